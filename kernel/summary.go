package kernel

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sharedos/sharedos-mcp/kernel/config"
	"github.com/sharedos/sharedos-mcp/kernel/files"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
	"github.com/sharedos/sharedos-mcp/policy"
)

// Summarize lists, per grant subject, each tool of this kernel's registry
// that the grants make available at now, and finds the grants that can
// never match. It is the same rule the kernel lists a tool by
// (policy.Discoverable), applied one grant at a time.
func Summarize(c config.Config, now time.Time) config.Summary {
	tools := registry()
	// A kernel that brokers upstreams may run without a files root, and
	// then serves no file tools. (Without upstreams it needs one.)
	if c.Root == "" && len(c.Upstreams) > 0 {
		tools = slices.DeleteFunc(tools, func(t *tool) bool { return t.scope.Namespace == files.Namespace })
	}
	var s config.Summary
	for i, u := range c.Upstreams {
		us := config.UpstreamSummary{Name: u.Name, Command: u.Command, Where: c.UpstreamRef(i)}
		for _, n := range sortedNames(u.Tools) {
			ts := u.Tools[n]
			us.Tools = append(us.Tools, config.ConfiguredTool{Name: u.Name + "." + n, Action: ts.Action, Resource: u.Name + ":" + ts.Resource.String()})
		}
		s.Upstreams = append(s.Upstreams, us)
	}
	bySubject := map[string]*config.SubjectSummary{}
	for i, g := range c.Grants {
		where := c.GrantRef(i)
		if !g.Expires.IsZero() && !now.Before(g.Expires) {
			s.Problems = append(s.Problems, config.Finding{Where: where, Msg: fmt.Sprintf("expired at %s, so it can never match again; move expires into the future or remove the grant",
				g.Expires.UTC().Format(time.RFC3339))})
			continue
		}
		name := strings.TrimPrefix(g.Subject, "integration:")
		rows, inNamespace := grantAllowances(c, tools, g, i, name, now)
		if len(rows) == 0 {
			tools := strings.Join(inNamespace, ", ")
			if len(inNamespace) == 0 {
				tools = "none (there is no [files] root)"
			}
			s.Problems = append(s.Problems, config.Finding{Where: where, Msg: fmt.Sprintf("gives %s on %s, which no tool uses, so it grants nothing; the tools in %s are %s",
				strings.Join(g.Actions, ", "), g.Resource, g.Resource.Namespace, tools)})
			continue
		}
		used := map[string]bool{}
		for _, r := range rows {
			used[r.Action] = true
		}
		var unused []string
		for _, a := range g.Actions {
			if !used[a] {
				unused = append(unused, a)
			}
		}
		if len(unused) > 0 {
			s.Warnings = append(s.Warnings, config.Finding{Where: where, Msg: fmt.Sprintf("no tool uses %s on %s; the grant's other actions stand",
				strings.Join(unused, ", "), g.Resource)})
		}
		sub := bySubject[g.Subject]
		if sub == nil {
			sub = &config.SubjectSummary{Subject: g.Subject}
			bySubject[g.Subject] = sub
		}
		sub.Rows = append(sub.Rows, rows...)
	}
	for _, sub := range bySubject {
		sort.SliceStable(sub.Rows, func(i, j int) bool { return sub.Rows[i].Tool < sub.Rows[j].Tool })
		s.Subjects = append(s.Subjects, *sub)
	}
	sort.Slice(s.Subjects, func(i, j int) bool {
		a, b := s.Subjects[i].Subject, s.Subjects[j].Subject
		if (a == policy.SubjectWildcard) != (b == policy.SubjectWildcard) {
			return a == policy.SubjectWildcard
		}
		return a < b
	})
	summarizeChildren(c, &s, tools, now)
	switch {
	case len(c.Grants) == 0:
		s.Problems = append(s.Problems, config.Finding{Msg: "the config has no [[grant]]: the kernel denies by default, so every integration's catalogue is empty"})
	case len(s.Subjects) == 0:
		s.Problems = append(s.Problems, config.Finding{Msg: "no grant gives any tool: every integration's catalogue is empty"})
	}
	return s
}

