package kernel

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos-mcp/hashing"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
	"github.com/sharedos/sharedos-mcp/policy"
)

// brokerTools configures the test upstream's tools the way the tests
// below grant them; every other tool is action call on /<tool name>.
const brokerTools = `
[[upstream.tool]]
name = "echo"
action = "read"
resource = "/echo"

[[upstream.tool]]
name = "get_repo"
action = "read"
resource = "/repos/{owner}/{repo}"

[[upstream.tool]]
name = "get_issue"
action = "read"
resource = "/issues/{n}"

[[upstream.tool]]
name = "hold"
action = "read"

[[upstream.tool]]
name = "release"
action = "read"
`

// brokerGrants gives claude-code read on test:/echo, on every repository
// of sharedos, on issue 7, on hold and release, and call on the tools
// named; nothing else of the upstream.
func brokerGrants(t *testing.T, calls ...string) []policy.Grant {
	t.Helper()
	const cc = "integration:claude-code"
	g := []policy.Grant{
		grant(t, cc, "test:/echo", false, "read"),
		grant(t, cc, "test:/repos/sharedos", true, "read"),
		grant(t, cc, "test:/issues/7", false, "read"),
		grant(t, cc, "test:/hold", false, "read"),
		grant(t, cc, "test:/release", false, "read"),
		grant(t, cc, "files:/public", true, "read"),
	}
	for _, c := range calls {
		g = append(g, grant(t, cc, "test:/"+c, false, "call"))
	}
	return g
}

func TestBrokeredToolsArePublishedOnlyWhereAGrantReaches(t *testing.T) {
	h, _ := startBrokered(t, brokerGrants(t, "fail"), brokerTools)
	c := h.dial()
	c.hello("claude-code")
	defs, _ := c.list()
	want := []string{"files.read", "test.echo", "test.fail", "test.get_issue", "test.get_repo", "test.hold", "test.release"}
	got := names(defs)
	slices.Sort(got)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("claude-code's catalogue = %v, want %v", got, want)
	}
	for _, d := range defs {
		switch d.Name {
		case "test.echo":
			if d.Namespace != "test" || d.Source != "upstream:test" || d.ReadWrite != "read" || len(d.OutputSchema) == 0 {
				t.Errorf("test.echo = %+v", d)
			}
			if d.RequiredCapability.Action != "read" || d.RequiredCapability.Resource != (capabilityResource{Namespace: "test", Path: "/echo"}) {
				t.Errorf("test.echo requiredCapability = %+v", d.RequiredCapability)
			}
		case "test.get_repo":
			if d.RequiredCapability.Resource.Path != "/repos/{owner}/{repo}" || d.ReadWrite != "read" {
				t.Errorf("test.get_repo = %+v", d)
			}
		case "test.fail":
			// Action call: it has effects, whatever the upstream's hints.
			if d.ReadWrite != "write" || d.RequiredCapability.Action != "call" {
				t.Errorf("test.fail = %+v", d)
			}
		}
	}

	// Deny by default: no grant, no tool.
	other := h.dial()
	other.hello("codex")
	if defs, _ := other.list(); len(defs) != 0 {
		t.Errorf("codex, with no grant, lists %v", names(defs))
	}
}

