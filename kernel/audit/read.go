package audit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"
)

// Filter selects events from the audit log.
type Filter struct {
	Integration string    // "" means every integration; otherwise exactly this name
	Since       time.Time // zero means from the start
}

func (f Filter) match(e Event) bool {
	if f.Integration != "" && e.Integration != f.Integration {
		return false
	}
	if !f.Since.IsZero() {
		t, err := time.Parse(time.RFC3339Nano, e.Time)
		if err != nil || t.Before(f.Since) {
			return false
		}
	}
	return true
}

// Read calls fn with every event of r that passes f, and the line
// it was stored as, in file order. It returns how many lines it could not
// parse and skipped (lines a crash cut short, which the kernel sets aside
// behind an audit.segment event). An error from fn stops it.
func Read(r io.Reader, f Filter, fn func(e Event, line []byte) error) (skipped int, err error) {
	lr := newAuditLineReader(r)
	for {
		l, err := lr.next()
		if errors.Is(err, io.EOF) {
			return skipped, nil
		}
		if err != nil {
			return skipped, fmt.Errorf("read audit log: %w", err)
		}
		if l.long {
			skipped++
			continue
		}
		if len(l.bytes) == 0 {
			continue
		}
		var e Event
		if json.Unmarshal(l.bytes, &e) != nil || e.Event == "" {
			skipped++
			continue
		}
		if !f.match(e) {
			continue
		}
		if err := fn(e, l.bytes); err != nil {
			return skipped, err
		}
	}
}

// auditLine is one line of a log as stored.
type auditLine struct {
	bytes      []byte // without the newline; valid until the next call
	terminated bool   // it ended in a newline (only a last line may not)
	long       bool   // longer than maxAuditLine; bytes is nil
}

// auditLineReader returns an audit log's lines exactly as stored: unlike
// a JSON-RPC reader it strips nothing but the newline, since a "\r" an
// editor added is part of what the chain must see.
type auditLineReader struct {
	br  *bufio.Reader
	buf []byte
}

func newAuditLineReader(r io.Reader) *auditLineReader {
	return &auditLineReader{br: bufio.NewReaderSize(r, 64<<10)}
}

func (r *auditLineReader) next() (auditLine, error) {
	r.buf = r.buf[:0]
	var l auditLine
	n := 0
	for {
		chunk, err := r.br.ReadSlice('\n')
		n += len(chunk)
		if !l.long {
			if len(r.buf)+len(chunk) > maxAuditLine+1 {
				l.long, r.buf = true, r.buf[:0]
			} else {
				r.buf = append(r.buf, chunk...)
			}
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if n == 0 {
				return l, io.EOF
			}
		case err != nil:
			return l, err
		default:
			l.terminated = true
			if !l.long {
				r.buf = r.buf[:len(r.buf)-1]
			}
		}
		if !l.long {
			l.bytes = r.buf
		}
		return l, nil
	}
}

// ErrChainBroken is wrapped by every *ChainBreak.
var ErrChainBroken = errors.New("audit chain broken")

// ChainBreak is where and why an audit log's chain does not hold.
type ChainBreak struct {
	Line   int // 1-based; 0 when the break concerns the whole file (a kept head not found)
	Reason string
}

func (b *ChainBreak) Error() string {
	if b.Line == 0 {
		return fmt.Sprintf("%v: %s", ErrChainBroken, b.Reason)
	}
	return fmt.Sprintf("%v at line %d: %s", ErrChainBroken, b.Line, b.Reason)
}

// Unwrap makes errors.Is(err, ErrChainBroken) hold.
func (b *ChainBreak) Unwrap() error { return ErrChainBroken }

// Verification is what Verify found. When the chain breaks it
// describes the log up to the line before the break.
type Verification struct {
	Lines     int // lines read, set-aside lines included
	Events    int // whole events
	Segments  int // of them, audit.segment events
	Unchained int // events before the first that has a prev: written before the chain existed, not covered by it
	SetAside  int // lines that are not events, each covered by the audit.segment after it
	// TornTail counts the bytes of lines at the end that are not events
	// and that no segment covers yet: a crash cut the last line short, and
	// the kernel sets it aside when it next opens the log.
	TornTail int64
	// Continues is the head of the file this one continues, when its first
	// line is an audit.segment "rotated": compare it with that file's Head.
	Continues string
	Head      string // SHA-256 (hex) of the last event line: what to keep elsewhere
	HeadLine  int    // that line's number; 0 for a log without events
}

