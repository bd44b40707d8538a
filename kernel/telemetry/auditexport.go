package telemetry

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
)

// CursorFile is the audit stream's cursor in the state directory: which
// line of the audit log was the last delivered.
const CursorFile = "audit-export.json"

// Bounds of the audit stream. A batch is at most maxBatchLines lines and
// about maxBatchBytes (one line may take it past, up to the longest line
// the kernel writes); it is what the stream holds in memory, whatever the
// collector does. A failed export is tried again after a wait that
// doubles from minRetry to maxRetry.
const (
	maxBatchLines = 512
	maxBatchBytes = 1 << 20
	minRetry      = 500 * time.Millisecond
	maxRetry      = 30 * time.Second
	auditPoll     = 200 * time.Millisecond
	// maxLine is the longest line read whole; a longer one (no line the
	// kernel writes) is sent as its hash alone.
	maxLine = 1 << 20
)

// cursor is the audit stream's durable position: the file is the one
// whose first line hashes to First, and every line before Offset, the
// last of which hashes to Hash, was delivered.
type cursor struct {
	Log    string `json:"log"`
	First  string `json:"first"`
	Offset int64  `json:"offset"`
	Hash   string `json:"hash"`
}

type auditStreamOptions struct {
	path, cursor string
	exporter     sdklog.Exporter
	resource     *resource.Resource
	version      string
	log          zerolog.Logger
	poll         time.Duration
}

// auditStream sends the audit log's lines, in order, as log records: each
// line the body, byte for byte; its fields as attributes; its hash as
// sharedos.audit.hash. It reads the file the kernel writes, from a cursor
// in the state directory it moves only once a batch is delivered, so a
// collector that was down gets what it missed when it is back, a kernel
// restart sends nothing again that was delivered, and what waits is on
// disk, not in memory. A batch whose delivery is not known (the kernel
// stopped mid-export) is sent again: at least once.
type auditStream struct {
	o      auditStreamOptions
	logger otellog.Logger
	coll   *collectProcessor
	lp     *sdklog.LoggerProvider

	kick chan chan error // a flush: run a round now and say how it went
	quit chan struct{}
	done chan struct{}
	once sync.Once
	// ctx is what exports run in; stop cancels it when its own ends.
	ctx    context.Context
	cancel context.CancelFunc

	// Owned by the run goroutine.
	f          *os.File
	cur        cursor
	retry      time.Duration
	failing    bool
	failedAt   time.Time
	buf, chunk []byte // read's
}

func newAuditStream(o auditStreamOptions) *auditStream {
	coll := &collectProcessor{}
	// An event's fields are unique keys already: the SDK need not check.
	lp := sdklog.NewLoggerProvider(sdklog.WithResource(o.resource), sdklog.WithProcessor(coll),
		sdklog.WithAttributeCountLimit(-1), sdklog.WithAttributeValueLengthLimit(-1), sdklog.WithAllowKeyDuplication())
	ctx, cancel := context.WithCancel(context.Background())
	return &auditStream{
		o: o, coll: coll, lp: lp,
		logger: lp.Logger(scope+"/audit", otellog.WithInstrumentationVersion(o.version)),
		kick:   make(chan chan error), quit: make(chan struct{}), done: make(chan struct{}),
		ctx: ctx, cancel: cancel,
	}
}

// collectProcessor keeps what the logger emits for the stream to export
// itself, so that it knows whether a batch was delivered.
type collectProcessor struct {
	pending []sdklog.Record
}

func (c *collectProcessor) OnEmit(_ context.Context, r *sdklog.Record) error {
	c.pending = append(c.pending, r.Clone())
	return nil
}
func (c *collectProcessor) Enabled(context.Context, sdklog.EnabledParameters) bool { return true }
func (c *collectProcessor) Shutdown(context.Context) error                         { return nil }
func (c *collectProcessor) ForceFlush(context.Context) error                       { return nil }

// run sends batches until stop: at each poll, on a flush, and after a
// failed export once its wait is over.
func (s *auditStream) run() {
	defer close(s.done)
	defer func() {
		if s.f != nil {
			s.f.Close()
		}
	}()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		var reply chan error
		select {
		case <-s.quit:
			return
		case reply = <-s.kick:
		case <-timer.C:
		}
		err := s.round(s.ctx)
		if reply != nil {
			reply <- err
		}
		wait := s.o.poll
		if err != nil {
			wait = s.retry
		}
		timer.Reset(wait)
	}
}

