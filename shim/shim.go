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
	// OnPayload, when set, is called when the turn meets a payload: a
	// stdin line longer than the reader's buffer, or a call's result
	// longer than payloadSize. It may be called again, and from the
	// reader and the writer at once. ServeStdio paces the collector
	// there.
	OnPayload func()

	// token makes a 2026-07-28 input-required result's requestState;
	// nil means newToken. Wire scripts make theirs predictable.
	token func() string
}

// payloadSize is the size past which a call's result is a payload (see
// Config.OnPayload): that of the stdin reader's buffer, past which a line
// is one.
const payloadSize = 64 << 10

type server struct {
	cfg        Config
	kernel     *kernelclient.Client
	serverInfo []byte // {"name":…,"version":…}

	cat *catalogue // fetched once per turn; see catalogue.go

	// Owned by the reader goroutine (legacyVersion), and by whoever
	// decides calls: the reader, or the catalogue's fetch for the calls
	// that waited for it, under mu (see catalogue.go).
	legacyVersion string // negotiated by initialize; "" before
	legacyElicit  bool   // initialize's client declared form elicitation
	escalated     bool
	nextCall      int64

	mu   sync.Mutex
	st   turnState     // under mu, changed only through update
	wake chan struct{} // to the writer: something can be written; holds one
	room chan struct{} // to the reader waiting in push; holds one

	out *writer // stdout's one writer

	calls sync.WaitGroup // calls at the kernel, the catalogue's fetch, an escalation
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
// One goroutine, Serve's own, writes out: every answer and notification,
// in the order docs/architecture.md §3 gives. The goroutine reading in
// never writes to out, so a slow reader of out does not keep
// cancellations and EOF from being read; the kernel client's reader hands
// a call's answer over and goes on reading.
func Serve(ctx context.Context, cfg Config, in io.Reader, out io.Writer) error {
	s := newServer(cfg, out)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.kernel.OnProgress(s.onProgress)
	s.kernel.OnApproval(s.onApprovalAsk, s.onApprovalWithdrawn)

	readErr := make(chan error, 1)
	go func() { readErr <- s.read(ctx, in) }()

	err := s.out.run(ctx)
	readDone := false
	if err == nil {
		// The reader ended and everything it queued was written.
		err, readDone = <-readErr, true
	}
	cancel()
	if !readDone {
		stopReader(in, readErr)
	}
	s.abortCalls()
	s.calls.Wait()
	s.kernel.OnProgress(nil)
	s.kernel.OnApproval(nil, nil)
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

func newServer(cfg Config, out io.Writer) *server {
	info, _ := marshal(map[string]string{"name": "sharedos-mcp", "version": cfg.Version})
	s := &server{
		cfg:        cfg,
		kernel:     cfg.Kernel,
		serverInfo: info,
		cat:        &catalogue{},
		st: turnState{
			byID:  make(map[string]*pending),
			calls: make(map[string]*pending),
			asks:  make(map[string]*asking),
		},
		wake: make(chan struct{}, 1),
		room: make(chan struct{}, 1),
	}
	s.out = newWriter(s, out)
	return s
}

// read turns stdin lines into pending answers, in order. It returns
// io.EOF at the end of input after queueing every answer. It never waits
// on the kernel's answers, and for the kernel to read only while 32 MiB
// of requests wait for it (kernelclient.WaitRoom), a wait the write
// timeout bounds: cancellations and EOF are read whatever the kernel does.
func (s *server) read(ctx context.Context, in io.Reader) error {
	defer s.update(func(st *turnState) { st.ended = true })
	r := jsonrpc.NewReaderSize(in, s.cfg.MaxLine, payloadSize)
	for {
		// A flood of calls to a kernel that reads slowly waits here,
		// bounded, outside every lock the kernel's answers need.
		if err := s.kernel.WaitRoom(ctx); err != nil {
			return err
		}
		line, err := r.ReadLine()
		if ctx.Err() != nil {
			return ctx.Err() // the turn is over: nothing read now is handled
		}
		var p *pending
		switch {
		case errors.Is(err, jsonrpc.ErrLineTooLong):
			s.cfg.Log.Warn().Msg("stdin line over the size limit answered -32600 and skipped")
			p = answered(errorLine(nil, jsonrpc.CodeInvalidRequest, "message exceeds the maximum line size", nil))
		case err != nil:
			return err
		default:
			if r.Long() && s.cfg.OnPayload != nil {
				s.cfg.OnPayload()
			}
			p = s.handleLine(ctx, line, r.Long())
		}
		if p == nil {
			continue
		}
		if err := s.push(ctx, p); err != nil {
			return err
		}
	}
}

// answered is an answer the shim decided at once, not cancellable.
func answered(lines ...[]byte) *pending {
	return &pending{state: decided, lines: lines}
}
