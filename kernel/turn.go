package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/sharedos/sharedos-mcp/hashing"
	"github.com/sharedos/sharedos-mcp/internal/clip"
	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/internal/peercred"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
	"github.com/sharedos/sharedos-mcp/kernel/files"
	"github.com/sharedos/sharedos-mcp/kernel/telemetry"
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

	seq   sequencer     // the order the turn's calls take effect in
	slots chan struct{} // one per call admitted and not yet answered
	line  *bigLine      // the long-line token of the line being handled; read goroutine only

	// budget are the turn's charges to grants with a turn_limit; read
	// and changed only under the server's budgets.mu.
	budget turnCounts
	// operator is set once the connection asked an operator method; it
	// can then never say hello (see operatorRequest).
	operator bool
	// asked counts the turn's tools.invoke and turn.escalate requests;
	// read goroutine only. turn.closed records it as calls: 0 marks a
	// turn that only looked.
	asked int
	// canAsk is set by hello when the shim announced it answers
	// approval.ask: the person at the harness can be asked.
	canAsk bool

	mu        sync.Mutex
	escalated bool
	calls     map[string]context.CancelFunc // in flight, by callId
	asks      map[string]chan string        // approval.ask requests awaiting the shim's answer, by id
	nextAsk   int64
	declined  map[binding]string // bindings a person declined in this turn: not asked again; the approval id
	wg        sync.WaitGroup
}

func (s *Server) serveConn(ctx context.Context, conn *net.UnixConn) {
	defer conn.Close()
	t := &turn{s: s, conn: conn, execID: newExecutionID(), calls: map[string]context.CancelFunc{}, asks: map[string]chan string{},
		slots: make(chan struct{}, s.turnCalls), budget: turnCounts{}}
	cred, err := s.PeerCred(conn)
	if err != nil {
		s.Log.Warn().Err(err).Str("executionId", t.execID).Msg("refused a connection: peer credentials unreadable")
		s.record(t.event(audit.EventTurnRefused, func(e *audit.Event) { e.Reason = "peer credentials unreadable" }))
		return
	}
	t.cred = cred
	if !s.mayConnect(cred.UID) {
		s.Log.Warn().Uint32("uid", cred.UID).Int("pid", cred.PID).Msg("refused a connection: uid not served")
		s.record(t.event(audit.EventTurnRefused, func(e *audit.Event) { e.Reason = "uid " + strconv.FormatUint(uint64(cred.UID), 10) + " is not served" }))
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
		if t.canAsk {
			s.forgetAsker(t)
		}
		if t.name != "" {
			s.record(t.event(audit.EventTurnClosed, func(e *audit.Event) { e.Calls = &t.asked }))
			if err := s.Audit.Sync(); err != nil {
				s.Log.Error().Err(err).Msg("audit sync failed")
			}
		}
	}()
	r := jsonrpc.NewReader(conn, s.maxLine())
	// A line longer than the read buffer is read on only with one of the
	// kernel's few long-line tokens (see maxBigLines); the token goes
	// with the line to the call it carries, which gives it back when
	// answered.
	var big *bigLine
	r.OnGrow = func() error {
		if err := s.acquire(ctx, s.bigLines, "line"); err != nil {
			return err
		}
		big = &bigLine{s: s}
		return nil
	}
	for {
		big = nil
		line, err := r.ReadOwnedLine()
		if errors.Is(err, jsonrpc.ErrLineTooLong) {
			big.release()
			t.tooLong(r.Skipped())
			continue
		}
		if err != nil {
			big.release()
			return
		}
		t.line = big
		ok := t.handle(line)
		t.line.release() // unless a call took it
		t.line = nil
		if !ok {
			return
		}
	}
}

// bigLine is a long-line token, given back once.
type bigLine struct {
	s    *Server
	once sync.Once
}

func (b *bigLine) release() {
	if b != nil {
		b.once.Do(func() { <-b.s.bigLines })
	}
}