func TestBrokeredCallsAreDecidedOnTheResourceTheirArgumentsName(t *testing.T) {
	h, u := startBrokered(t, brokerGrants(t), brokerTools)
	c := h.dial()
	c.hello("claude-code")
	c.list()

	r := c.invoke("test.echo", map[string]any{"text": "hi"})
	if r.Status != kproto.StatusSucceeded || contentText(t, r.Content) != "hi" || string(r.Output) != `{"text":"hi"}` {
		t.Errorf("test.echo = %+v, want its content and structuredContent passed through", r)
	}
	r = c.invoke("test.get_repo", map[string]any{"owner": "sharedos", "repo": "mcp"})
	if r.Status != kproto.StatusSucceeded || contentText(t, r.Content) != "sharedos/mcp" {
		t.Errorf("get_repo sharedos/mcp = %+v", r)
	}
	r = c.invoke("test.get_repo", map[string]any{"owner": "other", "repo": "mcp"})
	if r.Status != kproto.StatusDenied || r.Code != kproto.CodeNoMatchingGrant || !strings.Contains(r.Message, "test:/repos/other/mcp") {
		t.Errorf("get_repo other/mcp = %+v, want denied no_matching_grant naming the resource", r)
	}
	r = c.invoke("test.get_issue", map[string]any{"n": 7})
	if r.Status != kproto.StatusSucceeded {
		t.Errorf("get_issue 7 = %+v", r)
	}
	r = c.invoke("test.get_issue", map[string]any{"n": 8})
	if r.Status != kproto.StatusDenied || r.Code != kproto.CodeNoMatchingGrant {
		t.Errorf("get_issue 8 = %+v", r)
	}
	// An integer written another way names the same resource, and the
	// upstream receives it as the kernel read it.
	if r = c.invoke("test.get_issue", json.RawMessage(`{"n": 7.0}`)); r.Status != kproto.StatusSucceeded {
		t.Errorf("get_issue 7.0 = %+v", r)
	}
	h.stop()

	if got, want := u.calls(), []string{"echo", "get_repo", "get_issue", "get_issue"}; !reflect.DeepEqual(got, want) {
		t.Errorf("the upstream received %v, want %v: a denied call must not reach it", got, want)
	}
	if got := u.arguments("get_issue"); !reflect.DeepEqual(got, []string{`{"n":7}`, `{"n":7}`}) {
		t.Errorf("get_issue arguments at the upstream = %v", got)
	}
	var invoked []audit.Event
	for _, e := range eventsNamed(h.events(), audit.EventToolInvoked) {
		if strings.HasPrefix(e.Tool, "test.") {
			invoked = append(invoked, e)
		}
	}
	wantRes := []string{"test:/echo", "test:/repos/sharedos/mcp", "test:/repos/other/mcp", "test:/issues/7", "test:/issues/8", "test:/issues/7"}
	if len(invoked) != len(wantRes) {
		t.Fatalf("%d tool.invoked records for the upstream, want %d", len(invoked), len(wantRes))
	}
	for i, e := range invoked {
		if e.Upstream != "test" || e.Resource != wantRes[i] || e.Action != "read" || e.Seq != int64(i+1) {
			t.Errorf("record %d = %+v, want upstream test, resource %s, action read, seq %d", i, e, wantRes[i], i+1)
		}
	}
	if invoked[2].Status != kproto.StatusDenied || invoked[2].Code != kproto.CodeNoMatchingGrant {
		t.Errorf("the denied call is recorded %s/%s", invoked[2].Status, invoked[2].Code)
	}
}

// TestPlaceholderValuesCannotWidenTheirResource: a value that is empty,
// "." or "..", holds '/' or NUL, or is not a string or an integer, or a
// name given twice, is refused invalid_arguments, and nothing reaches
// the upstream.
func TestPlaceholderValuesCannotWidenTheirResource(t *testing.T) {
	h, u := startBrokered(t, brokerGrants(t), brokerTools)
	c := h.dial()
	c.hello("claude-code")
	c.list()
	for _, args := range []string{
		`{"owner": "..", "repo": "x"}`,
		`{"owner": "sharedos", "repo": ".."}`,
		`{"owner": ".", "repo": "x"}`,
		`{"owner": "", "repo": "x"}`,
		`{"owner": "sharedos/../other", "repo": "x"}`,
		`{"owner": "sharedos", "repo": "x/../../other"}`,
		`{"owner": "sharedos", "repo": "a\u0000b"}`,
		`{"owner": "sharedos", "repo": "\u002e\u002e"}`,
		`{"owner": ["sharedos"], "repo": "x"}`,
		`{"owner": {"a": 1}, "repo": "x"}`,
		`{"owner": null, "repo": "x"}`,
		`{"owner": true, "repo": "x"}`,
		`{"owner": 1.5, "repo": "x"}`,
		`{"repo": "x"}`,
		`["sharedos", "x"]`,
		`"sharedos/x"`,
	} {
		r := c.invoke("test.get_repo", json.RawMessage(args))
		if r.Status != kproto.StatusFailed || r.Code != kproto.CodeInvalidArguments {
			t.Errorf("get_repo %s = %+v, want failed invalid_arguments", args, r)
		}
	}
	for _, args := range []string{`{"n": 9007199254740993}`, `{"n": -0.5}`, `{"n": "7/8"}`} {
		if r := c.invoke("test.get_issue", json.RawMessage(args)); r.Code != kproto.CodeInvalidArguments {
			t.Errorf("get_issue %s = %+v, want invalid_arguments", args, r)
		}
	}
	// A duplicate key is refused too: an upstream could read the other
	// value (TestArgumentNamesADecoderFoldsAreRefusedBeforeTheUpstream).
	if r := c.invoke("test.get_repo", json.RawMessage(`{"owner": "other", "owner": "sharedos", "repo": "x"}`)); r.Code != kproto.CodeInvalidArguments {
		t.Errorf("duplicate owner = %+v, want invalid_arguments", r)
	}
	h.stop()
	if calls := u.calls(); len(calls) != 0 {
		t.Errorf("the upstream received %v, want nothing", calls)
	}
}

