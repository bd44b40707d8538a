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
type Client struct {
	conn *net.UnixConn
	r    *jsonrpc.Reader

	wmu      sync.Mutex // serializes writes
	wbuf     []byte     // requests encoded and not yet written (see Deferred)
	maxSend  int        // the kernel's line limit, from hello
	wtimeout time.Duration
	wdl      time.Time // the write deadline set last

	// What a kernel that stopped reading has not taken (see put), and
	// the goroutine writing it.
	backlog  []byte
	draining bool
	drained  *sync.Cond  // on wmu: the backlog shrank or failed
	werr     error       // the backlog could not be written: the connection is lost
	vec      net.Buffers // the pieces of the write under way, in vecs
	vecs     [3][]byte

	mu       sync.Mutex
	nextID   int64
	pending  map[int64]waiter
	progress func(kproto.ProgressParams)
	err      error // set once the connection is lost
	done     chan struct{}
}

// Answer is the kernel's answer to one request, not yet decoded: a result
// or an error (a KernelError, or ErrClosed when the connection was lost).
type Answer struct {
	result json.RawMessage
	err    error
	in     *jsonrpc.Reader // what read result, while it reads nothing else
}

// waiter is who waits for one request's answer: a channel, which gets the
// answer with a line of its own, or a function (StartInvokeFunc), which
// reads it in place.
type waiter struct {
	ch chan Answer
	f  func(a Answer, last bool)
}

// readBuffer holds a whole tools.list answer for 512 tools (about half a
// megabyte), so it is read in place rather than assembled from pieces.
// Only the pages a message reaches are ever touched: small messages reuse
// the start of the buffer.
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
		pending:  make(map[int64]waiter),
		done:     make(chan struct{}),
	}
	c.drained = sync.NewCond(&c.wmu)
	// Results are relayed from where they are read; the few answers a
	// channel waits for are copied out (Take).
	c.r.MapLong = true
	c.r.Ahead = true // a long result is checked while it arrives
	go c.readLoop()
	return c, nil
}

// Close closes the connection, which ends the turn at the kernel.
func (c *Client) Close() error {
	err := c.conn.Close()
	<-c.done
	return err
}

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
		// In place: a function waiter reads its answer before the next
		// line is read, and a channel waiter is given the line (take).
		// The read buffer keeps the size the longest answer grew it to,
		// so a turn that relays large results does not regrow it for
		// each of them.
		line, err = c.r.ReadLine()
		if errors.Is(err, jsonrpc.ErrLineTooLong) {
			// One answer too long to take fails its own request, not
			// the turn.
			if id, ok := leadingID(c.r.Skipped()); ok {
				c.deliver(id, nil, Answer{err: ErrAnswerTooLarge})
			}
			continue
		}
		if err != nil {
			break
		}
		m, perr := c.r.ParseEnvelope(line)
		if perr != nil {
			continue // ignore what we cannot use
		}
		if m.Method != nil {
			if m.ID == nil && string(m.Method) == `"`+kproto.MethodProgress+`"` {
				c.onProgress(m.Params)
			}
			continue // the kernel sends us no requests
		}
		if id, ok := parseID(m.ID); ok {
			c.deliver(id, line, answer(m))
		}
	}
	c.mu.Lock()
	c.err = fmt.Errorf("%w: %v", ErrClosed, err)
	pending := c.pending
	c.pending = map[int64]waiter{}
	c.mu.Unlock()
	for _, w := range pending {
		w.give(Answer{err: c.err}, true)
	}
	c.conn.Close()
	close(c.done)
}

