// Package kernelclient is the shim's side of the kernel socket
// (docs/kernel-protocol.md): it checks the socket path and the kernel's
// peer credentials before a byte is written, says integration.hello, and
// multiplexes requests over the one connection that is the turn.
package kernelclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sharedos/sharedos-mcp/hashing"
	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/internal/peercred"
	"github.com/sharedos/sharedos-mcp/internal/sockpath"
)

// ErrClosed is returned for requests that cannot be answered because the
// kernel connection is gone. There is no reconnect: a new connection would
// be a new turn with a new catalogue.
var ErrClosed = errors.New("kernel connection closed")

// ErrRequestTooLarge refuses a request whose line would be longer than the
// kernel reads (HelloResult.MaxLine): it is not sent, since the kernel
// could only refuse it without saying whose it was.
var ErrRequestTooLarge = errors.New("request exceeds the kernel's line limit")

// ErrAnswerTooLarge is a request's answer when the kernel's answer line is
// longer than Options.MaxLine. The line is skipped and the connection
// goes on: it costs that one request.
var ErrAnswerTooLarge = errors.New("kernel answer exceeds the line limit")

// KernelError is a JSON-RPC error answer from the kernel. Code is the
// protocol reason (data.code), when the kernel gave one.
type KernelError struct {
	RPC  jsonrpc.Error
	Code string
}

func (e *KernelError) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("kernel refused: %s (%s)", e.RPC.Message, e.Code)
	}
	return fmt.Sprintf("kernel refused: %s (code %d)", e.RPC.Message, e.RPC.Code)
}

// Options says where the kernel is and whom to trust.
type Options struct {
	Socket string
	// KernelUID, when non-negative, is one more uid the kernel may run as
	// besides our own and root.
	KernelUID int
	// MaxLine bounds one message line from the kernel; <= 0 means
	// jsonrpc.DefaultMaxLine.
	MaxLine int
	// WriteTimeout, when positive, bounds how long one write to the
	// kernel may wait for the kernel to read: past it the connection is
	// lost (ErrClosed), so a stalled kernel cannot block a caller for
	// longer.
	WriteTimeout time.Duration
	// PeerCred reads the kernel's credentials; nil means peercred.Get.
	// Tests inject a fake to exercise refusals without a second user.
	PeerCred func(*net.UnixConn) (peercred.Cred, error)
}

// Trusted reports whether uid may be the kernel's owner.
func (o Options) Trusted(uid uint32) bool {
	return uid == 0 || uid == uint32(os.Getuid()) || (o.KernelUID >= 0 && uid == uint32(o.KernelUID))
}

// Client is one connection to the kernel, that is, one turn.
//
// Requests are queued, in the order they are made, and written by one
// goroutine of the client's (writeLoop): a caller never waits for the
// kernel to read (WaitRoom bounds the queue for a caller that may flood
// it), and requests queued while a write is under way go together in the
// next one. Answers are read by another (readLoop), which copies each once
// out of its read buffer and hands it over; an answer longer than the
// buffer is read into a slice of its own (jsonrpc.Reader.Long), and handed
// over as it is.
type Client struct {
	conn *net.UnixConn
	r    *jsonrpc.Reader

	wmu        sync.Mutex
	more       *sync.Cond  // on wmu: writeLoop waits for requests
	room       *sync.Cond  // on wmu: a sender waits for the queue to shrink
	queue      net.Buffers // requests encoded and not yet taken by writeLoop
	spareQueue net.Buffers // the backing array of the last batch written, for the next queue
	open       bool        // queue's last buffer is a small one more requests are appended to
	queued     int         // bytes in queue and in the write under way
	spare      []byte      // a small buffer writeLoop has written, for the next requests
	werr       error       // a write failed: the connection is lost and nothing more is written
	closing    bool        // Close was called
	maxSend    int         // the kernel's line limit, from hello
	wtimeout   time.Duration
	wdone      chan struct{} // closed when writeLoop returns
	vec        net.Buffers   // the batch writeLoop is writing, consumed as written

	mu        sync.Mutex
	nextID    int64
	pending   map[int64]waiter
	progress  func(kproto.ProgressParams)
	ask       func(kproto.ApprovalAskParams, func(kproto.ApprovalAskResult))
	withdrawn func(kproto.ApprovalWithdrawnParams)
	err       error // set once the connection is lost
	done      chan struct{}
}

// Answer is the kernel's answer to one request, not yet decoded: a result
// or an error (a KernelError, or ErrClosed when the connection was lost).
// Its result is its own copy, out of the line that the client checked
// whole before handing it over.
type Answer struct {
	result json.RawMessage
	err    error
}