// tooLong answers a request line over the limit. The line is gone, but
// its beginning says whose it was: a tools.invoke is answered as a
// refused call (too_large, recorded in its place in the turn), any other
// request with an error carrying its id. Only a line whose id cannot be
// read is answered with a null id.
func (t *turn) tooLong(prefix []byte) {
	id, ok := jsonrpc.LeadingMember(prefix, "id")
	if !ok || !validID(id) {
		id = nil
	}
	msg := fmt.Sprintf("the request line is over the kernel's %d-byte limit", t.s.maxLine())
	if id != nil && leadingString(prefix, "method") == kproto.MethodInvoke && t.name != "" {
		t.asked++
		// Its arguments were never read: size -1 records nothing of them.
		t.invokeRefused(id, invokeParams{CallID: leadingString(prefix, "params", "callId"), Tool: leadingString(prefix, "params", "tool"), Arguments: boundedJSON{size: -1}},
			failed(kproto.CodeTooLarge, "%s; nothing was read of it", msg))
		return
	}
	t.writeError(id, jsonrpc.CodeInvalidRequest, msg, "")
}

// leadingString is the string member at path in a line's beginning, or
// "" when it is not there whole.
func leadingString(prefix []byte, path ...string) string {
	raw, ok := jsonrpc.LeadingMember(prefix, path...)
	if !ok {
		return ""
	}
	s, err := jsonrpc.DecodeString(raw)
	if err != nil {
		return ""
	}
	return s
}