func TestAnUnpublishedBrokeredNameIsToolUnavailable(t *testing.T) {
	h, u := startBrokered(t, brokerGrants(t), brokerTools)
	c := h.dial()
	c.hello("claude-code")
	c.list()
	for _, name := range []string{"test.env", "test.nosuch", "nosuch.echo"} {
		r := c.invoke(name, map[string]any{})
		if r.Status != kproto.StatusDenied || r.Code != kproto.CodeToolUnavailable {
			t.Errorf("%s = %+v, want denied tool_unavailable", name, r)
		}
	}
	h.stop()
	if calls := u.calls(); len(calls) != 0 {
		t.Errorf("the upstream received %v", calls)
	}
	var asked []string
	for _, e := range eventsNamed(h.events(), audit.EventToolInvoked) {
		asked = append(asked, e.Tool+" "+e.Code)
	}
	if want := []string{"test.env tool_unavailable", "test.nosuch tool_unavailable", "nosuch.echo tool_unavailable"}; !reflect.DeepEqual(asked, want) {
		t.Errorf("records %v, want %v (each with the name as asked)", asked, want)
	}
}

// TestAnActingBrokeredCallIsOnTheRecordBeforeTheUpstreamSeesIt: a tool
// whose action is not read, list or search records tool.authorized, and
// syncs it, before the call is forwarded; when that record cannot be
// written the upstream is never called.
func TestAnActingBrokeredCallIsOnTheRecordBeforeTheUpstreamSeesIt(t *testing.T) {
	sink := &failingSink{}
	h, u := startBrokered(t, brokerGrants(t, "fail", "env"), brokerTools, failing(sink))
	c := h.dial()
	c.hello("claude-code")
	c.list()
	r := c.invoke("test.env", map[string]any{})
	if r.Status != kproto.StatusSucceeded {
		t.Fatalf("test.env = %+v", r)
	}
	sink.fail.Store(true)
	r = c.invoke("test.fail", map[string]any{})
	if r.Status != kproto.StatusFailed || r.Code != codeAuditUnavailable {
		t.Errorf("test.fail with the log down = %+v, want audit_unavailable", r)
	}
	sink.fail.Store(false)
	h.stop()
	if got := u.calls(); !reflect.DeepEqual(got, []string{"env"}) {
		t.Errorf("the upstream received %v, want only env: nothing acts unrecorded", got)
	}
	evs := h.events()
	auth := eventsNamed(evs, audit.EventToolAuthorized)
	if len(auth) != 1 || auth[0].Tool != "test.env" || auth[0].Upstream != "test" || auth[0].Resource != "test:/env" || auth[0].Action != "call" || auth[0].Seq != 1 {
		t.Fatalf("tool.authorized = %+v, want one for test.env", auth)
	}
	// The decision comes before the outcome.
	ia, ii := slices.IndexFunc(evs, func(e audit.Event) bool { return e.Event == audit.EventToolAuthorized }), slices.IndexFunc(evs, func(e audit.Event) bool { return e.Event == audit.EventToolInvoked })
	if ia < 0 || ii < ia {
		t.Errorf("tool.authorized at %d, tool.invoked at %d", ia, ii)
	}
}