// waiter is who waits for one request's answer: a channel, or a function
// (StartInvokeFunc) that takes it on the goroutine reading the kernel.
type waiter struct {
	ch chan Answer
	f  func(Answer)
}

// readBuffer holds a whole tools.list answer for 512 tools (about half a
// megabyte) without growing. Only the pages a message reaches are ever
// touched: small messages reuse the start of the buffer.
const readBuffer = 1 << 20

// socketBuffer is the socket buffer asked for on each side of the
// connection.
const socketBuffer = 1 << 20

// Dial checks the socket path, connects, and checks the kernel's peer
// credentials. Nothing is written before all checks pass.
func Dial(opts Options) (*Client, error) {
	if err := sockpath.CheckSocket(opts.Socket, opts.Trusted); err != nil {
		return nil, fmt.Errorf("check socket: %w", err)
	}
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: opts.Socket, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	get := opts.PeerCred
	if get == nil {
		get = peercred.Get
	}
	cred, err := get(conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if !opts.Trusted(cred.UID) {
		conn.Close()
		return nil, fmt.Errorf("kernel peer runs as uid %d (pid %d), not our uid %d, root, or --kernel-uid", cred.UID, cred.PID, os.Getuid())
	}
	// Megabyte answers and arguments cross the socket in a few reads
	// and writes, not one every 200 KB; the system caps what it allows.
	conn.SetReadBuffer(socketBuffer)
	conn.SetWriteBuffer(socketBuffer)
	c := &Client{
		conn:     conn,
		r:        jsonrpc.NewReaderSize(conn, opts.MaxLine, readBuffer),
		maxSend:  jsonrpc.DefaultMaxLine,
		wtimeout: opts.WriteTimeout,
		wdone:    make(chan struct{}),
		pending:  make(map[int64]waiter),
		done:     make(chan struct{}),
	}
	c.more = sync.NewCond(&c.wmu)
	c.room = sync.NewCond(&c.wmu)
	go c.readLoop()
	go c.writeLoop()
	return c, nil
}

// Close closes the connection, which ends the turn at the kernel, and
// returns once the client's goroutines have. What is queued (a last
// call.cancel) is written first, if the kernel takes it within
// closeFlush.
func (c *Client) Close() error {
	c.wmu.Lock()
	c.closing = true
	c.more.Broadcast()
	c.room.Broadcast()
	c.wmu.Unlock()
	c.conn.SetWriteDeadline(time.Now().Add(closeFlush))
	<-c.wdone
	err := c.conn.Close()
	<-c.done
	return err
}

// closeFlush bounds how long Close waits for the kernel to take what is
// queued: a kernel that reads takes it at once, and one that has stopped
// reading must not hold up the end of the turn.
const closeFlush = 100 * time.Millisecond

// OnProgress sets the function the kernel's call.progress reports go to.
// It runs on the goroutine that reads the kernel's answers, so it must not
// block: every answer waits behind it.
func (c *Client) OnProgress(f func(kproto.ProgressParams)) {
	c.mu.Lock()
	c.progress = f
	c.mu.Unlock()
}

func (c *Client) readLoop() {
	var err error
	for {
		var line []byte
		// In place: what is kept of a line is copied out of it before
		// the next read (deliver), unless the line is already the
		// client's own (Long).
		line, err = c.r.ReadLine()
		if errors.Is(err, jsonrpc.ErrLineTooLong) {
			// One answer too long to take fails its own request, not
			// the turn.
			if id, ok := leadingID(c.r.Skipped()); ok {
				c.deliver(id, jsonrpc.Envelope{}, false, ErrAnswerTooLarge)
			}
			continue
		}
		if err != nil {
			break
		}
		m, perr := jsonrpc.ParseEnvelope(line)
		if perr != nil {
			continue // ignore what we cannot use
		}
		if m.Method != nil {
			switch string(m.Method) {
			case `"` + kproto.MethodProgress + `"`:
				if m.ID == nil {
					c.onProgress(m.Params)
				}
			case `"` + kproto.MethodApprovalAsk + `"`:
				if m.ID != nil {
					c.onAsk(bytes.Clone(m.ID), m.Params)
				}
			case `"` + kproto.MethodApprovalWithdrawn + `"`:
				if m.ID == nil {
					c.onWithdrawn(m.Params)
				}
			}
			continue // nothing else is asked of a shim
		}
		if id, ok := parseID(m.ID); ok {
			c.deliver(id, m, c.r.Long(), nil)
		}
	}
	c.mu.Lock()
	c.err = fmt.Errorf("%w: %v", ErrClosed, err)
	pending := c.pending
	c.pending = map[int64]waiter{}
	c.mu.Unlock()
	for _, w := range pending {
		w.give(Answer{err: c.err})
	}
	c.conn.Close()
	close(c.done)
}

// deliver hands a request its answer, if it is still awaited: the
// answer m, a message of the line just read, or err. What the waiter
// keeps of m is copied out of the read buffer here, once, unless the line
// is the client's own (own: the reader assembled a long line into a
// slice of its own, which the waiter then keeps instead).
func (c *Client) deliver(id int64, m jsonrpc.Envelope, own bool, err error) {
	c.mu.Lock()
	w, ok := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if !ok {
		return
	}
	if err != nil {
		w.give(Answer{err: err})
		return
	}
	w.give(answer(m, own))
}

func (w waiter) give(a Answer) {
	if w.f != nil {
		w.f(a)
		return
	}
	w.ch <- a
}

func (c *Client) onProgress(params []byte) {
	notify(c, params, &c.progress, func(p kproto.ProgressParams) bool { return p.CallID != "" })
}

// notify decodes a notification's params and hands them, when ok says
// they are whole, to the function *to holds (under mu), if one is set.
func notify[P any](c *Client, params []byte, to *func(P), ok func(P) bool) {
	var p P
	if json.Unmarshal(params, &p) != nil || !ok(p) {
		return
	}
	c.mu.Lock()
	f := *to
	c.mu.Unlock()
	if f != nil {
		f(p)
	}
}

// OnApproval sets the functions the kernel's approval.ask requests and
// approval.withdrawn notifications go to (docs/kernel-protocol.md). Both
// run on the goroutine that reads the kernel's answers, so they must not
// block; ask answers when it can through the function it is given, once,
// from any goroutine. Without them (nil), an ask is answered
// unavailable: this shim cannot ask anyone.
func (c *Client) OnApproval(ask func(kproto.ApprovalAskParams, func(kproto.ApprovalAskResult)), withdrawn func(kproto.ApprovalWithdrawnParams)) {
	c.mu.Lock()
	c.ask, c.withdrawn = ask, withdrawn
	c.mu.Unlock()
}

func (c *Client) onAsk(id, params []byte) {
	var once sync.Once
	reply := func(r kproto.ApprovalAskResult) {
		// A lost connection loses the answer too: the kernel ends the
		// call with the turn anyway.
		once.Do(func() { _ = c.respond(id, r) })
	}
	var p kproto.ApprovalAskParams
	if json.Unmarshal(params, &p) != nil {
		reply(kproto.ApprovalAskResult{Decision: kproto.ApprovalUnavailable})
		return
	}
	c.mu.Lock()
	f := c.ask
	c.mu.Unlock()
	if f == nil {
		reply(kproto.ApprovalAskResult{Decision: kproto.ApprovalUnavailable})
		return
	}
	f(p, reply)
}

func (c *Client) onWithdrawn(params []byte) {
	notify(c, params, &c.withdrawn, func(p kproto.ApprovalWithdrawnParams) bool { return p.ApprovalID != "" })
}

// respond queues the answer to a request the kernel sent (id as the
// kernel wrote it).
func (c *Client) respond(id []byte, result any) error {
	r, err := json.Marshal(result)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.writable(); err != nil {
		return err
	}
	b := c.openBuffer()
	start := len(b)
	b = jsonrpc.AppendResponse(b, id, r)
	c.queueOpen(b, len(b)-start)
	return nil
}

// AnswerApproval sends the person's answer to an ask this shim deferred
// (approval.answer), without waiting: the call's retry, sent after it,
// is decided on it.
func (c *Client) AnswerApproval(p kproto.ApprovalAnswerParams) error {
	return c.send(0, kproto.MethodApprovalAnswer, p)
}

// leadingID reads the id of a message that may be cut short, as
// Reader.Skipped hands it out. A kernel writes the id before the result,
// as JSON-RPC libraries do; one that writes it after a huge result loses
// that answer to the call's timeout instead.
func leadingID(b []byte) (int64, bool) {
	raw, ok := jsonrpc.LeadingMember(b, "id")
	if !ok {
		return 0, false
	}
	return parseID(raw)
}

// answer turns the kernel's response into what the waiting call gets,
// its own copy of the result: a slice of the line when own says the line
// is the client's, else a copy out of the read buffer.
func answer(m jsonrpc.Envelope, own bool) Answer {
	if m.Error == nil || string(m.Error) == "null" {
		if own {
			return Answer{result: m.Result}
		}
		return Answer{result: bytes.Clone(m.Result)}
	}
	ke := &KernelError{}
	if err := json.Unmarshal(m.Error, &ke.RPC); err != nil {
		return Answer{err: fmt.Errorf("kernel answered with a malformed error object: %v", err)}
	}
	var data kproto.ErrorData
	if json.Unmarshal(ke.RPC.Data, &data) == nil {
		ke.Code = data.Code
	}
	return Answer{err: ke}
}

// parseID reads the ids this client sends: positive decimal integers.
func parseID(raw []byte) (int64, bool) {
	if len(raw) == 0 || len(raw) > 18 || raw[0] == '0' {
		return 0, false
	}
	var id int64
	for _, b := range raw {
		if b < '0' || b > '9' {
			return 0, false
		}
		id = id*10 + int64(b-'0')
	}
	return id, true
}

// Call is a request sent to the kernel whose answer may still be coming.
type Call struct {
	c      *Client
	id     int64
	method string
	ch     chan Answer
}

// start sends one request and returns without waiting for the answer, so
// the caller can send requests in one order and wait for them in parallel.
func (c *Client) start(method string, params any) (*Call, error) {
	ch := make(chan Answer, 1)
	call, err := c.register(method, waiter{ch: ch})
	if err != nil {
		return nil, err
	}
	call.ch = ch
	if err := c.send(call.id, method, params); err != nil {
		c.forget(call.id)
		return nil, err
	}
	return call, nil
}

// register gives a request its id and w as who waits for its answer.
func (c *Client) register(method string, w waiter) (*Call, error) {
	id, err := c.registerID(w)
	if err != nil {
		return nil, err
	}
	return &Call{c: c, id: id, method: method}, nil
}

func (c *Client) registerID(w waiter) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	c.nextID++
	c.pending[c.nextID] = w
	return c.nextID, nil
}

