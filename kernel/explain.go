package kernel

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/kernel/config"
	"github.com/sharedos/sharedos-mcp/kernel/files"
	"github.com/sharedos/sharedos-mcp/kernel/status"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
	"github.com/sharedos/sharedos-mcp/policy"
)

// found is a tool an explanation looked up by name: the tool (nil when
// it cannot be called at all, with why in unavailable and detail).
type found struct {
	tl                  *tool
	unavailable, detail string
}

// ErrInvalidIntegration is an explanation asked for a name no hello
// could give.
var ErrInvalidIntegration = errors.New("invalid integration name: use 1-64 letters, digits, spaces, '-', '_' or '.'")

// Explain decides the call p describes exactly as a turn of
// p.Integration would now (the live grants at every level of its chain,
// its catalogue, the budgets' counts) without running it, charging it or
// calling any upstream: kernel.explain's answer. A turn_limit is counted
// as in a new turn.
func (s *Server) Explain(p kproto.ExplainParams) (kproto.ExplainResult, error) {
	b := s.budgets
	if b == nil { // not serving yet: nothing has been charged
		b, _ = openBudgets("", s.Log, s.now())
	}
	return explain(s.currentPolicy(), b, s.Config.File, p, s.now(), s.findTool)
}

// findTool finds a tool of this kernel by name: a built-in one, or one a
// running upstream offers (published or withheld).
func (s *Server) findTool(name string) found {
	for _, tl := range s.tools {
		if tl.def.Name == name {
			return found{tl: tl}
		}
	}
	up, tool, ok := strings.Cut(name, ".")
	b := s.brokers.set.Load().get(up)
	if !ok || b == nil {
		return found{unavailable: kproto.UnavailableNotRegistered, detail: notRegistered(name)}
	}
	snap := b.m.Snapshot()
	for _, ut := range snap.Tools {
		if ut.Name == name {
			tl, err := newBrokeredTool(ut)
			if err != nil {
				return found{unavailable: kproto.UnavailableQuarantined, detail: "its definition cannot be encoded"}
			}
			return found{tl: tl}
		}
	}
	for _, w := range snap.Withheld {
		if w.Name == name {
			return found{unavailable: kproto.UnavailableQuarantined, detail: fmt.Sprintf("the kernel withholds it (%s): %s", w.Reason, w.Detail)}
		}
	}
	for _, st := range snap.Upstreams {
		if st.Name == up && st.State != upstream.StateReady {
			d := fmt.Sprintf("its upstream %s is %s", up, st.State)
			if st.Reason != "" {
				d += ": " + st.Reason
			}
			return found{unavailable: kproto.UnavailableUpstreamNotReady, detail: d}
		}
	}
	return found{unavailable: kproto.UnavailableNotRegistered, detail: fmt.Sprintf("the upstream %s does not offer a tool named %q", up, tool)}
}

func notRegistered(name string) string {
	return fmt.Sprintf("no tool is named %q: not a tool of the kernel, nor of an upstream it brokers", name)
}

// ExplainFromConfig is Explain without a running kernel: from c, the
// budgets the kernel last saved and the upstream status it last wrote in
// stateDir ("" when there is none). What only a running kernel knows (the
// tools an upstream offers beyond those the config names, their pinned
// definitions now) is said in the result's notes.
func ExplainFromConfig(c config.Config, stateDir string, p kproto.ExplainParams, now time.Time) (kproto.ExplainResult, error) {
	pol := PolicyOf(c)
	pol.rules = c.Rules()
	b, err := openBudgets(stateDir, zerolog.Nop(), now)
	var notes []string
	switch {
	case err != nil:
		b, _ = openBudgets("", zerolog.Nop(), now)
		notes = append(notes, "the budgets' counts could not be read ("+err.Error()+"): limits are taken as unused")
	case stateDir == "":
		notes = append(notes, "no state directory: limits are taken as unused")
	}
	var report *status.Report
	if stateDir != "" {
		if r, err := status.Read(stateDir); err == nil {
			report = &r
		}
	}
	tools := registry()
	if c.Root == "" {
		tools = slices.DeleteFunc(tools, func(t *tool) bool { return t.scope.Namespace == files.Namespace })
	}
	find := func(name string) found {
		for _, tl := range tools {
			if tl.def.Name == name {
				return found{tl: tl}
			}
		}
		return configuredTool(c, report, name)
	}
	r, err := explain(&pol, b, c.File, p, now, find)
	if err != nil {
		return r, err
	}
	if up, _, ok := strings.Cut(r.Tool, "."); ok {
		if u := c.Upstream(up); u != nil {
			notes = append(notes, "whether the upstream offers this tool, and its definition now, are known only to a running kernel; this is decided from the config")
			if u.HostPaths {
				notes = append(notes, "decided on each path as named: the running kernel decides an upstream with host_paths on where the path really leads")
			}
		}
	}
	r.Notes = append(r.Notes, notes...)
	return r, nil
}

