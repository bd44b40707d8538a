package policy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Limit is a grant's `limit`: at most N calls that the grant allows, per
// integration, in each window of length Window. Windows are fixed and
// aligned to the Unix epoch (a "1d" window is a UTC day, a "1h" window a
// clock hour), so a count is the same whoever computes it and survives
// any restart; see WindowAt.
type Limit struct {
	N      int
	Window time.Duration
}

// Bounds of a limit: a count the kernel can hold, and a window no longer
// than a year (a longer one is a grant that should expire instead).
const (
	MaxLimitCount  = 1_000_000_000
	MaxLimitWindow = 366 * 24 * time.Hour
	// MaxTurnLimit bounds turn_limit for the same reason as MaxLimitCount.
	MaxTurnLimit = 1_000_000_000
)

// windowUnits are the units a limit's window is written in.
var windowUnits = []struct {
	suffix string
	d      time.Duration
}{{"s", time.Second}, {"m", time.Minute}, {"h", time.Hour}, {"d", 24 * time.Hour}}

// ErrLimitSyntax is a limit that is not COUNT/WINDOW.
var ErrLimitSyntax = errors.New(`want COUNT/WINDOW, e.g. "100/1h" (windows: s, m, h, d)`)

// ParseLimit parses "COUNT/WINDOW": COUNT a positive integer, WINDOW a
// positive integer followed by s, m, h or d ("100/1h", "5/30s",
// "1000/1d"). A window without a number ("100/h") is one unit.
func ParseLimit(s string) (Limit, error) {
	count, window, ok := strings.Cut(s, "/")
	if !ok {
		return Limit{}, fmt.Errorf("limit %q: %w", s, ErrLimitSyntax)
	}
	n, err := strconv.Atoi(count)
	if err != nil || n < 1 || n > MaxLimitCount || count != strconv.Itoa(n) {
		return Limit{}, fmt.Errorf("limit %q: the count must be a whole number from 1 to %d", s, MaxLimitCount)
	}
	for _, u := range windowUnits {
		num, ok := strings.CutSuffix(window, u.suffix)
		if !ok {
			continue
		}
		k := 1
		if num != "" {
			if k, err = strconv.Atoi(num); err != nil || k < 1 || num != strconv.Itoa(k) {
				return Limit{}, fmt.Errorf("limit %q: the window must be a whole number of %s, e.g. 1%s", s, unitName(u.suffix), u.suffix)
			}
		}
		if time.Duration(k) > MaxLimitWindow/u.d {
			return Limit{}, fmt.Errorf("limit %q: the window is over a year; give the grant an expiry instead", s)
		}
		return Limit{N: n, Window: time.Duration(k) * u.d}, nil
	}
	return Limit{}, fmt.Errorf("limit %q: %w", s, ErrLimitSyntax)
}

func unitName(suffix string) string {
	switch suffix {
	case "s":
		return "seconds"
	case "m":
		return "minutes"
	case "h":
		return "hours"
	}
	return "days"
}

// String writes the limit as ParseLimit reads it, in the largest unit
// that divides the window.
func (l Limit) String() string {
	if l.N == 0 {
		return ""
	}
	for i := len(windowUnits) - 1; i >= 0; i-- {
		u := windowUnits[i]
		if l.Window%u.d == 0 {
			return fmt.Sprintf("%d/%d%s", l.N, l.Window/u.d, u.suffix)
		}
	}
	return fmt.Sprintf("%d/%s", l.N, l.Window)
}

// IsZero reports whether there is no limit.
func (l Limit) IsZero() bool { return l.N == 0 }

// WindowAt returns the window of length w that holds t: windows are
// aligned to the Unix epoch, so [start, end) is the same for every t in
// it, whoever asks.
func WindowAt(t time.Time, w time.Duration) (start, end time.Time) {
	ns := t.UnixNano()
	off := ns % int64(w)
	if off < 0 {
		off += int64(w)
	}
	start = time.Unix(0, ns-off).UTC()
	return start, start.Add(w)
}