// TestBrokeredReadsOverlapAndProgressIsRelayed: hold and release are
// configured read, so hold (which waits for release) does not hold up
// release; hold's progress through the Go SDK client reaches the shim as
// call.progress before its answer.
func TestBrokeredReadsOverlapAndProgressIsRelayed(t *testing.T) {
	h, _ := startBrokered(t, brokerGrants(t), brokerTools)
	c := h.dial()
	c.hello("claude-code")
	c.list()
	holdID := c.send(kproto.MethodInvoke, c.invokeParams("hold-1", "test.hold", map[string]any{"id": "a"}))
	var progress []kproto.ProgressParams
	for len(progress) < 3 {
		m := c.recv()
		if m.Method != kproto.MethodProgress {
			t.Fatalf("got %s before hold's progress", m.Result)
		}
		var p kproto.ProgressParams
		if err := json.Unmarshal(m.Params, &p); err != nil {
			t.Fatal(err)
		}
		progress = append(progress, p)
	}
	for i, p := range progress {
		if p.CallID != "hold-1" || p.Progress != float64(i+1) || p.Total == nil || *p.Total != 3 || p.Message != "step "+string(rune('1'+i)) {
			t.Errorf("progress %d = %+v", i, p)
		}
	}
	relID := c.send(kproto.MethodInvoke, c.invokeParams("rel-1", "test.release", map[string]any{"id": "a"}))
	got := map[string]kproto.InvokeResult{}
	for len(got) < 2 {
		m := c.recv()
		if m.Method != "" {
			continue
		}
		got[string(m.ID)] = invokeResult(t, m)
	}
	if r := got[strconv.Itoa(holdID)]; r.Status != kproto.StatusSucceeded || contentText(t, r.Content) != "released a" {
		t.Errorf("hold = %+v", r)
	}
	if r := got[strconv.Itoa(relID)]; r.Status != kproto.StatusSucceeded {
		t.Errorf("release = %+v", r)
	}
}

func TestBrokeredFailuresAreResults(t *testing.T) {
	h, _ := startBrokered(t, brokerGrants(t, "fail", "rpcerror", "huge"), brokerTools, func(s *Server) { s.MaxLine = 256 << 10 })
	c := h.dial()
	c.hello("claude-code")
	c.list()
	r := c.invoke("test.fail", map[string]any{})
	if r.Status != kproto.StatusFailed || r.Code != kproto.CodeUpstreamError || !strings.Contains(r.Message, "it went wrong") || r.Retryable != nil {
		t.Errorf("isError = %+v, want failed upstream_error with the upstream's text", r)
	}
	r = c.invoke("test.rpcerror", map[string]any{})
	if r.Status != kproto.StatusFailed || r.Code != kproto.CodeUpstreamError || !strings.Contains(r.Message, "no such thing") {
		t.Errorf("JSON-RPC error = %+v", r)
	}
	// The result bound follows MaxLine: 256 KiB less the envelope.
	r = c.invoke("test.huge", map[string]any{"bytes": 200 << 10})
	if r.Status != kproto.StatusFailed || r.Code != kproto.CodeTooLarge {
		t.Errorf("a 200 KiB result under a 256 KiB line = %+v, want too_large", r)
	}
	r = c.invoke("test.huge", map[string]any{"bytes": 1000})
	if r.Status != kproto.StatusSucceeded || len(contentText(t, r.Content)) != 1000 {
		t.Errorf("the turn goes on after too_large: %+v", r)
	}
}

