// Package shim is the MCP stdio server that a harness spawns for one turn.
// It answers protocol-level methods itself, publishes the kernel's
// catalogue (projected and hashed), and relays every tools/call to the
// kernel, which authorizes it again. It decides nothing about authority.
//
// The loop is hand-written rather than built on an SDK server because the
// contract differs on three points: answers leave in arrival order even
// when the kernel answers out of order, every request already read is
// answered at stdin EOF, and a bad line is answered and skipped rather
// than ending the session.
package shim

import (
	"context"
	"errors"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/kernelclient"
)

// Config is what Serve needs for one turn.
type Config struct {
	// Kernel is the turn's connection, already introduced with Hello.
	Kernel *kernelclient.Client
	Hello  kproto.HelloResult
	// Version is the shim's own version, published in serverInfo.
	Version string
	// CallTimeout bounds one relayed call; 0 means no bound.
	CallTimeout time.Duration
	// MaxLine bounds one stdin line; <= 0 means jsonrpc.DefaultMaxLine.
	MaxLine int
	Log     zerolog.Logger
}

// maxInFlight bounds requests read but not yet answered, twice over: the
// queue from the reader to the writer holds as many, and so does the
// writer's list of answers waiting for their turn. The reader waits when
// both are full, so a flood of calls cannot grow memory without end.
const maxInFlight = 256

// slot is one answer to write, in one or more pieces (see listLine). out
// is empty when nothing is to be written (a cancelled request).
//
// An ordered slot answers a request that involves the kernel (tools/list,
// tools/call): those answers leave in arrival order among themselves. Any
// other slot is ready when queued and leaves at once (ADR 0011).
type slot struct {
	done      chan struct{}
	out       [][]byte
	ordered   bool
	cancelled atomic.Bool
	key       string // the request id, while the request can be cancelled

	// Set, under server.mu, once the call is at the kernel.
	cancel func() // stops the work behind it
	callID string

	closed bool // owned by the writer: written or dropped, so no progress follows
}

func readySlot(out ...[]byte) *slot {
	s := &slot{done: make(chan struct{}), out: out}
	close(s.done)
	return s
}

func (s *slot) finish(out ...[]byte) {
	s.out = out
	close(s.done)
}

// empty reports whether the slot has nothing to write.
func (s *slot) empty() bool {
	for _, p := range s.out {
		if len(p) > 0 {
			return false
		}
	}
	return true
}

type server struct {
	cfg        Config
	kernel     *kernelclient.Client
	serverInfo []byte // {"name":…,"version":…}

	cat *catalogue // fetched once per turn; see catalogue.go

	// Owned by the reader goroutine, or by the catalogue's fetch while
	// calls wait for it (see catalogue.go).
	in            *jsonrpc.Reader
	legacyVersion string // negotiated by initialize; "" before
	escalated     bool
	nextCall      int64

	mu       sync.Mutex
	inflight map[string]*slot         // by request id, for notifications/cancelled
	progress map[string]*progressCall // by call id, calls whose client asked for progress

	notes chan note // progress notifications for the writer

	calls sync.WaitGroup // goroutines answering requests

	work    chan func()   // to an idle worker (see spawn)
	end     chan struct{} // closed when the turn is over: workers return
	workers sync.WaitGroup
}

