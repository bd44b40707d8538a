// Package audit is the kernel's record: an append-only JSON Lines file
// whose lines form a hash chain (docs/adr/0009-audit-log-chain-and-repair.md),
// the events it holds, and its readers: filtering, following a log that
// grows and rotates, verifying the chain, and putting each turn's calls
// back in arrival order. How a terminal shows the record is the command
// layer's.
package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/sharedos/sharedos-mcp/internal/clip"
	"github.com/sharedos/sharedos-mcp/internal/sockpath"
)

// Audit event names.
const (
	EventTurnOpened    = "turn.opened"
	EventTurnRefused   = "turn.refused"
	EventCatalogListed = "tool.catalog.listed"
	EventToolInvoked   = "tool.invoked"
	EventTurnEscalated = "turn.escalated"
	EventTurnClosed    = "turn.closed"
	// EventToolAuthorized is recorded, and synced, before a call that
	// changes something acts: the decision is on disk before the effect
	// is. The call's tool.invoked follows with the outcome.
	EventToolAuthorized = "tool.authorized"
	// EventOperatorRefused is recorded when a connection asks an
	// operator method (kernel.explain) that it may not: an integration's
	// connection, or a uid the kernel does not serve as operator. Reason
	// says which method and why.
	EventOperatorRefused = "operator.refused"
	// Approvals (docs/approvals.md). EventApprovalRequested is recorded,
	// and synced, before a person is asked about a held call: the
	// binding (integration, tool, action, resource, argumentsSha256), the
	// approval's id, who may approve (ask) and until when (expires).
	// EventApprovalGranted and EventApprovalDeclined record the decision
	// and who made it (by: harness or operator, with the deciding
	// connection's peer), synced before the call acts.
	EventApprovalRequested = "tool.approval.requested"
	EventApprovalGranted   = "tool.approval.granted"
	EventApprovalDeclined  = "tool.approval.declined"
	// EventSegment is written by the log itself where its chain
	// needs explaining: after lines it set aside, or at the start of the
	// file that replaced a rotated one. Its Reason is a Segment* value.
	EventSegment = "audit.segment"
	// EventConfigLoaded is the kernel's, at start (Reason "start") and on
	// every reload ("reload"): the config file, its SHA256, and what it
	// Added, Removed and Changed against the config in force before it
	// (at start, against none), by name. With the record of each call it
	// says which grants were in force for each decision.
	EventConfigLoaded = "config.loaded"
)

// MaxArguments bounds the arguments a tool.invoked or tool.authorized
// holds under [audit] arguments = "full", as canonical JSON; larger ones
// are recorded by their digest alone.
const MaxArguments = 16 << 10

// Reasons of an audit.segment event.
const (
	// SegmentTornTail: the lines before this event are not events (a line
	// cut short by a crash or a failed write). They are kept as they are;
	// TornLines and TornBytes count them, and Continues is the hash of the
	// last event before them, so the chain still covers that event.
	SegmentTornTail = "torn_tail"
	// SegmentRotated: the file the kernel was writing was renamed or
	// removed, and it went on in this one. Continues is the hash of the
	// last line it wrote into the old file (that file's head).
	SegmentRotated = "rotated"
)

// Genesis is the prev of a log's first line: 64 zeros, the hash of
// no line.
const Genesis = "0000000000000000000000000000000000000000000000000000000000000000"

// Peer is the socket peer as the operating system reported it.
type Peer struct {
	UID uint32 `json:"uid"`
	PID int    `json:"pid"`
}

