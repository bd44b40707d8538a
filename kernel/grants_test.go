package kernel

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/internal/peercred"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
	"github.com/sharedos/sharedos-mcp/kernel/config"
	"github.com/sharedos/sharedos-mcp/policy"
)

// childOf makes the kernel's integrations: each pair is a child and its
// parent.
func childOf(t *testing.T, pairs ...string) func(*Server) {
	t.Helper()
	var decls []policy.Integration
	for i := 0; i+1 < len(pairs); i += 2 {
		decls = append(decls, policy.Integration{Name: pairs[i], Parent: pairs[i+1]})
	}
	h, err := policy.NewHierarchy(decls, []string{"cc"})
	if err != nil {
		t.Fatal(err)
	}
	return func(s *Server) { s.Integrations = h }
}

func lastInvoked(t *testing.T, h *kernelHarness) audit.Event {
	t.Helper()
	evs := eventsNamed(h.events(), audit.EventToolInvoked)
	if len(evs) == 0 {
		t.Fatal("no tool.invoked")
	}
	return evs[len(evs)-1]
}

// TestAChildIsDeniedWhatItsParentMayNotDo: a child's own grants reach
// everywhere, its parent's only /public: the child's catalogue and calls
// are the intersection, and each record names the grant of each level.
func TestAChildIsDeniedWhatItsParentMayNotDo(t *testing.T) {
	grants := []policy.Grant{
		grant(t, "integration:cc", "files:/public", true, "read", "list"),
		grant(t, "integration:cc.explorer", "files:/", true, "read", "list", "search", "write"),
	}
	h := startKernel(t, grants, childOf(t, "cc.explorer", "cc"))
	c := h.dial()
	c.hello("cc.explorer")
	tools, _ := c.list()
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name)
	}
	if !slices.Equal(names, []string{"files.list", "files.read"}) {
		t.Errorf("the child's catalogue is %v, want what it and its parent both have: files.list, files.read", names)
	}

	if r := c.invoke("files.read", map[string]string{"path": "/public/a.txt"}); r.Status != kproto.StatusSucceeded {
		t.Fatalf("a read both allow: %+v", r)
	}
	ev := lastInvoked(t, h)
	want := []audit.GrantRef{{Integration: "cc.explorer", Grant: 2}, {Integration: "cc", Grant: 1}}
	if !slices.Equal(ev.Grants, want) {
		t.Errorf("tool.invoked grants %+v, want %+v", ev.Grants, want)
	}

	r := c.invoke("files.read", map[string]string{"path": "/private/secret.txt"})
	if r.Status != kproto.StatusDenied || r.Code != kproto.CodeNoMatchingGrant ||
		r.Message != "no grant allows read on files:/private/secret.txt to cc, whose child this integration is (a child may do only what its parent may)" {
		t.Errorf("a read only the child's own grant allows: %+v", r)
	}
	ev = lastInvoked(t, h)
	if ev.Grants != nil || len(ev.Nearest) != maxNearest || ev.Nearest[0] != (audit.GrantRef{Integration: "cc.explorer", Grant: 2}) ||
		ev.Nearest[1] != (audit.GrantRef{Integration: "cc", Grant: 1, Failed: "resource"}) {
		t.Errorf("the denial's record: grants %+v, nearest %+v", ev.Grants, ev.Nearest)
	}

	// The parent itself is not narrowed by its child.
	p := h.turnOf("cc")
	if r := p.invoke("files.read", map[string]string{"path": "/public/a.txt"}); r.Status != kproto.StatusSucceeded {
		t.Errorf("the parent's own read: %+v", r)
	}
}

// limited is a grant of cc on /public with a limit and a turn_limit.
func limited(t *testing.T, limit string, turn int) policy.Grant {
	g := grant(t, "integration:cc", "files:/public", true, "read", "list")
	if limit != "" {
		l, err := policy.ParseLimit(limit)
		if err != nil {
			t.Fatal(err)
		}
		g.Limit = l
	}
	g.TurnLimit = turn
	return g
}