// Serve runs one turn: it reads MCP messages from in and writes answers to
// out until in reaches EOF (every request read is answered first), writing
// out fails, or ctx is cancelled (what is in flight is cancelled). It
// closes the kernel connection before returning. EOF is a clean end and
// returns nil.
//
// Serve returns after every goroutine it started has, the one reading in
// included, when in can be given a read deadline (a pollable *os.File, a
// net.Conn): on cancellation Serve sets a deadline in the past, which
// ends a Read waiting for input, and leaves it set. A reader without
// deadlines (an io.Pipe, a terminal) cannot be stopped from outside while
// a Read blocks: Serve then returns without waiting for it, and when that
// Read returns, whatever it read is dropped unhandled.
func Serve(ctx context.Context, cfg Config, in io.Reader, out io.Writer) error {
	s := newServer(cfg)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.kernel.OnProgress(s.onProgress)

	queue := make(chan *slot, maxInFlight)
	readErr := make(chan error, 1)
	go func() { readErr <- s.read(ctx, in, queue) }()

	writeErr := make(chan error, 1)
	go func() { writeErr <- s.write(ctx, out, queue) }()

	var err error
	readDone := false
	select {
	case err = <-writeErr:
		// The reader closed the queue and everything was written, or the
		// write side failed.
		if err == nil {
			err, readDone = <-readErr, true
		}
	case <-ctx.Done():
		err = ctx.Err()
		<-writeErr
	}
	cancel()
	if !readDone {
		stopReader(in, readErr)
	}
	s.calls.Wait()
	close(s.end)
	s.workers.Wait()
	s.kernel.OnProgress(nil)
	s.kernel.Close()
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// stopReader ends the reader's wait for input, if in allows it, and waits
// for the reader to return.
func stopReader(in io.Reader, readErr <-chan error) {
	d, ok := in.(interface{ SetReadDeadline(time.Time) error })
	if !ok || d.SetReadDeadline(time.Unix(1, 0)) != nil {
		return // see Serve: this Read cannot be interrupted
	}
	<-readErr
}

func newServer(cfg Config) *server {
	info, _ := marshal(map[string]string{"name": "sharedos-mcp", "version": cfg.Version})
	return &server{
		cfg:        cfg,
		kernel:     cfg.Kernel,
		serverInfo: info,
		cat:        newCatalogue(),
		inflight:   make(map[string]*slot),
		progress:   make(map[string]*progressCall),
		notes:      make(chan note, maxNotes),
		work:       make(chan func()),
		end:        make(chan struct{}),
	}
}

// spawn runs f on a goroutine of its own, one that ran an earlier call if
// one is idle. A new goroutine starts on a small stack that relaying a call
// outgrows, and each growth copies the stack, unwinding it frame by frame;
// a reused one has grown already. Idle workers return when the turn ends.
func (s *server) spawn(f func()) {
	select {
	case s.work <- f:
	default:
		s.workers.Add(1)
		go s.worker(f)
	}
}

func (s *server) worker(f func()) {
	defer s.workers.Done()
	for {
		f()
		select {
		case f = <-s.work:
		case <-s.end:
			return
		}
	}
}

// read turns stdin lines into slots, in order. It returns io.EOF at the
// end of input after queueing every answer. It never waits on the kernel
// for an answer (only, briefly, for a write the kernel must take within
// the call timeout), so cancellations and EOF are read whatever the
// kernel does.
func (s *server) read(ctx context.Context, in io.Reader, queue chan<- *slot) error {
	defer close(queue)
	r := jsonrpc.NewReader(in, s.cfg.MaxLine)
	s.in = r
	for {
		if !r.Buffered() {
			// About to wait on stdin: calls held back for one write go
			// now (see toolsCall).
			s.kernel.Flush()
		}
		line, err := r.ReadLine()
		if ctx.Err() != nil {
			return ctx.Err() // the turn is over: nothing read now is handled
		}
		var sl *slot
		switch {
		case errors.Is(err, jsonrpc.ErrLineTooLong):
			s.cfg.Log.Warn().Msg("stdin line over the size limit answered -32600 and skipped")
			sl = readySlot(errorLine(nil, jsonrpc.CodeInvalidRequest, "message exceeds the maximum line size", nil))
		case err != nil:
			return err
		default:
			sl = s.handleLine(ctx, line)
		}
		if sl == nil {
			continue
		}
		select {
		case queue <- sl:
			continue
		default:
			// The writer is behind, waiting on answers: the kernel must
			// have every call held back before the reader waits too.
			s.kernel.Flush()
		}
		select {
		case queue <- sl:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ring is the writer's list of ordered answers not yet written, in
// arrival order.
type ring struct {
	s       [maxInFlight]*slot
	head, n int
}

func (r *ring) push(sl *slot) { r.s[(r.head+r.n)%maxInFlight] = sl; r.n++ }
func (r *ring) peek() *slot   { return r.s[r.head] }
func (r *ring) pop() *slot {
	sl := r.s[r.head]
	r.s[r.head] = nil
	r.head = (r.head + 1) % maxInFlight
	r.n--
	return sl
}

// write writes answers: an ordered one when it and every ordered one
// before it are done, any other at once. Answers done together are
// gathered into one write. It returns nil when the queue is closed and
// every answer in it written.
func (s *server) write(ctx context.Context, out io.Writer, queue <-chan *slot) error {
	w := writer{s: s, out: out, queue: queue}
	for w.queue != nil || w.wait.n > 0 {
		var headDone <-chan struct{}
		if w.wait.n > 0 {
			headDone = w.wait.peek().done
		}
		in := w.queue
		if w.wait.n == maxInFlight {
			in = nil // full: the reader waits on the queue
		}
		var err error
		select {
		case sl, ok := <-in:
			if !ok {
				w.queue = nil
				continue
			}
			if sl.ordered {
				w.wait.push(sl)
				continue
			}
			err = w.alone(sl)
		case <-headDone:
			err = w.gather()
		case n := <-s.notes:
			if !n.call.closed {
				_, err = out.Write(n.line)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// writer is write's state.
type writer struct {
	s     *server
	out   io.Writer
	queue <-chan *slot
	wait  ring
	buf   []byte
}

// alone writes one answer that is not behind anything.
func (w *writer) alone(sl *slot) error {
	if !w.s.claim(sl) {
		return nil
	}
	for _, p := range sl.out {
		if _, err := w.out.Write(p); err != nil {
			return err
		}
	}
	return nil
}

// gather writes the ordered answer at the head of the list, which is
// done, with every answer done behind it.
func (w *writer) gather() error {
	// Progress the kernel reported before these answers goes first.
	w.notes()
	for {
		sl := w.wait.pop()
		w.pull()
		var next *slot
		if w.wait.n > 0 {
			next = w.wait.peek()
			if !isDone(next) {
				// The calls behind this one are being answered by
				// goroutines that are ready to run, but whoever finished
				// sl handed this goroutine the processor first. Let them
				// run, so their answers go out in this write instead of
				// one write each.
				runtime.Gosched()
				w.pull()
			}
		}
		more := next != nil && isDone(next) && len(w.buf) < 1<<20
		if !more && len(w.buf) == 0 {
			// Written alone, the answer goes out as it is rather than
			// copied: a 512-tool catalogue is half a megabyte.
			return w.alone(sl)
		}
		if w.s.claim(sl) {
			for _, p := range sl.out {
				w.buf = append(w.buf, p...)
			}
		}
		if !more {
			break
		}
	}
	if len(w.buf) == 0 {
		return nil
	}
	_, err := w.out.Write(w.buf)
	w.buf = w.buf[:0]
	return err
}

// pull takes what the reader has queued meanwhile without waiting: ordered
// answers join the list, others go into the write being gathered.
func (w *writer) pull() {
	for w.queue != nil && w.wait.n < maxInFlight {
		select {
		case sl, ok := <-w.queue:
			if !ok {
				w.queue = nil
				return
			}
			if sl.ordered {
				w.wait.push(sl)
			} else if w.s.claim(sl) {
				for _, p := range sl.out {
					w.buf = append(w.buf, p...)
				}
			}
		default:
			return
		}
	}
}

// notes writes the progress notifications waiting, into the write being
// gathered.
func (w *writer) notes() {
	for {
		select {
		case n := <-w.s.notes:
			if !n.call.closed {
				w.buf = append(w.buf, n.line...)
			}
		default:
			return
		}
	}
}

func isDone(s *slot) bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}