// flush runs a round now and returns how it went.
func (s *auditStream) flush(ctx context.Context) error {
	reply := make(chan error, 1)
	select {
	case s.kick <- reply:
	case <-s.done:
		return errors.New("telemetry: the audit stream has stopped")
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stop sends what is left, within ctx, and ends the stream. What ctx
// leaves unsent is sent by the next kernel, from the cursor.
func (s *auditStream) stop(ctx context.Context) error {
	defer context.AfterFunc(ctx, s.cancel)()
	err := s.flush(ctx)
	s.once.Do(func() { close(s.quit) })
	<-s.done
	s.cancel()
	return errors.Join(err, s.o.exporter.Shutdown(ctx), s.lp.Shutdown(ctx))
}

// round sends every whole line after the cursor, batch by batch, until
// the end of the file or a failed export.
func (s *auditStream) round(ctx context.Context) error {
	for {
		n, err := s.batch(ctx)
		if err != nil {
			s.failed(err)
			return err
		}
		if s.failing {
			s.o.log.Warn().Dur("down_for_ms", time.Since(s.failedAt)).Msg("audit stream delivered again; what it missed has been sent")
			s.failing = false
		}
		s.retry = 0
		if n == 0 {
			return nil
		}
	}
}

// failed notes a failed round: the next waits longer, and the log hears of
// the first of a run of failures.
func (s *auditStream) failed(err error) {
	s.retry = min(max(2*s.retry, minRetry), maxRetry)
	if !s.failing {
		s.failing, s.failedAt = true, time.Now()
		s.o.log.Warn().Err(err).Str("audit_log", s.o.path).
			Msg("audit stream cannot deliver; it is sent again from where it stopped once the collector takes it, and calls go on")
	}
}

// batch sends the next batch and returns how many lines it held.
func (s *auditStream) batch(ctx context.Context) (int, error) {
	if err := s.open(); err != nil {
		return 0, err
	}
	lines, err := s.read()
	if err != nil {
		return 0, err
	}
	if len(lines) == 0 {
		switched, err := s.followRotation()
		if err != nil || !switched {
			return 0, err
		}
		if lines, err = s.read(); err != nil || len(lines) == 0 {
			return 0, err
		}
	}
	s.coll.pending = s.coll.pending[:0]
	for _, l := range lines {
		s.logger.Emit(ctx, record(l))
	}
	if err := s.o.exporter.Export(ctx, s.coll.pending); err != nil {
		return 0, fmt.Errorf("export audit lines: %w", err)
	}
	last := lines[len(lines)-1]
	next := s.cur
	if next.First == "" {
		next.First = lines[0].hash
	}
	next.Offset, next.Hash = last.end, last.hash
	if err := writeCursor(s.o.cursor, next); err != nil {
		// Delivered, but the cursor did not move: a restart sends these
		// lines again, which at least once allows.
		s.o.log.Warn().Err(err).Msg("audit stream: the cursor could not be written")
	}
	s.cur = next
	return len(lines), nil
}

// line is one audit line read for export.
type line struct {
	bytes []byte // nil for a line longer than maxLine
	hash  string
	end   int64 // offset just after its newline
}

// open opens the audit log at the cursor, the first time.
func (s *auditStream) open() error {
	if s.f != nil {
		return nil
	}
	f, err := os.Open(s.o.path)
	if err != nil {
		return fmt.Errorf("open audit log: %w", err)
	}
	first, err := firstLineHash(f)
	if err != nil {
		f.Close()
		return err
	}
	c, cerr := readCursor(s.o.cursor)
	switch {
	case errors.Is(cerr, os.ErrNotExist):
		c = cursor{Log: s.o.path, First: first}
	case cerr != nil:
		s.o.log.Warn().Err(cerr).Msg("audit stream: the cursor cannot be read; sending the audit log from its first line")
		c = cursor{Log: s.o.path, First: first}
	case c.Log == s.o.path && c.First == first && holdsAt(f, c.Offset, c.Hash):
	default:
		how := "the log is not the one it was exporting (a different audit_log, or the log was rewritten)"
		if r, ok := rotatedFrom(f); ok {
			how = "the log was rotated before all of the file before it was delivered; the rest of that file is not sent"
			if r == c.Hash {
				how = ""
			}
		}
		if how != "" {
			s.o.log.Warn().Str("audit_log", s.o.path).Str("delivered_up_to", c.Hash).Msg("audit stream: " + how + "; sending it from its first line")
		}
		c = cursor{Log: s.o.path, First: first}
	}
	if _, err := f.Seek(c.Offset, io.SeekStart); err != nil {
		f.Close()
		return fmt.Errorf("seek audit log: %w", err)
	}
	s.f, s.cur = f, c
	return nil
}

// read reads the whole lines after the cursor, up to a batch.
func (s *auditStream) read() ([]line, error) {
	var out []line
	size := 0
	if s.chunk == nil {
		s.chunk = make([]byte, 64<<10)
	}
	// The stream polls an idle log five times a second: it reads into
	// buffers it keeps, and makes garbage only of the lines it sends.
	// buf holds the file from base on.
	buf, base := s.buf[:0], s.cur.Offset
	defer func() { s.buf = buf[:0] }()
	for {
		n, err := s.f.ReadAt(s.chunk, base+int64(len(buf)))
		buf = append(buf, s.chunk[:n]...)
		start := 0
		for {
			i := bytes.IndexByte(buf[start:], '\n')
			if i < 0 {
				break
			}
			text := buf[start : start+i]
			l := line{bytes: bytes.Clone(text), hash: audit.LineHash(text), end: base + int64(start+i) + 1}
			out, size, start = append(out, l), size+i, start+i+1
			if len(out) == maxBatchLines || size >= maxBatchBytes {
				return out, nil
			}
		}
		base += int64(start)
		buf = append(buf[:0], buf[start:]...)
		if len(buf) > maxLine {
			l, err := s.longLine(base)
			if err != nil || l.end == 0 {
				return out, err
			}
			out, base, buf = append(out, l), l.end, buf[:0]
			continue
		}
		if errors.Is(err, io.EOF) || n == 0 {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("read audit log: %w", err)
		}
	}
}

// longLine hashes the line at off without holding it; end is 0 when it
// does not end yet.
func (s *auditStream) longLine(off int64) (line, error) {
	h := sha256.New()
	chunk := make([]byte, 64<<10)
	for pos := off; ; {
		n, err := s.f.ReadAt(chunk, pos)
		if i := bytes.IndexByte(chunk[:n], '\n'); i >= 0 {
			h.Write(chunk[:i])
			return line{hash: hex.EncodeToString(h.Sum(nil)), end: pos + int64(i) + 1}, nil
		}
		h.Write(chunk[:n])
		pos += int64(n)
		if errors.Is(err, io.EOF) || n == 0 {
			return line{}, nil
		}
		if err != nil {
			return line{}, fmt.Errorf("read audit log: %w", err)
		}
	}
}

// followRotation, at the end of the open file, moves to the file now at
// the path when the kernel has rotated the log, once the old file has
// given every line the new one says it continues.
func (s *auditStream) followRotation() (bool, error) {
	open, err := s.f.Stat()
	if err != nil {
		return false, fmt.Errorf("stat audit log: %w", err)
	}
	now, err := os.Stat(s.o.path)
	if err != nil || os.SameFile(open, now) {
		return false, nil // gone and not yet begun again, or not rotated
	}
	nf, err := os.Open(s.o.path)
	if err != nil {
		return false, nil
	}
	continues, ok := rotatedFrom(nf)
	if ok && continues != s.cur.Hash {
		// The kernel may have written its last lines to the old file
		// after this stream read its end: they come first.
		nf.Close()
		if lines, err := s.read(); err != nil || len(lines) > 0 {
			return false, err
		}
		s.o.log.Warn().Str("audit_log", s.o.path).Msg("audit stream: the rotated-away file ends before the line the new one continues; the lines between are not sent")
		if nf, err = os.Open(s.o.path); err != nil {
			return false, nil
		}
	}
	first, err := firstLineHash(nf)
	if err != nil {
		nf.Close()
		return false, err
	}
	s.f.Close()
	s.f, s.cur = nf, cursor{Log: s.o.path, First: first}
	return true, nil
}

// record is the log record of one audit line: the line its body, and, for
// an event, its fields the attributes.
func record(l line) otellog.Record {
	var r otellog.Record
	r.SetObservedTimestamp(time.Now())
	r.SetSeverity(otellog.SeverityInfo)
	attrs := make([]attribute.KeyValue, 1, 24)
	attrs[0] = attribute.String(audit.AttrHash, l.hash)
	if l.bytes != nil {
		r.SetBody(attribute.StringValue(string(l.bytes)))
		if fields, ok := eventFields(attrs, l.bytes); ok {
			attrs = fields
			for _, kv := range fields {
				switch kv.Key {
				case "event":
					r.SetEventName(kv.Value.AsString())
				case "time":
					if t, err := time.Parse(time.RFC3339Nano, kv.Value.AsString()); err == nil {
						r.SetTimestamp(t)
					}
				}
			}
		}
	}
	r.AddAttributes(attrs...)
	return r
}

// eventFields appends the members of the audit line, a JSON object with
// an event, as attributes in their order: what a line holds is exported
// as it is, a field added to the events tomorrow included. ok is false
// for a line that is not an event (one a crash cut short).
func eventFields(attrs []attribute.KeyValue, line []byte) ([]attribute.KeyValue, bool) {
	n := len(attrs)
	event := false
	err := jsonrpc.EachMember(line, func(key, value []byte) error {
		name := string(jsonrpc.KeyName(key))
		v, ok := jsonValue(value)
		if ok {
			attrs = append(attrs, attribute.KeyValue{Key: attribute.Key(name), Value: v})
			event = event || name == "event" && v.AsString() != ""
		}
		return nil
	})
	if err != nil || !event {
		return attrs[:n], false
	}
	return attrs, true
}

// jsonValue is a JSON value, checked by the walk that handed it out, as an
// attribute's: objects as maps, arrays as slices; false for null.
func jsonValue(raw []byte) (attribute.Value, bool) {
	switch raw[0] {
	case '{':
		var kvs []attribute.KeyValue
		_ = jsonrpc.EachMember(raw, func(key, value []byte) error {
			if v, ok := jsonValue(value); ok {
				kvs = append(kvs, attribute.KeyValue{Key: attribute.Key(jsonrpc.KeyName(key)), Value: v})
			}
			return nil
		})
		return attribute.MapValue(kvs...), true
	case '[':
		var vals []attribute.Value
		strs := true
		_ = jsonrpc.EachElement(raw, func(elem []byte) error {
			if v, ok := jsonValue(elem); ok {
				vals = append(vals, v)
				strs = strs && v.Type() == attribute.STRING
			}
			return nil
		})
		if strs {
			ss := make([]string, len(vals))
			for i, v := range vals {
				ss[i] = v.AsString()
			}
			return attribute.StringSliceValue(ss), true
		}
		return attribute.SliceValue(vals...), true
	case '"':
		s, err := jsonrpc.DecodeString(raw)
		return attribute.StringValue(s), err == nil
	case 't', 'f':
		return attribute.BoolValue(raw[0] == 't'), true
	case 'n':
		return attribute.Value{}, false
	}
	if i, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return attribute.Int64Value(i), true
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	return attribute.Float64Value(f), err == nil
}

// firstLineHash is the hash of f's first whole line; "" when it has none
// yet.
func firstLineHash(f *os.File) (string, error) {
	l, ok, err := lineAt(f, 0)
	if err != nil || !ok {
		return "", err
	}
	return audit.LineHash(l), nil
}

// lineAt reads the whole line that starts at off (at most maxLine bytes).
func lineAt(f *os.File, off int64) ([]byte, bool, error) {
	buf := make([]byte, 0, 4096)
	chunk := make([]byte, 4096)
	for len(buf) <= maxLine {
		n, err := f.ReadAt(chunk, off+int64(len(buf)))
		if i := bytes.IndexByte(chunk[:n], '\n'); i >= 0 {
			return append(buf, chunk[:i]...), true, nil
		}
		buf = append(buf, chunk[:n]...)
		if errors.Is(err, io.EOF) || n == 0 {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("read audit log: %w", err)
		}
	}
	return nil, false, nil
}

// holdsAt reports whether the line of f that ends just before off hashes
// to hash.
func holdsAt(f *os.File, off int64, hash string) bool {
	if off <= 0 || hash == "" {
		return false
	}
	start := off - 1
	var b [1]byte
	if _, err := f.ReadAt(b[:], start); err != nil || b[0] != '\n' {
		return false
	}
	for start > 0 {
		if _, err := f.ReadAt(b[:], start-1); err != nil {
			return false
		}
		if b[0] == '\n' {
			break
		}
		start--
		if off-start > maxLine {
			return false
		}
	}
	l := make([]byte, off-1-start)
	if _, err := f.ReadAt(l, start); err != nil {
		return false
	}
	return audit.LineHash(l) == hash
}

// rotatedFrom is the continues of f's first line when it is a rotation's
// audit.segment: the hash of the last line of the file before.
func rotatedFrom(f *os.File) (string, bool) {
	l, ok, err := lineAt(f, 0)
	if err != nil || !ok {
		return "", false
	}
	var e audit.Event
	if json.Unmarshal(l, &e) != nil || e.Event != audit.EventSegment || e.Reason != audit.SegmentRotated {
		return "", false
	}
	return e.Continues, true
}

func readCursor(path string) (cursor, error) {
	var c cursor
	data, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// writeCursor replaces the cursor file whole (a temporary file, synced,
// renamed over it), so a crash leaves the old cursor or the new.
func writeCursor(path string, c cursor) error {
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".audit-export-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(append(data, '\n'))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}
