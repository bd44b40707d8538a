package shim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"
	"unicode/utf16"

	"github.com/sharedos/sharedos-mcp/hashing"
	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/kernelclient"
)

const defaultInstructions = "Tools here are decided and authorized by the host, call by call. " +
	"A refused call is a tool result with isError and _meta sharedos/status; do not retry it unless it says retryable. " +
	"Call sharedos.escalate, when listed, to stop and ask a person."

// modernInstructions is what a 2026-07-28 client must know on top: the
// turn is this process, not a session a request establishes (ADR 0012).
const modernInstructions = "This server is one turn: its process and its connection to the host. " +
	"No request needs another before it, but the turn keeps what its calls did: the tool catalogue is fixed for the turn, " +
	"and once sharedos.escalate succeeds every later call is denied escalation_pending. " +
	"A new turn is a new process."

func (s *server) instructions() string {
	if s.cfg.Hello.Instructions != "" {
		return s.cfg.Hello.Instructions
	}
	return defaultInstructions
}

// epochMeta is the _meta member every result the shim makes carries, as
// an object body without braces.
const epochMeta = `"` + metaSharedOSEpoch + `":"` + sharedosEpoch + `"`

// initialize negotiates a legacy session: a supported version is echoed,
// anything else gets the latest legacy version.
func (s *server) initialize(req *request) []byte {
	var asked string
	json.Unmarshal(req.params.protocolVersion, &asked)
	version := latestLegacy
	if legacyVersions[asked] {
		version = asked
	}
	s.legacyVersion = version
	var client struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	if json.Unmarshal(req.params.clientInfo, &client) == nil && client.Name != "" {
		s.cfg.Log.Debug().Str("client", client.Name).Str("clientVersion", client.Version).Str("protocolVersion", version).Msg("initialize")
	}
	result, _ := marshal(map[string]any{
		"protocolVersion": version,
		"capabilities":    map[string]any{"tools": map[string]bool{"listChanged": false}},
		"serverInfo":      json.RawMessage(s.serverInfo),
		"instructions":    s.instructions(),
		"_meta":           map[string]string{metaSharedOSEpoch: sharedosEpoch},
	})
	return resultLine(req.id, result)
}

// discover is the modern era's server/discover. Its answer is a
// CacheableResult: ttlMs 0 and a private scope, as the catalogue behind it
// is this principal's.
func (s *server) discover(req *request) []byte {
	result, _ := marshal(map[string]any{
		"supportedVersions": []string{modernVersion},
		"capabilities":      map[string]any{"tools": map[string]bool{"listChanged": false}},
		"serverInfo":        json.RawMessage(s.serverInfo),
		"instructions":      s.instructions() + " " + modernInstructions,
		"ttlMs":             0,
		"cacheScope":        "private",
	})
	return resultLine(req.id, s.modernize(result, []byte(epochMeta)))
}

// modernize adds what every modern result carries: resultType and
// _meta serverInfo, merged after meta (a JSON object body without braces,
// or nil). result must be a JSON object.
func (s *server) modernize(result []byte, meta []byte) []byte {
	out := make([]byte, 0, len(result)+len(meta)+len(s.serverInfo)+96)
	out = append(out, result[:len(result)-1]...)
	if len(result) > 2 {
		out = append(out, ',')
	}
	out = append(out, `"resultType":"complete","_meta":{`...)
	if len(meta) > 0 {
		out = append(out, meta...)
		out = append(out, ',')
	}
	out = append(out, `"`+metaServerInfo+`":`...)
	out = append(out, s.serverInfo...)
	return append(out, "}}"...)
}

// toolsList answers with the turn's catalogue, once it is fetched.
func (s *server) toolsList(ctx context.Context, req *request) *slot {
	sl := &slot{done: make(chan struct{}), ordered: true}
	s.register(req.id, sl)
	if s.cat.ready.Load() {
		sl.finish(s.listLine(req.id, req.modern))
		return sl
	}
	s.cat.mu.Lock()
	defer s.cat.mu.Unlock()
	switch {
	case s.cat.ready.Load():
		sl.finish(s.listLine(req.id, req.modern))
	case s.cat.failed != nil:
		sl.finish(s.listError(req, s.cat.failed))
	default:
		a := s.startFetch(ctx)
		s.calls.Add(1)
		go func() {
			defer s.calls.Done()
			<-a.done
			switch {
			case a.err == nil:
				sl.finish(s.listLine(req.id, req.modern))
			case ctx.Err() != nil:
				sl.finish()
			default:
				sl.finish(s.listError(req, a.err))
			}
		}()
	}
	return sl
}