// deliver hands a request its answer, if it is still awaited. line is the
// line the answer's result is a slice of, in the read buffer.
func (c *Client) deliver(id int64, line []byte, a Answer) {
	c.mu.Lock()
	w, ok := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if !ok {
		return
	}
	if w.ch != nil && a.result != nil {
		// A channel waiter reads the answer later, on another goroutine:
		// the result moves with its line out of the read buffer.
		// result is line[start:...]; both end where the read buffer
		// ends, so their capacities differ by start.
		owned := c.r.Take(line)
		start := cap(line) - cap(a.result)
		a.result = owned[start : start+len(a.result) : start+len(a.result)]
	}
	if w.f != nil {
		// A function waiter reads the answer now, before the next line.
		a.in = c.r
	}
	w.give(a, !c.r.Buffered())
}

func (w waiter) give(a Answer, last bool) {
	if w.f != nil {
		w.f(a, last)
		return
	}
	w.ch <- a
}

func (c *Client) onProgress(params []byte) {
	var p kproto.ProgressParams
	if json.Unmarshal(params, &p) != nil || p.CallID == "" {
		return
	}
	c.mu.Lock()
	f := c.progress
	c.mu.Unlock()
	if f != nil {
		f(p)
	}
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

// answer turns the kernel's response into what the waiting call gets.
func answer(m jsonrpc.Envelope) Answer {
	if m.Error == nil || string(m.Error) == "null" {
		return Answer{result: m.Result}
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
	return c.startWrite(method, params, false)
}

func (c *Client) startWrite(method string, params any, deferred bool) (*Call, error) {
	ch := make(chan Answer, 1)
	call, err := c.register(method, waiter{ch: ch})
	if err != nil {
		return nil, err
	}
	call.ch = ch
	if err := c.send(call.id, method, params, deferred); err != nil {
		c.forget(call.id)
		return nil, err
	}
	return call, nil
}

// register gives a request its id and w as who waits for its answer.
func (c *Client) register(method string, w waiter) (*Call, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return nil, c.err
	}
	c.nextID++
	c.pending[c.nextID] = w
	return &Call{c: c, id: c.nextID, method: method}, nil
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

// send writes one request (id > 0) or notification (id == 0), after any
// deferred ones; a deferred request waits in wbuf for the next write.
func (c *Client) send(id int64, method string, params any, deferred bool) error {
	p, ok := params.(json.RawMessage)
	if !ok {
		var err error
		if p, err = json.Marshal(params); err != nil {
			return fmt.Errorf("encode %s params: %w", method, err)
		}
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	b := append(c.wbuf, `{"jsonrpc":"2.0",`...)
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
	if len(b)-len(c.wbuf)-1 > c.maxSend {
		// Refused, not written; the requests held back before it go as
		// they would have.
		c.wbuf = b[:len(c.wbuf)]
		if !deferred && len(c.wbuf) > 0 {
			if err := c.write(c.wbuf); err != nil {
				return err
			}
		}
		return fmt.Errorf("%s: %w (%d bytes)", method, ErrRequestTooLarge, c.maxSend)
	}
	if deferred && len(b) < maxDeferred {
		c.wbuf = b
		return nil
	}
	return c.write(b)
}

// maxDeferred bounds the bytes deferred requests may hold back.
const maxDeferred = 64 << 10

// write writes b, which holds every deferred request, and empties wbuf.
// A failed write closes the connection, so every call waiting on an
// answer, deferred ones included, gets ErrClosed from the read loop.
func (c *Client) write(b []byte) error {
	c.wbuf = b[:0]
	c.vec = append(c.vecs[:0], b)
	return c.put()
}

// writev is write for a request in pieces: b (the deferred requests and
// the request's head), the arguments as the caller holds them, and tail.
func (c *Client) writev(b, args, tail []byte) error {
	c.wbuf = b[:0]
	c.vec = append(c.vecs[:0], b, args, tail)
	return c.put()
}

// stallTimeout is how long a write waits for a kernel that takes
// nothing before what is left of it goes to the backlog.
const stallTimeout = 50 * time.Millisecond

// maxBacklog bounds the backlog: past it a writer waits for the kernel.
const maxBacklog = 2 * jsonrpc.DefaultMaxLine

// put writes c.vec, whole, in order after everything written before. wmu
// is held. The caller (the shim's stdin reader) must not wait for a
// kernel that has stopped reading: cancellations, pings and EOF keep
// coming. So a write waits at most stallTimeout; what the kernel has not
// taken by then is copied to the backlog, which a goroutine of its own
// writes within the write timeout, and every later request joins the
// backlog until it is written. Only a backlog over maxBacklog makes the
// caller wait. A write that fails, then or later, closes the connection.
func (c *Client) put() error {
	defer clear(c.vecs[:]) // the pieces are the caller's
	for c.draining && len(c.backlog) > maxBacklog && c.werr == nil {
		c.drained.Wait()
	}
	if c.werr != nil {
		return c.werr
	}
	if c.draining {
		for _, b := range c.vec {
			c.backlog = append(c.backlog, b...)
		}
		return nil
	}
	if now := time.Now(); c.wdl.Sub(now) < stallTimeout/2 {
		// Moved only when half of it is used up, so most writes pay a
		// clock read and nothing else.
		c.wdl = now.Add(stallTimeout)
		c.conn.SetWriteDeadline(c.wdl)
	}
	var err error
	if len(c.vec) == 1 {
		var n int
		n, err = c.conn.Write(c.vec[0])
		c.vec[0] = c.vec[0][n:]
	} else {
		_, err = c.vec.WriteTo(c.conn) // consumes what it writes
	}
	if err == nil {
		return nil
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		c.conn.Close()
		return fmt.Errorf("%w: %v", ErrClosed, err)
	}
	// c.vec is what the kernel has not taken.
	c.backlog = c.backlog[:0]
	for _, b := range c.vec {
		c.backlog = append(c.backlog, b...)
	}
	c.draining = true
	go c.drain()
	return nil
}

// drain writes the backlog until it is empty, within the write timeout
// for each piece it takes, and closes the connection if the kernel does
// not take it.
func (c *Client) drain() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	var spare []byte
	for len(c.backlog) > 0 && c.werr == nil {
		b := c.backlog
		c.backlog = spare[:0]
		c.wmu.Unlock()
		deadline := time.Time{}
		if c.wtimeout > 0 {
			deadline = time.Now().Add(c.wtimeout)
		}
		c.conn.SetWriteDeadline(deadline)
		_, err := c.conn.Write(b)
		c.wmu.Lock()
		if err != nil {
			c.werr = fmt.Errorf("%w: %v", ErrClosed, err)
			c.conn.Close()
		}
		spare = b
		c.drained.Broadcast()
	}
	c.backlog = nil // a stall's copy is not kept for the turn
	c.draining = false
	c.wdl = time.Time{} // the next write sets its own deadline
	c.drained.Broadcast()
}

// Flush writes the requests StartInvokeDeferred held back.
func (c *Client) Flush() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if len(c.wbuf) == 0 {
		return nil
	}
	return c.write(c.wbuf)
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
	return c.startInvoke(p, false, nil)
}

// StartInvokeDeferred is StartInvoke for a caller that knows more
// requests follow at once: the request is held back until the next
// request that is not deferred, or Flush, writes it with the others. A
// caller that defers must Flush before it waits on anything.
func (c *Client) StartInvokeDeferred(p kproto.InvokeParams) (*Call, error) {
	return c.startInvoke(p, true, nil)
}

// StartInvokeFunc is StartInvoke (or, deferred, StartInvokeDeferred) for
// a caller that takes the answer where it is read rather than on the
// call's channel: f runs on the goroutine that reads the kernel's
// answers, once, unless the call is abandoned first, and may run before
// StartInvokeFunc returns. The answer's result is a slice of the
// client's read buffer, valid only until f returns; last reports that no
// other message from the kernel is read yet, so nothing else waits on f.
// f must not block on the kernel, and every other answer and progress
// report waits while it runs. Answer on the returned call is nil.
//
// It is how the shim relays a call without a hand-off between goroutines
// and a result without a copy: rendered, and written, as it is read.
func (c *Client) StartInvokeFunc(p kproto.InvokeParams, deferred bool, f func(a Answer, last bool)) (*Call, error) {
	return c.startInvoke(p, deferred, f)
}

func (c *Client) startInvoke(p kproto.InvokeParams, deferred bool, f func(Answer, bool)) (*Call, error) {
	w := waiter{f: f}
	if f == nil {
		w.ch = make(chan Answer, 1)
	}
	call, err := c.register(kproto.MethodInvoke, w)
	if err != nil {
		return nil, err
	}
	call.ch = w.ch
	if err := c.sendInvoke(call.id, p, deferred); err != nil {
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

// inlineArguments is the most arguments a tools.invoke copies into the
// write buffer. Larger ones (a file's content) go to the socket from
// where they are, in one writev with the request around them, so a
// payload is never copied on its way to the kernel.
const inlineArguments = 32 << 10

// sendInvoke writes one tools.invoke, after any deferred requests. A
// call with small arguments may be deferred; one with large arguments
// never is.
func (c *Client) sendInvoke(id int64, p kproto.InvokeParams, deferred bool) error {
	args := invokeArguments(p)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	start := len(c.wbuf)
	b := append(c.wbuf, `{"jsonrpc":"2.0","id":`...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"method":"`+kproto.MethodInvoke+`","params":`...)
	b, tail := invokeParts(b, p)
	tail = append(tail, "}\n"...)
	if n := len(b) - start + len(args) + len(tail) - 1; n > c.maxSend {
		c.wbuf = b[:start]
		if !deferred && start > 0 {
			if err := c.write(c.wbuf); err != nil {
				return err
			}
		}
		return fmt.Errorf("%s: %w (%d bytes)", kproto.MethodInvoke, ErrRequestTooLarge, c.maxSend)
	}
	if len(args) > inlineArguments {
		return c.writev(b, args, tail)
	}
	b = append(b, args...)
	b = append(b, tail...)
	if deferred && len(b) < maxDeferred {
		c.wbuf = b
		return nil
	}
	return c.write(b)
}

// Err is the answer's error, for a request whose result carries nothing
// (turn.escalate): nil when the kernel answered with a result.
func (a Answer) Err() error { return a.err }

// Invoke decodes the answer to tools.invoke.
func (a Answer) Invoke() (kproto.InvokeResult, error) {
	if a.err != nil {
		return kproto.InvokeResult{}, a.err
	}
	r, err := decodeInvokeWith(a.result, true, a.in)
	if err != nil {
		return kproto.InvokeResult{}, fmt.Errorf("decode %s result: %w", kproto.MethodInvoke, err)
	}
	return r, nil
}

// decodeInvoke reads a tools.invoke result as json.Unmarshal would into
// kproto.InvokeResult, names matched exactly, without reflection: output
// and content stay slices of the kernel's line.
func decodeInvoke(raw []byte) (kproto.InvokeResult, error) {
	return decodeInvokeWith(raw, false, nil)
}

// decodeInvokeWith is decodeInvoke, or, when checked, the same for a
// result that is a value of a line ParseEnvelope has checked, read by in
// (nil when it is not reading it now): its members are found without
// reading them again.
func decodeInvokeWith(raw []byte, checked bool, in *jsonrpc.Reader) (kproto.InvokeResult, error) {
	var r kproto.InvokeResult
	member := func(key, value []byte) error {
		var err error
		switch string(key) {
		case `"status"`:
			r.Status, err = jsonrpc.DecodeString(value)
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
		}
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		return nil
	}
	var err error
	if checked {
		err = in.EachValidMember(raw, member)
	} else {
		err = jsonrpc.EachMember(raw, member)
	}
	return r, err
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
	return c.send(0, kproto.MethodCancel, kproto.CancelParams{CallID: callID}, false)
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