// budgetKernel starts a kernel on stateDir with the clock at clock.
func budgetKernel(t *testing.T, stateDir string, clock *testClock, grants ...policy.Grant) *kernelHarness {
	return startKernel(t, grants, func(s *Server) { s.StateDir, s.Now = stateDir, clock.Now })
}

// turnOf opens a turn of name and lists its catalogue, as a shim does.
func (h *kernelHarness) turnOf(name string) *testClient {
	c := h.dial()
	c.hello(name)
	c.list()
	return c
}

func read(c *testClient) kproto.InvokeResult {
	return c.invoke("files.read", map[string]string{"path": "/public/a.txt"})
}

// TestLimitsHoldAcrossTurnsRestartsAndReloads: a grant's limit is counted
// per integration in epoch-aligned windows; a call over it is
// rate_limited with retryAfterMs and recorded; neither a new turn, nor a
// restart of the kernel, nor a reload that changes the limit resets the
// count; a denied call costs nothing; the next window starts afresh.
func TestLimitsHoldAcrossTurnsRestartsAndReloads(t *testing.T) {
	state := t.TempDir()
	clock := &testClock{t: time.Date(2026, 6, 1, 12, 15, 0, 0, time.UTC)}
	h := budgetKernel(t, state, clock, limited(t, "2/1h", 0))
	c := h.turnOf("cc")
	if r := read(c); r.Status != kproto.StatusSucceeded {
		t.Fatalf("first call: %+v", r)
	}
	if r := c.invoke("files.write", map[string]string{"path": "/public/x", "content": "x"}); r.Code != kproto.CodeToolUnavailable {
		t.Fatalf("a call no grant allows: %+v", r)
	}
	if r := c.invoke("files.read", map[string]string{"path": "/private/secret.txt"}); r.Code != kproto.CodeNoMatchingGrant {
		t.Fatalf("a denied call: %+v", r)
	}
	if r := read(c); r.Status != kproto.StatusSucceeded {
		t.Fatalf("second call, after a denied one that cost nothing: %+v", r)
	}
	r := read(c)
	const wait = 45 * time.Minute
	if r.Status != kproto.StatusDenied || r.Code != kproto.CodeRateLimited || r.Retryable == nil || !*r.Retryable ||
		r.RetryAfterMs == nil || *r.RetryAfterMs != wait.Milliseconds() || !strings.Contains(r.Message, "retry in 45m0s (retryAfterMs 2700000)") {
		t.Fatalf("the third call in the hour: %+v", r)
	}
	ev := lastInvoked(t, h)
	if ev.Code != kproto.CodeRateLimited || ev.RetryAfterMs == nil || *ev.RetryAfterMs != wait.Milliseconds() ||
		len(ev.Nearest) == 0 || ev.Nearest[0] != (audit.GrantRef{Integration: "cc", Grant: 1, Failed: "limit"}) {
		t.Errorf("its record: %+v", ev)
	}

	// A new turn is counted with the old ones.
	c2 := h.turnOf("cc")
	if r := read(c2); r.Code != kproto.CodeRateLimited {
		t.Errorf("a new turn: %+v", r)
	}

	// A reload that raises the limit keeps the count: one more call.
	cfg := config.Config{Grants: []policy.Grant{limited(t, "3/1h", 0)}}
	if _, err := h.srv.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if r := read(c2); r.Status != kproto.StatusSucceeded {
		t.Errorf("the call the raised limit allows: %+v", r)
	}
	if r := read(c2); r.Code != kproto.CodeRateLimited {
		t.Errorf("over the raised limit: %+v", r)
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}

	// A restarted kernel on the same state directory still counts them.
	h2 := budgetKernel(t, state, clock, limited(t, "3/1h", 0))
	c3 := h2.turnOf("cc")
	if r := read(c3); r.Code != kproto.CodeRateLimited {
		t.Errorf("after a restart: %+v", r)
	}
	clock.Set(time.Date(2026, 6, 1, 13, 0, 0, 0, time.UTC))
	if r := read(c3); r.Status != kproto.StatusSucceeded {
		t.Errorf("in the next window: %+v", r)
	}
	fi, err := os.Stat(filepath.Join(state, BudgetsFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("budgets file: %v, %v; want mode 0600", fi, err)
	}
}

// TestAKilledKernelKeepsItsCounts: every charge is written as it is made,
// so a kernel that never shut down cleanly does not forget it.
func TestAKilledKernelKeepsItsCounts(t *testing.T) {
	state := t.TempDir()
	clock := &testClock{t: time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)}
	h := budgetKernel(t, state, clock, limited(t, "1/1d", 0))
	c := h.turnOf("cc")
	if r := read(c); r.Status != kproto.StatusSucceeded {
		t.Fatal(r)
	}
	// What a second kernel reads now is what a kernel killed now left.
	b, err := openBudgets(state, h.srv.Log, clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	rules := policy.Rules{Grants: []policy.Grant{limited(t, "1/1d", 0)}}
	if v := b.peek(&rules, policy.Request{Integration: "cc", Resource: policy.Resource{Namespace: "files", Path: "/public/a.txt"}, Action: "read", Time: clock.Now()}, turnCounts{}); v.Decision != policy.RateLimited {
		t.Errorf("the file read while the kernel runs decides %v, want rate limited", v.Decision)
	}
}

// TestAForeignBudgetsFileIsRefused: whoever can write the budgets file can
// reset every limit, so a kernel refuses to start on one others can write.
func TestAForeignBudgetsFileIsRefused(t *testing.T) {
	state := t.TempDir()
	if err := os.WriteFile(filepath.Join(state, BudgetsFile), []byte(`{"version":1,"counters":[]}`), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(state, BudgetsFile), 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := openBudgets(state, zerolog.Nop(), time.Now()); err == nil || !strings.Contains(err.Error(), ErrUnsafeBudgets.Error()) {
		t.Errorf("openBudgets = %v, want %v", err, ErrUnsafeBudgets)
	}
}

// TestATurnLimitIsPerTurn: turn_limit counts one connection's calls; it
// is rate_limited without a retryAfterMs (no wait helps within the
// turn), and a new turn starts afresh.
func TestATurnLimitIsPerTurn(t *testing.T) {
	clock := &testClock{t: time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)}
	h := budgetKernel(t, t.TempDir(), clock, limited(t, "", 1))
	c := h.turnOf("cc")
	if r := read(c); r.Status != kproto.StatusSucceeded {
		t.Fatal(r)
	}
	r := read(c)
	if r.Code != kproto.CodeRateLimited || r.Retryable == nil || *r.Retryable || r.RetryAfterMs != nil {
		t.Errorf("the second call of the turn: %+v", r)
	}
	c2 := h.turnOf("cc")
	if r := read(c2); r.Status != kproto.StatusSucceeded {
		t.Errorf("a new turn: %+v", r)
	}
}

// TestAChildUsesItsParentsBudget: a child's call is charged to its
// parent's deciding grant too, so the child cannot make more calls than
// the parent may.
func TestAChildUsesItsParentsBudget(t *testing.T) {
	clock := &testClock{t: time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)}
	child := grant(t, "integration:cc.explorer", "files:/public", true, "read")
	h := startKernel(t, []policy.Grant{limited(t, "2/1h", 0), child}, childOf(t, "cc.explorer", "cc"),
		func(s *Server) { s.StateDir, s.Now = t.TempDir(), clock.Now })
	c := h.turnOf("cc.explorer")
	for i := range 2 {
		if r := read(c); r.Status != kproto.StatusSucceeded {
			t.Fatalf("child call %d: %+v", i+1, r)
		}
	}
	if r := read(c); r.Code != kproto.CodeRateLimited || !strings.Contains(r.Message, "to cc, whose child this integration is") {
		t.Errorf("the child over its parent's budget: %+v", r)
	}
	p := h.turnOf("cc")
	if r := read(p); r.Code != kproto.CodeRateLimited {
		t.Errorf("the parent, after its child used its budget: %+v", r)
	}
}

