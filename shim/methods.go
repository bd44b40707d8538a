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
	// Elicitation came with 2025-06-18; a client of an older version
	// cannot be asked whatever it says.
	s.legacyElicit = version >= "2025-06-18" && req.params.capabilities != nil && elicitsForm(req.params.capabilities)
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
func (s *server) toolsList(ctx context.Context, req *request) *pending {
	p := &pending{ordered: true}
	s.update(func(st *turnState) {
		st.register(req.id, p)
		switch c := &st.cat; {
		case c.ready:
			st.decide(p, s.listLine(req.id, req.modern)...)
		case c.failed != nil:
			st.decide(p, s.listError(req, c.failed))
		default:
			c.waiting = append(c.waiting, waitingRequest{req: req, p: p})
			s.startFetch(ctx, st)
		}
	})
	return p
}

// listLine is the whole tools/list answer, in three pieces: the
// catalogue is the largest thing the shim writes (half a megabyte for 512
// tools) and goes out as it is kept, not copied into each answer; in a
// fresh process every copy of it is paid in page faults.
func (s *server) listLine(id json.RawMessage, modern bool) [][]byte {
	c := s.cat
	var head, tail []byte
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
	return [][]byte{head, c.toolsJSON, append(tail, "}}}\n"...)}
}

// callParams are tools/call's params as the shim checks them.
type callParams struct {
	name string
	args json.RawMessage
	own  bool // args are the call's own, handed on to the kernel client without a copy
	// answer is the person's answer a 2026-07-28 retry brings, sent to
	// the kernel before the call.
	answer *retryAnswer
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
func (s *server) toolsCall(ctx context.Context, req *request) *pending {
	cp, ok := parseCallParams(req.params)
	cp.own = req.own
	if !ok {
		return s.answer(req, errorLine(req.id, jsonrpc.CodeInvalidParams, "invalid params: tools/call needs a non-empty string name and, if present, an object of arguments", nil))
	}
	p := &pending{ordered: true}
	var token string
	if req.modern && req.params.requestState != nil {
		token, _ = jsonrpc.DecodeString(req.params.requestState)
	}
	s.update(func(st *turnState) {
		st.register(req.id, p)
		if token != "" {
			cp.answer = st.takeDeferred(token, req.params.inputResponses)
		}
		switch c := &st.cat; {
		case c.ready:
			s.dispatch(ctx, st, req, cp, p, s.cfg.CallTimeout)
		case c.failed != nil:
			s.failWithoutCatalogue(st, req, p, c.failed)
		default:
			// The arguments alias the stdin line, which the reader
			// reuses unless it is the request's own.
			if !cp.own {
				cp.args, cp.own = bytes.Clone(cp.args), true
			}
			c.waiting = append(c.waiting, waitingRequest{req: req, call: &cp, p: p, readAt: time.Now()})
			s.startFetch(ctx, st)
		}
	})
	return p
}

// dispatch resolves the name against the catalogue, decides the call in
// arrival order (escalation state, call id) and sends it to the kernel,
// under mu, so a cancellation read at the same time finds the call either
// unsent or sent before its call.cancel. The reader calls it, or the
// catalogue's fetch for calls that waited for it. timeout bounds the
// wait for the answer; 0 means no bound.
func (s *server) dispatch(ctx context.Context, st *turnState, req *request, cp callParams, p *pending, timeout time.Duration) {
	if p.cancelled || st.aborted {
		st.decide(p) // cancelled while it waited, or the turn ended: nothing is sent
		return
	}
	tool, name := s.cat.resolve(cp.name)
	if s.escalated {
		no := false
		st.decide(p, resultLine(req.id, s.refusal(req, kproto.InvokeResult{
			Status: kproto.StatusDenied, Code: kproto.CodeEscalationPending,
			Message: "this turn was escalated to a person; no more tool calls are allowed", Retryable: &no,
		})))
		return
	}
	dismissed := false
	if a := cp.answer; a != nil && a.tool == name {
		if a.decision == kproto.ApprovalCancelled {
			dismissed = true
		} else if err := s.kernel.AnswerApproval(kproto.ApprovalAnswerParams{ApprovalID: a.approvalID, Decision: a.decision}); err != nil {
			// The person's answer goes first: the kernel reads the call
			// after it.
			s.cfg.Log.Debug().Err(err).Msg("approval.answer")
		}
	}
	s.nextCall++
	callID := "c" + strconv.FormatInt(s.nextCall, 10)
	if tool != nil && name == escalateTool {
		stop := make(chan struct{})
		p.stop = func() { close(stop) }
		s.calls.Add(1)
		s.escalated = true
		reason := escalationReason(cp.args)
		call, err := s.kernel.StartEscalate(kproto.EscalateParams{CallID: callID, Reason: reason, Note: escalationNotice})
		go s.escalate(ctx, req, p, stop, tool, reason, call, err, timeout)
		return
	}
	c := &relayCall{s: s, req: req, p: p, tool: tool, callID: callID, name: name, dismissed: dismissed}
	p.call = c
	if len(req.progressToken) > 0 {
		// The kernel's reports on this call go to the client from now on.
		p.progress = &progressTo{token: req.progressToken}
		st.calls[callID] = p
	}
	s.calls.Add(1)
	// A call is stopped by a function, not a context of its own: a
	// context per call, and a timer in it for --call-timeout, cost about a
	// tenth of the CPU a call takes. Set before the call is sent; the
	// answer takes mu, so it comes after this returns.
	if timeout > 0 {
		c.timer = time.AfterFunc(timeout, c.expire)
	}
	ip := kproto.InvokeParams{CallID: callID, Tool: name, Arguments: cp.args, CatalogHash: s.cat.hash, MCP: kproto.InvokeMCP{
		ProtocolVersion: req.version, TraceParent: req.traceParent, TraceState: req.traceState,
	}}
	if len(req.id) <= maxRequestID {
		ip.MCP.RequestID = req.id
	}
	if err := s.kernel.StartInvokeFunc(ip, cp.own, c.answered); err != nil && st.decide(p) {
		c.fail(err)
	}
}

// relayCall is one call sent to the kernel. Its answer is decided once,
// under mu, by whichever comes first: the kernel's answer (answered), the
// client's cancel or the end of the turn (server.cancel), or the call
// timeout (expire). No goroutine waits for it; the writer renders it.
type relayCall struct {
	s      *server
	req    *request
	p      *pending
	tool   *hashing.Tool // nil when the name is not published
	name   string        // the name sent to the kernel
	callID string
	timer  *time.Timer // nil without a call timeout

	answer    kernelclient.Answer // the kernel's answer, when it decided the call
	hasAnswer bool
	// asked is the question the kernel asked about this call that the
	// shim answers with an input-required result (2026-07-28); set under
	// mu before the kernel's answer, which it replaces.
	asked *asking
	// dismissed: the call is a 2026-07-28 retry whose person answered
	// its question without a decision; it is not asked again.
	dismissed bool
}

// answered takes the kernel's answer (or the error that kept it from
// being read), on the kernel client's reading goroutine: it is kept for
// the writer, which renders it, and the reader goes on.
func (c *relayCall) answered(a kernelclient.Answer) {
	c.s.update(func(st *turnState) {
		if st.decide(c.p) {
			c.answer, c.hasAnswer = a, true
			c.done()
		}
	})
}

// fail decides, under mu, the answer of a call the kernel could not be
// sent: the error as a refusal.
func (c *relayCall) fail(err error) {
	c.p.lines = [][]byte{resultLine(c.req.id, c.s.callResult(c.req, c.tool, c.s.relayFailure(err, c.name, c.callID)))}
	c.done()
}

// done ends the call's time at the kernel once its answer is decided.
func (c *relayCall) done() {
	if c.timer != nil {
		c.timer.Stop()
	}
	c.s.calls.Done()
}

// expire answers a call the kernel did not answer within the call
// timeout, and tells the kernel to stop it.
func (c *relayCall) expire() {
	s := c.s
	yes := true
	res := kproto.InvokeResult{Status: kproto.StatusFailed, Code: kproto.CodeKernelTimeout,
		Message: "the kernel did not answer within " + s.cfg.CallTimeout.String(), Retryable: &yes}
	line := resultLine(c.req.id, s.callResult(c.req, c.tool, res))
	expired := false
	s.update(func(st *turnState) {
		if expired = st.decide(c.p, line); expired {
			s.kernel.Cancel(c.callID)
			c.done()
		}
	})
	if expired {
		s.cfg.Log.Debug().Str("tool", c.name).Str("callId", c.callID).Str("status", res.Status).Str("code", res.Code).Msg("call")
	}
}

// renderCall makes r the response line to a call the kernel answered.
// The writer calls it, for a call it has claimed.
func (s *server) renderCall(r *reply, c *relayCall) {
	res, err := c.answer.Invoke()
	if err != nil {
		res = s.relayFailure(err, c.name, c.callID)
	}
	if len(res.Content)+len(res.Output) > payloadSize && s.cfg.OnPayload != nil {
		s.cfg.OnPayload()
	}
	s.cfg.Log.Debug().Str("tool", c.name).Str("callId", c.callID).Str("status", res.Status).Str("code", res.Code).Msg("call")
	if c.asked != nil && res.Code == kproto.CodeApprovalPending && res.ApprovalID == c.asked.ask.ApprovalID {
		s.inputRequired(r, c)
		return
	}
	s.callAnswer(r, c.req, c.tool, res)
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
// string at pieces[at] (the writer escapes it into a buffer it keeps).
type reply struct {
	pieces [][]byte
	text   []byte
	at     int
	buf    [6][]byte
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
	if res.ApprovalID != "" {
		// The approval a person was asked for: a harness can show it, or
		// the user approve it out of band ('sharedos-mcp approve ID').
		meta = append(meta, `,"sharedos/approvalId":`...)
		meta = jsonrpc.AppendString(meta, res.ApprovalID)
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
func (s *server) escalate(ctx context.Context, req *request, p *pending, stop <-chan struct{}, tool *hashing.Tool, reason string, call *kernelclient.Call, err error, timeout time.Duration) {
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
			call.Abandon() // cancelled, and decided so
			return
		case <-ctx.Done():
			call.Abandon()
			s.update(func(st *turnState) { st.decide(p) })
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
	line := resultLine(req.id, s.callResult(req, tool, res))
	s.update(func(st *turnState) { st.decide(p, line) })
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