// Event is one line of the audit record. The first five fields are on
// every event; the rest belong to particular events and are left out when
// empty. For audit.segment, Peer is the kernel process itself.
//
// The log stores at most a bounded prefix of every string field (a `max`
// tag in bytes, else maxAuditField), cut at a rune boundary and marked
// with "…": a string field added later is bounded without anyone
// remembering to.
type Event struct {
	Time        string `json:"time"` // RFC 3339, nanoseconds, UTC
	Event       string `json:"event"`
	ExecutionID string `json:"executionId"`
	Integration string `json:"integration" max:"128"`
	Peer        Peer   `json:"peer"`

	CallID      string `json:"callId,omitempty" max:"128"`
	Seq         int64  `json:"seq,omitempty"` // tool.invoked: the call's arrival position in its turn, from 1
	Tool        string `json:"tool,omitempty" max:"128"`
	Resource    string `json:"resource,omitempty"`
	Requested   string `json:"requested,omitempty"` // the resource as the call named it, when a link led elsewhere
	Action      string `json:"action,omitempty"`
	Status      string `json:"status,omitempty"`
	Code        string `json:"code,omitempty"`
	CatalogHash string `json:"catalogHash,omitempty" max:"128"`
	DurationUs  *int64 `json:"durationUs,omitempty"`
	Count       *int   `json:"count,omitempty"`
	Reason      string `json:"reason,omitempty"`
	Note        string `json:"note,omitempty"`

	// Brokered tools: the upstream a call went to (tool.invoked,
	// tool.authorized), and what upstream.tool.pinned and
	// upstream.tool.quarantined say of a definition: its SHA-256, the one
	// pinned before it, and the fields that differ.
	Upstream string   `json:"upstream,omitempty" max:"64"`
	SHA256   string   `json:"sha256,omitempty" max:"64"`
	Previous string   `json:"previous,omitempty" max:"64"`
	Changed  []string `json:"changed,omitempty"`

	// Grants: which grant decided a call (tool.authorized, tool.invoked),
	// one for the integration and one for each ancestor, nearest first.
	// Nearest: for a call the grants refused, the grants that came
	// nearest to allowing it and the first condition each failed, so an
	// old denial is understood without replaying it. RetryAfterMs: a
	// rate_limited call's wait, in milliseconds.
	Grants       []GrantRef `json:"grants,omitempty"`
	Nearest      []GrantRef `json:"nearest,omitempty"`
	RetryAfterMs *int64     `json:"retryAfterMs,omitempty"`

	// A call's arguments (tool.invoked, tool.authorized), as [audit]
	// arguments says: ArgumentsDigest is the SHA-256 (hex) of their
	// canonical JSON (digest and full), Arguments that JSON itself (full,
	// when it is at most MaxArguments bytes; Write drops a longer one).
	// The canonical form makes the digest depend on the arguments' value
	// alone, not on how a client encoded them; an approval's binding
	// (ArgumentsSHA256, below) is of the very bytes executed, so it has a
	// name of its own.
	ArgumentsDigest string          `json:"argumentsDigest,omitempty" max:"64"`
	Arguments       json.RawMessage `json:"arguments,omitempty"`

	// turn.closed: how many calls the turn made (tools.invoke and
	// turn.escalate). 0 marks a turn that only looked (claude mcp list,
	// doctor, catalog), which audit --calls hides.
	Calls *int `json:"calls,omitempty"`

	// config.loaded: the config file ("" for the built-in default, and
	// then no SHA256), and what changed by name (Changed, above, too).
	Config  string   `json:"config,omitempty" max:"1024"`
	Added   []string `json:"added,omitempty"`
	Removed []string `json:"removed,omitempty"`

	// Approvals: the approval a record is about (tool.approval.*, and a
	// call's tool.authorized and tool.invoked when it ran, or was
	// refused, under one), the SHA-256 of the arguments it binds, who may
	// approve (ask: harness or operator), until when (expires: for a
	// request, until when it can be decided; for a grant, until when the
	// approval is good), and who decided (by: harness or operator).
	ApprovalID      string `json:"approvalId,omitempty" max:"64"`
	ArgumentsSHA256 string `json:"argumentsSha256,omitempty" max:"64"`
	Ask             string `json:"ask,omitempty" max:"16"`
	Expires         string `json:"expires,omitempty" max:"64"`
	By              string `json:"by,omitempty" max:"16"`

	// audit.segment only.
	Continues string `json:"continues,omitempty"`
	TornLines int    `json:"tornLines,omitempty"`
	TornBytes int64  `json:"tornBytes,omitempty"`

	// Prev is the SHA-256 (hex) of the line before this one, its exact
	// bytes without the newline; Genesis on a file's first line.
	// Write sets it; whatever the caller put there is replaced.
	Prev string `json:"prev,omitempty"`
}