// TestACallOnlyAnAskingGrantAllowsIsHeldForApproval: such a call is held
// while a person is asked and, unanswered, refused approval_pending
// (retryable, with the approval's id), never charged while it waits;
// another grant that allows it without asking runs it at once.
func TestACallOnlyAnAskingGrantAllowsIsHeldForApproval(t *testing.T) {
	asking := limited(t, "1/1h", 0)
	asking.Ask, asking.AskTTL = policy.AskOperator, policy.DefaultAskTTL
	h := startKernel(t, []policy.Grant{asking}, func(s *Server) { s.StateDir, s.AskTimeout = t.TempDir(), 50*time.Millisecond })
	c := h.turnOf("cc")
	for range 2 {
		r := read(c)
		if r.Status != kproto.StatusDenied || r.Code != kproto.CodeApprovalPending || r.Retryable == nil || !*r.Retryable ||
			r.ApprovalID == "" || !strings.Contains(r.Message, "a person has been asked to approve this call (approval "+r.ApprovalID+", by the operator") {
			t.Errorf("a call only an asking grant allows: %+v", r)
		}
	}
	ev := lastInvoked(t, h)
	if !slices.Equal(ev.Grants, []audit.GrantRef{{Integration: "cc", Grant: 1, Ask: "operator"}}) {
		t.Errorf("its record names %+v", ev.Grants)
	}
	if got := len(eventsNamed(h.events(), audit.EventApprovalRequested)); got != 1 {
		t.Errorf("%d tool.approval.requested records; the retry joins the pending request, want 1", got)
	}
	h.srv.SetPolicy(Policy{Grants: []policy.Grant{asking, grant(t, "integration:cc", "files:/", true, "read")}})
	if r := read(c); r.Status != kproto.StatusSucceeded {
		t.Errorf("with a grant that does not ask: %+v", r)
	}
}