// listLine is the whole tools/list answer, in three pieces: the
// catalogue is the largest thing the shim writes (half a megabyte for 512
// tools) and goes out as it is kept, not copied into each answer; in a
// fresh process every copy of it is paid in page faults.
func (s *server) listLine(id json.RawMessage, modern bool) (head, tools, tail []byte) {
	c := s.cat
	head = append(head, `{"jsonrpc":"2.0","id":`...)
	head = append(head, id...)
	head = append(head, `,"result":{"tools":`...)
	if modern {
		tail = append(tail, `,"ttlMs":0,"cacheScope":"private","resultType":"complete"`...)
	}
	tail = append(tail, `,"_meta":{"sharedos/catalogHash":`...)
	tail = strconv.AppendQuote(tail, c.hash)
	tail = append(tail, `,"sharedos/executionId":`...)
	tail = jsonrpc.AppendString(tail, s.cfg.Hello.ExecutionID)
	tail = append(tail, ","+epochMeta...)
	if modern {
		tail = append(tail, `,"`+metaServerInfo+`":`...)
		tail = append(tail, s.serverInfo...)
	}
	return head, c.toolsJSON, append(tail, "}}}\n"...)
}

// callParams are tools/call's params as the shim checks them.
type callParams struct {
	name string
	args json.RawMessage
}

func parseCallParams(p params) (callParams, bool) {
	var c callParams
	if len(p.name) == 0 || p.name[0] != '"' {
		return c, false
	}
	var err error
	if c.name, err = jsonrpc.DecodeString(p.name); err != nil || c.name == "" {
		return c, false
	}
	c.args = p.arguments
	if len(c.args) == 0 {
		c.args = json.RawMessage("{}")
	}
	if c.args[0] != '{' {
		return c, false
	}
	return c, true
}

// toolsCall checks a call and sends it on: now when the catalogue is
// ready, else once it is (catalogue.go). Its answer is ordered.
func (s *server) toolsCall(ctx context.Context, req *request) *slot {
	p, ok := parseCallParams(req.params)
	if !ok {
		return s.answer(req, errorLine(req.id, jsonrpc.CodeInvalidParams, "invalid params: tools/call needs a non-empty string name and, if present, an object of arguments", nil))
	}
	sl := &slot{done: make(chan struct{}), ordered: true}
	s.register(req.id, sl)
	if s.cat.ready.Load() {
		s.dispatch(ctx, req, p, sl, s.cfg.CallTimeout, false)
		return sl
	}
	s.cat.mu.Lock()
	defer s.cat.mu.Unlock()
	switch {
	case s.cat.ready.Load():
		s.dispatch(ctx, req, p, sl, s.cfg.CallTimeout, false)
	case s.cat.failed != nil:
		s.failWithoutCatalogue(req, sl, s.cat.failed)
	default:
		// The arguments alias the stdin line, which the reader reuses.
		p.args = bytes.Clone(p.args)
		s.cat.waiting = append(s.cat.waiting, &waitingCall{req: req, p: p, sl: sl, readAt: time.Now()})
		s.startFetch(ctx)
	}
	return sl
}