// GrantRef names one grant of the kernel's config in a record: the
// level of the call's chain it was asked at (the integration, or an
// ancestor), its number (#N, from 1, as kernel check and explain show
// it) and its line in the config file (0 when the grants came from no
// file). Failed is, in Event.Nearest, the first condition it failed
// (subject, namespace, resource, descendants, action, expiry, limit, ask).
type GrantRef struct {
	Integration string `json:"integration"`
	Grant       int    `json:"grant"`
	Line        int    `json:"line,omitempty"`
	Failed      string `json:"failed,omitempty"`
	Ask         string `json:"ask,omitempty"`
}

const (
	// maxAuditField is the longest string field the log stores unless the
	// field's `max` tag says less. File paths longer than PATH_MAX cannot
	// be opened, so a resource this long is already meaningless.
	maxAuditField = 4096
	// maxAuditLine is the longest line the readers (audit, audit verify,
	// the repair at open) accept. TestAuditLinesAreBounded checks that the
	// writer's longest possible line fits with room to spare.
	maxAuditLine = 1 << 20
	// A list field keeps at most maxListItems items of at most
	// maxListItem bytes each; the last item kept then says how many more
	// there were.
	maxListItems = 32
	maxListItem  = 160
)

type boundedField struct {
	index int
	max   int
}

// eventStrings lists every string field of Event with its bound.
var eventStrings = func() []boundedField {
	var out []boundedField
	t := reflect.TypeFor[Event]()
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Type.Kind() != reflect.String {
			continue
		}
		limit := maxAuditField
		if tag := f.Tag.Get("max"); tag != "" {
			n, err := strconv.Atoi(tag)
			if err != nil || n <= 0 {
				panic("audit: bad max tag on Event." + f.Name)
			}
			limit = n
		}
		out = append(out, boundedField{i, limit})
	}
	return out
}()

// eventLists lists every []string field of Event.
var eventLists = func() []int {
	var out []int
	t := reflect.TypeFor[Event]()
	for i := range t.NumField() {
		if t.Field(i).Type == reflect.TypeFor[[]string]() {
			out = append(out, i)
		}
	}
	return out
}()

// boundEvent cuts every string field of ev to its bound, every list to
// maxListItems items of maxListItem bytes, and drops Arguments over
// MaxArguments.
func boundEvent(ev *Event) {
	v := reflect.ValueOf(ev).Elem()
	for _, f := range eventStrings {
		fv := v.Field(f.index)
		if s := fv.String(); len(s) > f.max {
			fv.SetString(clip.String(s, f.max))
		}
	}
	for _, i := range eventLists {
		if fv := v.Field(i); listOver(fv) {
			fv.Set(reflect.ValueOf(boundList(fv.Interface().([]string))))
		}
	}
	if len(ev.Arguments) > MaxArguments {
		ev.Arguments = nil
	}
}

// listOver reports whether the list l is over the bounds; it allocates
// nothing, as it runs on every Write.
func listOver(l reflect.Value) bool {
	if l.Len() > maxListItems {
		return true
	}
	for j := range l.Len() {
		if l.Index(j).Len() > maxListItem {
			return true
		}
	}
	return false
}

// boundList is a copy of items within the bounds.
func boundList(items []string) []string {
	out := make([]string, 0, min(len(items), maxListItems))
	for _, it := range items[:min(len(items), maxListItems)] {
		out = append(out, clip.String(it, maxListItem))
	}
	if n := len(items) - len(out); n > 0 {
		out[len(out)-1] = fmt.Sprintf("… and %d more", n+1)
	}
	return out
}