// TestTheOperatorConnection: kernel.explain is served to a connection that
// has not said hello and whose uid is the operator's; an integration's
// connection, or another uid, is refused operator_only and recorded; an
// operator connection cannot then say hello.
func TestTheOperatorConnection(t *testing.T) {
	grants := []policy.Grant{grant(t, "integration:cc", "files:/public", true, "read")}
	h := startKernel(t, grants)
	explainParams := kproto.ExplainParams{Integration: "cc", Tool: "files.read", Arguments: json.RawMessage(`{"path":"/private/secret.txt"}`)}

	op := h.dial()
	m := op.call(kproto.MethodExplain, explainParams)
	var r kproto.ExplainResult
	if m.Error != nil || json.Unmarshal(m.Result, &r) != nil {
		t.Fatalf("kernel.explain: %v %s", m.Error, m.Result)
	}
	if r.Allowed || r.Code != kproto.CodeNoMatchingGrant || r.Resource != "files:/private/secret.txt" || r.Action != "read" ||
		len(r.Checks) != 1 || r.Checks[0].Failed != "resource" || r.Checks[0].Detail != "covers files:/public and below, not files:/private/secret.txt" {
		t.Errorf("explain: %+v", r)
	}
	if code := errorCode(t, op.call(kproto.MethodHello, kproto.HelloParams{Name: "cc"})); code != kproto.ErrAlreadyIntroduced {
		t.Errorf("hello on an operator connection: %s", code)
	}

	in := h.turnOf("cc")
	if code := errorCode(t, in.call(kproto.MethodExplain, explainParams)); code != kproto.ErrOperatorOnly {
		t.Errorf("explain on an integration's connection: %s", code)
	}
	refused := eventsNamed(h.events(), audit.EventOperatorRefused)
	if len(refused) != 1 || refused[0].Integration != "cc" || refused[0].Reason != "kernel.explain: an integration's connection may not ask it" {
		t.Errorf("operator.refused records %+v", refused)
	}
}