// dispatch resolves the name against the catalogue, decides the call in
// arrival order (escalation state, call id) and sends it to the kernel;
// the wait for the kernel's answer runs concurrently. The reader calls it,
// or the catalogue's fetch for calls that waited for it (fetched), under
// the catalogue's lock. timeout bounds the wait; 0 means no bound.
func (s *server) dispatch(ctx context.Context, req *request, p callParams, sl *slot, timeout time.Duration, fetched bool) {
	tool, name := s.cat.resolve(p.name)
	if s.escalated {
		no := false
		sl.finish(resultLine(req.id, s.refusal(req, kproto.InvokeResult{
			Status: kproto.StatusDenied, Code: kproto.CodeEscalationPending,
			Message: "this turn was escalated to a person; no more tool calls are allowed", Retryable: &no,
		})))
		return
	}
	if fetched {
		// The reader may be cancelling this call right now: decide
		// under the lock cancelRequest holds, so the call is either
		// dropped unsent or sent before its call.cancel.
		s.mu.Lock()
		defer s.mu.Unlock()
		if sl.cancelled.Load() {
			sl.finish()
			return
		}
	}
	s.nextCall++
	callID := "c" + strconv.FormatInt(s.nextCall, 10)
	sl.callID = callID
	// The request goes to the kernel now, in arrival order; its answer is
	// awaited concurrently.
	if tool != nil && name == escalateTool {
		stop := make(chan struct{})
		s.lockUnlessFetched(fetched)
		sl.cancel = func() { close(stop) }
		s.unlockUnlessFetched(fetched)
		s.calls.Add(1)
		s.escalated = true
		reason := escalationReason(p.args)
		call, err := s.kernel.StartEscalate(kproto.EscalateParams{CallID: callID, Reason: reason, Note: escalationNotice})
		go s.escalate(ctx, req, sl, stop, tool, reason, call, err, timeout)
		return
	}
	ip := kproto.InvokeParams{CallID: callID, Tool: name, Arguments: p.args, CatalogHash: s.cat.hash, MCP: kproto.InvokeMCP{
		ProtocolVersion: s.versionOf(req), TraceParent: req.traceParent, TraceState: req.traceState,
	}}
	if len(req.id) <= maxRequestID {
		ip.MCP.RequestID = req.id
	}
	c := &relayCall{s: s, req: req, sl: sl, tool: tool, callID: callID, name: name}
	s.lockUnlessFetched(fetched)
	if s.aborted {
		// The turn ended while this was read: nothing is sent.
		s.unlockUnlessFetched(fetched)
		sl.finish()
		return
	}
	// A call is stopped by a function, not a context of its own: a
	// context per call, and a timer in it for --call-timeout, cost about a
	// tenth of the CPU a call takes.
	sl.cancel = c.cancel
	if len(req.progressToken) > 0 {
		// The kernel's reports on this call go to the client from now on.
		s.progress[callID] = &progressCall{sl: sl, token: req.progressToken}
	}
	s.unlockUnlessFetched(fetched)
	s.calls.Add(1)
	if timeout > 0 {
		// Set before the call is sent: the answer may come before
		// StartInvokeFunc returns, and stops the timer.
		c.timer = time.AfterFunc(timeout, c.expire)
	}
	// More lines already read: this call goes to the kernel in one write
	// with the ones after it, not one write each. The reader flushes
	// before it waits on stdin or on the writer.
	deferred := !fetched && s.in != nil && s.in.Buffered()
	if _, err := s.kernel.StartInvokeFunc(ip, deferred, c.answered); err != nil && c.sl.settle() {
		c.deliver(s.relayFailure(err, name, callID), false)
	}
}

// versionOf is the MCP protocol version req was made under: the modern
// era's, or the one initialize negotiated ("" before it).
func (s *server) versionOf(req *request) string {
	if req.modern {
		return modernVersion
	}
	return s.legacyVersion
}

// lockUnlessFetched takes mu unless dispatch holds it already (for a call
// the catalogue's fetch sends).
func (s *server) lockUnlessFetched(fetched bool) {
	if !fetched {
		s.mu.Lock()
	}
}

func (s *server) unlockUnlessFetched(fetched bool) {
	if !fetched {
		s.mu.Unlock()
	}
}

// relayCall is one call sent to the kernel. Its answer is decided once,
// by whichever comes first (slot.settle): the kernel's answer, read and
// rendered on the kernel client's reading goroutine (answered); the
// client's cancel or the end of the turn (cancel); or the call timeout
// (expire). No goroutine waits for it.
type relayCall struct {
	s      *server
	req    *request
	sl     *slot
	tool   *hashing.Tool // nil when the name is not published
	name   string        // the name sent to the kernel
	callID string
	timer  *time.Timer // nil without a call timeout
}

