package kernel

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// AuditFilter selects events from the audit log.
type AuditFilter struct {
	Integration string    // "" means every integration; otherwise exactly this name
	Since       time.Time // zero means from the start
}

func (f AuditFilter) match(e Event) bool {
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

// ReadAudit calls fn with every event of r that passes f, and the line
// it was stored as, in file order. It returns how many lines it could not
// parse and skipped (lines a crash cut short, which the kernel sets aside
// behind an audit.segment event). An error from fn stops it.
func ReadAudit(r io.Reader, f AuditFilter, fn func(e Event, line []byte) error) (skipped int, err error) {
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

// AuditPrinter writes events one at a time, as they are read, so that a
// follower shows each event when it happens: with JSON one JSON object
// per line, otherwise a table whose columns have fixed widths (they
// cannot be measured ahead of events that have not happened yet), with
// each call's turn (executionId) and its place in the turn (seq).
//
// With JSON each line is the stored line byte for byte, so it hashes to
// the next line's prev, as long as it is terminal-safe, which every line
// the kernel writes is. A line written otherwise (by hand, by an older
// kernel) has its non-graphic runes (C0 and C1 controls, DEL, bidi
// overrides) rewritten as \u escapes: the same JSON value, harmless on a
// terminal, no longer the stored bytes.
type AuditPrinter struct {
	W    io.Writer
	JSON bool

	events int
	buf    []byte
}

// Print writes one event, and before the first row of a table its header.
func (p *AuditPrinter) Print(e Event, line []byte) error {
	if p.JSON {
		p.buf = append(appendTerminalSafe(p.buf[:0], line), '\n')
	} else {
		p.buf = p.buf[:0]
		if p.events == 0 {
			p.buf = appendRow(p.buf, "TIME", "EXECUTION", "SEQ", "INTEGRATION", "EVENT", "TOOL", "RESOURCE", "STATUS")
		}
		seq := "-"
		if e.Seq > 0 {
			seq = strconv.FormatInt(e.Seq, 10)
		}
		p.buf = appendRow(p.buf, cell(shortTime(e.Time)), cell(e.ExecutionID), seq, cell(e.Integration),
			cell(e.Event), cell(e.Tool), cell(e.Resource), cell(statusCell(e)))
	}
	p.events++
	_, err := p.W.Write(p.buf)
	return err
}

// Events is how many events Print has written.
func (p *AuditPrinter) Events() int { return p.events }

// auditColumns are the table's column widths; a longer value pushes the
// rest of its row right rather than being cut.
var auditColumns = [...]int{20, 20, 4, 14, 19, 16, 28, 0}

func appendRow(b []byte, cells ...string) []byte {
	for i, c := range cells {
		if i > 0 {
			b = append(b, "  "...)
		}
		if i == 2 { // seq: right-aligned
			for n := utf8.RuneCountInString(c); n < auditColumns[i]; n++ {
				b = append(b, ' ')
			}
			b = append(b, c...)
			continue
		}
		b = append(b, c...)
		if i < len(cells)-1 {
			for n := utf8.RuneCountInString(c); n < auditColumns[i]; n++ {
				b = append(b, ' ')
			}
		}
	}
	return append(b, '\n')
}

// PrintAudit copies the events of r that pass f to w, as an AuditPrinter
// writes them, and returns how many lines it skipped (see ReadAudit).
func PrintAudit(w io.Writer, r io.Reader, f AuditFilter, asJSON bool) (skipped int, err error) {
	p := &AuditPrinter{W: w, JSON: asJSON}
	return ReadAudit(r, f, p.Print)
}

func shortTime(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return t.UTC().Format(time.RFC3339)
}

func statusCell(e Event) string {
	switch e.Event {
	case EventToolInvoked:
		return strings.TrimSpace(e.Status + " " + e.Code)
	case EventCatalogListed:
		if e.Count != nil {
			return strconv.Itoa(*e.Count) + " tools"
		}
	case EventTurnRefused, EventTurnEscalated:
		return e.Reason
	case EventUpstreamToolPinned:
		if len(e.Changed) > 0 {
			return e.Reason + ": " + strings.Join(e.Changed, ", ")
		}
		return e.Reason
	case EventUpstreamToolQuarantined:
		return "changed: " + strings.Join(e.Changed, ", ")
	case EventAuditSegment:
		if e.Reason == SegmentTornTail {
			return fmt.Sprintf("%s: %d line(s) set aside", e.Reason, e.TornLines)
		}
		return e.Reason
	}
	return ""
}

// cell makes a value safe for one table cell on a terminal: the log holds
// whatever a client sent (a tool name, a reason), and a tab, newline or
// escape sequence in it must not break the table or drive the terminal.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	for _, r := range s {
		if !unicode.IsGraphic(r) || (unicode.IsSpace(r) && r != ' ') {
			return strconv.Quote(s)
		}
	}
	return s
}

// needsTerminalEscape reports whether appendTerminalSafe would change a
// JSON text: whether it holds any byte outside printable ASCII besides
// the escapes JSON already makes.
func needsTerminalEscape(b []byte) bool {
	for _, c := range b {
		if c >= 0x7f {
			return true
		}
	}
	return false
}

// appendTerminalSafe appends the JSON text src to dst with every rune
// that is not graphic written as a \u escape (a pair of them beyond the
// BMP), and every byte that is not UTF-8 as \ufffd. Outside strings JSON
// is printable ASCII, so this only rewrites string contents, and the
// result means what src meant.
func appendTerminalSafe(dst, src []byte) []byte {
	for i := 0; i < len(src); {
		c := src[i]
		if c < utf8.RuneSelf && c != 0x7f {
			dst = append(dst, c)
			i++
			continue
		}
		r, size := utf8.DecodeRune(src[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, `\ufffd`...)
		case unicode.IsGraphic(r):
			dst = append(dst, src[i:i+size]...)
		case r > 0xffff:
			hi, lo := utf16.EncodeRune(r)
			dst = appendUEscape(appendUEscape(dst, hi), lo)
		default:
			dst = appendUEscape(dst, r)
		}
		i += size
	}
	return dst
}

func appendUEscape(dst []byte, r rune) []byte {
	const hexDigits = "0123456789abcdef"
	return append(dst, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
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

// AuditVerification is what VerifyAudit found. When the chain breaks it
// describes the log up to the line before the break.
type AuditVerification struct {
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

// VerifyAudit reads an audit log and checks its chain: every event's prev
// is the hash of the line before it (AuditGenesis for the first line), and
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
func VerifyAudit(r io.Reader, kept ...string) (AuditVerification, error) {
	var v AuditVerification
	want := map[string]bool{}
	for _, k := range kept {
		want[strings.ToLower(k)] = false
	}
	lr := newAuditLineReader(r)
	prev := AuditGenesis // hash of the line before
	lastEvent := prev    // hash of the last event line
	chained := false     // an event with a prev has been seen
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
		sum := sha256.Sum256(l.bytes)
		h := hex.EncodeToString(sum[:])
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
			case e.Event != EventAuditSegment || e.Reason != SegmentTornTail:
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
		if e.Event == EventAuditSegment {
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

// FollowAudit opens the audit log at path for reading that does not end
// at the end of the file: a Read there waits for the kernel to append
// more, polling every poll, and moves on to a new file when the path is
// rotated (renamed or removed, and a new log begun), after reading what
// was left of the old one. It returns io.EOF once ctx ends.
func FollowAudit(ctx context.Context, path string, poll time.Duration) (io.ReadCloser, error) {
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