// Errors Open and Write return, wrapped with the path and cause.
// A file or directory that another user owns or can write also wraps
// sockpath.ErrUntrusted.
var (
	// ErrBusy: another process (a second kernel) holds the log's
	// lock; two writers would interleave two chains.
	ErrBusy = errors.New("another process is writing the audit log")
	// ErrClosed: Write or Sync after Close.
	ErrClosed = errors.New("audit log is closed")
)

// Log appends events to a JSON Lines file whose lines form a hash
// chain (docs/adr/0009-audit-log-chain-and-repair.md).
//
// Each event is one write(2) of one whole line to a file opened O_APPEND,
// under a mutex, and the file is flocked so no second kernel appends to
// it. A Write either appends exactly one whole line or returns an error
// and leaves the file as it was: bytes of a failed or short write are
// truncated away (if even that fails, the next Write sets them aside as
// a repair would). A failed Write does not poison the log: the next one
// tries again, so a kernel can refuse calls while the disk is full and
// serve again once it is not.
//
// Lines are encoded by encoding/json without HTML escaping; every string
// is bounded (see Event), and every rune that is not graphic (C0 and C1
// controls, DEL, bidi overrides and other format characters) is stored
// as a \u escape, so no client string can end a line or drive a terminal
// that prints the stored line.
//
// Each Write also checks (one stat) that the path still names the open
// file; when it was renamed or removed (rotation), the log opens the path
// again and goes on there, starting with an audit.segment "rotated".
// Durability is per turn: Sync is called when a turn closes (see
// docs/adr/0002-audit-durability.md).
type Log struct {
	path string
	log  zerolog.Logger

	mu       sync.Mutex
	f        *os.File // nil after Close
	dev, ino uint64   // of f, to notice a rename or removal
	size     int64    // end of the last whole line in f
	head     string   // hash of f's last line: the next line's prev
	dirty    bool     // a failed write may have left bytes; repair before the next
	failures int      // consecutive failed Writes, for the log
	buf      bytes.Buffer
	enc      *json.Encoder
	line     []byte
}

// Option configures Open.
type Option func(*Log)

// WithLogger makes the log report what it repairs, rotations, failed
// writes and the recovery after them to l (the default discards them).
func WithLogger(l zerolog.Logger) Option {
	return func(a *Log) { a.log = l }
}

// Open opens the audit file at path, creating it 0600 and any
// missing directory 0700. The file must be a regular file owned by this
// uid and not writable by group or others, and every directory and
// symlink on the way must pass the socket's check (sockpath.MakeDirs);
// the file itself must not be a symlink. A last line that is not a whole
// event (a crash cut it short) is set aside: kept as it is, terminated,
// and followed by an audit.segment "torn_tail" that says so.
func Open(path string, opts ...Option) (*Log, error) {
	a := &Log{path: path, log: zerolog.Nop()}
	for _, o := range opts {
		o(a)
	}
	a.enc = json.NewEncoder(&a.buf)
	a.enc.SetEscapeHTML(false)
	f, dev, ino, err := openAuditFile(path)
	if err != nil {
		return nil, err
	}
	a.f, a.dev, a.ino = f, dev, ino
	if err := a.repair(); err != nil {
		f.Close()
		return nil, err
	}
	return a, nil
}

