package kernel

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
	"github.com/sharedos/sharedos-mcp/policy"
)

// asked is a grant of cc to write under /public only once ask approves.
func asked(t *testing.T, ask string) policy.Grant {
	g := grant(t, "integration:cc", "files:/public", true, "write")
	g.Ask, g.AskTTL = ask, policy.DefaultAskTTL
	return g
}

// approvalKernel serves grants, holding a call that waits for approval
// at most hold.
func approvalKernel(t *testing.T, hold time.Duration, grants ...policy.Grant) *kernelHarness {
	return startKernel(t, grants, func(s *Server) { s.StateDir, s.AskTimeout = t.TempDir(), hold })
}

// askingTurn opens a turn of name whose shim announces it can ask the
// person at the harness, and lists its catalogue.
func (h *kernelHarness) askingTurn(name string) *testClient {
	c := h.dial()
	m := c.call(kproto.MethodHello, kproto.HelloParams{Name: name, Shim: kproto.Peer{Version: "test"},
		Capabilities: &kproto.ShimCapabilities{Approvals: &struct{}{}}})
	if m.Error != nil {
		c.t.Fatalf("hello: %v", m.Error)
	}
	c.list()
	return c
}

// startWrite is files.write of content to path, as a call sent without
// waiting for its answer; it returns the request's id.
func (c *testClient) startWrite(path, content string) int {
	return c.send(kproto.MethodInvoke, c.invokeParams("w"+strconv.Itoa(c.id+1), "files.write", map[string]string{"path": path, "content": content}))
}

// askOf reads the kernel's approval.ask.
func (c *testClient) askOf() (json.RawMessage, kproto.ApprovalAskParams) {
	c.t.Helper()
	m := c.recv()
	if m.Method != kproto.MethodApprovalAsk || m.ID == nil {
		c.t.Fatalf("got %s %s %s, want an approval.ask request", m.Method, m.ID, m.Result)
	}
	var p kproto.ApprovalAskParams
	if err := json.Unmarshal(m.Params, &p); err != nil {
		c.t.Fatal(err)
	}
	return m.ID, p
}

// answerAsk answers the kernel's approval.ask id with decision.
func (c *testClient) answerAsk(id json.RawMessage, decision string) {
	c.t.Helper()
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": kproto.ApprovalAskResult{Decision: decision}})
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(string(b))
}

// resultOf reads the answer to request id, failing on anything else.
func (c *testClient) resultOf(id int) kproto.InvokeResult {
	c.t.Helper()
	m := c.recv()
	if m.Method != "" || string(m.ID) != jsonID(id) {
		c.t.Fatalf("got %s %s, want the answer to %d", m.Method, m.ID, id)
	}
	return invokeResult(c.t, m)
}

func jsonID(id int) string { b, _ := json.Marshal(id); return string(b) }

// operatorCall asks an operator method on a fresh operator connection.
func (h *kernelHarness) operatorCall(method string, params any) jsonrpc.Message {
	return h.dial().call(method, params)
}

func (h *kernelHarness) approve(id string) (kproto.ApprovalDecideResult, jsonrpc.Message) {
	m := h.operatorCall(kproto.MethodApprovalsApprove, kproto.ApprovalDecideParams{ID: id})
	var r kproto.ApprovalDecideResult
	if m.Error == nil {
		_ = json.Unmarshal(m.Result, &r)
	}
	return r, m
}

func (h *kernelHarness) fileIs(t *testing.T, rel, want string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(h.root, rel))
	if got := string(b); err != nil && want != "" || got != want {
		t.Errorf("%s holds %q (%v), want %q", rel, got, err, want)
	}
}

