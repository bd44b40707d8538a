package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sharedos/sharedos-mcp/internal/nearest"
	"github.com/sharedos/sharedos-mcp/kernel/status"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
	"github.com/sharedos/sharedos-mcp/policy"
)

// Summary is what a config lets each integration do, tool by tool, and
// what is wrong with it: the view `kernel check` prints and the kernel
// prints when it starts. kernel.Summarize makes it from the kernel's
// tools; the checks below add what is known only outside the config.
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
	// Children are the integrations with a parent, in config order: what
	// each may do in effect.
	Children []ChildSummary
}

// ChildSummary is what a child integration may do in effect: each row of
// its own grants narrowed to what every ancestor may do too (the
// intersection a call of the child is decided on).
type ChildSummary struct {
	Name  string
	Chain []string // the child, its parent, ... its root
	Where string   // Config.IntegrationRef
	Rows  []EffectiveRow
	// Proved is set when every row was checked to lie within a grant of
	// each ancestor that gives its action (policy.Scope.Within): nothing
	// the child may do is beyond its ancestors.
	Proved bool
}

// EffectiveRow is one tool a child may call in effect, on which
// resources, until when, and the grant that allows it at each level.
type EffectiveRow struct {
	Tool, Action string
	Scope        policy.Scope
	Expires      time.Time // the earliest expiry of its grants; zero: never
	Grants       []int     // the child's grant, then one per ancestor
	Ask          string    // the strictest ask of its grants
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
	// The grant's ask, limit and turn_limit.
	Ask       string
	Limit     policy.Limit
	TurnLimit int
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

// Upstream returns the [[upstream]] named name, or nil.
func (c Config) Upstream(name string) *upstream.Spec {
	for i := range c.Upstreams {
		if c.Upstreams[i].Name == name {
			return &c.Upstreams[i]
		}
	}
	return nil
}

// CheckUpstreamReport adds what a running kernel found once its
// upstreams ran (r, from status.Read): each tool it does not
// publish, and why, as a problem, and each upstream that is not ready as
// a warning, and so is a plain placeholder whose argument the tool's
// schema says takes a path or a URL (typedAdvice). Only upstreams the
// config still names are looked at.
func (s *Summary) CheckUpstreamReport(c Config, r status.Report) {
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
		for _, p := range st.Published {
			for _, a := range p.Arguments {
				if a.Kind == "segment" && a.Takes != "" {
					s.Warnings = append(s.Warnings, Finding{where, fmt.Sprintf("%s (as the kernel reported at %s)", typedAdvice(&c.Upstreams[i], p, a), when)})
				}
			}
		}
	}
}

// typedAdvice says why a plain placeholder on an argument that takes a
// path or a URL refuses what the tool is for, and which typed
// placeholder to write instead.
func typedAdvice(u *upstream.Spec, p status.Published, a status.Argument) string {
	what, by := "a path", "its "+a.By
	if a.Takes == upstream.TakesURL {
		what = "a URL"
	}
	if a.By == "format" {
		by = fmt.Sprintf("its format %q", a.Format)
	}
	plain, typed := "{"+a.Name+"}", "{"+a.Name+":"+a.Takes+"}"
	msg := fmt.Sprintf("%s: placeholder %s fills one segment, but the tool's schema says by %s that its argument takes %s, so a value with '/' in it is refused before the server sees it",
		p.Name, plain, by, what)
	if _, tmpl, _ := strings.Cut(p.Resource, ":"); strings.HasSuffix(tmpl, plain) {
		msg += fmt.Sprintf(": use resource = %q", strings.TrimSuffix(tmpl, plain)+typed)
	} else {
		msg += fmt.Sprintf(": use %s, as the resource's last segment", typed)
	}
	if a.Takes == upstream.TakesPath && !u.HostPaths {
		msg += ", and host_paths = true if the server opens that path on this host"
	}
	return msg
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

// UpstreamTool returns how the config authorizes the upstream ns's tool
// (the upstream's own name for it): its action and resource template. ok
// is false when ns is not a configured upstream or the tool's name cannot
// be its default resource.
func (c Config) UpstreamTool(ns, tool string) (action, template string, ok bool) {
	u := c.Upstream(ns)
	if u == nil {
		return "", "", false
	}
	ts, ok := u.Tool(tool)
	if !ok {
		return "", "", false
	}
	return ts.Action, ts.Resource.String(), true
}
