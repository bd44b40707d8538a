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

// maxInFlight bounds requests read but not yet answered; the reader waits
// when it is reached, so a flood of calls cannot grow memory without end.
const maxInFlight = 256

// slot is one answer to write, in arrival order, in one or more pieces
// (see listLine). out is empty when nothing is to be written (a cancelled
// request).
type slot struct {
	done      chan struct{}
	out       [][]byte
	cancelled atomic.Bool
	cancel    context.CancelFunc // set for requests that wait on something
	callID    string             // set for calls sent to the kernel
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

	// Owned by the reader goroutine.
	in            *jsonrpc.Reader
	legacyVersion string // negotiated by initialize; "" before
	escalated     bool
	nextCall      int64

	mu       sync.Mutex
	inflight map[string]*slot // by request id, for notifications/cancelled

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
func Serve(ctx context.Context, cfg Config, in io.Reader, out io.Writer) error {
	s := newServer(cfg)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	queue := make(chan *slot, maxInFlight)
	readErr := make(chan error, 1)
	go func() { readErr <- s.read(ctx, in, queue) }()

	writeErr := make(chan error, 1)
	go func() { writeErr <- write(ctx, out, queue) }()

	var err error
	select {
	case err = <-writeErr:
		// The reader closed the queue and everything was written, or the
		// write side failed.
		if err == nil {
			err = <-readErr
		}
	case <-ctx.Done():
		err = ctx.Err()
	}
	cancel()
	s.calls.Wait()
	close(s.end)
	s.workers.Wait()
	s.kernel.Close()
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

func newServer(cfg Config) *server {
	info, _ := marshal(map[string]string{"name": "sharedos-mcp", "version": cfg.Version})
	return &server{
		cfg:        cfg,
		kernel:     cfg.Kernel,
		serverInfo: info,
		cat:        newCatalogue(),
		inflight:   make(map[string]*slot),
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
// end of input after queueing every answer.
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

// write writes answers in queue order. Answers already done when the
// previous one is written are gathered into one write. It returns nil when
// the queue is closed and drained.
func write(ctx context.Context, out io.Writer, queue <-chan *slot) error {
	var buf []byte
	var next *slot
	for {
		sl := next
		next = nil
		if sl == nil {
			var ok bool
			if sl, ok = <-queue; !ok {
				return nil
			}
		}
		select {
		case <-sl.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		closed := false
		select {
		case n, ok := <-queue:
			next, closed = n, !ok
		default:
		}
		if next != nil && !isDone(next) {
			// The calls behind this one are being answered by goroutines
			// that are ready to run, but whoever finished sl handed this
			// goroutine the processor first. Let them run, so their
			// answers go out in this write instead of one write each.
			runtime.Gosched()
		}
		batch := next != nil && isDone(next) && len(buf) < 1<<20
		switch {
		case sl.cancelled.Load() || sl.empty():
		case len(buf) == 0 && !batch:
			// Written alone, the answer goes out as it is rather than
			// copied: a 512-tool catalogue is half a megabyte.
			for _, p := range sl.out {
				if _, err := out.Write(p); err != nil {
					return err
				}
			}
		default:
			for _, p := range sl.out {
				buf = append(buf, p...)
			}
		}
		if batch {
			continue
		}
		if len(buf) > 0 {
			if _, err := out.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
		if closed {
			return nil
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