// TestAHeldCallIsApprovedOutOfBandAndItsRetryRuns: a shim that cannot ask
// gets the out-of-band path: the call is recorded requested before
// anything else, held, answered approval_pending with the approval's id
// and expiry; the operator lists and approves it; the same call then
// runs without asking again, once; a third asks again.
func TestAHeldCallIsApprovedOutOfBandAndItsRetryRuns(t *testing.T) {
	h := approvalKernel(t, 50*time.Millisecond, asked(t, policy.AskHarness))
	c := h.turnOf("cc")
	args := map[string]string{"path": "/public/new.txt", "content": "v1\n"}
	r := c.invoke("files.write", args)
	if r.Status != kproto.StatusDenied || r.Code != kproto.CodeApprovalPending || r.Retryable == nil || !*r.Retryable ||
		!strings.HasPrefix(r.ApprovalID, "apr_") || !strings.Contains(r.Message, "approval "+r.ApprovalID) || !strings.Contains(r.Message, "can be approved until ") {
		t.Fatalf("the held call: %+v", r)
	}
	h.fileIs(t, "public/new.txt", "")

	m := h.operatorCall(kproto.MethodApprovalsList, struct{}{})
	var list kproto.ApprovalsListResult
	if m.Error != nil || json.Unmarshal(m.Result, &list) != nil || len(list.Approvals) != 1 {
		t.Fatalf("approvals.list: %v %s", m.Error, m.Result)
	}
	a := list.Approvals[0]
	if a.ID != r.ApprovalID || a.Integration != "cc" || a.Tool != "files.write" || a.Action != "write" || a.Resource != "files:/public/new.txt" ||
		a.Arguments != `{"content":"v1\n","path":"/public/new.txt"}` || a.Ask != policy.AskHarness || len(a.ArgumentsSHA256) != 64 {
		t.Errorf("listed %+v", a)
	}
	d, m := h.approve(r.ApprovalID)
	if m.Error != nil || d.Decision != kproto.ApprovalApproved || d.ApprovedUntil == "" {
		t.Fatalf("approve: %v %+v", m.Error, d)
	}
	if r := c.invoke("files.write", args); r.Status != kproto.StatusSucceeded {
		t.Fatalf("the retry after the approval: %+v", r)
	}
	h.fileIs(t, "public/new.txt", "v1\n")
	if r := c.invoke("files.write", args); r.Code != kproto.CodeApprovalPending || r.ApprovalID == a.ID {
		t.Errorf("a third call: %+v; an approval is good for one call", r)
	}

	evs := h.events()
	var names []string
	for _, e := range evs {
		if strings.HasPrefix(e.Event, "tool.") && e.Event != audit.EventCatalogListed {
			names = append(names, e.Event+" "+e.Code+e.By)
		}
	}
	want := "tool.approval.requested |tool.invoked approval_pending|tool.approval.granted operator|tool.authorized |tool.invoked |tool.approval.requested |tool.invoked approval_pending"
	if got := strings.Join(names, "|"); got != want {
		t.Errorf("records\n got %s\nwant %s", got, want)
	}
	req := eventsNamed(evs, audit.EventApprovalRequested)[0]
	if req.ApprovalID != a.ID || req.ArgumentsSHA256 != a.ArgumentsSHA256 || req.Ask != policy.AskHarness || req.Expires != a.ExpiresAt ||
		req.Resource != "files:/public/new.txt" || req.Tool != "files.write" || req.Seq != 1 || len(req.Grants) != 1 {
		t.Errorf("requested record %+v", req)
	}
	granted := eventsNamed(evs, audit.EventApprovalGranted)[0]
	if granted.ApprovalID != a.ID || granted.By != "operator" || granted.Peer.UID != uint32(os.Getuid()) || granted.Integration != "cc" || granted.Expires != d.ApprovedUntil {
		t.Errorf("granted record %+v", granted)
	}
	if auth := eventsNamed(evs, audit.EventToolAuthorized)[0]; auth.ApprovalID != a.ID {
		t.Errorf("the call ran under %q, want %s", auth.ApprovalID, a.ID)
	}
	if inv := eventsNamed(evs, audit.EventToolInvoked)[0]; inv.ApprovalID != a.ID || inv.Reason != "the harness cannot be asked: its shim does not speak approval.ask" {
		t.Errorf("the held call's record: approval %q, reason %q", inv.ApprovalID, inv.Reason)
	}
}