// openAuditFile opens and locks path after the trust checks. The lock
// travels with the descriptor: closing the file releases it.
func openAuditFile(path string) (f *os.File, dev, ino uint64, err error) {
	uid := uint32(os.Getuid())
	trusted := func(u uint32) bool { return u == uid || u == 0 }
	dir, err := sockpath.MakeDirs(filepath.Dir(path), trusted)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("audit directory: %w", err)
	}
	file := filepath.Join(dir, filepath.Base(path))
	fi, err := os.Lstat(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, 0, 0, fmt.Errorf("open audit log: %w", err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, 0, 0, fmt.Errorf("audit log %s is a symlink; point at the file itself", path)
	case !fi.Mode().IsRegular():
		// Checked before opening: opening a FIFO would block.
		return nil, 0, 0, fmt.Errorf("audit log %s is not a regular file", path)
	}
	f, err = os.OpenFile(file, os.O_RDWR|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("open audit log: %w", err)
	}
	fail := func(err error) (*os.File, uint64, uint64, error) {
		f.Close()
		return nil, 0, 0, err
	}
	if fi, err = f.Stat(); err != nil {
		return fail(fmt.Errorf("stat audit log: %w", err))
	}
	st := fi.Sys().(*syscall.Stat_t)
	own := func(u uint32) bool { return u == uid }
	if !fi.Mode().IsRegular() {
		return fail(fmt.Errorf("audit log %s is not a regular file", path))
	}
	if err := sockpath.CheckFile(path, fi, own); err != nil {
		return fail(fmt.Errorf("audit log: %w", err))
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if errors.Is(err, unix.EWOULDBLOCK) {
		return fail(fmt.Errorf("%w: %s", ErrBusy, path))
	}
	if err != nil {
		return fail(fmt.Errorf("lock audit log: %w", err))
	}
	if fi.Size() == 0 {
		// A new file: its name must be as durable as the lines a turn's
		// sync will make durable in it.
		if err := syncDir(dir); err != nil {
			return fail(fmt.Errorf("sync audit directory: %w", err))
		}
	}
	return f, uint64(st.Dev), uint64(st.Ino), nil
}

// Write appends ev as one line, chained to the line before it. An event
// that cannot be recorded is an error the caller must not ignore: no
// effect may happen without its record. The log is then unchanged, and
// the next Write tries again.
func (a *Log) Write(ev Event) error {
	boundEvent(&ev)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return ErrClosed
	}
	err := a.ready()
	if err == nil {
		err = a.append(&ev)
	}
	if err != nil {
		if a.failures++; a.failures == 1 {
			a.log.Error().Err(err).Str("path", a.path).Msg("audit log write failed; it is retried on every event")
		}
		return err
	}
	if a.failures > 0 {
		a.log.Warn().Int("failed_writes", a.failures).Str("path", a.path).Msg("audit log writable again")
		a.failures = 0
	}
	return nil
}

// ready makes a.f the file at a.path with a clean tail.
func (a *Log) ready() error {
	var st unix.Stat_t
	err := unix.Stat(a.path, &st)
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("stat audit log: %w", err)
	}
	if err != nil || uint64(st.Dev) != a.dev || st.Ino != a.ino {
		return a.rotate()
	}
	if a.dirty {
		return a.repair()
	}
	return nil
}

// rotate goes on in a new file at a.path after the old one was renamed
// or removed. Until that works, every Write fails and tries again.
func (a *Log) rotate() error {
	f, dev, ino, err := openAuditFile(a.path)
	if err != nil {
		return fmt.Errorf("reopen rotated audit log: %w", err)
	}
	oldF, oldDev, oldIno, oldSize, oldHead, oldDirty := a.f, a.dev, a.ino, a.size, a.head, a.dirty
	a.f, a.dev, a.ino, a.dirty = f, dev, ino, false
	restore := func(err error) error {
		f.Close()
		a.f, a.dev, a.ino, a.size, a.head, a.dirty = oldF, oldDev, oldIno, oldSize, oldHead, oldDirty
		return err
	}
	if err := a.repair(); err != nil {
		return restore(fmt.Errorf("reopen rotated audit log: %w", err))
	}
	seg := a.segment(SegmentRotated)
	seg.Continues = oldHead
	seg.Note = "the file this kernel was writing was renamed or removed; continues is the hash of the last line it wrote there"
	if err := a.append(&seg); err != nil {
		return restore(err)
	}
	if err := errors.Join(oldF.Sync(), oldF.Close()); err != nil {
		a.log.Warn().Err(err).Msg("closing the rotated audit log")
	}
	a.log.Warn().Str("path", a.path).Str("continues", oldHead).Msg("audit log was renamed or removed; writing a new one at its path")
	return nil
}