// configuredTool is a brokered tool as the config describes it: an
// [[upstream.tool]], or an upstream's other tool (action call on
// /<tool>), unless the kernel last reported it withheld.
func configuredTool(c config.Config, report *status.Report, name string) found {
	up, tool, ok := strings.Cut(name, ".")
	u := c.Upstream(up)
	if !ok || u == nil {
		return found{unavailable: kproto.UnavailableNotRegistered, detail: notRegistered(name)}
	}
	if report != nil {
		for _, st := range report.Upstreams {
			for _, w := range st.Withheld {
				if st.Name == up && w.Name == name {
					return found{unavailable: kproto.UnavailableQuarantined,
						detail: fmt.Sprintf("the kernel withheld it when it last reported (%s): %s", w.Reason, w.Detail)}
				}
			}
		}
	}
	ts, ok := u.Tool(tool)
	if !ok {
		return found{unavailable: kproto.UnavailableNotRegistered, detail: fmt.Sprintf("%q cannot be a tool of the upstream %s", tool, up)}
	}
	ut := &upstream.Tool{Name: name, Upstream: up, UpstreamTool: tool, Action: ts.Action, Resource: ts.Resource, InputSchema: json.RawMessage(`{"type":"object"}`)}
	tl, err := newBrokeredTool(ut)
	if err != nil {
		return found{unavailable: kproto.UnavailableNotRegistered, detail: err.Error()}
	}
	return found{tl: tl}
}

// explain decides p on pol and the counts in b, finding its tool with
// find: the one explanation behind Explain and ExplainFromConfig.
func explain(pol *Policy, b *budgets, file string, p kproto.ExplainParams, now time.Time, find func(string) found) (kproto.ExplainResult, error) {
	if !policy.ValidIntegrationName(p.Integration) {
		return kproto.ExplainResult{}, ErrInvalidIntegration
	}
	r := kproto.ExplainResult{Tool: p.Tool, Chain: pol.Integrations.Chain(p.Integration), Config: file}
	f := find(p.Tool)
	if f.tl == nil {
		refuseWith(&r, denied(kproto.CodeToolUnavailable, "%q is not in this turn's catalogue", p.Tool))
		r.Unavailable, r.UnavailableDetail = f.unavailable, f.detail
		return r, nil
	}
	tl := f.tl
	r.Action = tl.action
	res, o := explainTarget(tl, p.Arguments)
	if o.status != "" {
		refuseWith(&r, o)
		return r, nil
	}
	r.Resource = res.String()
	if tl.resolves {
		r.Notes = append(r.Notes, "decided on the path as named: when the call runs, a link on the way is followed and the grants must cover where it leads")
	}
	req := policy.Request{Integration: p.Integration, Resource: res, Action: tl.action, Time: now}
	v := b.peek(&pol.rules, req, turnCounts{})
	if !pol.rules.Discoverable(p.Integration, tl.catalogScope(), tl.action, now) {
		refuseWith(&r, denied(kproto.CodeToolUnavailable, "%q is not in this turn's catalogue", p.Tool))
		r.Unavailable = kproto.UnavailableNotGranted
		r.UnavailableDetail = notGranted(pol, r.Chain, tl, now)
		r.Checks = explainChecks(pol, b, req)
		return r, nil
	}
	switch {
	case v.Decision != policy.Allowed:
		refuseWith(&r, refusal(v, tl.action, shown(r.Resource), ""))
		r.Checks = explainChecks(pol, b, req)
	case v.Ask != "":
		r.Ask = v.Ask
		refuseWith(&r, denied(kproto.CodeApprovalRequired, "a person must approve this call before it runs"))
	default:
		r.Allowed = true
	}
	if v.Decision == policy.Allowed {
		for _, lv := range v.Levels {
			r.Grants = append(r.Grants, kproto.ExplainGrant{Integration: lv.Integration, Grant: lv.Grant + 1, Line: pol.grantLine(lv.Grant), Ask: lv.Ask})
		}
	}
	return r, nil
}

