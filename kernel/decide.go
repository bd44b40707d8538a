package kernel

import (
	"context"
	"fmt"
	"time"

	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
	"github.com/sharedos/sharedos-mcp/policy"
)

// decision is a call's grant decision, kept with the call for its
// record: the verdict, what was asked, and the policy it was asked of.
type decision struct {
	v   policy.Verdict
	req policy.Request
	pol *Policy
}

// maxNearest is how many of the grants that came nearest to allowing a
// refused call its tool.invoked names.
const maxNearest = 3

// authorize decides the turn's call c on resource r with action
// (policy.Rules.Decide, at every level of the turn's integration's
// chain) and, when it is allowed without asking anyone, charges it to
// its grants' budgets at once. A call the grants allow only once a
// person approves it is held here until they do (awaitApproval), and
// charged when it runs. via is added to a refusal's message (a file
// tool's "a link on the way leads ..."). The decision is kept in c for
// the call's record.
func (t *turn) authorize(ctx context.Context, c *call, r policy.Resource, action, via string) (outcome, bool) {
	pol := t.s.currentPolicy()
	req := policy.Request{Integration: t.name, Resource: r, Action: action, Time: t.s.Now()}
	v := t.s.budgets.decide(&pol.rules, req, t.budget)
	c.decided = &decision{v: v, req: req, pol: pol}
	if v.Decision != policy.Allowed {
		return refusal(v, action, shown(c.requested), via), false
	}
	if v.Ask != "" {
		return t.awaitApproval(ctx, c)
	}
	return outcome{}, true
}

// refusal is what the model reads of a call the grants refused: short,
// naming no grant (the grants are not the model's to read), and for a
// child that its parent's refusal is why.
func refusal(v policy.Verdict, action, resource, via string) outcome {
	whose := ""
	for i, lv := range v.Levels {
		if lv.Decision == v.Decision {
			if i > 0 {
				whose = fmt.Sprintf(" to %s, whose child this integration is (a child may do only what its parent may)", lv.Integration)
			}
			break
		}
	}
	switch v.Decision {
	case policy.GrantExpired:
		return denied(kproto.CodeGrantExpired, "the grant for %s on %s has expired%s%s", action, resource, whose, via)
	case policy.RateLimited:
		if v.TurnLimited {
			return denied(kproto.CodeRateLimited, "a grant's limit of calls per turn is used up for %s on %s%s; this turn cannot make this call again, a new turn starts afresh", action, resource, whose)
		}
		o := denied(kproto.CodeRateLimited, "a grant's limit of calls is used up for %s on %s%s; retry in %s (retryAfterMs %d)",
			action, resource, whose, roundUp(v.RetryAfter), v.RetryAfter.Milliseconds())
		o.retryable, o.retryAfter = true, v.RetryAfter
		return o
	}
	return denied(kproto.CodeNoMatchingGrant, "no grant allows %s on %s%s%s", action, resource, whose, via)
}

// roundUp shows a wait in whole seconds, never less than the wait.
func roundUp(d time.Duration) time.Duration {
	if r := d.Round(time.Second); r >= d {
		return r
	}
	return d.Round(time.Second) + time.Second
}

// chargeApproved charges an approved call's grants when it runs after
// its approval, every budget or none, and reports the refusal to answer
// when one of them has no room left by then. Calls allowed without
// asking are charged by authorize.
func (t *turn) chargeApproved(c *call) (outcome, bool) {
	d := c.decided
	ok, retry, turn := t.s.budgets.chargeApproved(d.v, t.s.Now(), t.budget)
	if ok {
		return outcome{}, true
	}
	v := d.v
	v.Decision, v.RetryAfter, v.TurnLimited = policy.RateLimited, retry, turn
	return refusal(v, d.req.Action, shown(c.requested), ""), false
}

// grantRefs are the deciding grant of each level of an allowed (or
// asked) decision, for its record.
func (d *decision) grantRefs() []audit.GrantRef {
	if d == nil || d.v.Decision != policy.Allowed {
		return nil
	}
	refs := make([]audit.GrantRef, 0, len(d.v.Levels))
	for _, lv := range d.v.Levels {
		refs = append(refs, audit.GrantRef{Integration: lv.Integration, Grant: lv.Grant + 1, Line: d.pol.grantLine(lv.Grant), Ask: lv.Ask})
	}
	return refs
}

// nearest are the grants that came nearest to allowing a refused call,
// for its record.
func (d *decision) nearest(b *budgets, turn turnCounts) []audit.GrantRef {
	if d == nil || d.v.Decision == policy.Allowed {
		return nil
	}
	checks := b.explain(&d.pol.rules, d.req, turn)
	refs := make([]audit.GrantRef, 0, maxNearest)
	for _, ch := range checks[:min(len(checks), maxNearest)] {
		refs = append(refs, audit.GrantRef{Integration: ch.Integration, Grant: ch.Grant + 1, Line: d.pol.grantLine(ch.Grant), Failed: string(ch.Failed)})
	}
	return refs
}

// allowedBeyond answers a file tool asking about a resource it reaches
// beyond the one its call was decided on (files.search reading a file,
// files.list showing where a link leads): allowed at every level without
// asking anyone. It charges nothing: the call was charged once.
func (t *turn) allowedBeyond(r policy.Resource, action string) bool {
	pol := t.s.currentPolicy()
	v := pol.rules.Decide(policy.Request{Integration: t.name, Resource: r, Action: action, Time: t.s.Now()}, policy.NoCounters{})
	return v.Decision == policy.Allowed && v.Ask == ""
}