// Verify reads an audit log and checks its chain: every event's prev
// is the hash of the line before it (Genesis for the first line), and
// lines that are not events appear only where an audit.segment
// "torn_tail" right after them counts them and names the hash of the
// event before them, or at the very end (a torn tail not yet repaired).
// Events without a prev are allowed only before the first event that has
// one (a log begun by an older kernel).
//
// Each kept head (a Head recorded earlier, kept where the kernel's uid
// cannot write) must be the hash of some event in the chain: a log
// rewritten or cut before that point fails even if its new chain is
// whole.
//
// It returns a *ChainBreak (wrapping ErrChainBroken) for the first break,
// and other errors only for reading.
func Verify(r io.Reader, kept ...string) (Verification, error) {
	var v Verification
	want := map[string]bool{}
	for _, k := range kept {
		want[strings.ToLower(k)] = false
	}
	lr := newAuditLineReader(r)
	prev := Genesis   // hash of the line before
	lastEvent := prev // hash of the last event line
	chained := false  // an event with a prev has been seen
	torn, tornBytes := 0, int64(0)
	for {
		l, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return v, fmt.Errorf("read audit log: %w", err)
		}
		n := v.Lines + 1
		if l.long {
			return v, &ChainBreak{n, fmt.Sprintf("longer than any line the kernel writes (%d bytes)", maxAuditLine)}
		}
		h := LineHash(l.bytes)
		var e struct {
			Event     string `json:"event"`
			Prev      string `json:"prev"`
			Reason    string `json:"reason"`
			Continues string `json:"continues"`
			TornLines int    `json:"tornLines"`
			TornBytes int64  `json:"tornBytes"`
		}
		if json.Unmarshal(l.bytes, &e) != nil || e.Event == "" {
			torn++
			tornBytes += int64(len(l.bytes))
			v.Lines, prev = n, h
			continue
		}
		if torn > 0 {
			switch {
			case e.Event != EventSegment || e.Reason != SegmentTornTail:
				return v, &ChainBreak{n - torn, "not an audit event, and no audit.segment sets it aside"}
			case e.TornLines != torn || e.TornBytes != tornBytes:
				return v, &ChainBreak{n, fmt.Sprintf("the segment sets aside %d line(s) of %d bytes, but %d line(s) of %d bytes precede it",
					e.TornLines, e.TornBytes, torn, tornBytes)}
			case e.Continues != lastEvent:
				return v, &ChainBreak{n, fmt.Sprintf("the segment continues from %s, but the event before the set-aside lines hashes to %s", e.Continues, lastEvent)}
			}
			v.SetAside += torn
			torn, tornBytes = 0, 0
		}
		switch {
		case e.Prev == "" && chained:
			return v, &ChainBreak{n, "no prev, after events that have one"}
		case e.Prev == "":
			v.Unchained++
		case e.Prev != prev && n == 1:
			return v, &ChainBreak{n, "the first line's prev is not the genesis value: lines before it were removed"}
		case e.Prev != prev:
			return v, &ChainBreak{n, fmt.Sprintf("prev does not match line %d: a line was edited, inserted or removed", n-1)}
		default:
			chained = true
		}
		if e.Event == EventSegment {
			v.Segments++
			if n == 1 && e.Reason == SegmentRotated {
				v.Continues = e.Continues
			}
		}
		if _, ok := want[h]; ok {
			want[h] = true
		}
		v.Lines, v.Events, v.Head, v.HeadLine = n, v.Events+1, h, n
		prev, lastEvent = h, h
	}
	// Lines after the last event that no segment covers: a torn tail the
	// kernel repairs when it next opens the log.
	v.TornTail = tornBytes
	for _, k := range kept {
		if !want[strings.ToLower(k)] {
			return v, &ChainBreak{0, fmt.Sprintf("no event in the chain hashes to the kept head %s: the log was rewritten or cut before it", k)}
		}
	}
	return v, nil
}

// Follow opens the audit log at path for reading that does not end
// at the end of the file: a Read there waits for the kernel to append
// more, polling every poll, and moves on to a new file when the path is
// rotated (renamed or removed, and a new log begun), after reading what
// was left of the old one. It returns io.EOF once ctx ends.
func Follow(ctx context.Context, path string, poll time.Duration) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return &follower{ctx: ctx, path: path, poll: poll, f: f}, nil
}

type follower struct {
	ctx  context.Context
	path string
	poll time.Duration
	f    *os.File
}

func (fl *follower) Read(p []byte) (int, error) {
	var t *time.Ticker
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		n, err := fl.f.Read(p)
		if n > 0 || (err != nil && !errors.Is(err, io.EOF)) {
			return n, err
		}
		// At the end of the file: a rotated log is left for its new
		// file only now, when nothing more can come of it.
		if fl.rotated() {
			if nf, err := os.Open(fl.path); err == nil {
				fl.f.Close()
				fl.f = nf
				continue
			}
		}
		if t == nil {
			t = time.NewTicker(fl.poll)
		}
		select {
		case <-fl.ctx.Done():
			return 0, io.EOF
		case <-t.C:
		}
	}
}

