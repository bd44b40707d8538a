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

func (s *server) instructions() string {
	if s.cfg.Hello.Instructions != "" {
		return s.cfg.Hello.Instructions
	}
	return defaultInstructions
}

// initialize negotiates a legacy session: a supported version is echoed,
// anything else gets the latest legacy version.
func (s *server) initialize(req *request) []byte {
	var asked string
	json.Unmarshal(req.params["protocolVersion"], &asked)
	version := latestLegacy
	if legacyVersions[asked] {
		version = asked
	}
	s.legacyVersion = version
	var client struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	if json.Unmarshal(req.params["clientInfo"], &client) == nil && client.Name != "" {
		s.cfg.Log.Debug().Str("client", client.Name).Str("clientVersion", client.Version).Str("protocolVersion", version).Msg("initialize")
	}
	result, _ := marshal(map[string]any{
		"protocolVersion": version,
		"capabilities":    map[string]any{"tools": map[string]bool{"listChanged": false}},
		"serverInfo":      json.RawMessage(s.serverInfo),
		"instructions":    s.instructions(),
	})
	return resultLine(req.id, result)
}

// discover is the modern era's server/discover.
func (s *server) discover(req *request) []byte {
	result, _ := marshal(map[string]any{
		"supportedVersions": []string{modernVersion},
		"capabilities":      map[string]any{"tools": map[string]bool{"listChanged": false}},
		"serverInfo":        json.RawMessage(s.serverInfo),
		"instructions":      s.instructions(),
	})
	return resultLine(req.id, s.modernize(result, nil))
}

