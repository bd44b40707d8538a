package upstream

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"
)

type logLine struct {
	Line          string `json:"line"`
	Truncated     bool   `json:"truncated"`
	DroppedBefore int    `json:"droppedBefore"`
}

func logged(t *testing.T, buf *bytes.Buffer) []logLine {
	t.Helper()
	var out []logLine
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var e logLine
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, e)
	}
	return out
}

func TestStderrLinesAreCutAtTheirBound(t *testing.T) {
	var buf bytes.Buffer
	s := newStderrLog(zerolog.New(&buf), time.Now)
	long := strings.Repeat("é", stderrLineBytes) // two bytes each: the cut falls inside one
	s.copy(strings.NewReader("short\n" + long + "\nafter\nno newline at the end"))
	got := logged(t, &buf)
	if len(got) != 4 {
		t.Fatalf("logged %d lines, want 4: %+v", len(got), got)
	}
	if got[0].Line != "short" || got[0].Truncated {
		t.Errorf("first line %+v", got[0])
	}
	if !got[1].Truncated || len(got[1].Line) > stderrLineBytes+len("…") || !utf8.ValidString(got[1].Line) || !strings.HasSuffix(got[1].Line, "…") {
		t.Errorf("long line logged as %d bytes, truncated %v, valid UTF-8 %v", len(got[1].Line), got[1].Truncated, utf8.ValidString(got[1].Line))
	}
	if got[2].Line != "after" || got[3].Line != "no newline at the end" {
		t.Errorf("the lines after a long one: %+v", got[2:])
	}
	if last := s.lastLines(); len(last) != 4 || last[3] != "no newline at the end" {
		t.Errorf("lastLines = %q", last)
	}
}

func TestStderrFloodIsRateLimitedAndCounted(t *testing.T) {
	var buf bytes.Buffer
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := newStderrLog(zerolog.New(&buf), func() time.Time { return clock })
	var flood strings.Builder
	for range 10 * stderrBurst {
		flood.WriteString("noise\n")
	}
	s.copy(strings.NewReader(flood.String()))
	if n := len(logged(t, &buf)); n != stderrBurst {
		t.Errorf("a flood logged %d lines, want the burst of %d", n, stderrBurst)
	}
	// A second later there is room for stderrPerSecond more, and the
	// first of them says how many were dropped.
	clock = clock.Add(time.Second)
	buf.Reset()
	s.copy(strings.NewReader("after the flood\n"))
	got := logged(t, &buf)
	if len(got) != 1 || got[0].Line != "after the flood" || got[0].DroppedBefore != 9*stderrBurst {
		t.Errorf("after a second: %+v, want one line that counts %d dropped", got, 9*stderrBurst)
	}
	if last := s.lastLines(); len(last) != stderrKeep || last[stderrKeep-1] != "after the flood" {
		t.Errorf("lastLines = %q", last)
	}
}