// TestTheHarnessIsAskedAndItsAnswerDecides: a shim that can ask is sent
// approval.ask with what a person needs to judge the call; approved runs
// it, recorded by harness; declined refuses it approval_declined and
// the turn does not ask about the same call again, while a new turn
// does; cancelled answers approval_pending at once.
func TestTheHarnessIsAskedAndItsAnswerDecides(t *testing.T) {
	h := approvalKernel(t, time.Minute, asked(t, policy.AskHarness))
	c := h.askingTurn("cc")

	id := c.startWrite("/public/yes.txt", "line\x1b[31m\n")
	askID, ask := c.askOf()
	if ask.Integration != "cc" || ask.Tool != "files.write" || ask.Action != "write" || ask.Resource != "files:/public/yes.txt" ||
		ask.Arguments != `{"content":"line\u001b[31m\n","path":"/public/yes.txt"}` || ask.CallID != "w"+strconv.Itoa(id) ||
		!strings.Contains(ask.Message, "cc asks to run files.write: write on files:/public/yes.txt.\nArguments: {") {
		t.Errorf("approval.ask %+v", ask)
	}
	c.answerAsk(askID, kproto.ApprovalApproved)
	if r := c.resultOf(id); r.Status != kproto.StatusSucceeded {
		t.Fatalf("approved: %+v", r)
	}
	h.fileIs(t, "public/yes.txt", "line\x1b[31m\n")

	id = c.startWrite("/public/no.txt", "x")
	askID, _ = c.askOf()
	c.answerAsk(askID, kproto.ApprovalDeclined)
	r := c.resultOf(id)
	if r.Status != kproto.StatusDenied || r.Code != kproto.CodeApprovalDeclined || r.Retryable == nil || *r.Retryable ||
		!strings.HasPrefix(r.Message, "The person at the harness declined this call") {
		t.Fatalf("declined: %+v", r)
	}
	// Not asked again in this turn: the answer comes without a question.
	if r := c.resultOf(c.startWrite("/public/no.txt", "x")); r.Code != kproto.CodeApprovalDeclined {
		t.Errorf("the declined call again in its turn: %+v", r)
	}
	c2 := h.askingTurn("cc")
	id = c2.startWrite("/public/no.txt", "x")
	askID, _ = c2.askOf()
	c2.answerAsk(askID, kproto.ApprovalCancelled)
	if r := c2.resultOf(id); r.Code != kproto.CodeApprovalPending {
		t.Errorf("in a new turn, asked again and dismissed: %+v", r)
	}
	h.fileIs(t, "public/no.txt", "")

	evs := h.events()
	if inv := eventsNamed(evs, audit.EventToolInvoked); inv[len(inv)-1].Reason != "the person at the harness was asked and gave no decision (cancelled)" {
		t.Errorf("the dismissed call's reason: %q", inv[len(inv)-1].Reason)
	}
	if g := eventsNamed(evs, audit.EventApprovalGranted); len(g) != 1 || g[0].By != "harness" || g[0].ExecutionID != eventsNamed(evs, audit.EventTurnOpened)[0].ExecutionID {
		t.Errorf("granted records %+v", g)
	}
	if d := eventsNamed(evs, audit.EventApprovalDeclined); len(d) != 1 || d[0].By != "harness" || d[0].Resource != "files:/public/no.txt" {
		t.Errorf("declined records %+v", d)
	}
}