// answered is the kernel's answer (or the error that kept the call from
// being sent, or its answer from being read). The result is a slice of
// the kernel client's read buffer: when last says nothing else waits
// behind it and the call's turn has come, the answer is written from
// there, now, by this goroutine; otherwise it is copied into the slot
// for whoever writes next.
func (c *relayCall) answered(a kernelclient.Answer, last bool) {
	if !c.sl.settle() {
		return // cancelled or timed out first; the answer is dropped
	}
	res, err := a.Invoke()
	if err != nil {
		res = c.s.relayFailure(err, c.name, c.callID)
	}
	c.deliver(res, last)
}

// deliver renders and writes (or queues) the answer of a call settled by
// its answer, or by the error that kept it from being sent.
func (c *relayCall) deliver(res kproto.InvokeResult, last bool) {
	if c.timer != nil {
		c.timer.Stop()
	}
	s := c.s
	if len(c.req.progressToken) > 0 {
		s.unwatchProgress(c.callID)
	}
	s.cfg.Log.Debug().Str("tool", c.name).Str("callId", c.callID).Str("status", res.Status).Str("code", res.Code).Msg("call")
	var r reply
	s.callAnswer(&r, c.req, c.tool, res)
	if last && s.out.drain(c.sl, &r) {
		close(c.sl.done)
	} else {
		c.sl.finish(r.bytes())
	}
	s.calls.Done()
}

// cancel stops the call without an answer: the client cancelled it (and
// cancelRequest has told the kernel), or the turn is over. mu is held.
func (c *relayCall) cancel() {
	if !c.sl.settle() {
		return
	}
	if c.timer != nil {
		c.timer.Stop()
	}
	delete(c.s.progress, c.callID)
	c.sl.finish()
	c.s.calls.Done()
}

// expire answers a call the kernel did not answer within the call
// timeout, and tells the kernel to stop it.
func (c *relayCall) expire() {
	if !c.sl.settle() {
		return
	}
	s := c.s
	s.kernel.Cancel(c.callID)
	if len(c.req.progressToken) > 0 {
		s.unwatchProgress(c.callID)
	}
	yes := true
	res := kproto.InvokeResult{Status: kproto.StatusFailed, Code: kproto.CodeKernelTimeout,
		Message: "the kernel did not answer within " + s.cfg.CallTimeout.String(), Retryable: &yes}
	s.cfg.Log.Debug().Str("tool", c.name).Str("callId", c.callID).Str("status", res.Status).Str("code", res.Code).Msg("call")
	c.sl.finish(resultLine(c.req.id, s.callResult(c.req, c.tool, res)))
	s.calls.Done()
}

// relayFailure is the result a call gets when the kernel's answer could
// not be had or read.
func (s *server) relayFailure(err error, tool, callID string) kproto.InvokeResult {
	switch {
	case errors.Is(err, kernelclient.ErrRequestTooLarge):
		return kproto.InvokeResult{Status: kproto.StatusFailed, Code: kproto.CodeTooLarge,
			Message: "the call is too large for the kernel to read: at most " + strconv.Itoa(s.kernelMaxLine()) + " bytes a message, arguments included"}
	case errors.Is(err, kernelclient.ErrAnswerTooLarge):
		s.cfg.Log.Warn().Str("tool", tool).Str("callId", callID).Msg("the kernel's answer is over the line limit; the call failed too_large")
		return kproto.InvokeResult{Status: kproto.StatusFailed, Code: kproto.CodeTooLarge,
			Message: "the kernel's answer is too large to relay: over " + strconv.Itoa(s.maxLine()) + " bytes"}
	case errors.Is(err, kernelclient.ErrClosed):
		return kproto.InvokeResult{Status: kproto.StatusFailed, Code: kproto.CodeKernelUnavailable,
			Message: "the kernel connection was lost; this turn cannot reach it again"}
	}
	s.cfg.Log.Error().Err(err).Str("tool", tool).Msg("relay call")
	return kproto.InvokeResult{Status: kproto.StatusFailed, Code: kproto.CodeInternal, Message: "the kernel's answer could not be read"}
}

