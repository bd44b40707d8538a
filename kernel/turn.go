package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/sharedos/sharedos-mcp/hashing"
	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/internal/peercred"
	"github.com/sharedos/sharedos-mcp/policy"
)

// turn is one connection: one integration, one catalogue, one execution.
type turn struct {
	s      *Server
	conn   *net.UnixConn
	cred   peercred.Cred
	execID string
	ctx    context.Context // cancelled when the connection ends

	wmu sync.Mutex // one whole line per write, whatever the goroutine

	// Set once by hello, on the read goroutine, before any call starts.
	name        string
	tools       map[string]*tool
	defs        []json.RawMessage
	catalogHash string

	mu        sync.Mutex
	escalated bool
	calls     map[string]context.CancelFunc // in flight, by callId
	wg        sync.WaitGroup
}

func (s *Server) serveConn(ctx context.Context, conn *net.UnixConn) {
	defer conn.Close()
	t := &turn{s: s, conn: conn, execID: newExecutionID(), calls: map[string]context.CancelFunc{}}
	cred, err := s.PeerCred(conn)
	if err != nil {
		s.Log.Warn().Err(err).Str("executionId", t.execID).Msg("refused a connection: peer credentials unreadable")
		s.record(t.event(EventTurnRefused, func(e *Event) { e.Reason = "peer credentials unreadable" }))
		return
	}
	t.cred = cred
	if !s.uidAllowed(cred.UID) {
		s.Log.Warn().Uint32("uid", cred.UID).Int("pid", cred.PID).Msg("refused a connection: uid not served")
		s.record(t.event(EventTurnRefused, func(e *Event) { e.Reason = "uid " + strconv.FormatUint(uint64(cred.UID), 10) + " is not served" }))
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	t.ctx = ctx
	// Whatever ends the read loop (EOF, a refused hello, shutdown) ends
	// the turn: in-flight calls are cancelled and answered before the
	// turn is recorded closed and the record made durable.
	defer func() {
		cancel()
		t.wg.Wait()
		if t.name != "" {
			s.record(t.event(EventTurnClosed, nil))
			if err := s.Audit.Sync(); err != nil {
				s.Log.Error().Err(err).Msg("audit sync failed")
			}
		}
	}()
	r := jsonrpc.NewReader(conn, s.maxLine())
	for {
		line, err := r.ReadLine()
		if errors.Is(err, jsonrpc.ErrLineTooLong) {
			t.writeError(nil, jsonrpc.CodeInvalidRequest, "message line exceeds the size limit", "")
			continue
		}
		if err != nil {
			return
		}
		if !t.handle(line) {
			return
		}
	}
}

// event returns an audit event of this turn, stamped now, with fill
// applied.
func (t *turn) event(name string, fill func(*Event)) Event {
	e := Event{
		Time: stamp(t.s.Now()), Event: name, ExecutionID: t.execID, Integration: t.name,
		Peer: AuditPeer{UID: t.cred.UID, PID: t.cred.PID},
	}
	if fill != nil {
		fill(&e)
	}
	return e
}

// handle serves one line and reports whether the connection stays open.
func (t *turn) handle(line []byte) bool {
	m, err := readMessage(line)
	if err != nil {
		t.writeError(nil, jsonrpc.CodeParseError, "not a JSON-RPC message", "")
		return true
	}
	if m.Method == "" {
		if m.Result != nil || m.Error != nil {
			return true // a response: the kernel asks nothing, so nothing to match
		}
		t.writeError(m.ID, jsonrpc.CodeInvalidRequest, "not a request", "")
		return true
	}
	if m.JSONRPC != "2.0" || !validID(m.ID) {
		t.writeError(nil, jsonrpc.CodeInvalidRequest, "not a JSON-RPC 2.0 request", "")
		return true
	}
	if m.IsNotification() {
		if m.Method == kproto.MethodCancel && t.name != "" {
			var p kproto.CancelParams
			if json.Unmarshal(m.Params, &p) == nil {
				t.cancel(p.CallID)
			}
		}
		return true
	}
	if m.Method == kproto.MethodHello {
		return t.hello(m)
	}
	if t.name == "" {
		t.writeError(m.ID, jsonrpc.CodeInvalidRequest, "integration.hello must be the first request", kproto.ErrHelloRequired)
		return true
	}
	switch m.Method {
	case kproto.MethodPing:
		t.writeResult(m.ID, struct{}{})
	case kproto.MethodList:
		return t.list(m)
	case kproto.MethodInvoke:
		t.invoke(m)
	case kproto.MethodEscalate:
		return t.escalateRequest(m)
	default:
		t.writeError(m.ID, jsonrpc.CodeMethodNotFound, "unknown method "+strconv.Quote(m.Method), "")
	}
	return true
}

// readMessage reads a line's envelope as the shim and the kernel client
// read theirs (jsonrpc.ParseEnvelope, docs/adr/0004): member names match
// exactly, so "Method" or "ID" is not a method or an id, and a name that
// repeats takes its last value. Member types are checked as
// json.Unmarshal into a jsonrpc.Message checked them. Params alias line,
// which the caller reads before the next line; the id is copied, since
// an invoke answers it later.
func readMessage(line []byte) (jsonrpc.Message, error) {
	e, err := jsonrpc.ParseEnvelope(line)
	if err != nil {
		return jsonrpc.Message{}, err
	}
	m := jsonrpc.Message{ID: bytes.Clone(e.ID), Params: e.Params, Result: e.Result}
	if e.JSONRPC != nil {
		if m.JSONRPC, err = jsonrpc.DecodeString(e.JSONRPC); err != nil {
			return m, err
		}
	}
	if e.Method != nil {
		if m.Method, err = jsonrpc.DecodeString(e.Method); err != nil {
			return m, err
		}
	}
	if e.Error != nil && string(e.Error) != "null" {
		m.Error = new(jsonrpc.Error)
		if err := json.Unmarshal(e.Error, m.Error); err != nil {
			return m, err
		}
	}
	return m, nil
}

// validID accepts what JSON-RPC 2.0 allows a request id to be: a string
// or a number (null is tolerated as the spec's discouraged form).
func validID(id json.RawMessage) bool {
	if len(id) == 0 {
		return true
	}
	var v any
	if json.Unmarshal(id, &v) != nil {
		return false
	}
	switch v.(type) {
	case string, float64, nil:
		return true
	}
	return false
}

func (t *turn) hello(m jsonrpc.Message) bool {
	if t.name != "" {
		t.writeError(m.ID, jsonrpc.CodeInvalidRequest, "this connection already said hello; one connection is one turn", kproto.ErrAlreadyIntroduced)
		return true
	}
	var p kproto.HelloParams
	if err := json.Unmarshal(m.Params, &p); err != nil {
		t.writeError(m.ID, jsonrpc.CodeInvalidParams, "integration.hello params: "+err.Error(), "")
		return true
	}
	if !policy.ValidIntegrationName(p.Name) {
		t.writeError(m.ID, jsonrpc.CodeInvalidParams,
			"invalid integration name: use 1-64 letters, digits, spaces, '-', '_' or '.'", kproto.ErrInvalidIntegrationName)
		t.s.record(t.event(EventTurnRefused, func(e *Event) { e.Reason = "invalid integration name " + strconv.Quote(shorten(p.Name, 128)) }))
		return false
	}
	now := t.s.Now()
	t.tools = map[string]*tool{}
	var defs []hashing.Definition
	for _, tl := range t.s.tools {
		if !policy.Discoverable(t.s.Grants, p.Name, tl.scope, tl.action, now) {
			continue
		}
		raw, err := json.Marshal(tl.def)
		if err != nil {
			t.writeError(m.ID, jsonrpc.CodeInternalError, "encode catalogue", "")
			return false
		}
		t.tools[tl.def.Name] = tl
		t.defs = append(t.defs, raw)
		defs = append(defs, tl.def.Definition)
	}
	projected, err := hashing.Project(defs)
	if err != nil {
		// The registry is fixed in this package; failing here is a bug.
		t.s.Log.Error().Err(err).Msg("own catalogue refused by hashing")
		t.writeError(m.ID, jsonrpc.CodeInternalError, "kernel catalogue is invalid", "")
		return false
	}
	t.catalogHash = hashing.Hash(projected)
	t.name = p.Name
	if !t.s.record(t.event(EventTurnOpened, func(e *Event) { e.CatalogHash = t.catalogHash })) {
		return false
	}
	t.writeResult(m.ID, kproto.HelloResult{
		Protocol:     kproto.Version,
		Principal:    kproto.Principal{Kind: "integration", Name: p.Name},
		ExecutionID:  t.execID,
		Instructions: instructions(p.Name),
		Kernel:       kproto.Peer{Name: KernelName, Version: t.s.Version},
	})
	return true
}

func (t *turn) list(m jsonrpc.Message) bool {
	tools := t.defs
	if tools == nil {
		tools = []json.RawMessage{}
	}
	if !t.s.record(t.event(EventCatalogListed, func(e *Event) {
		e.CatalogHash = t.catalogHash
		n := len(tools)
		e.Count = &n
	})) {
		return false
	}
	t.writeResult(m.ID, kproto.ListResult{Tools: tools, CatalogHash: t.catalogHash})
	return true
}

func (t *turn) escalateRequest(m jsonrpc.Message) bool {
	var p kproto.EscalateParams
	if err := json.Unmarshal(m.Params, &p); err != nil {
		t.writeError(m.ID, jsonrpc.CodeInvalidParams, "turn.escalate params: "+err.Error(), "")
		return true
	}
	t.markEscalated(p.CallID, p.Reason, p.Note)
	t.writeResult(m.ID, struct{}{})
	return true
}

// markEscalated ends the turn's ability to act and records why.
func (t *turn) markEscalated(callID, reason, note string) {
	t.mu.Lock()
	t.escalated = true
	t.mu.Unlock()
	// The shim caps reasons at 512 UTF-16 units; this cap only keeps a
	// client that skips the shim from writing megabyte audit lines.
	t.s.record(t.event(EventTurnEscalated, func(e *Event) {
		e.CallID, e.Reason, e.Note = shorten(callID, 128), shorten(reason, 4096), shorten(note, 4096)
	}))
}

func (t *turn) isEscalated() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.escalated
}