// modernize adds what every modern result carries: resultType and
// _meta serverInfo, merged after meta (a JSON object body without braces,
// or nil). result must be a JSON object.
func (s *server) modernize(result []byte, meta []byte) []byte {
	out := make([]byte, 0, len(result)+128)
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

// toolsList answers with the turn's catalogue, waiting for its fetch.
func (s *server) toolsList(ctx context.Context, req *request) *slot {
	s.cat.start(ctx, s.kernel, s.cfg.Log)
	sl := &slot{done: make(chan struct{})}
	s.calls.Add(1)
	go func() {
		defer s.calls.Done()
		if err := s.cat.wait(ctx); err != nil {
			sl.finish(errorLine(req.id, jsonrpc.CodeInternalError, "internal error: the kernel's catalogue cannot be served", nil))
			return
		}
		sl.finish(s.listLine(req.id, req.modern))
	}()
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

func parseCallParams(p map[string]json.RawMessage) (callParams, bool) {
	var c callParams
	if json.Unmarshal(p["name"], &c.name) != nil || c.name == "" {
		return c, false
	}
	c.args = p["arguments"]
	if len(c.args) == 0 {
		c.args = json.RawMessage("{}")
	}
	if c.args[0] != '{' {
		return c, false
	}
	return c, true
}

// toolsCall resolves the name against the turn's catalogue and relays the
// call. The name resolution and the escalation state are decided here, in
// arrival order; the kernel round trip runs concurrently.
func (s *server) toolsCall(ctx context.Context, req *request) *slot {
	p, ok := parseCallParams(req.params)
	if !ok {
		return readySlot(errorLine(req.id, jsonrpc.CodeInvalidParams, "invalid params: tools/call needs a non-empty string name and, if present, an object of arguments", nil))
	}
	s.cat.start(ctx, s.kernel, s.cfg.Log)
	if err := s.cat.wait(ctx); err != nil {
		code := kproto.CodeInternal
		if errors.Is(err, kernelclient.ErrClosed) {
			code = kproto.CodeKernelUnavailable
		}
		return readySlot(resultLine(req.id, s.refusal(req, kproto.InvokeResult{Status: kproto.StatusFailed, Code: code, Message: err.Error()})))
	}
	tool, name := s.cat.resolve(p.name)
	if s.escalated {
		no := false
		return readySlot(resultLine(req.id, s.refusal(req, kproto.InvokeResult{
			Status: kproto.StatusDenied, Code: kproto.CodeEscalationPending,
			Message: "this turn was escalated to a person; no more tool calls are allowed", Retryable: &no,
		})))
	}
	s.nextCall++
	callID := "c" + strconv.FormatInt(s.nextCall, 10)
	sl := &slot{done: make(chan struct{}), callID: callID}
	// The request goes to the kernel now, in arrival order; its answer is
	// awaited concurrently.
	if tool != nil && name == escalateTool {
		callCtx, cancel := context.WithCancel(ctx)
		sl.cancel = cancel
		s.register(req.id, sl)
		s.calls.Add(1)
		s.escalated = true
		reason := escalationReason(p.args)
		call, err := s.kernel.StartEscalate(kproto.EscalateParams{CallID: callID, Reason: reason, Note: escalationNotice})
		go s.escalate(callCtx, req, sl, tool, reason, call, err)
		return sl
	}
	// A call is stopped through a channel, not a context of its own: a
	// context per call, and a timer in it for --call-timeout, cost about a
	// tenth of the CPU a call takes.
	stop := make(chan struct{})
	sl.cancel = func() { close(stop) }
	s.register(req.id, sl)
	s.calls.Add(1)
	ip := kproto.InvokeParams{CallID: callID, Tool: name, Arguments: p.args, CatalogHash: s.cat.hash}
	start := s.kernel.StartInvoke
	if s.in != nil && s.in.Buffered() {
		// More lines are already read: this call goes to the kernel in
		// one write with the ones after it, not one write each. The
		// reader flushes before it waits on stdin or on the writer.
		start = s.kernel.StartInvokeDeferred
	}
	call, err := start(ip)
	s.spawn(func() { s.relay(ctx, req, sl, stop, tool, ip, call, err) })
	return sl
}

// relay waits for the kernel's answer to a call already sent (or the
// error that kept it from being sent) and renders it. stop is closed when
// the client cancels the call; ctx ends with the turn.
func (s *server) relay(ctx context.Context, req *request, sl *slot, stop <-chan struct{}, tool *hashing.Tool, p kproto.InvokeParams, call *kernelclient.Call, err error) {
	defer s.calls.Done()
	defer s.unregister(req.id, sl)
	var res kproto.InvokeResult
	timedOut := false
	if err == nil {
		var timeout <-chan time.Time
		if s.cfg.CallTimeout > 0 {
			t := time.NewTimer(s.cfg.CallTimeout)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case a := <-call.Answer():
			res, err = a.Invoke()
		case <-stop:
			// Cancelled by the client; call.cancel has been sent.
			call.Abandon()
			sl.finish(nil)
			return
		case <-ctx.Done():
			// Shutting down: tell the kernel, answer nothing.
			call.Abandon()
			s.kernel.Cancel(p.CallID)
			sl.cancelled.Store(true)
			sl.finish(nil)
			return
		case <-timeout:
			call.Abandon()
			timedOut = true
		}
	}
	switch {
	case timedOut:
		s.kernel.Cancel(p.CallID)
		yes := true
		res = kproto.InvokeResult{Status: kproto.StatusFailed, Code: kproto.CodeKernelTimeout,
			Message: "the kernel did not answer within " + s.cfg.CallTimeout.String(), Retryable: &yes}
	case err == nil:
	case errors.Is(err, kernelclient.ErrClosed):
		res = kproto.InvokeResult{Status: kproto.StatusFailed, Code: kproto.CodeKernelUnavailable,
			Message: "the kernel connection was lost; this turn cannot reach it again"}
	default:
		s.cfg.Log.Error().Err(err).Str("tool", p.Tool).Msg("relay call")
		res = kproto.InvokeResult{Status: kproto.StatusFailed, Code: kproto.CodeInternal, Message: "the kernel's answer could not be read"}
	}
	s.cfg.Log.Debug().Str("tool", p.Tool).Str("callId", p.CallID).Str("status", res.Status).Str("code", res.Code).Msg("call")
	sl.finish(resultLine(req.id, s.callResult(req, tool, res)))
}

// callResult renders a kernel result as an MCP CallToolResult.
func (s *server) callResult(req *request, tool *hashing.Tool, res kproto.InvokeResult) []byte {
	if res.Status != kproto.StatusSucceeded {
		if res.Status != kproto.StatusDenied && res.Status != kproto.StatusFailed {
			res = kproto.InvokeResult{Status: kproto.StatusFailed, Code: kproto.CodeInternal, Message: "the kernel answered with an unknown status"}
		}
		return s.refusal(req, res)
	}
	out := make([]byte, 0, 256)
	out = append(out, `{"content":`...)
	switch {
	case len(res.Content) > 0 && res.Content[0] == '[':
		out = append(out, res.Content...)
	case len(res.Output) > 0:
		out = append(out, `[{"type":"text","text":`...)
		out = jsonrpc.AppendString(out, res.Output)
		out = append(out, "}]"...)
	default:
		out = append(out, "[]"...)
	}
	if tool != nil && tool.OutputSchema != nil && len(res.Output) > 0 && res.Output[0] == '{' {
		out = append(out, `,"structuredContent":`...)
		out = append(out, res.Output...)
	}
	out = append(out, '}')
	if req.modern {
		return s.modernize(out, nil)
	}
	return out
}

// refusal renders a denied or failed result: isError, one text block the
// model can read, and the status and code in _meta for the harness.
func (s *server) refusal(req *request, res kproto.InvokeResult) []byte {
	if res.Code == "" {
		res.Code = kproto.CodeInternal
	}
	text, _ := marshal(struct {
		Status    string `json:"status"`
		Code      string `json:"code"`
		Message   string `json:"message"`
		Retryable *bool  `json:"retryable,omitempty"`
	}{res.Status, res.Code, res.Message, res.Retryable})
	out := make([]byte, 0, 256)
	out = append(out, `{"content":[{"type":"text","text":`...)
	out = jsonrpc.AppendString(out, text)
	out = append(out, `}],"isError":true`...)
	meta := make([]byte, 0, 64)
	meta = append(meta, `"sharedos/status":`...)
	meta = jsonrpc.AppendString(meta, res.Status)
	meta = append(meta, `,"sharedos/code":`...)
	meta = jsonrpc.AppendString(meta, res.Code)
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
// call was read.
func (s *server) escalate(ctx context.Context, req *request, sl *slot, tool *hashing.Tool, reason string, call *kernelclient.Call, err error) {
	defer s.calls.Done()
	defer sl.cancel()
	defer s.unregister(req.id, sl)
	if err == nil {
		err = call.Wait(ctx)
	}
	var res kproto.InvokeResult
	switch {
	case err == nil:
		output, _ := marshal(map[string]any{"escalated": true, "reason": reason, "note": escalationNotice})
		res = kproto.InvokeResult{Status: kproto.StatusSucceeded, Output: output}
	case sl.cancelled.Load() || ctx.Err() != nil:
		sl.finish(nil)
		return
	case errors.Is(err, kernelclient.ErrClosed):
		res = kproto.InvokeResult{Status: kproto.StatusFailed, Code: kproto.CodeKernelUnavailable, Message: "the kernel connection was lost; the escalation was not recorded"}
	default:
		res = kproto.InvokeResult{Status: kproto.StatusFailed, Code: kproto.CodeInternal, Message: "the kernel refused the escalation: " + err.Error()}
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