func (s *server) maxLine() int {
	if s.cfg.MaxLine > 0 {
		return s.cfg.MaxLine
	}
	return jsonrpc.DefaultMaxLine
}

func (s *server) kernelMaxLine() int {
	if s.cfg.Hello.MaxLine > 0 {
		return s.cfg.Hello.MaxLine
	}
	return jsonrpc.DefaultMaxLine
}

// callResult renders a kernel result as an MCP CallToolResult.
func (s *server) callResult(req *request, tool *hashing.Tool, res kproto.InvokeResult) []byte {
	var r reply
	s.callAnswer(&r, req, tool, res)
	line := r.bytes()
	// callAnswer wrote the whole response line: keep the result alone.
	head := len(`{"jsonrpc":"2.0","id":`) + len(req.id) + len(`,"result":`)
	return line[head : len(line)-len("}\n")]
}

// reply is the response line to a call, in pieces: a small head and tail
// of the shim's own around content or output as the kernel sent them
// (slices of its answer, not copies), and, for an output without
// content, the text block it becomes, which is text escaped as a JSON
// string at pieces[at]. The line is never assembled on the way to
// stdout: the text is escaped a piece at a time as it is written, so the
// client reads the first of it while the rest is escaped, and a
// megabyte output costs a buffer of textPiece, not of its size.
type reply struct {
	pieces [][]byte
	text   []byte
	at     int
	buf    [6][]byte
	unsent [1][]byte // what writeTo has escaped and not yet written
}

// textPiece is how much of an output's text is escaped at a time, and
// textAhead how much of it may be escaped and not yet written. On a
// non-blocking stdout the text is escaped while the client reads what was
// written before it: a piece is escaped, as much as the pipe takes is
// written without waiting, and the next piece is escaped, until textAhead
// is waiting; only then does the writer wait for the pipe. Escaping in
// small pieces keeps the pipe (64 KiB unless the harness made it larger)
// from running dry while a piece is escaped (ADR 0025).
const (
	textPiece = 32 << 10
	textAhead = 4 * textPiece
	// textRoom is the text buffer kept for the turn: what may wait, and
	// room for a piece escaped at the most a byte can take (\u00xx).
	textRoom = textAhead + 6*textPiece + 64
)

// lineWriter is where a reply is written: write writes bufs whole,
// writeSome what the output takes now without waiting, returning the rest.
type lineWriter interface {
	write(bufs [][]byte) error
	writeSome(bufs [][]byte) ([][]byte, error)
}

// writeTo writes the line to w, escaping the text into *scratch (kept for
// the next reply) as it goes. The line's head and its escaped text are
// written from one buffer, where what is not yet written is always its
// last bytes: when the buffer runs out of room they are moved to its
// start, so the buffer never grows.
func (r *reply) writeTo(w lineWriter, scratch *[]byte) error {
	if r.text == nil {
		return w.write(r.pieces)
	}
	buf := *scratch
	if cap(buf) < textRoom {
		buf = make([]byte, 0, textRoom)
	}
	buf = buf[:0]
	defer func() { *scratch = buf[:0] }()
	for _, p := range r.pieces[:r.at] {
		buf = append(buf, p...)
	}
	sent := 0 // buf[:sent] is written
	for rest := r.text; ; {
		cut := jsonrpc.CutString(rest, textPiece)
		buf = jsonrpc.AppendStringBody(buf, rest[:cut])
		if rest = rest[cut:]; len(rest) == 0 {
			break
		}
		r.unsent[0] = buf[sent:]
		left, err := w.writeSome(r.unsent[:])
		if err != nil {
			return err
		}
		sent = len(buf) - queuedBytes(left)
		if len(buf)-sent >= textAhead {
			r.unsent[0] = buf[sent:]
			if err := w.write(r.unsent[:]); err != nil {
				return err
			}
			sent = len(buf)
		}
		if cap(buf)-len(buf) < textRoom-textAhead {
			n := copy(buf, buf[sent:])
			buf, sent = buf[:n], 0
		}
	}
	r.unsent[0] = nil
	var bufs [8][]byte
	return w.write(append(append(bufs[:0], buf[sent:]), r.pieces[r.at:]...))
}