// notGranted says which levels of chain no grant publishes tl to.
func notGranted(pol *Policy, chain []string, tl *tool, now time.Time) string {
	alone := policy.Rules{Grants: pol.Grants}
	var lacking []string
	for _, name := range chain {
		if !alone.Discoverable(name, tl.catalogScope(), tl.action, now) {
			lacking = append(lacking, name)
		}
	}
	switch {
	case len(lacking) == 0:
		return fmt.Sprintf("grants publish it to %s, but on resources they do not share: a child's catalogue is what it and each ancestor may see at once", strings.Join(chain, " and to "))
	case lacking[0] == chain[0]:
		return "no live grant publishes it to " + chain[0]
	}
	return fmt.Sprintf("no live grant publishes it to %s, whose child %s is: a child's catalogue is what it and each ancestor may see at once", lacking[0], chain[0])
}

// refuseWith sets how the call would be refused.
func refuseWith(r *kproto.ExplainResult, o outcome) {
	res := resultOf(o)
	r.Allowed, r.Status, r.Code, r.Message, r.RetryAfterMs = false, res.Status, res.Code, res.Message, res.RetryAfterMs
}

// explainTarget derives the resource a call of tl with args would be
// decided on, as a turn derives it, or the refusal of arguments it would
// answer.
func explainTarget(tl *tool, args json.RawMessage) (policy.Resource, outcome) {
	if len(args) > 0 && !json.Valid(args) {
		return policy.Resource{}, failed(kproto.CodeInvalidArguments, "%s: the arguments are not JSON", tl.def.Name)
	}
	if tl.brokered != nil {
		res, _, err := tl.brokered.Resolve(args)
		if err != nil {
			return res, failed(kproto.CodeInvalidArguments, "%s: %s", tl.def.Name, strings.TrimPrefix(err.Error(), upstream.ErrInvalidArguments.Error()+": "))
		}
		return res, outcome{}
	}
	parsed, msg := tl.parseArgs(args)
	if msg != "" {
		return policy.Resource{}, failed(kproto.CodeInvalidArguments, "%s: %s", tl.def.Name, msg)
	}
	res, err := tl.target(parsed)
	if err != nil {
		code := kproto.CodeInvalidArguments
		if ae := (*files.ArgError)(nil); errors.As(err, &ae) {
			code = ae.Code
		}
		return res, failed(code, "%s: %v", tl.def.Name, err)
	}
	return res, outcome{}
}

// explainChecks is every grant of every level of req's chain with the
// first condition it fails, nearest first.
func explainChecks(pol *Policy, b *budgets, req policy.Request) []kproto.ExplainGrant {
	var out []kproto.ExplainGrant
	for _, ch := range b.explain(&pol.rules, req, turnCounts{}) {
		g := kproto.ExplainGrant{Integration: ch.Integration, Grant: ch.Grant + 1, Line: pol.grantLine(ch.Grant), Failed: string(ch.Failed), Detail: ch.Detail}
		if ch.Failed == policy.CondAsk {
			g.Ask = pol.Grants[ch.Grant].Ask
		}
		if ch.RetryAfter > 0 {
			ms := ch.RetryAfter.Milliseconds()
			g.RetryAfterMs = &ms
		}
		out = append(out, g)
	}
	return out
}