func TestASlowBrokeredCallTimesOutAndOneCancelledIsCancelledUpstream(t *testing.T) {
	stderr := newStderrLog()
	h, _ := startBrokered(t, brokerGrants(t, "slow"), "call_timeout = \"500ms\"\n"+brokerTools, logStderr(stderr))
	c := h.dial()
	c.hello("claude-code")
	c.list()
	// slow may have an effect (it is not classified read): the upstream
	// received it, so it may have acted, and a model told to retry would
	// do it twice (on the code before, it was retryable).
	r := c.invoke("test.slow", map[string]any{"id": "timed"})
	if r.Status != kproto.StatusFailed || r.Code != kproto.CodeUpstreamTimeout || r.Retryable != nil || !strings.Contains(r.Message, "it may have acted") {
		t.Errorf("slow = %+v, want failed upstream_timeout, not retryable, saying it may have acted", r)
	}
	// The upstream was sent notifications/cancelled: its handler ended.
	stderr.wait(t, "cancelled timed")
	// A read that times out did nothing: it may be tried again.
	r = c.invoke("test.hold", map[string]any{"id": "timed-read"})
	if r.Status != kproto.StatusFailed || r.Code != kproto.CodeUpstreamTimeout || r.Retryable == nil || !*r.Retryable {
		t.Errorf("hold = %+v, want failed upstream_timeout, retryable", r)
	}
	stderr.wait(t, "cancelled timed-read")
	// hold reports progress once it runs at the upstream: cancel it then.
	c2 := h.dial()
	c2.hello("claude-code")
	c2.list()
	id := c2.send(kproto.MethodInvoke, c2.invokeParams("hold-2", "test.hold", map[string]any{"id": "cancelled"}))
	m := c2.recv()
	if m.Method != kproto.MethodProgress {
		t.Fatalf("got %+v, want hold's progress", m)
	}
	c2.notify(kproto.MethodCancel, kproto.CancelParams{CallID: "hold-2"})
	for m.Method != "" {
		m = c2.recv()
	}
	if string(m.ID) != strconv.Itoa(id) {
		t.Fatalf("answer %+v", m)
	}
	if r := invokeResult(t, m); r.Status != kproto.StatusFailed || r.Code != kproto.CodeCancelled {
		t.Errorf("cancelled hold = %+v", r)
	}
	stderr.wait(t, "cancelled cancelled")
}

func TestAnUpstreamCrashMidCallFailsTheCallAndItIsRestarted(t *testing.T) {
	h, u := startBrokered(t, brokerGrants(t, "crash"), brokerTools)
	c := h.dial()
	c.hello("claude-code")
	c.list()
	from := u.events.len()
	// crash is not classified read, and its upstream received it before
	// it died: it may have acted, so it is not retryable.
	r := c.invoke("test.crash", map[string]any{})
	if r.Status != kproto.StatusFailed || r.Code != kproto.CodeUpstreamUnavailable || r.Retryable != nil || !strings.Contains(r.Message, "it may have acted") {
		t.Errorf("crash = %+v, want failed upstream_unavailable, not retryable, saying it may have acted", r)
	}
	u.events.ready(t, from, "test")
	// The open turn's tools reach the restarted upstream: the definitions
	// are the pinned ones.
	if r := c.invoke("test.echo", map[string]any{"text": "again"}); r.Status != kproto.StatusSucceeded {
		t.Errorf("echo after the restart = %+v", r)
	}
	c2 := h.dial()
	c2.hello("claude-code")
	if defs, _ := c2.list(); !hasName(defs, "test.echo") {
		t.Errorf("a turn after the restart lists %v", names(defs))
	}
}