func (a *Log) segment(reason string) Event {
	return Event{
		Time: Stamp(time.Now()), Event: EventSegment, Reason: reason,
		Peer: Peer{UID: uint32(os.Getuid()), PID: os.Getpid()},
	}
}

// append writes ev as the next line of a.f. On failure it undoes what
// reached the file, or marks the log dirty when it cannot.
func (a *Log) append(ev *Event) error {
	ev.Prev = a.head
	a.buf.Reset()
	if err := a.enc.Encode(ev); err != nil {
		return fmt.Errorf("encode audit event: %w", err)
	}
	line := a.buf.Bytes()
	if needsTerminalEscape(line) {
		a.line = AppendTerminalSafe(a.line[:0], line)
		line = a.line
	}
	n, err := a.f.Write(line)
	if err != nil {
		a.undo(int64(n))
		return fmt.Errorf("write audit log: %w", err)
	}
	a.size += int64(n)
	a.head = LineHash(line[:len(line)-1])
	return nil
}

// undo removes the n bytes a failed write left at the end of a.f, if the
// file is as long as this log alone would have made it; otherwise (or if
// truncating fails) the next Write repairs the tail first.
func (a *Log) undo(n int64) {
	if n == 0 {
		return
	}
	if fi, err := a.f.Stat(); err == nil && fi.Size() == a.size+n {
		if a.f.Truncate(a.size) == nil {
			return
		}
	}
	a.dirty = true
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// LineHash is the SHA-256 (hex) of a log line without its newline: the
// prev of the line after it, and the AttrHash an export carries.
func LineHash(line []byte) string {
	sum := sha256.Sum256(line)
	return hex.EncodeToString(sum[:])
}

// repair reads the end of a.f and sets a.size and a.head from it. When the
// file does not end in a whole event, the lines that are not events are
// set aside: kept as they are, the last one terminated, and followed by an
// audit.segment "torn_tail" that counts them and names the hash of the
// last event before them.
func (a *Log) repair() error {
	fi, err := a.f.Stat()
	if err != nil {
		return fmt.Errorf("stat audit log: %w", err)
	}
	t, err := readTail(a.f, fi.Size())
	if err != nil {
		return fmt.Errorf("read the audit log's end: %w", err)
	}
	// The newline and the segment are two writes. If only the first
	// lands, the file ends in a terminated line that is not an event,
	// which the next repair sets aside the same way.
	a.size, a.head = fi.Size(), t.head
	if t.open {
		if n, err := a.f.Write([]byte("\n")); err != nil {
			a.undo(int64(n))
			return fmt.Errorf("repair audit log: %w", err)
		}
		a.size++
	}
	if t.tornLines > 0 {
		seg := a.segment(SegmentTornTail)
		seg.Continues, seg.TornLines, seg.TornBytes = t.lastEvent, t.tornLines, t.tornBytes
		seg.Note = "the lines before this one are not whole events (a crash or a failed write cut them short); they are kept as they were"
		if err := a.append(&seg); err != nil {
			return err
		}
		a.log.Warn().Str("path", a.path).Int("lines", t.tornLines).Int64("bytes", t.tornBytes).
			Msg("audit log ended in lines that are not whole events; set them aside behind an audit.segment")
	}
	a.dirty = false
	return nil
}

// Sync makes every event written so far durable. It does not hold the
// write lock: other turns keep appending while the disk flushes.
func (a *Log) Sync() error {
	err := a.syncCurrent()
	if errors.Is(err, os.ErrClosed) {
		// A rotation synced and closed the file; sync its successor.
		err = a.syncCurrent()
	}
	if err != nil && !errors.Is(err, ErrClosed) {
		return fmt.Errorf("sync audit log: %w", err)
	}
	return err
}

func (a *Log) syncCurrent() error {
	a.mu.Lock()
	f := a.f
	a.mu.Unlock()
	if f == nil {
		return ErrClosed
	}
	return f.Sync()
}

// Close syncs and closes the file, releasing its lock.
func (a *Log) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return ErrClosed
	}
	f := a.f
	a.f = nil
	if err := f.Sync(); err != nil {
		return errors.Join(fmt.Errorf("sync audit log: %w", err), f.Close())
	}
	return f.Close()
}

