package kernel

import (
	"strings"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
)

// wantOutcomeUnrecorded checks the answer to a call that acted, or may
// have, whose outcome could not be recorded: never refused, never
// retryable, its result withheld, and saying it may have taken effect.
func wantOutcomeUnrecorded(t *testing.T, what string, r kproto.InvokeResult) {
	t.Helper()
	if r.Status != kproto.StatusFailed || r.Code != codeOutcomeUnrecorded || r.Retryable == nil || *r.Retryable ||
		!strings.Contains(r.Message, "Do not repeat it") {
		t.Errorf("%s: %+v, want failed outcome_unrecorded, retryable false, saying not to repeat it", what, r)
	}
	if len(r.Content) > 0 || len(r.Output) > 0 {
		t.Errorf("%s handed out a result it could not record: %s %s", what, r.Content, r.Output)
	}
}

// TestACallThatMayHaveActedIsNeverToldToRetry: when a call's outcome
// cannot be recorded, what the answer says depends on whether the call
// reached what it acts on. A brokered call with an effect that its
// upstream received may have acted even when the upstream answered an
// error: outcome_unrecorded, not retryable (on the code before, it was
// audit_unavailable, retryable, "nothing was done"). So is an
// escalation, which took effect. A brokered call its upstream never
// received (the upstream is not running), and a read, did nothing:
// audit_unavailable, retryable.
func TestACallThatMayHaveActedIsNeverToldToRetry(t *testing.T) {
	sink := &failingSink{failOn: audit.EventToolInvoked}
	tools := brokerTools + `
[[upstream.tool]]
name = "fail"
action = "write"
resource = "/fail"
`
	grants := append(brokerGrants(t), grant(t, "integration:claude-code", "test:/fail", false, "write"),
		grant(t, "integration:claude-code", "sharedos:/escalate", false, "escalate"))
	h, u := startBrokered(t, grants, tools, failing(sink))
	c := h.dial()
	c.hello("claude-code")
	c.list()
	sink.fail.Store(true)
	wantOutcomeUnrecorded(t, "a brokered write its upstream answered with an error", c.invoke("test.fail", map[string]any{}))
	wantAuditUnavailable(t, "a brokered read", c.invoke("test.echo", map[string]any{"text": "x"}))

	// The same tools, classified the same way, on an upstream that cannot
	// start: the call never reaches it.
	specs := upstreamSpecs(t, testUpstreamTable(t, "test", u.record, tools))
	specs[0].Command = []string{"/nonexistent/upstream"}
	if err := h.srv.SetUpstreams(specs); err != nil {
		t.Fatal(err)
	}
	wantAuditUnavailable(t, "a brokered write its upstream never received", c.invoke("test.fail", map[string]any{}))

	wantOutcomeUnrecorded(t, "sharedos.escalate", c.invoke("sharedos.escalate", map[string]any{"reason": "help"}))
	sink.fail.Store(false)
	if r := c.invoke("test.echo", map[string]any{"text": "x"}); r.Code != kproto.CodeEscalationPending {
		t.Errorf("a call after the escalation that took effect = %+v, want escalation_pending", r)
	}
	h.stop()
	if got := u.calls(); len(got) != 2 || got[0] != "fail" || got[1] != "echo" {
		t.Errorf("the upstream received %v, want fail and echo, once each", got)
	}
}