func (t *turn) cancel(callID string) {
	t.mu.Lock()
	c := t.calls[callID]
	t.mu.Unlock()
	if c != nil {
		c()
	}
}

// invoke starts a call on its own goroutine: the shim pipelines calls, and
// a slow search must not hold up a quick read behind it.
func (t *turn) invoke(m jsonrpc.Message) {
	var p kproto.InvokeParams
	if err := json.Unmarshal(m.Params, &p); err != nil {
		t.writeError(m.ID, jsonrpc.CodeInvalidParams, "tools.invoke params: "+err.Error(), "")
		return
	}
	ctx, cancel := context.WithCancel(t.ctx)
	t.mu.Lock()
	if _, dup := t.calls[p.CallID]; dup && p.CallID != "" {
		t.mu.Unlock()
		cancel()
		t.answer(m.ID, p, "", "", time.Now(), failed(kproto.CodeInvalidArguments, "callId %q is already in flight on this turn", p.CallID))
		return
	}
	if p.CallID != "" {
		t.calls[p.CallID] = cancel
	}
	t.mu.Unlock()
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer func() {
			t.mu.Lock()
			delete(t.calls, p.CallID)
			t.mu.Unlock()
			cancel()
		}()
		start := time.Now()
		res, action, o := t.run(ctx, p)
		t.answer(m.ID, p, res, action, start, o)
	}()
}