// queuedBytes is how many bytes bufs hold.
func queuedBytes(bufs [][]byte) int {
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	return n
}

// bytes is the line in one buffer.
func (r *reply) bytes() []byte {
	n := 0
	for _, p := range r.pieces {
		n += len(p)
	}
	// Room for the escapes of text like source code (about one byte in
	// ten) and then some, so a large output is escaped without regrowing
	// the buffer.
	b := make([]byte, 0, n+len(r.text)+len(r.text)/4)
	for i, p := range r.pieces {
		if i == r.at && r.text != nil {
			b = jsonrpc.AppendStringBody(b, r.text)
		}
		b = append(b, p...)
	}
	return b
}

// callAnswer makes r the response line to a call whose kernel result is
// res.
func (s *server) callAnswer(r *reply, req *request, tool *hashing.Tool, res kproto.InvokeResult) {
	r.pieces = r.buf[:0]
	id := req.id
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	if res.Status != kproto.StatusSucceeded {
		if res.Status != kproto.StatusDenied && res.Status != kproto.StatusFailed {
			res = kproto.InvokeResult{Status: kproto.StatusFailed, Code: kproto.CodeInternal, Message: "the kernel answered with an unknown status"}
		}
		r.pieces = append(r.pieces, resultLine(req.id, s.refusal(req, res)))
		return
	}
	head := make([]byte, 0, 48+len(id)+len(`[{"type":"text","text":"`))
	head = append(head, `{"jsonrpc":"2.0","id":`...)
	head = append(head, id...)
	head = append(head, `,"result":{"content":`...)
	structured := tool != nil && tool.OutputSchema != nil && len(res.Output) > 0 && res.Output[0] == '{'
	switch {
	case len(res.Content) > 0 && res.Content[0] == '[':
		r.pieces = append(r.pieces, head, res.Content)
	case len(res.Output) > 0:
		r.pieces = append(r.pieces, append(head, `[{"type":"text","text":"`...))
		r.text, r.at = res.Output, len(r.pieces)
		r.pieces = append(r.pieces, []byte(`"}]`))
	default:
		r.pieces = append(r.pieces, append(head, "[]"...))
	}
	if structured {
		r.pieces = append(r.pieces, []byte(`,"structuredContent":`), res.Output)
	}
	if req.modern {
		tail := make([]byte, 0, 128+len(s.serverInfo))
		tail = append(tail, `,"resultType":"complete","_meta":{`+epochMeta+`,"`+metaServerInfo+`":`...)
		tail = append(tail, s.serverInfo...)
		r.pieces = append(r.pieces, append(tail, "}}}\n"...))
		return
	}
	r.pieces = append(r.pieces, []byte(`,"_meta":{`+epochMeta+`}}}`+"\n"))
}

// refusal renders a denied or failed result: isError, one text block the
// model can read, and the status and code in _meta for the harness.
func (s *server) refusal(req *request, res kproto.InvokeResult) []byte {
	if res.Code == "" {
		res.Code = kproto.CodeInternal
	}
	text, _ := marshal(struct {
		Status       string `json:"status"`
		Code         string `json:"code"`
		Message      string `json:"message"`
		Retryable    *bool  `json:"retryable,omitempty"`
		RetryAfterMs *int64 `json:"retryAfterMs,omitempty"`
	}{res.Status, res.Code, res.Message, res.Retryable, res.RetryAfterMs})
	out := make([]byte, 0, 160+2*len(text))
	out = append(out, `{"content":[{"type":"text","text":`...)
	out = jsonrpc.AppendString(out, text)
	out = append(out, `}],"isError":true`...)
	meta := make([]byte, 0, 96)
	meta = append(meta, `"sharedos/status":`...)
	meta = jsonrpc.AppendString(meta, res.Status)
	meta = append(meta, `,"sharedos/code":`...)
	meta = jsonrpc.AppendString(meta, res.Code)
	if res.RetryAfterMs != nil {
		// A rate_limited call's wait, for a harness that schedules the
		// retry itself.
		meta = append(meta, `,"sharedos/retryAfterMs":`...)
		meta = strconv.AppendInt(meta, *res.RetryAfterMs, 10)
	}
	meta = append(meta, ","+epochMeta...)
	if req.modern {
		return s.modernize(append(out, '}'), meta)
	}
	out = append(out, `,"_meta":{`...)
	out = append(out, meta...)
	return append(out, "}}"...)
}

