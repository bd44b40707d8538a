package kernel

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
	"github.com/sharedos/sharedos-mcp/policy"
)

// purgeAsRead is issue 24's config A: purge reads the graph, and
// claude-code may read it. purgeAsWrite is its config B: purge writes
// /purge, which no grant gives.
const (
	purgeAsRead = brokerTools + `
[[upstream.tool]]
name = "purge"
action = "read"
resource = "/graph"
`
	purgeAsWrite = brokerTools + `
[[upstream.tool]]
name = "purge"
action = "write"
resource = "/purge"
`
)

func purgeGrants(t *testing.T) []policy.Grant {
	return append(brokerGrants(t), grant(t, "integration:claude-code", "test:/graph", false, "read"))
}

// TestAReloadThatReclassifiesAToolReachesOpenTurns: a turn opened under
// config A lists test.purge as a read of /graph. A reload to config B
// makes purge a write on /purge, granted to nobody: a new turn does not
// list it, and the open turn's call of it is refused tool_unavailable,
// saying a reload reclassified it, while the upstream restarts and once
// it is ready again; the upstream never runs it, and the audit records
// it with its action now, never as a read of /graph. A reload back to A
// makes the open turn's catalogue true again. On the code before, the
// open turn's call was decided and recorded as a read of /graph, and
// the upstream ran it.
func TestAReloadThatReclassifiesAToolReachesOpenTurns(t *testing.T) {
	h, u := startBrokered(t, purgeGrants(t), purgeAsRead)
	c := h.dial()
	c.hello("claude-code")
	if defs, _ := c.list(); !hasName(defs, "test.purge") {
		t.Fatalf("config A does not publish test.purge: %v", names(defs))
	}
	if r := c.invoke("test.echo", map[string]any{"text": "before"}); r.Status != kproto.StatusSucceeded {
		t.Fatalf("echo before the reload = %+v", r)
	}
	from := u.events.len()
	if err := h.srv.SetUpstreams(upstreamSpecs(t, testUpstreamTable(t, "test", u.record, purgeAsWrite))); err != nil {
		t.Fatal(err)
	}
	wantReclassified := func(when string, r kproto.InvokeResult) {
		t.Helper()
		if r.Status != kproto.StatusDenied || r.Code != kproto.CodeToolUnavailable || r.Retryable == nil || *r.Retryable ||
			!strings.Contains(r.Message, "test.purge was reclassified by a reload of the kernel's config") {
			t.Errorf("purge %s = %+v, want denied tool_unavailable, not retryable, saying a reload reclassified it", when, r)
		}
	}
	// Decided on the config as it is now, whether or not the restarted
	// upstream is ready yet.
	wantReclassified("at once after the reload", c.invoke("test.purge", map[string]any{}))
	u.events.ready(t, from, "test")
	wantReclassified("once the upstream is ready again", c.invoke("test.purge", map[string]any{}))
	if r := c.invoke("test.echo", map[string]any{"text": "after"}); r.Status != kproto.StatusSucceeded {
		t.Errorf("echo, which the reload did not reclassify, = %+v", r)
	}
	c2 := h.dial()
	c2.hello("claude-code")
	if defs, _ := c2.list(); hasName(defs, "test.purge") {
		t.Errorf("a new turn lists test.purge, which config B grants to nobody")
	}

	// Config A again: the open turn's catalogue says what the config says.
	from = u.events.len()
	if err := h.srv.SetUpstreams(upstreamSpecs(t, testUpstreamTable(t, "test", u.record, purgeAsRead))); err != nil {
		t.Fatal(err)
	}
	u.events.ready(t, from, "test")
	if r := c.invoke("test.purge", map[string]any{}); r.Status != kproto.StatusSucceeded {
		t.Errorf("purge once the config is A again = %+v", r)
	}
	h.stop()
	if got := u.calls(); !slices.Equal(got, []string{"echo", "echo", "purge"}) {
		t.Errorf("the upstream received %v, want echo, echo and only the purge made under config A", got)
	}
	var purges []audit.Event
	for _, e := range h.events() {
		if e.Tool == "test.purge" && (e.Event == audit.EventToolInvoked || e.Event == audit.EventToolAuthorized) {
			purges = append(purges, e)
		}
	}
	if len(purges) != 3 {
		t.Fatalf("test.purge calls recorded %+v, want three tool.invoked", purges)
	}
	for i, e := range purges[:2] {
		if e.Event != audit.EventToolInvoked || e.Action != "write" || e.Resource != "" || e.Code != kproto.CodeToolUnavailable {
			t.Errorf("purge %d under config B is recorded %+v, want its action now (write), no resource decided, tool_unavailable", i+1, e)
		}
	}
	if e := purges[2]; e.Action != "read" || e.Resource != "test:/graph" || e.Status != kproto.StatusSucceeded {
		t.Errorf("purge under config A again is recorded %+v", e)
	}
}

// TestAReclassifiedCallCannotTakeEffectOutOfOrder: the open turn's
// catalogue says purge is a read, so it was admitted to run alongside
// the reads before it (docs/adr/0018). After a reload made it a write it
// must wait for them, or not run: it is refused while test.hold, before
// it, still runs, and it never reaches the upstream. On the code before,
// purge ran at once, beside the hold its new action should have waited
// for.
func TestAReclassifiedCallCannotTakeEffectOutOfOrder(t *testing.T) {
	h, u := startBrokered(t, purgeGrants(t), purgeAsRead)
	c := h.dial()
	c.hello("claude-code")
	c.list()
	from := u.events.len()
	writeGrants := append(purgeGrants(t), grant(t, "integration:claude-code", "test:/purge", false, "write"))
	h.srv.SetPolicy(Policy{Grants: writeGrants})
	if err := h.srv.SetUpstreams(upstreamSpecs(t, testUpstreamTable(t, "test", u.record, purgeAsWrite))); err != nil {
		t.Fatal(err)
	}
	u.events.ready(t, from, "test")
	holdID := c.send(kproto.MethodInvoke, c.invokeParams("hold-1", "test.hold", map[string]any{"id": "a"}))
	purgeID := c.send(kproto.MethodInvoke, c.invokeParams("purge-1", "test.purge", map[string]any{}))
	// hold answers only once released; the first answer is purge's.
	m := c.recv()
	for m.Method != "" {
		m = c.recv()
	}
	if string(m.ID) != strconv.Itoa(purgeID) {
		t.Fatalf("answer %s came first, want purge's (%d), refused while hold (%d) runs", m.ID, purgeID, holdID)
	}
	if r := invokeResult(t, m); r.Status != kproto.StatusDenied || r.Code != kproto.CodeToolUnavailable {
		t.Errorf("purge beside a running hold = %+v, want denied tool_unavailable: it is a write now, and may not run beside hold", r)
	}
	c2 := h.dial()
	c2.hello("claude-code")
	c2.list()
	if r := c2.invoke("test.release", map[string]any{"id": "a"}); r.Status != kproto.StatusSucceeded {
		t.Fatalf("release = %+v", r)
	}
	m = c.recv()
	for m.Method != "" {
		m = c.recv()
	}
	if r := invokeResult(t, m); string(m.ID) != strconv.Itoa(holdID) || r.Status != kproto.StatusSucceeded {
		t.Errorf("hold = %s %+v", m.ID, r)
	}
	h.stop()
	if slices.Contains(u.calls(), "purge") {
		t.Errorf("the upstream ran purge: %v", u.calls())
	}
}