// TestTheFirstDecisionWins: the operator approving while the harness is
// being asked decides; the shim is told (approval.withdrawn) and its
// late answer changes nothing. The other way round, the operator is told
// the harness decided first.
func TestTheFirstDecisionWins(t *testing.T) {
	h := approvalKernel(t, time.Minute, asked(t, policy.AskHarness))
	c := h.askingTurn("cc")
	id := c.startWrite("/public/op.txt", "op")
	askID, ask := c.askOf()
	if d, m := h.approve(ask.ApprovalID); m.Error != nil || d.Decision != kproto.ApprovalApproved {
		t.Fatalf("the operator's approve: %v %+v", m.Error, d)
	}
	m := c.recv()
	var w kproto.ApprovalWithdrawnParams
	if m.Method != kproto.MethodApprovalWithdrawn || json.Unmarshal(m.Params, &w) != nil ||
		w != (kproto.ApprovalWithdrawnParams{ApprovalID: ask.ApprovalID, Reason: kproto.WithdrawnDecided, Decision: kproto.ApprovalApproved, By: "operator"}) {
		t.Fatalf("got %s %s, want approval.withdrawn", m.Method, m.Params)
	}
	if r := c.resultOf(id); r.Status != kproto.StatusSucceeded {
		t.Fatalf("the call the operator approved: %+v", r)
	}
	c.answerAsk(askID, kproto.ApprovalDeclined) // too late: dropped
	h.fileIs(t, "public/op.txt", "op")

	id = c.startWrite("/public/harness.txt", "h")
	askID, ask = c.askOf()
	c.answerAsk(askID, kproto.ApprovalDeclined)
	if r := c.resultOf(id); r.Code != kproto.CodeApprovalDeclined {
		t.Fatalf("declined at the harness: %+v", r)
	}
	_, m = h.approve(ask.ApprovalID)
	if code := errorCode(t, m); code != kproto.ErrApprovalDecided || m.Error.Message != "approval "+ask.ApprovalID+" was already declined by the person at the harness" {
		t.Errorf("the operator after the harness: %s %q", code, m.Error.Message)
	}
	if n := len(eventsNamed(h.events(), audit.EventApprovalGranted)) + len(eventsNamed(h.events(), audit.EventApprovalDeclined)); n != 2 {
		t.Errorf("%d decisions recorded, want 2", n)
	}
}

// TestOnlyTheOperatorDecidesWhatOnlyTheOperatorMay: ask = "operator" is
// never asked of the shim, and approval.answer for an approval the
// connection was not asked is refused and recorded, and decides nothing.
func TestOnlyTheOperatorDecidesWhatOnlyTheOperatorMay(t *testing.T) {
	h := approvalKernel(t, 50*time.Millisecond, asked(t, policy.AskOperator))
	c := h.askingTurn("cc")
	r := c.resultOf(c.startWrite("/public/op.txt", "op"))
	if r.Code != kproto.CodeApprovalPending || !strings.Contains(r.Message, "by the operator (") {
		t.Fatalf("an operator-only call, with a shim that can ask: %+v", r)
	}
	c.notify(kproto.MethodApprovalAnswer, kproto.ApprovalAnswerParams{ApprovalID: r.ApprovalID, Decision: kproto.ApprovalApproved})
	if r2 := c.resultOf(c.startWrite("/public/op.txt", "op")); r2.Code != kproto.CodeApprovalPending || r2.ApprovalID != r.ApprovalID {
		t.Errorf("after the shim's own approval.answer: %+v", r2)
	}
	refused := eventsNamed(h.events(), audit.EventOperatorRefused)
	if len(refused) != 1 || !strings.HasPrefix(refused[0].Reason, "approval.answer: approval \""+r.ApprovalID+"\" was not asked of this connection") {
		t.Errorf("refusals recorded %+v", refused)
	}
	if len(eventsNamed(h.events(), audit.EventApprovalGranted)) != 0 {
		t.Error("an approval was recorded")
	}
	h.fileIs(t, "public/op.txt", "")
}

// TestADeferredAskIsAnsweredBeforeTheRetry: a shim that asks in a way that
// ends the request first (the 2026-07-28 era's input-required result)
// defers; the call is answered approval_pending at once, and the
// person's answer (approval.answer) sent before the retry lets it run.
func TestADeferredAskIsAnsweredBeforeTheRetry(t *testing.T) {
	h := approvalKernel(t, time.Minute, asked(t, policy.AskHarness))
	c := h.askingTurn("cc")
	id := c.startWrite("/public/mrtr.txt", "m")
	askID, ask := c.askOf()
	c.answerAsk(askID, kproto.ApprovalDeferred)
	if r := c.resultOf(id); r.Code != kproto.CodeApprovalPending || r.ApprovalID != ask.ApprovalID {
		t.Fatalf("deferred: %+v", r)
	}
	c.notify(kproto.MethodApprovalAnswer, kproto.ApprovalAnswerParams{ApprovalID: ask.ApprovalID, Decision: kproto.ApprovalApproved})
	if r := c.resultOf(c.startWrite("/public/mrtr.txt", "m")); r.Status != kproto.StatusSucceeded {
		t.Fatalf("the retry: %+v", r)
	}
	h.fileIs(t, "public/mrtr.txt", "m")
	// One answer only: a second is refused and recorded.
	c.notify(kproto.MethodApprovalAnswer, kproto.ApprovalAnswerParams{ApprovalID: ask.ApprovalID, Decision: kproto.ApprovalApproved})
	c.call(kproto.MethodPing, struct{}{})
	if n := len(eventsNamed(h.events(), audit.EventOperatorRefused)); n != 1 {
		t.Errorf("%d refusals recorded, want 1", n)
	}
}

