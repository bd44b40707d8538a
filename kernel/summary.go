package kernel

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sharedos/sharedos-mcp/internal/nearest"
	"github.com/sharedos/sharedos-mcp/kernel/files"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
	"github.com/sharedos/sharedos-mcp/policy"
)

// Summary is what a config lets each integration do, tool by tool, and
// what is wrong with it: the view `kernel check` prints and the kernel
// prints when it starts.
type Summary struct {
	// Subjects holds one entry per grant subject, integration:* first,
	// then by name.
	Subjects []SubjectSummary
	// Problems are grants that can never match (expired, or reaching no
	// tool) and a config that grants nothing: `kernel check` fails on
	// them. The kernel still starts: an expired grant gives nothing.
	Problems []Finding
	// Warnings are worth fixing but may be meant: an action no tool
	// uses, a subject no installed harness announces.
	Warnings []Finding
	// Upstreams are the brokered servers, in config order: which of
	// their tools are known before they run, and how those are
	// authorized.
	Upstreams []UpstreamSummary
}

// UpstreamSummary is one [[upstream]] as the config describes it.
type UpstreamSummary struct {
	Name    string
	Command []string
	Where   string // Config.UpstreamRef
	// Tools are its [[upstream.tool]] tables, by name. Every other tool
	// it offers is action call on /<tool name>; which those are is known
	// only once it runs.
	Tools []ConfiguredTool
}

// ConfiguredTool is one [[upstream.tool]]: the published name and how a
// call is authorized.
type ConfiguredTool struct {
	Name     string // "<upstream>.<tool>"
	Action   string
	Resource string // "<upstream>:/path/{arg}"
}

// AnyTool stands, in an Allowance's Tool, for every tool of an upstream
// that no [[upstream.tool]] names: "memory.*". Which those are is known
// only once the upstream runs.
const AnyTool = "*"

// SubjectSummary is what one grant subject may do.
type SubjectSummary struct {
	Subject string // "integration:claude-code", or policy.SubjectWildcard
	Rows    []Allowance
}

// Allowance is one tool a grant makes available: the tool, the action it
// needs, the resource the grant gives it on, and until when.
type Allowance struct {
	Tool        string
	Action      string
	Resource    policy.Resource
	Descendants bool      // the resource and everything beneath it
	Expires     time.Time // zero: never
	Grant       int       // index in Config.Grants
}

// Finding is one problem or warning. Where names the grant
// (Config.GrantRef) or is "" when it is about the whole config.
type Finding struct {
	Where string
	Msg   string
}

func (f Finding) String() string {
	if f.Where == "" {
		return f.Msg
	}
	return f.Where + ": " + f.Msg
}

