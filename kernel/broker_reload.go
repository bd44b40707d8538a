package kernel

import (
	"github.com/sharedos/sharedos-mcp/internal/kproto"
)

// brokerNow returns the upstream that serves a call of the brokered tool
// tl now, and the call as the audit begins it, or a nil broker and the
// call's refusal. A turn's catalogue is the tools as they were when it
// opened; a config reload since may have removed the upstream or
// reclassified the tool (another [[upstream.tool]] action or resource,
// or host_paths turned on or off). Either is tool_unavailable, decided on
// the config as it is now: the call is never decided, recorded or
// forwarded on a classification a reload replaced, and, refused before
// it runs, it cannot take effect out of the order (docs/adr/0018) its
// new action would have put it in. The one broker returned is both what
// the call is checked against and what runs it, so a reload that lands
// in between finds this one closed, never a newer one running the old
// classification.
func (t *turn) brokerNow(tl *tool) (*broker, call, outcome) {
	ut := tl.brokered
	b := t.s.brokers.set.Load().get(ut.Upstream)
	if b == nil {
		return nil, call{upstream: ut.Upstream}, denied(kproto.CodeToolUnavailable,
			"%s is no longer served: its upstream %s was removed from the kernel's config", tl.def.Name, ut.Upstream)
	}
	if !ut.ClassifiedBy(&b.spec) {
		c, now := call{upstream: ut.Upstream}, "unpublishable"
		if ts, ok := b.spec.Tool(ut.UpstreamTool); ok {
			c.action, now = ts.Action, ts.Action+" on "+ut.Upstream+":"+ts.Resource.String()
		}
		t.s.Log.Info().Str("integration", t.name).Str("executionId", t.execID).Str("tool", tl.def.Name).
			Str("catalogue", ut.Action+" on "+ut.Upstream+":"+ut.Resource.String()).Str("now", now).
			Msg("refused a call: a reload reclassified the tool after the turn's catalogue was taken")
		return nil, c, denied(kproto.CodeToolUnavailable,
			"%s was reclassified by a reload of the kernel's config after this turn's catalogue was taken, so it is not called; a new turn lists it if the grants allow it as it is now", tl.def.Name)
	}
	return b, call{action: tl.action, upstream: ut.Upstream}, outcome{}
}