// TestAListChangeAppliesFromTheNextTurnAndAChangedToolIsQuarantined: the
// upstream's change adds a tool and rewrites echo's description. The
// open turn keeps its catalogue; the next one lists the new tool (pinned
// on first sight) and not echo (quarantined) until it is approved, and
// the approval is on the record before the tool is published again.
func TestAListChangeAppliesFromTheNextTurnAndAChangedToolIsQuarantined(t *testing.T) {
	grants := brokerGrants(t, "change", "added")
	h, u := startBrokered(t, grants, brokerTools)
	c := h.dial()
	c.hello("claude-code")
	defs, _ := c.list()
	if hasName(defs, "test.added") || !hasName(defs, "test.echo") {
		t.Fatalf("first turn lists %v", names(defs))
	}
	from := u.events.len()
	if r := c.invoke("test.change", map[string]any{}); r.Status != kproto.StatusSucceeded {
		t.Fatalf("change = %+v", r)
	}
	u.events.waitFrom(t, from, "the list change", func(e upstream.Event) bool {
		return e.Kind == upstream.EventToolsChanged && e.Upstream == "test"
	})
	// The open turn: added is not in its catalogue; echo's definition
	// is no longer what the upstream offers.
	if r := c.invoke("test.added", map[string]any{}); r.Code != kproto.CodeToolUnavailable {
		t.Errorf("added in the open turn = %+v, want tool_unavailable", r)
	}
	if r := c.invoke("test.echo", map[string]any{"text": "x"}); r.Code != kproto.CodeToolUnavailable {
		t.Errorf("the changed echo in the open turn = %+v, want tool_unavailable", r)
	}
	c2 := h.dial()
	c2.hello("claude-code")
	defs, _ = c2.list()
	if !hasName(defs, "test.added") || hasName(defs, "test.echo") {
		t.Errorf("the turn after the change lists %v, want added and not the quarantined echo", names(defs))
	}
	if r := c2.invoke("test.added", map[string]any{}); r.Status != kproto.StatusSucceeded {
		t.Errorf("added = %+v", r)
	}
	approvals, err := upstream.Approve(u.stateDir, "test", "echo", "", time.Now())
	if err != nil || len(approvals) != 1 || !slices.Equal(approvals[0].Changed, []string{"description"}) {
		t.Fatalf("approve = %+v, %v", approvals, err)
	}
	c3 := h.dial()
	c3.hello("claude-code")
	defs, _ = c3.list()
	if !hasName(defs, "test.echo") {
		t.Errorf("after approval the catalogue is %v", names(defs))
	}
	if r := c3.invoke("test.echo", map[string]any{"text": "approved"}); r.Status != kproto.StatusSucceeded {
		t.Errorf("the approved echo = %+v", r)
	}
	h.stop()

	evs := h.events()
	var pins []string
	for _, e := range evs {
		switch e.Event {
		case upstream.EventToolPinned, upstream.EventToolQuarantined:
			if e.Upstream != "test" || len(e.SHA256) != 64 || e.Integration != "" || e.Peer.PID != os.Getpid() {
				t.Errorf("%s record = %+v", e.Event, e)
			}
			pins = append(pins, e.Event+" "+e.Tool+" "+e.Reason+" "+strings.Join(e.Changed, ","))
		}
	}
	for _, want := range []string{
		"upstream.tool.pinned test.echo first_seen ",
		"upstream.tool.quarantined test.echo  description",
		"upstream.tool.pinned test.added first_seen ",
		"upstream.tool.pinned test.echo approved description",
	} {
		if !slices.Contains(pins, want) {
			t.Errorf("no record %q in %q", want, pins)
		}
	}
	// The approval is recorded before the turn that lists echo again.
	approved := slices.IndexFunc(evs, func(e audit.Event) bool {
		return e.Event == upstream.EventToolPinned && e.Reason == upstream.ReasonApproved
	})
	opened := -1
	for i, e := range evs {
		if e.Event == audit.EventTurnOpened {
			opened = i
		}
	}
	if approved < 0 || approved > opened {
		t.Errorf("approval recorded at %d, the last turn opened at %d", approved, opened)
	}
}