// grantAllowances lists the tools grant g (index i) publishes, on its
// own, to integration at now: each tool of the registry, and of the
// upstream whose namespace it names. inNamespace describes the tools of
// that namespace for a message.
func grantAllowances(c config.Config, tools []*tool, g policy.Grant, i int, integration string, now time.Time) (rows []config.Allowance, inNamespace []string) {
	if u := c.Upstream(g.Resource.Namespace); u != nil {
		rows, inNamespace = brokeredAllowances(u, g, i, integration, now)
	}
	for _, t := range tools {
		if t.scope.Namespace != g.Resource.Namespace {
			continue
		}
		inNamespace = append(inNamespace, fmt.Sprintf("%s (%s on %s)", t.def.Name, t.action, t.scope))
		if policy.Discoverable([]policy.Grant{g}, integration, t.scope, t.action, now) {
			rows = append(rows, allowance(g, i, t.def.Name, t.action))
		}
	}
	return rows, inNamespace
}

// brokeredAllowances lists what grant g (index i) publishes of upstream
// u to integration: each configured tool whose action and resource it
// reaches (the kernel's own rule, brokeredDiscoverable), and the tools no
// [[upstream.tool]] names, action call on /<tool>: all of them ("u.*")
// for a grant on u:/ and below, the one it names for a grant on u:/name.
// inNamespace describes the configured tools for a message.
func brokeredAllowances(u *upstream.Spec, g policy.Grant, i int, integration string, now time.Time) (rows []config.Allowance, inNamespace []string) {
	one := &policy.Rules{Grants: []policy.Grant{g}}
	row := func(tool, action string) config.Allowance {
		return allowance(g, i, u.Name+"."+tool, action)
	}
	for _, n := range sortedNames(u.Tools) {
		ts := u.Tools[n]
		inNamespace = append(inNamespace, fmt.Sprintf("%s.%s (%s on %s:%s)", u.Name, n, ts.Action, u.Name, ts.Resource))
		if brokeredDiscoverable(one, integration, u.Name, ts.Resource, ts.Action, now) {
			rows = append(rows, row(n, ts.Action))
		}
	}
	inNamespace = append(inNamespace, fmt.Sprintf("%s.%s (every other tool: call on %s:/<tool>, known once it runs)", u.Name, config.AnyTool, u.Name))
	if !one.Discoverable(integration, policy.Scope{Resource: g.Resource, Below: true}, policy.ActionCall, now) {
		return rows, inNamespace
	}
	p := g.Resource.Path
	switch {
	case p == "/" && g.Descendants:
		rows = append(rows, row(config.AnyTool, policy.ActionCall))
	case p != "/" && !strings.Contains(p[1:], "/"):
		if _, configured := u.Tools[p[1:]]; !configured {
			rows = append(rows, row(p[1:], policy.ActionCall))
		}
	}
	return rows, inNamespace
}

// allowance is one row of grant g (index i): tool with action.
func allowance(g policy.Grant, i int, tool, action string) config.Allowance {
	return config.Allowance{Tool: tool, Action: action, Resource: g.Resource, Descendants: g.Descendants, Expires: g.Expires, Grant: i,
		Ask: g.Ask, Limit: g.Limit, TurnLimit: g.TurnLimit}
}