// wait waits for the answer or ctx. On ctx expiry the request is
// forgotten; the caller decides whether to tell the kernel.
func (call *Call) wait(ctx context.Context, result any) error {
	raw, err := call.raw(ctx)
	if err != nil || result == nil {
		return err
	}
	if err := json.Unmarshal(raw, result); err != nil {
		return fmt.Errorf("decode %s result: %w", call.method, err)
	}
	return nil
}

// raw waits as wait does and returns the result undecoded.
func (call *Call) raw(ctx context.Context) (json.RawMessage, error) {
	select {
	case a := <-call.ch:
		return a.result, a.err
	case <-ctx.Done():
		call.Abandon()
		return nil, ctx.Err()
	}
}

// Answer returns the channel the call's answer arrives on, once, for a
// caller that waits on it together with events of its own (without a
// context per call: creating one, and a timer in it, cost a call about a
// tenth of its CPU).
func (call *Call) Answer() <-chan Answer { return call.ch }

// Answered reports whether the call's answer has come (or it was
// abandoned): a report the kernel sends about it now comes after its
// answer.
func (call *Call) Answered() bool {
	call.c.mu.Lock()
	defer call.c.mu.Unlock()
	_, pending := call.c.pending[call.id]
	return !pending
}

// Abandon forgets a call whose answer is no longer awaited: if it still
// comes, it is dropped. Telling the kernel is the caller's choice (Cancel).
func (call *Call) Abandon() { call.c.forget(call.id) }