// TestOtherArgumentsAreAskedForAgain: an approval binds the arguments as
// they will be executed: the same tool on the same resource with other
// content is a new request, which the first approval does not run.
func TestOtherArgumentsAreAskedForAgain(t *testing.T) {
	h := approvalKernel(t, 50*time.Millisecond, asked(t, policy.AskOperator))
	c := h.turnOf("cc")
	first := c.invoke("files.write", map[string]string{"path": "/public/f.txt", "content": "one"})
	if _, m := h.approve(first.ApprovalID); m.Error != nil {
		t.Fatal(m.Error)
	}
	other := c.invoke("files.write", map[string]string{"path": "/public/f.txt", "content": "two"})
	if other.Code != kproto.CodeApprovalPending || other.ApprovalID == first.ApprovalID {
		t.Fatalf("other content: %+v", other)
	}
	h.fileIs(t, "public/f.txt", "")
	if r := c.invoke("files.write", map[string]string{"content": "one", "path": "/public/f.txt"}); r.Status != kproto.StatusSucceeded {
		t.Fatalf("the approved call, members in another order: %+v", r)
	}
	h.fileIs(t, "public/f.txt", "one")
}

// TestAWrongOrExpiredIDDecidesNothing: an id no approval has, and one
// whose request expired, are unknown_approval; an integration's
// connection asking approvals.approve is refused and recorded.
func TestAWrongOrExpiredIDDecidesNothing(t *testing.T) {
	clock := &testClock{t: time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)}
	g := asked(t, policy.AskOperator)
	g.AskTTL = time.Minute
	h := startKernel(t, []policy.Grant{g}, func(s *Server) { s.StateDir, s.AskTimeout, s.Now = t.TempDir(), 20*time.Millisecond, clock.Now })
	c := h.turnOf("cc")
	r := c.invoke("files.write", map[string]string{"path": "/public/e.txt", "content": "e"})
	if r.Code != kproto.CodeApprovalPending {
		t.Fatalf("%+v", r)
	}
	_, m := h.approve("apr_0000000000000000")
	if code := errorCode(t, m); code != kproto.ErrUnknownApproval || !strings.Contains(m.Error.Message, "never existed, it expired, or the kernel restarted") {
		t.Errorf("a wrong id: %s %q", code, m.Error.Message)
	}
	if code := errorCode(t, c.call(kproto.MethodApprovalsApprove, kproto.ApprovalDecideParams{ID: r.ApprovalID})); code != kproto.ErrOperatorOnly {
		t.Errorf("approve from the integration's own connection: %s", code)
	}
	clock.Set(clock.Now().Add(2 * time.Minute))
	_, m = h.approve(r.ApprovalID)
	if code := errorCode(t, m); code != kproto.ErrUnknownApproval || !strings.Contains(m.Error.Message, "expired at 2026-06-01T12:01:00Z") {
		t.Errorf("an expired id: %s %q", code, m.Error.Message)
	}
	evs := h.events()
	if len(eventsNamed(evs, audit.EventApprovalGranted)) != 0 {
		t.Error("an approval was recorded")
	}
	if refused := eventsNamed(evs, audit.EventOperatorRefused); len(refused) != 1 || refused[0].Reason != "approvals.approve: an integration's connection may not ask it" {
		t.Errorf("refusals recorded %+v", refused)
	}
}