const (
	escalateTool     = "sharedos.escalate"
	maxReasonUnits   = 512
	fallbackReason   = "no reason given"
	escalationNotice = "This turn is over: a person has been asked to decide. Make no more tool calls; tell the user what you need from them."
)

// escalationReason is the reason the model gave, trimmed and clipped, or
// a fixed fallback.
func escalationReason(args json.RawMessage) string {
	var a struct {
		Reason any `json:"reason"`
	}
	json.Unmarshal(args, &a)
	reason, _ := a.Reason.(string)
	reason = clipUTF16(hashing.TrimSpace(reason), maxReasonUnits)
	if reason == "" {
		return fallbackReason
	}
	return reason
}

// escalate answers sharedos.escalate itself once the kernel has recorded
// turn.escalate. Every later call was already marked denied when this
// call was read. The wait is bounded like a call's; a kernel that does not
// record the escalation in time gets a failed answer that is not
// retryable, since the turn takes no more calls either way.
func (s *server) escalate(ctx context.Context, req *request, sl *slot, stop <-chan struct{}, tool *hashing.Tool, reason string, call *kernelclient.Call, err error, timeout time.Duration) {
	defer s.calls.Done()
	timedOut := false
	if err == nil {
		var expired <-chan time.Time
		if timeout > 0 {
			t := time.NewTimer(timeout)
			defer t.Stop()
			expired = t.C
		}
		select {
		case a := <-call.Answer():
			err = a.Err()
		case <-stop:
			call.Abandon()
			sl.finish()
			return
		case <-ctx.Done():
			call.Abandon()
			sl.finish()
			return
		case <-expired:
			call.Abandon()
			timedOut = true
		}
	}
	no := false
	var res kproto.InvokeResult
	switch {
	case timedOut:
		res = kproto.InvokeResult{Status: kproto.StatusFailed, Code: kproto.CodeKernelTimeout, Retryable: &no,
			Message: "the kernel did not record the escalation within " + s.cfg.CallTimeout.String() + "; this turn takes no more tool calls"}
	case err == nil:
		output, _ := marshal(map[string]any{"escalated": true, "reason": reason, "note": escalationNotice})
		res = kproto.InvokeResult{Status: kproto.StatusSucceeded, Output: output}
	case errors.Is(err, kernelclient.ErrClosed):
		res = kproto.InvokeResult{Status: kproto.StatusFailed, Code: kproto.CodeKernelUnavailable, Message: "the kernel connection was lost; the escalation was not recorded"}
	default:
		s.cfg.Log.Error().Err(err).Msg("the kernel refused turn.escalate")
		res = kproto.InvokeResult{Status: kproto.StatusFailed, Code: kproto.CodeInternal, Message: "the kernel refused the escalation; this turn takes no more tool calls"}
	}
	sl.finish(resultLine(req.id, s.callResult(req, tool, res)))
}

// clipUTF16 shortens s to at most max UTF-16 code units without splitting
// a surrogate pair.
func clipUTF16(s string, max int) string {
	units := 0
	for i, r := range s {
		n := utf16.RuneLen(r)
		if n < 0 {
			n = 1 // invalid UTF-8 decodes as U+FFFD, one unit
		}
		if units+n > max {
			return s[:i]
		}
		units += n
	}
	return s
}

// Helpers for building lines.

func resultLine(id json.RawMessage, result []byte) []byte {
	return jsonrpc.AppendResponse(nil, id, result)
}

func errorLine(id json.RawMessage, code int, msg string, data json.RawMessage) []byte {
	return jsonrpc.AppendError(nil, id, &jsonrpc.Error{Code: code, Message: msg, Data: data})
}

// marshal is json.Marshal without HTML escaping, so text reaches the model
// as written.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
}