// TestOperatorUIDs: a uid the kernel serves but not as operator is refused
// operator methods; one of operator_uids may ask them without being
// served as an integration, and may not say hello.
func TestOperatorUIDs(t *testing.T) {
	playing := func(uid uint32) func(*Server) {
		return func(s *Server) {
			s.PeerCred = func(*net.UnixConn) (peercred.Cred, error) { return peercred.Cred{UID: uid, GID: uid, PID: 99}, nil }
		}
	}
	params := kproto.ExplainParams{Integration: "cc", Tool: "files.read", Arguments: json.RawMessage(`{"path":"/public/a.txt"}`)}

	h := startKernel(t, publicReader(t), playing(4242), func(s *Server) { s.AllowUIDs = []uint32{uint32(os.Getuid()), 4242} })
	if code := errorCode(t, h.dial().call(kproto.MethodExplain, params)); code != kproto.ErrOperatorOnly {
		t.Errorf("a served uid that is not an operator: %s", code)
	}
	if refused := eventsNamed(h.events(), audit.EventOperatorRefused); len(refused) != 1 || refused[0].Reason != "kernel.explain: uid 4242 is not served as operator" {
		t.Errorf("operator.refused records %+v", refused)
	}

	h2 := startKernel(t, publicReader(t), playing(4343), func(s *Server) { s.OperatorUIDs = []uint32{4343} })
	c := h2.dial()
	m := c.call(kproto.MethodExplain, params)
	var r kproto.ExplainResult
	if m.Error != nil || json.Unmarshal(m.Result, &r) != nil || !r.Allowed || len(r.Grants) != 1 || r.Grants[0].Grant != 1 {
		t.Errorf("explain by an operator uid: %v %s", m.Error, m.Result)
	}
	c2 := h2.dial()
	if code := errorCode(t, c2.call(kproto.MethodHello, kproto.HelloParams{Name: "cc"})); code != kproto.ErrOperatorOnly {
		t.Errorf("hello by an operator-only uid: %s", code)
	}
	c2.expectEOF()
}

// TestAnApprovedCallIsChargedWhenItRuns: an approved call is charged
// every budget of its decision when it runs, or none when one has no
// room left by then, and told how long until it has.
func TestAnApprovedCallIsChargedWhenItRuns(t *testing.T) {
	clock := &testClock{t: time.Date(2026, 6, 1, 12, 30, 0, 0, time.UTC)}
	asking := limited(t, "1/1h", 0)
	asking.Ask = policy.AskHarness
	b, err := openBudgets("", zerolog.Nop(), clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Now: clock.Now, budgets: b}
	s.SetPolicy(Policy{Grants: []policy.Grant{asking}})
	tn := &turn{s: s, name: "cc", budget: turnCounts{}}
	req := policy.Request{Integration: "cc", Resource: policy.Resource{Namespace: "files", Path: "/public/a.txt"}, Action: "read", Time: clock.Now()}
	v := b.decide(&s.currentPolicy().rules, req, tn.budget)
	if v.Decision != policy.Allowed || v.Ask != policy.AskHarness {
		t.Fatalf("decide = %+v; want allowed with ask", v)
	}
	c := &call{requested: "files:/public/a.txt", decided: &decision{v: v, req: req, pol: s.currentPolicy()}}
	if o, ok := tn.chargeApproved(c); !ok {
		t.Fatalf("the first approved call: %+v", o)
	}
	o, ok := tn.chargeApproved(c)
	if ok || o.code != kproto.CodeRateLimited || o.retryAfter != 30*time.Minute {
		t.Errorf("a second approved call over the limit: %+v, %v", o, ok)
	}
}