// run decides and executes one call. The order of the checks is the
// protocol's: catalogue, catalogHash, escalation, arguments, grants.
func (t *turn) run(ctx context.Context, p kproto.InvokeParams) (resource, action string, o outcome) {
	tl, ok := t.tools[p.Tool]
	if !ok {
		return "", "", denied(kproto.CodeToolUnavailable, "%s is not in this turn's catalogue", strconv.Quote(shorten(p.Tool, 128)))
	}
	action = tl.action
	if p.CatalogHash != t.catalogHash {
		return "", action, denied(kproto.CodeCatalogMismatch, "the call's catalogHash is not this turn's; list the tools again in a new turn")
	}
	if t.isEscalated() {
		return "", action, denied(kproto.CodeEscalationPending, "this turn was escalated to a person; no more tool calls run in it")
	}
	args, msg := tl.parseArgs(p.Arguments)
	if msg != "" {
		return "", action, failed(kproto.CodeInvalidArguments, "%s: %s", tl.def.Name, msg)
	}
	res, err := tl.target(args)
	if err != nil {
		return "", action, failed(kproto.CodeInvalidArguments, "%s: %v", tl.def.Name, err)
	}
	resource = res.String()
	switch policy.Authorize(t.s.Grants, policy.Request{Integration: t.name, Resource: res, Action: tl.action, Time: t.s.Now()}) {
	case policy.GrantExpired:
		return resource, action, denied(kproto.CodeGrantExpired, "the grant for %s on %s has expired", tl.action, resource)
	case policy.NoMatchingGrant:
		return resource, action, denied(kproto.CodeNoMatchingGrant, "no grant allows %s on %s", tl.action, resource)
	}
	if ctx.Err() != nil {
		return resource, action, failed(kproto.CodeCancelled, "cancelled")
	}
	env := &callEnv{
		files: t.s.files,
		allowed: func(r policy.Resource, action string) bool {
			return policy.Authorize(t.s.Grants, policy.Request{Integration: t.name, Resource: r, Action: action, Time: t.s.Now()}) == policy.Allowed
		},
		escalate: func(reason string) { t.markEscalated(p.CallID, reason, "") },
	}
	o = tl.run(ctx, env, res, args)
	// A call cancelled while it ran is answered cancelled, as the shim
	// expects, unless it is a write that completed: that one is reported
	// done, because it was.
	if ctx.Err() != nil && (o.status != kproto.StatusSucceeded || tl.def.ReadWrite != "write") {
		o = failed(kproto.CodeCancelled, "cancelled")
	}
	return resource, action, o
}

