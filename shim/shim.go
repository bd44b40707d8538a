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

// maxInFlight bounds requests read but not yet answered: ordered answers
// waiting for their turn, and the shim's own answers waiting for stdout,
// as many of each. The reader waits when either is full, so a flood of
// calls cannot grow memory without end.
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

	// settled is taken by whichever decides a call's answer first: the
	// kernel's answer, the client's cancel, the call timeout or the end
	// of the turn (see relayCall).
	settled atomic.Bool
	closed  atomic.Bool            // claimed: written or dropped, so no progress follows
	box     atomic.Pointer[outbox] // set once queued: finish wakes its writer
}

func readySlot(out ...[]byte) *slot {
	s := &slot{done: make(chan struct{}), out: out}
	close(s.done)
	return s
}

func (s *slot) finish(out ...[]byte) {
	s.out = out
	s.ready()
}

// ready marks the slot's answer complete, and wakes the writer if the
// slot is queued already (push wakes it otherwise).
func (s *slot) ready() {
	close(s.done)
	if b := s.box.Load(); b != nil {
		b.kick()
	}
}

// settle reports whether the caller is the first to decide the slot's
// answer.
func (s *slot) settle() bool { return s.settled.CompareAndSwap(false, true) }

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
	aborted  bool                     // the turn is over: calls still at the kernel were stopped

	out  *outbox // answers on their way to stdout
	text []byte  // the text of the last output relayed; the kernel client's reading goroutine's

	calls sync.WaitGroup // calls at the kernel, and goroutines answering requests
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
//
// Answers are written by whichever goroutine completes them when nothing
// else is being written: a call's by the kernel client's reading
// goroutine, as it reads it, with no hand-off to another goroutine; the
// rest by a writer goroutine. The goroutine reading in never writes to
// out, so a slow reader of out does not keep cancellations and EOF from
// being read.
func Serve(ctx context.Context, cfg Config, in io.Reader, out io.Writer) error {
	s := newServer(cfg, out)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.kernel.OnProgress(s.onProgress)

	readErr := make(chan error, 1)
	go func() { readErr <- s.read(ctx, in) }()

	writeErr := make(chan error, 1)
	go func() { writeErr <- s.out.run(ctx) }()

	var err error
	readDone := false
	select {
	case err = <-writeErr:
		// The reader ended and everything was written, or the write
		// side failed.
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
	s.abortCalls()
	s.calls.Wait()
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

// abortCalls stops every call still at the kernel once the turn is over:
// each gets call.cancel and no answer. A call the reader sends after this
// is stopped as it is sent (see relayCall).
func (s *server) abortCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.aborted = true
	for key, sl := range s.inflight {
		if sl.cancel == nil {
			continue
		}
		delete(s.inflight, key)
		sl.cancelled.Store(true)
		s.kernel.Cancel(sl.callID)
		sl.cancel()
	}
}

func newServer(cfg Config, out io.Writer) *server {
	info, _ := marshal(map[string]string{"name": "sharedos-mcp", "version": cfg.Version})
	s := &server{
		cfg:        cfg,
		kernel:     cfg.Kernel,
		serverInfo: info,
		cat:        newCatalogue(),
		inflight:   make(map[string]*slot),
		progress:   make(map[string]*progressCall),
	}
	s.out = newOutbox(s, out)
	return s
}

// read turns stdin lines into slots, in order. It returns io.EOF at the
// end of input after queueing every answer. It never waits on the kernel
// for an answer (only, briefly, for a write the kernel must take within
// the call timeout), so cancellations and EOF are read whatever the
// kernel does.
func (s *server) read(ctx context.Context, in io.Reader) error {
	defer s.out.end()
	r := jsonrpc.NewReader(in, s.cfg.MaxLine)
	r.MapLong = true // a call's arguments are relayed from where they are read
	r.Ahead = true   // and checked while they arrive
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
		if err := s.out.push(ctx, sl); err != nil {
			return err
		}
	}
}