// TestAHeldCallGivesBackItsRunningToken: while a call waits for a person,
// other turns' calls run, even when the kernel runs one call at a time.
func TestAHeldCallGivesBackItsRunningToken(t *testing.T) {
	h := startKernel(t, []policy.Grant{asked(t, policy.AskHarness), grant(t, "integration:*", "files:/public", true, "read")},
		func(s *Server) { s.StateDir, s.AskTimeout, s.runningCalls = t.TempDir(), time.Minute, 1 })
	c := h.askingTurn("cc")
	id := c.startWrite("/public/held.txt", "h")
	askID, _ := c.askOf()
	if r := h.turnOf("other").invoke("files.read", map[string]string{"path": "/public/a.txt"}); r.Status != kproto.StatusSucceeded {
		t.Errorf("another turn's read while a call is held: %+v", r)
	}
	c.answerAsk(askID, kproto.ApprovalApproved)
	if r := c.resultOf(id); r.Status != kproto.StatusSucceeded {
		t.Errorf("the held call once approved: %+v", r)
	}
}

// TestAHeldWriteHoldsTheCallsBehindIt: a held call keeps its place in its
// turn (ADR 0018): a read of the same file sent after it is answered
// after it, and reads what it wrote.
func TestAHeldWriteHoldsTheCallsBehindIt(t *testing.T) {
	h := startKernel(t, []policy.Grant{asked(t, policy.AskHarness), grant(t, "integration:cc", "files:/public", true, "read")},
		func(s *Server) { s.StateDir, s.AskTimeout = t.TempDir(), time.Minute })
	c := h.askingTurn("cc")
	w := c.startWrite("/public/order.txt", "written first")
	askID, _ := c.askOf()
	rd := c.send(kproto.MethodInvoke, c.invokeParams("r1", "files.read", map[string]string{"path": "/public/order.txt"}))
	c.answerAsk(askID, kproto.ApprovalApproved)
	if r := c.resultOf(w); r.Status != kproto.StatusSucceeded {
		t.Fatalf("the write: %+v", r)
	}
	if r := c.resultOf(rd); r.Status != kproto.StatusSucceeded || !strings.Contains(text(t, r), "written first") {
		t.Fatalf("the read behind it: %+v", r)
	}
}