// answer writes a call's result and records it.
func (t *turn) answer(id json.RawMessage, p kproto.InvokeParams, resource, action string, start time.Time, o outcome) {
	r := kproto.InvokeResult{Status: o.status, Code: o.code, Message: o.message}
	if o.output != nil {
		b, err := json.Marshal(o.output)
		if err != nil {
			r = kproto.InvokeResult{Status: kproto.StatusFailed, Code: kproto.CodeInternal, Message: "encode output"}
		} else {
			r.Output = b
		}
	}
	if o.text != "" && r.Status == kproto.StatusSucceeded {
		r.Content, _ = json.Marshal([]map[string]string{{"type": "text", "text": o.text}})
	}
	if r.Status == kproto.StatusDenied {
		// A refusal stands until the grants change; retrying the same
		// call cannot help.
		retry := false
		r.Retryable = &retry
	}
	d := time.Since(start).Microseconds()
	t.s.record(t.event(EventToolInvoked, func(e *Event) {
		e.CallID, e.Tool, e.Resource, e.Action = p.CallID, shorten(p.Tool, 128), resource, action
		e.Status, e.Code, e.CatalogHash, e.DurationUs = r.Status, r.Code, p.CatalogHash, &d
	}))
	t.writeResult(id, r)
}

func (t *turn) writeResult(id json.RawMessage, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		t.writeError(id, jsonrpc.CodeInternalError, "encode result", "")
		return
	}
	t.write(jsonrpc.AppendResponse(nil, id, b))
}

func (t *turn) writeError(id json.RawMessage, code int, msg, dataCode string) {
	e := &jsonrpc.Error{Code: code, Message: msg}
	if dataCode != "" {
		e.Data, _ = json.Marshal(kproto.ErrorData{Code: dataCode})
	}
	t.write(jsonrpc.AppendError(nil, id, e))
}

// write sends one whole line. A failed write means the peer is gone; the
// read loop sees that and ends the turn, so the error is only logged.
func (t *turn) write(line []byte) {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	if _, err := t.conn.Write(line); err != nil {
		t.s.Log.Debug().Err(err).Str("executionId", t.execID).Int("bytes", len(line)).Msg("write to peer failed")
	}
}