// TestAQuarantineAndItsApprovalSurviveAKernelRestart: a kernel whose
// upstream offers another echo than the one pinned by an earlier kernel
// does not publish it; approved while no kernel runs, the next kernel
// records the approval when it starts and publishes it.
func TestAQuarantineAndItsApprovalSurviveAKernelRestart(t *testing.T) {
	u := &testUpstream{}
	state := filepath.Join(t.TempDir(), "state")
	u.stateDir = state
	h := startKernel(t, brokerGrants(t), withTestUpstream(t, u, brokerTools))
	u.events.ready(t, 0, "test")
	c := h.dial()
	c.hello("claude-code")
	if defs, _ := c.list(); !hasName(defs, "test.echo") {
		t.Fatalf("first kernel lists %v", names(defs))
	}
	h.stop()

	u2 := &testUpstream{stateDir: state}
	h2 := startKernel(t, brokerGrants(t), withTestUpstream(t, u2, brokerTools, "-variant", "1"))
	u2.events.ready(t, 0, "test")
	c = h2.dial()
	c.hello("claude-code")
	if defs, _ := c.list(); hasName(defs, "test.echo") {
		t.Errorf("the changed echo is published by the second kernel")
	}
	if r := c.invoke("test.echo", map[string]any{"text": "x"}); r.Code != kproto.CodeToolUnavailable {
		t.Errorf("calling the quarantined echo = %+v", r)
	}
	h2.stop()
	if _, err := upstream.Approve(state, "test", "", "", time.Now()); err != nil {
		t.Fatal(err)
	}

	u3 := &testUpstream{stateDir: state}
	h3 := startKernel(t, brokerGrants(t), withTestUpstream(t, u3, brokerTools, "-variant", "1"))
	u3.events.ready(t, 0, "test")
	c = h3.dial()
	c.hello("claude-code")
	if defs, _ := c.list(); !hasName(defs, "test.echo") {
		t.Errorf("after approval the third kernel lists %v", names(defs))
	}
	h3.stop()
	approved := 0
	for _, e := range eventsNamed(h3.events(), upstream.EventToolPinned) {
		if e.Reason == upstream.ReasonApproved && e.Tool == "test.echo" {
			approved++
		}
	}
	if approved != 1 {
		t.Errorf("the third kernel recorded %d approvals of echo, want 1", approved)
	}
}

// TestTheUpstreamGetsOnlyItsConfiguredEnvironment: of the kernel's
// environment, only PATH and HOME reach an upstream.
func TestTheUpstreamGetsOnlyItsConfiguredEnvironment(t *testing.T) {
	t.Setenv("SHAREDOS_TEST_SECRET", "kernel-only-3c1f")
	h, _ := startBrokered(t, brokerGrants(t, "env"), "env = { GORACE = \"atexit_sleep_ms=0\", GIVEN = \"yes\" }\n"+brokerTools)
	c := h.dial()
	c.hello("claude-code")
	c.list()
	r := c.invoke("test.env", map[string]any{})
	if r.Status != kproto.StatusSucceeded {
		t.Fatalf("env = %+v", r)
	}
	var keys []string
	for _, line := range strings.Split(contentText(t, r.Content), "\n") {
		k, _, _ := strings.Cut(line, "=")
		keys = append(keys, k)
	}
	if want := []string{"GIVEN", "GORACE", "HOME", "PATH"}; !reflect.DeepEqual(keys, want) {
		t.Errorf("the upstream's environment has %v, want %v", keys, want)
	}
}

// TestAReloadReplacesTheUpstreamsForNewTurns: removing an upstream stops
// it; an open turn's calls to its tools are refused tool_unavailable (not
// retryable: it is gone, not restarting) and new turns do not list it;
// adding it back starts it again.
func TestAReloadReplacesTheUpstreamsForNewTurns(t *testing.T) {
	h, u := startBrokered(t, brokerGrants(t), brokerTools)
	c := h.dial()
	c.hello("claude-code")
	c.list()
	specs := h.srv.Upstreams
	if err := h.srv.SetUpstreams(nil); err != nil {
		t.Fatal(err)
	}
	if r := c.invoke("test.echo", map[string]any{"text": "x"}); r.Status != kproto.StatusDenied || r.Code != kproto.CodeToolUnavailable || r.Retryable == nil || *r.Retryable {
		t.Errorf("echo after its upstream was removed = %+v, want denied tool_unavailable, not retryable", r)
	}
	c2 := h.dial()
	c2.hello("claude-code")
	if defs, _ := c2.list(); hasName(defs, "test.echo") {
		t.Errorf("a new turn lists the removed upstream's tools: %v", names(defs))
	}
	from := u.events.len()
	if err := h.srv.SetUpstreams(specs); err != nil {
		t.Fatal(err)
	}
	u.events.ready(t, from, "test")
	c3 := h.dial()
	c3.hello("claude-code")
	if defs, _ := c3.list(); !hasName(defs, "test.echo") {
		t.Errorf("after adding it back: %v", names(defs))
	}
	if r := c3.invoke("test.echo", map[string]any{"text": "back"}); r.Status != kproto.StatusSucceeded {
		t.Errorf("echo after it was added back = %+v", r)
	}
	// An unchanged upstream is left running through a reload.
	before := u.events.len()
	if err := h.srv.SetUpstreams(specs); err != nil {
		t.Fatal(err)
	}
	if r := c3.invoke("test.echo", map[string]any{"text": "still"}); r.Status != kproto.StatusSucceeded {
		t.Errorf("echo after an unchanged reload = %+v", r)
	}
	if after := u.events.len(); after != before {
		t.Errorf("an unchanged reload caused %d upstream events", after-before)
	}

	// A changed [[upstream]] is restarted: another process, and the open
	// turn's tools, whose definitions are unchanged, reach it.
	pid := h.srv.brokers.set.Load().get("test").m.Status()[0].PID
	changed := slices.Clone(specs)
	changed[0].Env = map[string]string{"GORACE": "atexit_sleep_ms=0", "CHANGED": "1"}
	from = u.events.len()
	if err := h.srv.SetUpstreams(changed); err != nil {
		t.Fatal(err)
	}
	u.events.ready(t, from, "test")
	if now := h.srv.brokers.set.Load().get("test").m.Status()[0].PID; now == pid || now == 0 {
		t.Errorf("after a changed reload the upstream's pid is %d, was %d", now, pid)
	}
	if r := c3.invoke("test.echo", map[string]any{"text": "restarted"}); r.Status != kproto.StatusSucceeded {
		t.Errorf("echo after a changed reload = %+v", r)
	}
}