// rotated reports whether path now names another file than the one open.
func (fl *follower) rotated() bool {
	open, err := fl.f.Stat()
	if err != nil {
		return false
	}
	now, err := os.Stat(fl.path)
	if err != nil {
		return false // removed and not yet begun again
	}
	return !os.SameFile(open, now)
}

func (fl *follower) Close() error { return fl.f.Close() }

// CallOrder passes events on to next with each turn's calls in arrival
// order: a tool.invoked whose seq comes after one not yet seen is held
// until the ones before it have passed (overlapping reads finish, and are
// recorded, in any order). Everything else passes at once, but a turn's
// turn.closed, after its held calls. A held call whose predecessor never
// comes (its record could not be written) passes at turn.closed, or at
// Flush.
type CallOrder struct {
	next  func(Event, []byte) error
	turns map[string]*turnOrder
}

type turnOrder struct {
	want int64 // the seq that passes next
	held map[int64]heldEvent
}

type heldEvent struct {
	e    Event
	line []byte
}

// NewCallOrder returns a CallOrder that passes events to next.
func NewCallOrder(next func(Event, []byte) error) *CallOrder {
	return &CallOrder{next: next, turns: map[string]*turnOrder{}}
}

// Event takes the next event in file order; line is kept if it is held.
func (o *CallOrder) Event(e Event, line []byte) error {
	switch {
	case e.Event == EventToolInvoked && e.Seq > 0:
		t := o.turn(e.ExecutionID)
		if e.Seq != t.want {
			t.held[e.Seq] = heldEvent{e, bytes.Clone(line)}
			return nil
		}
		if err := o.next(e, line); err != nil {
			return err
		}
		t.want++
		for {
			h, ok := t.held[t.want]
			if !ok {
				return nil
			}
			delete(t.held, t.want)
			if err := o.next(h.e, h.line); err != nil {
				return err
			}
			t.want++
		}
	case e.Event == EventTurnClosed:
		if err := o.release(e.ExecutionID); err != nil {
			return err
		}
		delete(o.turns, e.ExecutionID)
	}
	return o.next(e, line)
}

func (o *CallOrder) turn(id string) *turnOrder {
	t := o.turns[id]
	if t == nil {
		t = &turnOrder{want: 1, held: map[int64]heldEvent{}}
		o.turns[id] = t
	}
	return t
}

// release passes a turn's held calls, in seq order.
func (o *CallOrder) release(id string) error {
	t := o.turns[id]
	if t == nil {
		return nil
	}
	seqs := slices.Sorted(maps.Keys(t.held))
	for _, s := range seqs {
		if err := o.next(t.held[s].e, t.held[s].line); err != nil {
			return err
		}
	}
	clear(t.held)
	return nil
}

// Flush passes every call still held, turn by turn: at the end of a log
// whose turns are still open.
func (o *CallOrder) Flush() error {
	ids := slices.Sorted(maps.Keys(o.turns))
	for _, id := range ids {
		if err := o.release(id); err != nil {
			return err
		}
	}
	return nil
}

// CallsOnly passes on to next the events of turns that made a call, and
// none of a turn that only looked (a health check: claude mcp list,
// doctor, catalog: a turn with no call, its turn.closed says calls 0).
// A turn's events are held until its first call (a tool.invoked or
// tool.authorized, any event of a call, or turn.escalated) and dropped at
// its turn.closed if none came; an open turn with no call yet shows
// nothing. The kernel's own events (no executionId) and refused
// connections always pass.
type CallsOnly struct {
	next   func(Event, []byte) error
	held   map[string][]heldEvent // events of open turns with no call yet
	called map[string]bool        // open turns that made a call
}

// NewCallsOnly returns a CallsOnly that passes events to next.
func NewCallsOnly(next func(Event, []byte) error) *CallsOnly {
	return &CallsOnly{next: next, held: map[string][]heldEvent{}, called: map[string]bool{}}
}

// Event takes the next event in file order; line is kept if it is held.
func (c *CallsOnly) Event(e Event, line []byte) error {
	id := e.ExecutionID
	switch {
	case id == "" || e.Event == EventTurnRefused:
		return c.next(e, line)
	case c.called[id]:
		if e.Event == EventTurnClosed {
			delete(c.called, id)
		}
		return c.next(e, line)
	case e.CallID != "" || e.Seq > 0 || e.Event == EventTurnEscalated || e.Event == EventTurnClosed && e.Calls != nil && *e.Calls > 0:
		// A turn.closed that counts calls none of whose records came
		// (they could not be written) is a turn that acted, too.
		held := c.held[id]
		delete(c.held, id)
		if e.Event != EventTurnClosed {
			c.called[id] = true
		}
		for _, h := range held {
			if err := c.next(h.e, h.line); err != nil {
				return err
			}
		}
		return c.next(e, line)
	case e.Event == EventTurnClosed:
		delete(c.held, id)
		return nil
	}
	c.held[id] = append(c.held[id], heldEvent{e, bytes.Clone(line)})
	return nil
}