// TestAKernelStoppedWhileACallWaitsActsOnNothing: the held call is
// answered when the kernel stops, and the kernel started next knows no
// approval of the old one: approving its id decides nothing, and the
// file is not written.
func TestAKernelStoppedWhileACallWaitsActsOnNothing(t *testing.T) {
	state := t.TempDir()
	g := asked(t, policy.AskHarness)
	h := startKernel(t, []policy.Grant{g}, func(s *Server) { s.StateDir, s.AskTimeout = state, time.Minute })
	c := h.askingTurn("cc")
	id := c.startWrite("/public/restart.txt", "r")
	_, ask := c.askOf()
	go func() { _ = h.stop() }()
	for {
		m := c.recv()
		if m.Method == kproto.MethodApprovalWithdrawn {
			continue
		}
		if string(m.ID) != jsonID(id) {
			t.Fatalf("got %s %s, want the held call's answer", m.Method, m.ID)
		}
		if r := invokeResult(t, m); r.Status != kproto.StatusFailed || r.Code != kproto.CodeCancelled || !strings.Contains(r.Message, "nothing was done") {
			t.Errorf("the held call when the kernel stopped: %+v", r)
		}
		break
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	evs := parseEvents(t, []byte(mustRead(t, h.auditPath)))
	if len(eventsNamed(evs, audit.EventApprovalRequested)) != 1 || len(eventsNamed(evs, audit.EventApprovalGranted)) != 0 || len(eventsNamed(evs, audit.EventToolAuthorized)) != 0 {
		t.Errorf("records of the first kernel: %v", evs)
	}

	h2 := startKernel(t, []policy.Grant{g}, func(s *Server) { s.StateDir = state })
	if _, m := h2.approve(ask.ApprovalID); errorCode(t, m) != kproto.ErrUnknownApproval {
		t.Errorf("the old approval at the new kernel: %s", m.Result)
	}
	h.fileIs(t, "public/restart.txt", "")
}

// TestAnApprovalThatCannotBeRecordedDoesNotHappen: with the audit log
// failing, no request is made (the call is audit_unavailable, and nobody
// is asked) and no decision is taken.
func TestAnApprovalThatCannotBeRecordedDoesNotHappen(t *testing.T) {
	sink := &failingSink{}
	h := startKernel(t, []policy.Grant{asked(t, policy.AskHarness)}, func(s *Server) { s.StateDir, s.AskTimeout = t.TempDir(), time.Minute }, failing(sink))
	c := h.askingTurn("cc")
	sink.fail.Store(true)
	if r := c.resultOf(c.startWrite("/public/u.txt", "u")); r.Code != codeAuditUnavailable {
		t.Fatalf("a request that cannot be recorded: %+v", r)
	}
	sink.fail.Store(false)
	id := c.startWrite("/public/u.txt", "u")
	askID, _ := c.askOf()
	sink.fail.Store(true)
	c.answerAsk(askID, kproto.ApprovalApproved)
	if r := c.resultOf(id); r.Code != codeAuditUnavailable {
		t.Fatalf("an approval that cannot be recorded: %+v", r)
	}
	sink.fail.Store(false)
	h.fileIs(t, "public/u.txt", "")
}

// BenchmarkAnAskedCall is what asking costs the kernel beyond the
// person's wait: one call through a turn, unasked (a grant without ask),
// and asked (a grant with ask = "harness", the shim answering approve at
// once), for a read and for a write, in one run so they compare. Asked,
// a call also writes and syncs tool.approval.requested and
// tool.approval.granted, and crosses the socket twice more.
func BenchmarkAnAskedCall(b *testing.B) {
	docs, _ := policy.ParseResource("files:/docs")
	for _, tool := range []struct{ name, args, action string }{
		{"files.read", `{"path":"/docs/a.txt"}`, "read"},
		{"files.write", `{"path":"/docs/w.txt","content":"a line a model wrote\n"}`, "write"},
	} {
		for _, ask := range []string{"", policy.AskHarness} {
			name := tool.action + "/unasked"
			if ask != "" {
				name = tool.action + "/asked"
			}
			b.Run(name, func(b *testing.B) {
				g := policy.Grant{Subject: policy.SubjectWildcard, Resource: docs, Descendants: true, Actions: []string{tool.action}, Ask: ask, AskTTL: policy.DefaultAskTTL}
				t := startBenchTurnWith(b, "bench", []policy.Grant{g}, func(s *Server) { s.AskTimeout = time.Minute })
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					if ask == "" {
						t.invoke(b, i, tool.name, tool.args)
						continue
					}
					t.invokeApproved(b, i, tool.name, tool.args)
				}
			})
		}
	}
}

// invokeApproved sends a call, answers the kernel's approval.ask
// approved, and reads the call's result.
func (t *benchTurn) invokeApproved(b *testing.B, i int, tool, args string) {
	line := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools.invoke","params":{"callId":"c%d","tool":%q,"arguments":%s,"catalogHash":%q}}`, i+3, i, tool, args, t.hash)
	if _, err := t.conn.Write([]byte(line + "\n")); err != nil {
		b.Fatal(err)
	}
	raw, err := t.r.ReadLine()
	if err != nil {
		b.Fatal(err)
	}
	var ask jsonrpc.Message
	if err := json.Unmarshal(raw, &ask); err != nil || ask.Method != kproto.MethodApprovalAsk {
		b.Fatalf("%s: want approval.ask (%v)", raw, err)
	}
	if _, err := t.conn.Write(jsonrpc.AppendResponse(nil, ask.ID, []byte(`{"decision":"approved"}`))); err != nil {
		b.Fatal(err)
	}
	raw, err = t.r.ReadLine()
	if err != nil {
		b.Fatal(err)
	}
	var m jsonrpc.Message
	var r kproto.InvokeResult
	if json.Unmarshal(raw, &m) != nil || json.Unmarshal(m.Result, &r) != nil || r.Status != kproto.StatusSucceeded {
		b.Fatalf("%s: %+v", raw, r)
	}
}