func TestAKernelWithOnlyUpstreamsServesNoFileTools(t *testing.T) {
	h, _ := startBrokered(t, brokerGrants(t), brokerTools, func(s *Server) { s.Root = "" })
	c := h.dial()
	c.hello("claude-code")
	defs, _ := c.list()
	for _, d := range defs {
		if d.Namespace == "files" {
			t.Errorf("a kernel without a files root lists %s", d.Name)
		}
	}
	if !hasName(defs, "test.echo") {
		t.Errorf("lists %v", names(defs))
	}
	if r := c.invoke("files.read", map[string]any{"path": "/public/a.txt"}); r.Code != kproto.CodeToolUnavailable {
		t.Errorf("files.read = %+v", r)
	}
}

// TestTheCatalogueHoldsAtMostMaxToolsBrokeredOnesIncluded: the whole
// catalogue is capped, the kernel's own tools first.
func TestTheCatalogueHoldsAtMostMaxToolsBrokeredOnesIncluded(t *testing.T) {
	h, _ := startBrokered(t, brokerGrants(t), brokerTools)
	got := h.srv.brokeredCatalogue("claude-code", time.Now(), 2)
	if len(got) != 2 || got[0].def.Name != "test.echo" || got[1].def.Name != "test.get_issue" {
		var n []string
		for _, tl := range got {
			n = append(n, tl.def.Name)
		}
		t.Errorf("with room for 2: %v, want the first two by name", n)
	}
	if n := len(h.srv.brokeredCatalogue("claude-code", time.Now(), hashing.MaxTools)); n != 5 {
		t.Errorf("with room: %d brokered tools, want 5", n)
	}
}

// TestBrokeredCodesAreTheProtocols: the codes a brokered call fails with
// are the ones docs/kernel-protocol.md and internal/kproto name.
func TestBrokeredCodesAreTheProtocols(t *testing.T) {
	for _, c := range [][2]string{
		{upstream.CodeUpstreamError, kproto.CodeUpstreamError},
		{upstream.CodeUpstreamTimeout, kproto.CodeUpstreamTimeout},
		{upstream.CodeUpstreamUnavailable, kproto.CodeUpstreamUnavailable},
		{upstream.CodeTooLarge, kproto.CodeTooLarge},
		{upstream.CodeToolUnavailable, kproto.CodeToolUnavailable},
		{upstream.CodeInvalidArguments, kproto.CodeInvalidArguments},
		{upstream.CodeCancelled, kproto.CodeCancelled},
	} {
		if c[0] != c[1] {
			t.Errorf("upstream code %q, protocol code %q", c[0], c[1])
		}
	}
}