// DefaultPath is $XDG_STATE_HOME/sharedos/audit.jsonl, else
// ~/.local/state/sharedos/audit.jsonl.
func DefaultPath(getenv func(string) string) (string, error) {
	if d := getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "sharedos", "audit.jsonl"), nil
	}
	home := getenv("HOME")
	if home == "" {
		return "", errors.New("neither XDG_STATE_HOME nor HOME is set")
	}
	return filepath.Join(home, ".local", "state", "sharedos", "audit.jsonl"), nil
}

// stamp formats t for an event's time field.
func Stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// auditTail is what repair needs to know about the end of a log.
type auditTail struct {
	head      string // hash of the last line, whatever it is; Genesis if none
	lastEvent string // hash of the last whole event line; Genesis if none
	tornLines int    // lines after that event (none of them an event)
	tornBytes int64  // their bytes, newlines not counted
	open      bool   // the file does not end in a newline
}

// readTail walks back from the end of r (size bytes) line by line to the
// last whole event. Only those lines are read.
func readTail(r io.ReaderAt, size int64) (auditTail, error) {
	t := auditTail{head: Genesis, lastEvent: Genesis}
	if size == 0 {
		return t, nil
	}
	end := size // end of the line being looked at, its newline excluded
	var last [1]byte
	if _, err := r.ReadAt(last[:], size-1); err != nil {
		return t, err
	}
	t.open = last[0] != '\n'
	if !t.open {
		end--
	}
	for first := true; ; first = false {
		start, err := lineStart(r, end)
		if err != nil {
			return t, err
		}
		h, event, err := examineLine(io.NewSectionReader(r, start, end-start), end-start)
		if err != nil {
			return t, err
		}
		if first {
			t.head = h
		}
		if event {
			t.lastEvent = h
			return t, nil
		}
		t.tornLines++
		t.tornBytes += end - start
		if start == 0 {
			return t, nil
		}
		end = start - 1
	}
}

// lineStart returns where the line ending at end (exclusive) starts: just
// after the previous newline, or 0.
func lineStart(r io.ReaderAt, end int64) (int64, error) {
	var buf [32 << 10]byte
	for pos := end; pos > 0; {
		n := int64(len(buf))
		if n > pos {
			n = pos
		}
		if _, err := r.ReadAt(buf[:n], pos-n); err != nil {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return pos - n + int64(i) + 1, nil
		}
		pos -= n
	}
	return 0, nil
}

// examineLine hashes a line and tells whether it is a whole event. A line
// longer than any the kernel writes is hashed without being held.
func examineLine(r io.Reader, n int64) (hash string, event bool, err error) {
	if n > maxAuditLine {
		h := sha256.New()
		if _, err := io.Copy(h, r); err != nil {
			return "", false, err
		}
		return hex.EncodeToString(h.Sum(nil)), false, nil
	}
	line := make([]byte, n)
	if _, err := io.ReadFull(r, line); err != nil {
		return "", false, err
	}
	return LineHash(line), isEvent(line), nil
}

// isEvent reports whether line is one whole audit event.
func isEvent(line []byte) bool {
	var e struct {
		Event string `json:"event"`
	}
	return json.Unmarshal(line, &e) == nil && e.Event != ""
}
