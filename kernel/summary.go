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
		var rows []config.Allowance
		used := map[string]bool{}
		var inNamespace []string
		if u := c.Upstream(g.Resource.Namespace); u != nil {
			rows, inNamespace = brokeredAllowances(u, g, i, name, now, used)
		}
		for _, t := range tools {
			if t.scope.Namespace != g.Resource.Namespace {
				continue
			}
			inNamespace = append(inNamespace, fmt.Sprintf("%s (%s on %s)", t.def.Name, t.action, t.scope))
			if !policy.Discoverable([]policy.Grant{g}, name, t.scope, t.action, now) {
				continue
			}
			used[t.action] = true
			rows = append(rows, config.Allowance{Tool: t.def.Name, Action: t.action, Resource: g.Resource, Descendants: g.Descendants, Expires: g.Expires, Grant: i})
		}
		if len(rows) == 0 {
			tools := strings.Join(inNamespace, ", ")
			if len(inNamespace) == 0 {
				tools = "none (there is no [files] root)"
			}
			s.Problems = append(s.Problems, config.Finding{Where: where, Msg: fmt.Sprintf("gives %s on %s, which no tool uses, so it grants nothing; the tools in %s are %s",
				strings.Join(g.Actions, ", "), g.Resource, g.Resource.Namespace, tools)})
			continue
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
	switch {
	case len(c.Grants) == 0:
		s.Problems = append(s.Problems, config.Finding{Msg: "the config has no [[grant]]: the kernel denies by default, so every integration's catalogue is empty"})
	case len(s.Subjects) == 0:
		s.Problems = append(s.Problems, config.Finding{Msg: "no grant gives any tool: every integration's catalogue is empty"})
	}
	return s
}

// brokeredAllowances lists what grant g (index i) publishes of upstream
// u to integration: each configured tool whose action and resource it
// reaches (the kernel's own rule, brokeredDiscoverable), and the tools no
// [[upstream.tool]] names, action call on /<tool>: all of them ("u.*")
// for a grant on u:/ and below, the one it names for a grant on u:/name.
// inNamespace describes the configured tools for a message.
func brokeredAllowances(u *upstream.Spec, g policy.Grant, i int, integration string, now time.Time, used map[string]bool) (rows []config.Allowance, inNamespace []string) {
	one := &policy.Rules{Grants: []policy.Grant{g}}
	row := func(tool, action string) config.Allowance {
		used[action] = true
		return config.Allowance{Tool: u.Name + "." + tool, Action: action, Resource: g.Resource, Descendants: g.Descendants, Expires: g.Expires, Grant: i}
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