// summarizeChildren adds what each child integration may do in effect:
// each row its own grants (named for it, or integration:*) give it,
// narrowed to what each ancestor may do too (policy.Rules.Narrow), with
// the proof that each row lies within a grant of every ancestor. A grant
// named for the child that gives it rows of its own, none of which
// survive, can never match: a problem, like a grant no tool uses.
func summarizeChildren(c config.Config, s *config.Summary, tools []*tool, now time.Time) {
	rules := c.Rules()
	for ci, d := range c.Integrations {
		if d.Parent == "" {
			continue
		}
		chain := c.Hierarchy.Chain(d.Name)
		cs := config.ChildSummary{Name: d.Name, Chain: chain, Where: c.IntegrationRef(ci), Proved: true}
		for i, g := range c.Grants {
			if g.Subject != policy.SubjectWildcard && g.Subject != "integration:"+d.Name {
				continue
			}
			if !g.Expires.IsZero() && !now.Before(g.Expires) {
				continue
			}
			own, _ := grantAllowances(c, tools, g, i, d.Name, now)
			survived, lacking := 0, ""
			kept := map[string]bool{}   // actions with a row that survived
			lost := map[string]string{} // actions with none: the ancestor lacking them
			for _, a := range own {
				scope, ok := rowScope(c, tools, a).Intersect(policy.Scope{Resource: g.Resource, Below: g.Descendants})
				if !ok {
					continue
				}
				parts := rules.Narrow(chain[1:], scope, a.Action, now)
				if len(parts) == 0 {
					l := firstLacking(&rules, chain[1:], scope, a.Action, now)
					if lacking == "" {
						lacking = l
					}
					if _, ok := lost[a.Action]; !ok {
						lost[a.Action] = l
					}
				}
				for _, p := range parts {
					survived++
					kept[a.Action] = true
					row := config.EffectiveRow{Tool: a.Tool, Action: a.Action, Scope: p.Scope, Expires: g.Expires, Grants: append([]int{i}, p.Grants...), Ask: g.Ask}
					for li, gi := range p.Grants {
						ag := c.Grants[gi]
						if !ag.Expires.IsZero() && (row.Expires.IsZero() || ag.Expires.Before(row.Expires)) {
							row.Expires = ag.Expires
						}
						if ag.Ask == policy.AskOperator || ag.Ask == policy.AskHarness && row.Ask == "" {
							row.Ask = ag.Ask
						}
						// The proof, checked rather than assumed: the row
						// lies within the grant of each ancestor, which
						// gives its action and is live now.
						if !p.Scope.Within(policy.Scope{Resource: ag.Resource, Below: ag.Descendants}) || !slices.Contains(ag.Actions, a.Action) ||
							(ag.Subject != policy.SubjectWildcard && ag.Subject != "integration:"+chain[li+1]) {
							cs.Proved = false
						}
					}
					cs.Rows = append(cs.Rows, row)
				}
			}
			if g.Subject == policy.SubjectWildcard {
				continue
			}
			if len(own) > 0 && survived == 0 {
				s.Problems = append(s.Problems, config.Finding{Where: c.GrantRef(i), Msg: fmt.Sprintf(
					"gives %s %s on %s, which its ancestor %s may never be allowed (no live grant of %s reaches it), so it can never match",
					g.Subject, strings.Join(g.Actions, ", "), scopeText(g), lacking, lacking)})
				continue
			}
			for _, a := range g.Actions {
				if l, ok := lost[a]; ok && !kept[a] {
					s.Warnings = append(s.Warnings, config.Finding{Where: c.GrantRef(i), Msg: fmt.Sprintf(
						"gives %s %s on %s, which its ancestor %s may never be allowed; the grant's other actions stand", g.Subject, a, scopeText(g), l)})
				}
			}
		}
		sort.SliceStable(cs.Rows, func(a, b int) bool { return cs.Rows[a].Tool < cs.Rows[b].Tool })
		if !cs.Proved {
			s.Problems = append(s.Problems, config.Finding{Where: cs.Where, Msg: "what it may do in effect could not be shown within what each ancestor may: a kernel bug, please report it"})
		}
		s.Children = append(s.Children, cs)
	}
}

// firstLacking is the first of levels at which scope loses every part.
func firstLacking(rules *policy.Rules, levels []string, scope policy.Scope, action string, now time.Time) string {
	for n := 1; n <= len(levels); n++ {
		if len(rules.Narrow(levels[:n], scope, action, now)) == 0 {
			return levels[n-1]
		}
	}
	return levels[len(levels)-1]
}

// rowScope is where calls of an allowance's tool land: a tool of the
// registry's or a configured brokered tool's own scope, or for an
// upstream's other tools the resource the grant names.
func rowScope(c config.Config, tools []*tool, a config.Allowance) policy.Scope {
	for _, t := range tools {
		if t.def.Name == a.Tool {
			return t.catalogScope()
		}
	}
	if up, name, ok := strings.Cut(a.Tool, "."); ok {
		if u := c.Upstream(up); u != nil {
			if ts, ok := u.Tools[name]; ok {
				return templateScope(up, ts.Resource)
			}
			if name != config.AnyTool {
				return policy.Scope{Resource: policy.Resource{Namespace: up, Path: "/" + name}}
			}
		}
	}
	return policy.Scope{Resource: a.Resource, Below: a.Descendants}
}

func scopeText(g policy.Grant) string {
	return policy.Scope{Resource: g.Resource, Below: g.Descendants}.String()
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// toolGrants returns the indexes of c's grants that, each on its own,
// publish to integration at now a brokered tool of the upstream ns whose
// calls need action on the resource template: the kernel's rule for
// listing it. The catalog command shows them beside each brokered tool.
func toolGrants(c config.Config, integration, ns, template, action string, now time.Time) ([]int, error) {
	r, err := policy.ParseTemplate(template)
	if err != nil {
		return nil, err
	}
	var out []int
	for i, g := range c.Grants {
		if brokeredDiscoverable(&policy.Rules{Grants: []policy.Grant{g}}, integration, ns, r, action, now) {
			out = append(out, i)
		}
	}
	return out, nil
}
