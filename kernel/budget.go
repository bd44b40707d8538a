package kernel

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/sharedos/sharedos-mcp/internal/sockpath"
	"github.com/sharedos/sharedos-mcp/policy"
)

// BudgetsFile is where, in the state directory, the kernel keeps the
// counts of its grants' limits, so that neither reconnecting nor
// restarting the kernel resets them.
const BudgetsFile = "budgets.json"

const budgetsVersion = 1

// ErrUnsafeBudgets is a budgets file, or state directory, that another
// user owns or can write: whoever can write it can reset every limit.
var ErrUnsafeBudgets = errors.New("the budgets file must be the kernel's own and writable by no one else")

// budgetKey names one budget: a grant (policy.Grant.Key, which a reload
// that changes only the limit keeps) counted for one integration.
type budgetKey struct {
	grant, integration string
}

// window is the count of one budget in its current window. A window,
// once started, runs to its end even if a reload changes the limit's
// length: the count is kept, and the next window has the new length.
type window struct {
	start, end time.Time
	count      int
}

// budgets are the counters of every grant's limit, across turns, and
// persisted in the state directory. Every decision that reads them and
// every charge is made under mu, so two calls cannot both take a
// budget's last call. turn_limit counts live in each turn (turnCounts),
// also read and changed only under mu.
type budgets struct {
	mu   sync.Mutex
	file string // "" keeps them in memory only (no state directory)
	log  zerolog.Logger
	win  map[budgetKey]*window
	// failing is set while the file cannot be written, so the log says
	// so once, not at every call.
	failing bool
}

// turnCounts are one turn's charges to grants with a turn_limit.
type turnCounts map[budgetKey]int

// counters is what policy.Rules.Decide reads: the kernel's windows and
// one turn's counts. It is used only under budgets.mu.
type counters struct {
	b    *budgets
	turn turnCounts
}

func (c counters) Used(key, integration string, w time.Duration, t time.Time) (int, time.Time) {
	if win := c.b.win[budgetKey{key, integration}]; win != nil && t.Before(win.end) && !t.Before(win.start) {
		return win.count, win.end
	}
	_, end := policy.WindowAt(t, w)
	return 0, end
}

func (c counters) TurnUsed(key, integration string) int {
	return c.turn[budgetKey{key, integration}]
}

// BudgetsError is a budgets file the kernel will not start on: one it
// cannot read, or ErrUnsafeBudgets.
type BudgetsError struct {
	Path string
	Err  error
}

func (e *BudgetsError) Error() string { return e.Err.Error() }
func (e *BudgetsError) Unwrap() error { return e.Err }

// openBudgets reads the budgets file of stateDir ("" keeps budgets in
// memory only). A missing file is an empty one; a file that is not the
// kernel's own, or that others can write, is ErrUnsafeBudgets, and one
// that cannot be read is an error: starting with the counts at zero
// would silently reset every limit.
func openBudgets(stateDir string, log zerolog.Logger, now time.Time) (*budgets, error) {
	b := &budgets{log: log, win: map[budgetKey]*window{}}
	if stateDir == "" {
		return b, nil
	}
	b.file = filepath.Join(stateDir, BudgetsFile)
	if err := b.load(now); err != nil {
		return nil, &BudgetsError{Path: b.file, Err: err}
	}
	return b, nil
}

// load reads the file's windows still running at now.
func (b *budgets) load(now time.Time) error {
	f, err := os.Open(b.file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open budgets: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat budgets: %w", err)
	}
	own := func(uid uint32) bool { return uid == uint32(os.Getuid()) }
	if err := sockpath.CheckFile(b.file, fi, own); err != nil {
		return fmt.Errorf("%w: %w", ErrUnsafeBudgets, err)
	}
	var bf budgetsDoc
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&bf); err != nil {
		return fmt.Errorf("read budgets %s: %w", b.file, err)
	}
	if bf.Version != budgetsVersion {
		return fmt.Errorf("read budgets %s: version %d, this kernel reads version %d", b.file, bf.Version, budgetsVersion)
	}
	for _, c := range bf.Counters {
		if now.Before(c.End) && c.Count > 0 {
			b.win[budgetKey{c.Grant, c.Integration}] = &window{start: c.Start, end: c.End, count: c.Count}
		}
	}
	return nil
}

// budgetsDoc is the budgets file.
type budgetsDoc struct {
	Version  int             `json:"version"`
	Counters []budgetCounter `json:"counters"`
}

type budgetCounter struct {
	Grant       string    `json:"grant"`
	Integration string    `json:"integration"`
	Start       time.Time `json:"start"`
	End         time.Time `json:"end"`
	Count       int       `json:"count"`
}

// decide decides req for a turn whose charges are turn, and charges a
// call allowed without asking at once, in one step: no other call can
// take the budget in between. A call that needs approval is not charged
// here; chargeApproved charges it when it runs.
func (b *budgets) decide(r *policy.Rules, req policy.Request, turn turnCounts) policy.Verdict {
	b.mu.Lock()
	defer b.mu.Unlock()
	v := r.Decide(req, counters{b, turn})
	if v.Decision == policy.Allowed && v.Ask == "" {
		b.chargeLocked(v.Charges, req.Time, turn)
	}
	return v
}