// Summarize lists, per grant subject, each tool of this kernel's registry
// that the grants make available at now, and finds the grants that can
// never match. It is the same rule the kernel lists a tool by
// (policy.Discoverable), applied one grant at a time.
func Summarize(c Config, now time.Time) Summary {
	tools := registry()
	// A kernel that brokers upstreams may run without a files root, and
	// then serves no file tools. (Without upstreams it needs one.)
	if c.Root == "" && len(c.Upstreams) > 0 {
		tools = slices.DeleteFunc(tools, func(t *tool) bool { return t.scope.Namespace == files.Namespace })
	}
	var s Summary
	for i, u := range c.Upstreams {
		us := UpstreamSummary{Name: u.Name, Command: u.Command, Where: c.UpstreamRef(i)}
		for _, n := range sortedNames(u.Tools) {
			ts := u.Tools[n]
			us.Tools = append(us.Tools, ConfiguredTool{Name: u.Name + "." + n, Action: ts.Action, Resource: u.Name + ":" + ts.Resource.String()})
		}
		s.Upstreams = append(s.Upstreams, us)
	}
	bySubject := map[string]*SubjectSummary{}
	for i, g := range c.Grants {
		where := c.GrantRef(i)
		if !g.Expires.IsZero() && !now.Before(g.Expires) {
			s.Problems = append(s.Problems, Finding{where, fmt.Sprintf("expired at %s, so it can never match again; move expires into the future or remove the grant",
				g.Expires.UTC().Format(time.RFC3339))})
			continue
		}
		name := strings.TrimPrefix(g.Subject, "integration:")
		var rows []Allowance
		used := map[string]bool{}
		var inNamespace []string
		if u := c.upstream(g.Resource.Namespace); u != nil {
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
			rows = append(rows, Allowance{Tool: t.def.Name, Action: t.action, Resource: g.Resource, Descendants: g.Descendants, Expires: g.Expires, Grant: i})
		}
		if len(rows) == 0 {
			tools := strings.Join(inNamespace, ", ")
			if len(inNamespace) == 0 {
				tools = "none (there is no [files] root)"
			}
			s.Problems = append(s.Problems, Finding{where, fmt.Sprintf("gives %s on %s, which no tool uses, so it grants nothing; the tools in %s are %s",
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
			s.Warnings = append(s.Warnings, Finding{where, fmt.Sprintf("no tool uses %s on %s; the grant's other actions stand",
				strings.Join(unused, ", "), g.Resource)})
		}
		sub := bySubject[g.Subject]
		if sub == nil {
			sub = &SubjectSummary{Subject: g.Subject}
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
		s.Problems = append(s.Problems, Finding{"", "the config has no [[grant]]: the kernel denies by default, so every integration's catalogue is empty"})
	case len(s.Subjects) == 0:
		s.Problems = append(s.Problems, Finding{"", "no grant gives any tool: every integration's catalogue is empty"})
	}
	return s
}

// upstream returns the [[upstream]] named name, or nil.
func (c Config) upstream(name string) *upstream.Spec {
	for i := range c.Upstreams {
		if c.Upstreams[i].Name == name {
			return &c.Upstreams[i]
		}
	}
	return nil
}

// brokeredAllowances lists what grant g (index i) publishes of upstream
// u to integration: each configured tool whose action and resource it
// reaches (the kernel's own rule, brokeredDiscoverable), and the tools no
// [[upstream.tool]] names, action call on /<tool>: all of them ("u.*")
// for a grant on u:/ and below, the one it names for a grant on u:/name.
// inNamespace describes the configured tools for a message.
func brokeredAllowances(u *upstream.Spec, g policy.Grant, i int, integration string, now time.Time, used map[string]bool) (rows []Allowance, inNamespace []string) {
	one := []policy.Grant{g}
	row := func(tool, action string) Allowance {
		used[action] = true
		return Allowance{Tool: u.Name + "." + tool, Action: action, Resource: g.Resource, Descendants: g.Descendants, Expires: g.Expires, Grant: i}
	}
	for _, n := range sortedNames(u.Tools) {
		ts := u.Tools[n]
		inNamespace = append(inNamespace, fmt.Sprintf("%s.%s (%s on %s:%s)", u.Name, n, ts.Action, u.Name, ts.Resource))
		if brokeredDiscoverable(one, integration, u.Name, ts.Resource, ts.Action, now) {
			rows = append(rows, row(n, ts.Action))
		}
	}
	inNamespace = append(inNamespace, fmt.Sprintf("%s.%s (every other tool: call on %s:/<tool>, known once it runs)", u.Name, AnyTool, u.Name))
	if !policy.Discoverable(one, integration, g.Resource, policy.ActionCall, now) {
		return rows, inNamespace
	}
	p := g.Resource.Path
	switch {
	case p == "/" && g.Descendants:
		rows = append(rows, row(AnyTool, policy.ActionCall))
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

// CheckUpstreamReport adds what a running kernel found once its
// upstreams ran (r, from ReadUpstreamReport): each tool it does not
// publish, and why, as a problem, and each upstream that is not ready as
// a warning. Only upstreams the config still names are looked at.
func (s *Summary) CheckUpstreamReport(c Config, r UpstreamReport) {
	when := r.Written.UTC().Format(time.RFC3339)
	for _, st := range r.Upstreams {
		i := slices.IndexFunc(c.Upstreams, func(u upstream.Spec) bool { return u.Name == st.Name })
		if i < 0 {
			continue
		}
		where := c.UpstreamRef(i)
		if st.State != string(upstream.StateReady) {
			msg := fmt.Sprintf("was %s when the kernel last reported (%s)", st.State, when)
			if st.Reason != "" {
				msg += ": " + st.Reason
			}
			s.Warnings = append(s.Warnings, Finding{where, msg})
		}
		for _, w := range st.Withheld {
			s.Problems = append(s.Problems, Finding{where, fmt.Sprintf("%s is not published (%s): %s (as the kernel reported at %s)", w.Name, w.Reason, w.Detail, when)})
		}
	}
}

// CheckInstalled adds warnings about how the grants and the installed
// harness entries meet: a subject that no entry announces (a misspelled
// integration:claude_code, or an integration not installed yet), and an
// installed integration no grant names, whose catalogue holds only what
// integration:* gets. installed lists the integration names the entries
// announce.
func (s *Summary) CheckInstalled(c Config, installed []string) {
	wildcard := slices.ContainsFunc(s.Subjects, func(sub SubjectSummary) bool { return sub.Subject == policy.SubjectWildcard })
	named := map[string]bool{}
	for i, g := range c.Grants {
		name, ok := strings.CutPrefix(g.Subject, "integration:")
		if !ok || name == "*" || named[name] {
			continue
		}
		named[name] = true
		if slices.Contains(installed, name) {
			continue
		}
		msg := fmt.Sprintf("subject %s: no installed harness entry announces %q", g.Subject, name)
		if len(installed) > 0 {
			msg += " (installed: " + strings.Join(installed, ", ") + ")"
		}
		if m := nearest.Find(name, nearest.Names(installed...)); m != "" {
			msg += fmt.Sprintf("; did you mean integration:%s?", m)
		} else {
			msg += "; fine if you install it later"
		}
		s.Warnings = append(s.Warnings, Finding{c.GrantRef(i), msg})
	}
	for _, name := range installed {
		if named[name] {
			continue
		}
		if wildcard {
			s.Warnings = append(s.Warnings, Finding{"", fmt.Sprintf("the installed integration %q has no grant of its own: it gets only what integration:* gets", name)})
		} else {
			s.Warnings = append(s.Warnings, Finding{"", fmt.Sprintf("the installed integration %q has no grant: its catalogue is empty", name)})
		}
	}
}

// ToolGrants returns the indexes of c's grants that, each on its own,
// publish to integration at now a brokered tool of the upstream ns whose
// calls need action on the resource template: the kernel's rule for
// listing it. The catalog command shows them beside each brokered tool.
func ToolGrants(c Config, integration, ns, template, action string, now time.Time) ([]int, error) {
	r, err := policy.ParseTemplate(template)
	if err != nil {
		return nil, err
	}
	var out []int
	for i, g := range c.Grants {
		if brokeredDiscoverable([]policy.Grant{g}, integration, ns, r, action, now) {
			out = append(out, i)
		}
	}
	return out, nil
}

// UpstreamTool returns how the config authorizes the upstream ns's tool
// (the upstream's own name for it): its action and resource template. ok
// is false when ns is not a configured upstream or the tool's name cannot
// be its default resource.
func (c Config) UpstreamTool(ns, tool string) (action, template string, ok bool) {
	u := c.upstream(ns)
	if u == nil {
		return "", "", false
	}
	ts, ok := u.Tool(tool)
	if !ok {
		return "", "", false
	}
	return ts.Action, ts.Resource.String(), true
}