func (c *Client) call(ctx context.Context, method string, params, result any) error {
	call, err := c.start(method, params)
	if err != nil {
		return err
	}
	return call.wait(ctx, result)
}

func (c *Client) forget(id int64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// send queues one request (id > 0) or notification (id == 0).
func (c *Client) send(id int64, method string, params any) error {
	p, ok := params.(json.RawMessage)
	if !ok {
		var err error
		if p, err = json.Marshal(params); err != nil {
			return fmt.Errorf("encode %s params: %w", method, err)
		}
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.writable(); err != nil {
		return err
	}
	b := c.openBuffer()
	start := len(b)
	b = append(b, `{"jsonrpc":"2.0",`...)
	if id > 0 {
		b = append(b, `"id":`...)
		b = strconv.AppendInt(b, id, 10)
		b = append(b, ',')
	}
	b = append(b, `"method":`...)
	b = strconv.AppendQuote(b, method)
	b = append(b, `,"params":`...)
	b = append(b, p...)
	b = append(b, "}\n"...)
	if len(b)-start-1 > c.maxSend {
		c.unqueue(b[:start])
		return fmt.Errorf("%s: %w (%d bytes)", method, ErrRequestTooLarge, c.maxSend)
	}
	c.queueOpen(b, len(b)-start)
	return nil
}

// maxQueued is how many bytes may be queued for the kernel before
// WaitRoom waits for writeLoop, and so for the kernel to read.
const maxQueued = 2 * jsonrpc.DefaultMaxLine

// smallBuffer is the size of the buffer small requests are appended to,
// and the largest one writeLoop keeps for reuse.
const smallBuffer = 16 << 10

// writable returns, with wmu held, the error that keeps anything more
// from being written.
func (c *Client) writable() error {
	switch {
	case c.werr != nil:
		return c.werr
	case c.closing:
		return ErrClosed
	}
	return nil
}

// WaitRoom waits until at most maxQueued bytes are queued for the kernel,
// the connection is lost, or ctx ends, and returns ctx's error in the last
// case. A sender never waits inside the client: one that may flood it (the
// shim's stdin reader) calls this first, holding no lock of its own that
// the kernel's answers need, so stdin is read on while the kernel is at
// most that far behind, and memory stays bounded when it stops reading.
func (c *Client) WaitRoom(ctx context.Context) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.queued <= maxQueued {
		return nil
	}
	stop := context.AfterFunc(ctx, func() {
		c.wmu.Lock()
		c.room.Broadcast()
		c.wmu.Unlock()
	})
	defer stop()
	for c.queued > maxQueued && c.werr == nil && !c.closing && ctx.Err() == nil {
		c.room.Wait()
	}
	return ctx.Err()
}

// openBuffer returns the buffer a small request is appended to, with wmu
// held: the queue's last one while it is open, else the spare one or a
// new one. The caller appends, then calls queueOpen or unqueue.
func (c *Client) openBuffer() []byte {
	if c.open {
		return c.queue[len(c.queue)-1]
	}
	b := c.spare
	c.spare = nil
	if b == nil {
		b = make([]byte, 0, smallBuffer)
	}
	return b[:0]
}

// queueOpen queues b, the buffer openBuffer gave with n bytes appended
// to it, and wakes writeLoop.
func (c *Client) queueOpen(b []byte, n int) {
	if c.open {
		c.queue[len(c.queue)-1] = b
	} else {
		c.queue = append(c.queue, b)
		c.open = true
	}
	c.queued += n
	c.more.Signal()
}

// unqueue drops what was appended to b, the buffer openBuffer gave: a
// request refused before it was queued.
func (c *Client) unqueue(b []byte) {
	if !c.open {
		c.spare = b[:0]
	}
}

// queueOwn queues a request of n bytes in buffers of its own (large
// arguments), in order, and wakes writeLoop.
func (c *Client) queueOwn(n int, bufs ...[]byte) {
	c.queue = append(c.queue, bufs...)
	c.open = false
	c.queued += n
	c.more.Signal()
}

// writeLoop writes what is queued, everything queued at once in one
// writev, until Close or a failed write. Each write waits at most the
// write timeout for the kernel to take it; past it, or on any error, the
// connection is closed, so every call waiting on an answer gets ErrClosed
// from readLoop.
func (c *Client) writeLoop() {
	defer close(c.wdone)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	var taken net.Buffers
	for {
		for len(c.queue) == 0 && !c.closing {
			c.more.Wait()
		}
		if len(c.queue) == 0 || c.werr != nil {
			return // closing, with nothing left to write
		}
		closing := c.closing
		c.vec, taken = c.queue, c.queue
		c.queue = c.spareQueue[:0]
		n := c.queued // what this write takes: it counts until written
		c.open = false
		var small []byte // kept for reuse once written
		if b := taken[0]; cap(b) == smallBuffer {
			small = b[:0]
		}
		c.wmu.Unlock()
		if c.wtimeout > 0 && !closing { // closing: Close has set the deadline
			c.conn.SetWriteDeadline(time.Now().Add(c.wtimeout))
		}
		_, err := c.vec.WriteTo(c.conn) // consumes c.vec, not taken
		c.wmu.Lock()
		clear(taken) // written: a large request is not kept alive by the queue
		c.spareQueue = taken
		c.queued -= n
		c.room.Broadcast()
		if err != nil {
			c.werr = fmt.Errorf("%w: %v", ErrClosed, err)
			c.conn.Close()
			c.room.Broadcast()
			return
		}
		if small != nil && c.spare == nil {
			c.spare = small
		}
	}
}

// Hello introduces the turn. It must be the first request.
func (c *Client) Hello(ctx context.Context, p kproto.HelloParams) (kproto.HelloResult, error) {
	var r kproto.HelloResult
	if err := c.call(ctx, kproto.MethodHello, p, &r); err != nil {
		return r, err
	}
	if r.Protocol != kproto.Version {
		return r, fmt.Errorf("kernel speaks protocol %d, this shim speaks %d", r.Protocol, kproto.Version)
	}
	if r.MaxLine > 0 {
		c.wmu.Lock()
		c.maxSend = r.MaxLine
		c.wmu.Unlock()
	}
	return r, nil
}

// list fetches the turn's catalogue as the kernel sends it.
func (c *Client) list(ctx context.Context) (kproto.ListResult, error) {
	call, err := c.start(kproto.MethodList, struct{}{})
	if err != nil {
		return kproto.ListResult{}, err
	}
	raw, err := call.raw(ctx)
	if err != nil {
		return kproto.ListResult{}, err
	}
	r, err := decodeList(raw)
	if err != nil {
		return kproto.ListResult{}, fmt.Errorf("decode %s result: %w", kproto.MethodList, err)
	}
	return r, nil
}

// decodeList reads a tools.list result without encoding/json, which would
// scan and copy a half-megabyte catalogue twice more: the tools are left
// as slices of raw, to be read once, by the projection.
func decodeList(raw []byte) (kproto.ListResult, error) {
	var r kproto.ListResult
	err := jsonrpc.EachMember(raw, func(key, value []byte) error {
		switch string(key) {
		case `"tools"`:
			r.Tools = r.Tools[:0]
			if string(value) == "null" {
				return nil
			}
			err := jsonrpc.EachElement(value, func(t []byte) error {
				r.Tools = append(r.Tools, t)
				return nil
			})
			if err != nil {
				return fmt.Errorf("tools: %w", err)
			}
		case `"catalogHash"`:
			if err := json.Unmarshal(value, &r.CatalogHash); err != nil {
				return fmt.Errorf("catalogHash: %w", err)
			}
		}
		return nil
	})
	return r, err
}

// StartInvoke sends tools.invoke without waiting for the answer.
func (c *Client) StartInvoke(p kproto.InvokeParams) (*Call, error) {
	return c.startInvoke(p)
}

// StartInvokeFunc is StartInvoke for a caller that takes the answer from
// the goroutine reading the kernel's answers rather than on a channel: f
// runs there, once, after StartInvokeFunc has returned nil. The answer is
// f's to keep. f must not block: every other answer and progress report
// waits while it runs.
//
// The arguments are copied into the client's queue, unless given: then
// they are handed over and written to the kernel from where they are, and
// the caller must not change them again. The shim gives the arguments of a
// long stdin line, which the line's reader assembled for it alone
// (jsonrpc.Reader.Long), so a 4 MiB argument is not copied a second time.
func (c *Client) StartInvokeFunc(p kproto.InvokeParams, given bool, f func(Answer)) error {
	id, err := c.registerID(waiter{f: f})
	if err != nil {
		return err
	}
	if err := c.sendInvoke(id, p, given); err != nil {
		c.forget(id)
		return err
	}
	return nil
}

func (c *Client) startInvoke(p kproto.InvokeParams) (*Call, error) {
	ch := make(chan Answer, 1)
	call, err := c.register(kproto.MethodInvoke, waiter{ch: ch})
	if err != nil {
		return nil, err
	}
	call.ch = ch
	if err := c.sendInvoke(call.id, p, false); err != nil {
		c.forget(call.id)
		return nil, err
	}
	return call, nil
}

// encodeInvoke writes tools.invoke's params by hand: it is the one request
// made per call. Arguments go as they are; the shim has checked that they
// are a JSON object.
func encodeInvoke(p kproto.InvokeParams) json.RawMessage {
	head, tail := invokeParts(nil, p)
	return slices.Concat(head, invokeArguments(p), tail)
}

// invokeParts are tools.invoke's params around the arguments: head is
// appended to dst, tail is a buffer of its own.
func invokeParts(dst []byte, p kproto.InvokeParams) (head, tail []byte) {
	head = append(dst, `{"callId":`...)
	head = jsonrpc.AppendString(head, p.CallID)
	head = append(head, `,"tool":`...)
	head = jsonrpc.AppendString(head, p.Tool)
	head = append(head, `,"arguments":`...)
	tail = append(make([]byte, 0, 20+len(p.CatalogHash)+mcpLen(p.MCP)), `,"catalogHash":`...)
	tail = jsonrpc.AppendString(tail, p.CatalogHash)
	tail = appendMCP(tail, p.MCP)
	return head, append(tail, '}')
}

// appendMCP appends tools.invoke's mcp member, when m holds anything.
func appendMCP(b []byte, m kproto.InvokeMCP) []byte {
	if len(m.RequestID) == 0 && m.ProtocolVersion == "" && m.TraceParent == "" {
		return b
	}
	b = append(b, `,"mcp":{`...)
	open := len(b)
	if len(m.RequestID) > 0 {
		b = append(b, `"requestId":`...)
		b = append(b, m.RequestID...)
	}
	if m.ProtocolVersion != "" {
		b = appendMember(b, open, `"protocolVersion":`)
		b = jsonrpc.AppendString(b, m.ProtocolVersion)
	}
	if m.TraceParent != "" {
		b = appendMember(b, open, `"traceparent":`)
		b = jsonrpc.AppendString(b, m.TraceParent)
		if m.TraceState != "" {
			b = append(b, `,"tracestate":`...)
			b = jsonrpc.AppendString(b, m.TraceState)
		}
	}
	return append(b, '}')
}

// appendMember appends a member's name, after a comma unless it is the
// first since open.
func appendMember(b []byte, open int, name string) []byte {
	if len(b) > open {
		b = append(b, ',')
	}
	return append(b, name...)
}

// mcpLen bounds what appendMCP appends.
func mcpLen(m kproto.InvokeMCP) int {
	return 80 + len(m.RequestID) + 2*(len(m.ProtocolVersion)+len(m.TraceParent)+len(m.TraceState))
}

func invokeArguments(p kproto.InvokeParams) []byte {
	if len(p.Arguments) == 0 {
		return []byte("null")
	}
	return p.Arguments
}

// inlineArguments is the most arguments a tools.invoke is appended to
// the small requests' buffer with. Larger ones (a file's content) are
// copied into a buffer of their own, of the request's size, so the small
// buffer stays small.
const inlineArguments = 8 << 10

// sendInvoke queues one tools.invoke. Its arguments are copied, once,
// into the queue (the caller's are a slice of its own read buffer), or,
// when given and large, queued as they are between a head and a tail of
// their own.
func (c *Client) sendInvoke(id int64, p kproto.InvokeParams, given bool) error {
	args := invokeArguments(p)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.writable(); err != nil {
		return err
	}
	var head [256]byte // a head of a tool name up to 128 bytes, on the stack
	h := append(head[:0], `{"jsonrpc":"2.0","id":`...)
	h = strconv.AppendInt(h, id, 10)
	h = append(h, `,"method":"`+kproto.MethodInvoke+`","params":`...)
	h, tail := invokeParts(h, p)
	tail = append(tail, "}\n"...)
	n := len(h) + len(args) + len(tail)
	if n-1 > c.maxSend {
		return fmt.Errorf("%s: %w (%d bytes)", kproto.MethodInvoke, ErrRequestTooLarge, c.maxSend)
	}
	switch {
	case len(args) > inlineArguments && given:
		ends := append(append(make([]byte, 0, len(h)+len(tail)), h...), tail...)
		c.queueOwn(n, ends[:len(h)], args, ends[len(h):])
		return nil
	case len(args) > inlineArguments:
		// make and append, not slices.Concat: under the race detector
		// Concat allocates its size twice.
		c.queueOwn(n, append(append(append(make([]byte, 0, n), h...), args...), tail...))
		return nil
	}
	b := c.openBuffer()
	b = append(append(append(b, h...), args...), tail...)
	c.queueOpen(b, n)
	return nil
}

// Err is the answer's error, for a request whose result carries nothing
// (turn.escalate): nil when the kernel answered with a result.
func (a Answer) Err() error { return a.err }

// Invoke decodes the answer to tools.invoke. Its members are found without
// checking them again: the client checked the line they came in whole.
func (a Answer) Invoke() (kproto.InvokeResult, error) {
	if a.err != nil {
		return kproto.InvokeResult{}, a.err
	}
	r, err := decodeInvokeWith(a.result, true)
	if err != nil {
		return kproto.InvokeResult{}, fmt.Errorf("decode %s result: %w", kproto.MethodInvoke, err)
	}
	return r, nil
}

// decodeInvoke reads a tools.invoke result as json.Unmarshal would into
// kproto.InvokeResult, names matched exactly, without reflection: output
// and content stay slices of the kernel's line.
func decodeInvoke(raw []byte) (kproto.InvokeResult, error) {
	return decodeInvokeWith(raw, false)
}

// decodeInvokeWith is decodeInvoke, or, when checked, the same for a
// result that is (a copy of) a value of a line ParseEnvelope has checked:
// its members are found without checking them again.
func decodeInvokeWith(raw []byte, checked bool) (kproto.InvokeResult, error) {
	var r kproto.InvokeResult
	member := func(key, value []byte) error {
		var err error
		switch string(key) {
		case `"status"`:
			r.Status, err = status(value)
		case `"code"`:
			r.Code, err = jsonrpc.DecodeString(value)
		case `"message"`:
			r.Message, err = jsonrpc.DecodeString(value)
		case `"output"`:
			r.Output = value
		case `"content"`:
			r.Content = value
		case `"retryable"`:
			switch string(value) {
			case "true", "false":
				b := value[0] == 't'
				r.Retryable = &b
			case "null":
				r.Retryable = nil
			default:
				err = errors.New("not a boolean")
			}
		case `"retryAfterMs"`:
			r.RetryAfterMs, err = decodeMillis(value)
		case `"approvalId"`:
			r.ApprovalID, err = jsonrpc.DecodeString(value)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		return nil
	}
	var err error
	if checked {
		err = jsonrpc.EachValidMember(raw, member)
	} else {
		err = jsonrpc.EachMember(raw, member)
	}
	return r, err
}

// status decodes a result's status: the statuses of the protocol as
// constants, without a string made for each answer.
func status(raw []byte) (string, error) {
	switch string(raw) {
	case `"` + kproto.StatusSucceeded + `"`:
		return kproto.StatusSucceeded, nil
	case `"` + kproto.StatusDenied + `"`:
		return kproto.StatusDenied, nil
	case `"` + kproto.StatusFailed + `"`:
		return kproto.StatusFailed, nil
	}
	return jsonrpc.DecodeString(raw)
}

// decodeMillis reads a count of milliseconds as json.Unmarshal reads it
// into an *int64: null is nil, and anything but a whole number that fits
// is an error.
func decodeMillis(value []byte) (*int64, error) {
	if string(value) == "null" {
		return nil, nil
	}
	n, err := strconv.ParseInt(string(value), 10, 64)
	if err != nil {
		return nil, errors.New("not a whole number of milliseconds")
	}
	return &n, nil
}

// Cancel tells the kernel to stop a call; it does not wait.
func (c *Client) Cancel(callID string) error {
	return c.send(0, kproto.MethodCancel, kproto.CancelParams{CallID: callID})
}

// StartEscalate reports that the turn ends by asking a person, without
// waiting for the kernel's acknowledgement: that is the call's Answer.
func (c *Client) StartEscalate(p kproto.EscalateParams) (*Call, error) {
	return c.start(kproto.MethodEscalate, p)
}

// ErrCatalogueRefused marks a catalogue the shim must not serve: it does
// not project (a bad or duplicate name, too many tools, a bad schema), or
// the kernel's catalogHash is not the hash of what would be published.
var ErrCatalogueRefused = errors.New("refused the kernel's catalogue")

// Catalogue fetches the turn's catalogue and accepts it only as published:
// projected, and hashing to the kernel's catalogHash.
func (c *Client) Catalogue(ctx context.Context) (tools []hashing.Tool, catalogHash string, err error) {
	tools, _, catalogHash, err = c.catalogue(ctx, false)
	return tools, catalogHash, err
}

// CatalogueDefinitions is Catalogue, and also each tool's kernel-side
// definition as the kernel sent it, by name, kernel-internal fields
// (requiredCapability, …) included: for a tool that shows the operator
// what the shim never publishes (the catalog command).
func (c *Client) CatalogueDefinitions(ctx context.Context) (tools []hashing.Tool, defs map[string]json.RawMessage, catalogHash string, err error) {
	return c.catalogue(ctx, true)
}

func (c *Client) catalogue(ctx context.Context, withDefs bool) ([]hashing.Tool, map[string]json.RawMessage, string, error) {
	res, err := c.list(ctx)
	if err != nil {
		return nil, nil, "", fmt.Errorf("fetch catalogue: %w", err)
	}
	tools, err := hashing.ProjectRaw(res.Tools)
	if err != nil {
		return nil, nil, "", fmt.Errorf("%w: %w", ErrCatalogueRefused, err)
	}
	if h := hashing.Hash(tools); h != res.CatalogHash {
		return nil, nil, "", fmt.Errorf("%w: kernel catalogHash %q, published projection hashes to %q", ErrCatalogueRefused, res.CatalogHash, h)
	}
	var defs map[string]json.RawMessage
	if withDefs {
		defs = make(map[string]json.RawMessage, len(res.Tools))
		for _, raw := range res.Tools {
			var d hashing.Definition
			if err := d.UnmarshalJSON(raw); err == nil {
				defs[d.Name] = bytes.Clone(raw)
			}
		}
	}
	return tools, defs, res.CatalogHash, nil
}