// peek is Rules.Decide on the current counts, charging nothing.
func (b *budgets) peek(r *policy.Rules, req policy.Request, turn turnCounts) policy.Verdict {
	b.mu.Lock()
	defer b.mu.Unlock()
	return r.Decide(req, counters{b, turn})
}

// explain is Rules.Explain on the current counts.
func (b *budgets) explain(r *policy.Rules, req policy.Request, turn turnCounts) []policy.Check {
	b.mu.Lock()
	defer b.mu.Unlock()
	return r.Explain(req, counters{b, turn})
}

// chargeApproved charges an approved call when it runs: every one of
// v's charges, or, when one of them has no room left by now, none, and
// then it says how long until that one has (0 with turnLimited: not in
// this turn).
func (b *budgets) chargeApproved(v policy.Verdict, t time.Time, turn turnCounts) (ok bool, retryAfter time.Duration, turnLimited bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, ch := range v.Charges {
		if fits, retry, tl := ch.Fits(counters{b, turn}, t); !fits {
			return false, retry, tl
		}
	}
	b.chargeLocked(v.Charges, t, turn)
	return true, 0, false
}

// chargeLocked counts one call against each charge and, when a window
// changed, writes the file.
func (b *budgets) chargeLocked(chs []policy.Charge, t time.Time, turn turnCounts) {
	windowed := false
	for _, ch := range chs {
		k := budgetKey{ch.Key, ch.Integration}
		if ch.TurnLimit > 0 {
			turn[k]++
		}
		if ch.Limit.N == 0 {
			continue
		}
		w := b.win[k]
		if w == nil || !t.Before(w.end) || t.Before(w.start) {
			start, end := policy.WindowAt(t, ch.Limit.Window)
			w = &window{start: start, end: end}
			b.win[k] = w
		}
		w.count++
		windowed = true
	}
	if windowed {
		b.saveLocked(t, false)
	}
}

// save writes the file and syncs it, for the kernel's exit.
func (b *budgets) save(t time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.saveLocked(t, true)
}

// saveLocked replaces the budgets file with the windows still running at
// t. Each charge rewrites it (a new file renamed over the old), so a
// kernel that is killed keeps every count it made; only the last save,
// at exit, is synced, so a machine that loses power may lose the counts
// of its last seconds. A file that cannot be written is logged, once,
// and the counts are kept in memory: the limits still hold while the
// kernel runs.
func (b *budgets) saveLocked(t time.Time, sync bool) {
	if b.file == "" {
		return
	}
	doc := budgetsDoc{Version: budgetsVersion, Counters: []budgetCounter{}}
	for k, w := range b.win {
		if !t.Before(w.end) {
			delete(b.win, k)
			continue
		}
		doc.Counters = append(doc.Counters, budgetCounter{Grant: k.grant, Integration: k.integration, Start: w.start, End: w.end, Count: w.count})
	}
	slices.SortFunc(doc.Counters, func(a, b budgetCounter) int {
		if c := strings.Compare(a.Grant, b.Grant); c != 0 {
			return c
		}
		return strings.Compare(a.Integration, b.Integration)
	})
	err := writeFileAtomic(b.file, doc, sync)
	switch {
	case err != nil && !b.failing:
		b.failing = true
		b.log.Error().Err(err).Str("file", b.file).Msg("budgets cannot be written; the limits hold while the kernel runs, but a restart would forget this window's counts")
	case err == nil && b.failing:
		b.failing = false
		b.log.Warn().Str("file", b.file).Msg("budgets can be written again")
	}
}

// writeFileAtomic writes v as JSON to a new file (0600) beside path and
// renames it over path; with sync, the file and its directory are synced.
func writeFileAtomic(path string, v any, sync bool) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename nothing has this name
	_, err = tmp.Write(append(data, '\n'))
	if err == nil && sync {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err == nil && sync {
		var d *os.File
		if d, err = os.Open(dir); err == nil {
			err = d.Sync()
			d.Close()
		}
	}
	return err
}

// BudgetCount is one budget's count in its current window, as the kernel
// last saved it: the grant (policy.Grant.Key) and the integration it is
// counted for.
type BudgetCount struct {
	Grant, Integration string
	Count              int
	Ends               time.Time
}

// ReadBudgets reads the counts the kernel keeps in stateDir whose window
// is still running at now. A running kernel saves them at each charge,
// so they are its counts. With no budgets file (no kernel has counted
// anything there) the error wraps fs.ErrNotExist.
func ReadBudgets(stateDir string, now time.Time) ([]BudgetCount, error) {
	if _, err := os.Stat(filepath.Join(stateDir, BudgetsFile)); err != nil {
		return nil, err
	}
	b, err := openBudgets(stateDir, zerolog.Nop(), now)
	if err != nil {
		return nil, err
	}
	var out []BudgetCount
	for k, w := range b.win {
		out = append(out, BudgetCount{Grant: k.grant, Integration: k.integration, Count: w.count, Ends: w.end})
	}
	return out, nil
}