// event returns an audit event of this turn, stamped now, with fill
// applied.
func (t *turn) event(name string, fill func(*audit.Event)) audit.Event {
	e := audit.Event{
		Time: audit.Stamp(t.s.Now()), Event: name, ExecutionID: t.execID, Integration: t.name,
		Peer: audit.Peer{UID: t.cred.UID, PID: t.cred.PID},
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
			// A response: the shim's answer to an approval.ask, the only
			// request the kernel sends.
			if t.name != "" {
				t.askAnswered(m.ID, m.Result, m.Error != nil)
			}
			return true
		}
		t.writeError(m.ID, jsonrpc.CodeInvalidRequest, "not a request", "")
		return true
	}
	if m.JSONRPC != "2.0" || !validID(m.ID) {
		t.writeError(nil, jsonrpc.CodeInvalidRequest, "not a JSON-RPC 2.0 request", "")
		return true
	}
	if m.IsNotification() {
		switch {
		case t.name == "":
		case m.Method == kproto.MethodCancel:
			var p kproto.CancelParams
			if json.Unmarshal(m.Params, &p) == nil {
				t.cancel(p.CallID)
			}
		case m.Method == kproto.MethodApprovalAnswer:
			// On the read goroutine: the decision is on the record before
			// the call's retry, sent right after it, is read.
			var p kproto.ApprovalAnswerParams
			if json.Unmarshal(m.Params, &p) == nil {
				t.answerApproval(p)
			}
		}
		return true
	}
	if m.Method == kproto.MethodHello {
		return t.hello(m)
	}
	if h, ok := operatorMethods[m.Method]; ok {
		return t.operatorRequest(m, h)
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

// readMessage reads the envelope of a line, as the shim
// and the kernel client read theirs (jsonrpc.ParseEnvelope, docs/adr/0004):
// member names match exactly, so "Method" or "ID" is not a method or an
// id, and a name that repeats takes its last value. Member types are checked as
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
// or a number (null is tolerated as the spec's discouraged form). id is a
// value of a line ParseEnvelope has checked, or a whole value
// LeadingMember found.
func validID(id json.RawMessage) bool {
	return len(id) == 0 || string(id) == "null" || jsonrpc.ValidID(id)
}

func (t *turn) hello(m jsonrpc.Message) bool {
	if t.name != "" {
		t.writeError(m.ID, jsonrpc.CodeInvalidRequest, "this connection already said hello; one connection is one turn", kproto.ErrAlreadyIntroduced)
		return true
	}
	if t.operator {
		t.writeError(m.ID, jsonrpc.CodeInvalidRequest, "this connection is the operator's; an integration says hello on a connection of its own", kproto.ErrAlreadyIntroduced)
		return true
	}
	if !t.s.uidAllowed(t.cred.UID) {
		// An operator uid that allow_uids does not name may ask operator
		// methods only.
		t.s.Log.Warn().Uint32("uid", t.cred.UID).Int("pid", t.cred.PID).Msg("refused a hello: uid served as operator only")
		t.s.record(t.event(audit.EventTurnRefused, func(e *audit.Event) {
			e.Reason = "uid " + strconv.FormatUint(uint64(t.cred.UID), 10) + " is served as operator only"
		}))
		t.writeError(m.ID, jsonrpc.CodeInvalidRequest, "this uid is served as the kernel's operator only, not as an integration", kproto.ErrOperatorOnly)
		return false
	}
	var p kproto.HelloParams
	if err := json.Unmarshal(m.Params, &p); err != nil {
		t.writeError(m.ID, jsonrpc.CodeInvalidParams, "integration.hello params: "+err.Error(), "")
		return true
	}
	if !policy.ValidIntegrationName(p.Name) {
		t.writeError(m.ID, jsonrpc.CodeInvalidParams,
			"invalid integration name: use 1-64 letters, digits, spaces, '-', '_' or '.'", kproto.ErrInvalidIntegrationName)
		t.s.record(t.event(audit.EventTurnRefused, func(e *audit.Event) { e.Reason = "invalid integration name " + strconv.Quote(clip.String(p.Name, 128)) }))
		return false
	}
	t.tools = map[string]*tool{}
	var defs []hashing.Definition
	for _, tl := range t.s.catalogue(p.Name, t.s.Now()) {
		raw := tl.raw
		if raw == nil {
			var err error
			if raw, err = json.Marshal(tl.def); err != nil {
				t.writeError(m.ID, jsonrpc.CodeInternalError, "encode catalogue", "")
				return false
			}
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
	t.canAsk = p.Capabilities != nil && p.Capabilities.Approvals != nil
	if !t.s.record(t.event(audit.EventTurnOpened, func(e *audit.Event) { e.CatalogHash = t.catalogHash })) {
		return false
	}
	t.writeResult(m.ID, kproto.HelloResult{
		Protocol:     kproto.Version,
		Principal:    kproto.Principal{Kind: "integration", Name: p.Name},
		ExecutionID:  t.execID,
		Instructions: t.s.instructions(p.Name),
		Kernel:       kproto.Peer{Name: kernelName, Version: t.s.Version},
		MaxLine:      t.s.maxLine(),
	})
	return true
}

func (t *turn) list(m jsonrpc.Message) bool {
	tools := t.defs
	if tools == nil {
		tools = []json.RawMessage{}
	}
	if !t.s.record(t.event(audit.EventCatalogListed, func(e *audit.Event) {
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
	t.asked++
	// The escalation takes effect in its place among the turn's calls:
	// after every call that came before it, before any that comes after.
	if t.s.acquire(t.ctx, t.slots, "turn") != nil {
		return false
	}
	tk := t.seq.admit(true)
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer func() { <-t.slots }()
		defer tk.finish()
		if tk.wait(t.ctx) != nil {
			return // the turn is over; nobody waits for the answer
		}
		if !t.markEscalated(p.CallID, p.Reason, p.Note) {
			t.writeError(m.ID, jsonrpc.CodeInternalError, "the escalation could not be recorded: the audit log cannot be written", codeAuditUnavailable)
			return
		}
		t.writeResult(m.ID, struct{}{})
	}()
	return true
}

// markEscalated records why the turn is asking a person and then ends
// its ability to act. An escalation that cannot be recorded does not
// happen: nobody would be asked.
func (t *turn) markEscalated(callID, reason, note string) bool {
	// The shim caps reasons at 512 UTF-16 units; this cap only keeps a
	// client that skips the shim from writing megabyte audit lines.
	if !t.s.record(t.event(audit.EventTurnEscalated, func(e *audit.Event) {
		e.CallID, e.Reason, e.Note = clip.String(callID, 128), clip.String(reason, maxReasonBytes), clip.String(note, maxReasonBytes)
	})) {
		return false
	}
	t.mu.Lock()
	t.escalated = true
	t.mu.Unlock()
	return true
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

// Bounds on what one tools.invoke may send. Arguments are kept as raw
// JSON only up to maxArgumentBytes: files.write's content, at most
// files.MaxReadBytes, fits with room for escaping; anything larger is refused
// too_large without being copied or decoded.
const (
	maxArgumentBytes = 4 * files.MaxReadBytes
	maxCallIDBytes   = 1024
	maxReasonBytes   = 4096
)

// codeAuditUnavailable answers a call the kernel refused because its
// record could not be written; retrying once the log works can succeed.
const codeAuditUnavailable = "audit_unavailable"

// codeOutcomeUnrecorded answers a call that acted, or may have, whose
// outcome could not be recorded: its result is withheld, and it is never
// retryable, since doing it again would act twice (docs/adr/0035).
const codeOutcomeUnrecorded = "outcome_unrecorded"

// invokeParams is tools.invoke's params as the kernel decodes them
// (decodeInvokeParams).
type invokeParams struct {
	CallID      string
	Tool        string
	Arguments   boundedJSON
	CatalogHash string
	// MCP is the mcp member as it came (kproto.InvokeMCP), a slice of
	// the line: read only for telemetry.
	MCP []byte
}

// boundedJSON is a raw JSON value kept only if it is at most
// maxArgumentBytes long, and its length either way.
type boundedJSON struct {
	raw  []byte
	size int
}

// call is what the audit says of one invocation, and what an approval
// of it binds.
type call struct {
	callID    string
	seq       int64
	tool      string
	action    string
	requested string // the resource the call named
	resource  string // the resource decided on: where the named one really is
	upstream  string // a brokered call's upstream
	decided   *decision
	// recorded is what the audit records of the call's arguments.
	recorded argumentsRecord
	// args are the call's arguments as they will be executed, as JSON;
	// asked for only when a person must approve the call.
	args func() []byte
	// approvalID is the approval the call ran, or was refused, under.
	approvalID string
	// token is the call's running token, given back while it waits for
	// a person; nil outside a turn's run.
	token *runToken
}

// invoke admits a call in arrival order and runs it on its own goroutine
// once every call it must follow has finished (see sequencer): calls
// without effects overlap, so a slow search does not hold up a quick
// read behind it, while a write waits for what came before it and is
// waited for by what comes after.
func (t *turn) invoke(m jsonrpc.Message) {
	t.asked++
	p, err := decodeInvokeParamsIn(m.Params, true)
	if err != nil {
		t.writeError(m.ID, jsonrpc.CodeInvalidParams, "tools.invoke params: "+err.Error(), "")
		return
	}
	if len(p.CallID) > maxCallIDBytes {
		t.invokeRefused(m.ID, p, failed(kproto.CodeInvalidArguments, "callId is %d bytes, over the %d-byte limit", len(p.CallID), maxCallIDBytes))
		return
	}
	ctx, cancel := context.WithCancel(t.ctx)
	t.mu.Lock()
	if _, dup := t.calls[p.CallID]; dup && p.CallID != "" {
		t.mu.Unlock()
		cancel()
		t.invokeRefused(m.ID, p, failed(kproto.CodeInvalidArguments, "callId %q is already in flight on this turn", clip.String(p.CallID, 128)))
		return
	}
	if p.CallID != "" {
		t.calls[p.CallID] = cancel
	}
	t.mu.Unlock()
	t.start(m.ID, p, outcome{}, func() {
		t.mu.Lock()
		delete(t.calls, p.CallID)
		t.mu.Unlock()
		cancel()
	}, ctx)
}

// invokeRefused answers a call refused before it could run, in its place
// among the turn's calls, so that its record has its seq.
func (t *turn) invokeRefused(id json.RawMessage, p invokeParams, o outcome) {
	t.start(id, p, o, func() {}, t.ctx)
}

// start admits one call and runs it (or, when refused is set, answers it
// refused) on a goroutine of its own. It waits, on the read goroutine,
// while the turn has maxTurnCalls calls unanswered: the kernel then stops
// reading the turn until one is answered.
func (t *turn) start(id json.RawMessage, p invokeParams, refused outcome, done func(), ctx context.Context) {
	if t.s.acquire(t.ctx, t.slots, "turn") != nil {
		done()
		return
	}
	tk := t.seq.admit(refused.status == "" && t.hasEffect(p.Tool))
	line := t.line // the long-line token, if this call's line holds one
	t.line = nil
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer func() { <-t.slots }()
		defer tk.finish()
		defer done()
		defer line.release()
		start := time.Now()
		// A copy of its own: a closure that changed what it captured
		// would move it to the heap, at every call.
		ctx := ctx
		var span *telemetry.Call
		if t.s.Telemetry != nil {
			_, published := t.tools[p.Tool]
			ctx, span = t.s.Telemetry.StartCall(ctx, telemetry.CallStart{
				Integration: t.name, ExecutionID: t.execID, Tool: clip.String(p.Tool, 128), Published: published, Seq: tk.seq, MCP: p.MCP,
			})
		}
		var c call
		o := refused
		if o.status == "" {
			c, o = t.runInOrder(ctx, tk, p)
		}
		t.answer(id, p, c, tk.seq, start, o, span)
	}()
}

// hasEffect reports whether a call of the named tool may change anything;
// a name not in the catalogue is refused without running, so it has none.
func (t *turn) hasEffect(name string) bool {
	tl, ok := t.tools[name]
	return ok && tl.hasEffect()
}

// runInOrder waits for the call's turn in the sequence and for a running
// token, then runs it.
func (t *turn) runInOrder(ctx context.Context, tk *ticket, p invokeParams) (call, outcome) {
	if err := tk.wait(ctx); err != nil {
		return call{}, failed(kproto.CodeCancelled, "cancelled before it ran")
	}
	tok := &runToken{s: t.s}
	if tok.take(ctx) != nil {
		return call{}, failed(kproto.CodeCancelled, "cancelled before it ran")
	}
	defer tok.give()
	return t.run(ctx, p, tk.seq, tok)
}

// run decides and executes one call. The order of the checks is the
// protocol's: catalogue, catalogHash, escalation, arguments, grants. The
// grant is decided on the resource the call will touch: for a tool that
// resolves, on where the named path really leads, once the tool holds
// what it leads to (see files.Call.Authorize).
func (t *turn) run(ctx context.Context, p invokeParams, seq int64, tok *runToken) (c call, o outcome) {
	c.recorded = recordArguments(t.s.currentPolicy().Arguments, p.Arguments)
	tl, ok := t.tools[p.Tool]
	if !ok {
		return c, denied(kproto.CodeToolUnavailable, "%s is not in this turn's catalogue", strconv.Quote(clip.String(p.Tool, 128)))
	}
	c.callID, c.seq, c.tool, c.action, c.token = p.CallID, seq, tl.def.Name, tl.action, tok
	if p.CatalogHash != t.catalogHash {
		return c, denied(kproto.CodeCatalogMismatch, "the call's catalogHash is not this turn's; list the tools again in a new turn")
	}
	if t.isEscalated() {
		return c, denied(kproto.CodeEscalationPending, "this turn was escalated to a person; no more tool calls run in it")
	}
	if p.Arguments.size > maxArgumentBytes {
		return c, failed(kproto.CodeTooLarge, "%s: the arguments are %d bytes of JSON, over the %d-byte limit", tl.def.Name, p.Arguments.size, maxArgumentBytes)
	}
	if tl.brokered != nil {
		return t.runBrokered(ctx, tl, p, &c)
	}
	args, msg := tl.parseArgs(p.Arguments.raw)
	if msg != "" {
		return c, failed(kproto.CodeInvalidArguments, "%s: %s", tl.def.Name, msg)
	}
	c.args = func() []byte { return filesArguments(args) }
	res, err := tl.target(args)
	if err != nil {
		code := kproto.CodeInvalidArguments
		if ae := (*files.ArgError)(nil); errors.As(err, &ae) {
			code = ae.Code
		}
		return c, failed(code, "%s: %v", tl.def.Name, err)
	}
	c.requested, c.resource = res.String(), res.String()
	decided := false
	// refused is the grants' refusal, whole: a file tool hands back only
	// its status, code and message, not when to retry.
	var refused *outcome
	authorize := func(r policy.Resource) (outcome, bool) {
		decided = true
		c.resource = r.String()
		via := ""
		if r != res {
			// Name only the path the caller gave: where its links lead is
			// not the caller's to learn from a refusal.
			via = ": a link on the way leads where the grants do not reach"
		}
		o, ok := t.authorize(ctx, &c, r, tl.action, via)
		if !ok {
			refused = &o
		}
		return o, ok
	}
	if !tl.resolves {
		if d, ok := authorize(res); !ok {
			return c, d
		}
	}
	if ctx.Err() != nil {
		return c, failed(kproto.CodeCancelled, "cancelled")
	}
	env := &callEnv{
		file: files.Call{
			Root:      t.s.files,
			HardLinks: t.s.currentPolicy().AllowHardLinks,
			Requested: res,
			Authorize: func(r policy.Resource) (files.Outcome, bool) {
				d, ok := authorize(r)
				return d.refusal(), ok
			},
			Allowed: t.allowedBeyond,
			Commit: func() (files.Outcome, bool) {
				if !t.s.recordDurably(t.event(audit.EventToolAuthorized, func(e *audit.Event) {
					e.CallID, e.Seq, e.Tool, e.Action, e.CatalogHash = p.CallID, seq, tl.def.Name, c.action, p.CatalogHash
					e.Resource, e.Requested, e.Grants, e.ApprovalID = c.resource, requestedIfOther(c), c.decided.grantRefs(), c.approvalID
					e.ArgumentsDigest, e.Arguments = c.recorded.digest, c.recorded.full
				})) {
					return auditUnavailable(false).refusal(), false
				}
				return files.Outcome{}, true
			},
			Progress: func(progress, total float64, message string) {
				t.progress(p.CallID, progress, total, message)
			},
		},
		escalate: func(reason string) bool { return t.markEscalated(p.CallID, reason, "") },
	}
	o = tl.run(ctx, env, res, args)
	if refused != nil && o.status == refused.status && o.code == refused.code {
		o = *refused
	}
	if tl.resolves && !decided && o.status == kproto.StatusSucceeded {
		// A resolving tool that never asked the grants has a bug; it must
		// not be able to hand anything out because of it.
		t.s.Log.Error().Str("tool", tl.def.Name).Msg("tool succeeded without authorizing what it resolved")
		return c, failed(kproto.CodeInternal, "%s: internal error", tl.def.Name)
	}
	// A call cancelled while it ran is answered cancelled, as the shim
	// expects, unless it already changed something: that one is reported
	// done, because it was.
	if ctx.Err() != nil && !o.acted && o.code != kproto.CodeCancelled {
		o = failed(kproto.CodeCancelled, "cancelled")
	}
	return c, o
}

// shown is a resource a call named as a message may quote it: never
// unbounded.
func shown(r string) string { return clip.String(r, maxShownResource) }

// maxShownResource bounds the bytes of a resource a message quotes back.
const maxShownResource = 200

// requestedIfOther is the resource the call named, when that is not
// where it led.
func requestedIfOther(c call) string {
	if c.requested == c.resource {
		return ""
	}
	return c.requested
}

// auditUnavailable answers a call whose record could not be written.
// acted says the call had already changed something, or may have, when
// the record of its outcome failed; its decision was recorded before it
// acted, and it is answered outcome_unrecorded, never retryable: a model
// told to try again would do it twice. Otherwise nothing was done, and
// trying again once the log works can succeed.
func auditUnavailable(acted bool) outcome {
	if acted {
		return failed(codeOutcomeUnrecorded, "the call was carried out, or reached what it acts on and may have been, "+
			"but its outcome could not be recorded: the audit log cannot be written, so its result is withheld. "+
			"Do not repeat it: check whether it took effect first. The kernel refuses calls until the log can be written.")
	}
	return failed(codeAuditUnavailable, "the audit log cannot be written, so the kernel refuses calls until it can; nothing was done. Try again later.")
}

// answer records a call's outcome and then writes its result. Nothing is
// handed out unrecorded: when the record fails, the answer is
// audit_unavailable instead of the result. The call's span ends with
// what was answered.
func (t *turn) answer(id json.RawMessage, p invokeParams, c call, seq int64, start time.Time, o outcome, span *telemetry.Call) {
	r := resultOf(o)
	took := time.Since(start)
	d := took.Microseconds()
	if c.recorded.digest == "" {
		// Refused or cancelled before it ran.
		c.recorded = recordArguments(t.s.currentPolicy().Arguments, p.Arguments)
	}
	var nearest []audit.GrantRef
	if o.status == kproto.StatusDenied {
		nearest = c.decided.nearest(t.s.budgets, t.budget)
	}
	if !t.s.record(t.event(audit.EventToolInvoked, func(e *audit.Event) {
		e.CallID, e.Seq, e.Tool, e.Resource, e.Requested, e.Action = clip.String(p.CallID, maxCallIDBytes), seq, clip.String(p.Tool, 128), c.resource, requestedIfOther(c), c.action
		e.Status, e.Code, e.CatalogHash, e.DurationUs, e.Upstream = r.Status, r.Code, clip.String(p.CatalogHash, 128), &d, c.upstream
		e.Grants, e.Nearest, e.RetryAfterMs, e.ApprovalID, e.Reason = c.decided.grantRefs(), nearest, r.RetryAfterMs, c.approvalID, o.note
		e.ArgumentsDigest, e.Arguments = c.recorded.digest, c.recorded.full
	})) {
		r = resultOf(auditUnavailable(o.acted))
	}
	span.End(telemetry.CallEnd{Status: r.Status, Code: r.Code, Resource: c.resource, Action: c.action, Upstream: c.upstream, Grant: c.decided.grantNumber()})
	// One line per call for whoever watches the kernel: the same facts
	// as the record, without what the arguments held.
	t.s.Log.Info().Str("integration", t.name).Str("executionId", t.execID).Int64("seq", seq).
		Str("tool", clip.String(p.Tool, 128)).Str("resource", c.resource).Str("decision", r.Status).Str("code", r.Code).
		Dur("took_ms", took).Msg("call")
	t.writeResult(id, r)
}

// progress tells the shim how far a running call has got. Reports after
// the call's answer are dropped by the shim; the kernel sends none, as a
// tool reports only while it runs.
func (t *turn) progress(callID string, progress, total float64, message string) {
	if callID == "" {
		return
	}
	pp := kproto.ProgressParams{CallID: callID, Progress: progress, Message: clip.String(message, 256)}
	if total > 0 {
		pp.Total = &total
	}
	b, err := json.Marshal(struct {
		JSONRPC string                `json:"jsonrpc"`
		Method  string                `json:"method"`
		Params  kproto.ProgressParams `json:"params"`
	}{"2.0", kproto.MethodProgress, pp})
	if err != nil {
		return
	}
	t.write(append(b, '\n'))
}

func resultOf(o outcome) kproto.InvokeResult {
	r := kproto.InvokeResult{Status: o.status, Code: o.code, Message: o.message}
	if raw, ok := o.output.(json.RawMessage); ok {
		r.Output = raw
	} else if o.output != nil {
		b, err := json.Marshal(o.output)
		if err != nil {
			return kproto.InvokeResult{Status: kproto.StatusFailed, Code: kproto.CodeInternal, Message: "encode output"}
		}
		r.Output = b
	}
	if o.text != "" && r.Status == kproto.StatusSucceeded {
		r.Content, _ = json.Marshal([]map[string]string{{"type": "text", "text": o.text}})
	}
	if o.content != nil && r.Status == kproto.StatusSucceeded {
		r.Content = o.content
	}
	retry := o.code == codeAuditUnavailable || o.retryable
	if r.Status == kproto.StatusDenied || retry || o.code == codeOutcomeUnrecorded {
		// A refusal stands until the grants change; retrying the same
		// call cannot help. A log that cannot be written may work again,
		// and a limit's window ends. A call that acted is said not to be
		// retryable in so many words.
		r.Retryable = &retry
	}
	if o.retryAfter > 0 {
		ms := max(o.retryAfter.Milliseconds(), 1)
		r.RetryAfterMs = &ms
	}
	if r.Status != kproto.StatusSucceeded {
		r.ApprovalID = o.approvalID
	}
	return r
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
