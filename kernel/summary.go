package kernel

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sharedos/sharedos-mcp/internal/nearest"
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
}

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
	var s Summary
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
			s.Problems = append(s.Problems, Finding{where, fmt.Sprintf("gives %s on %s, which no tool uses, so it grants nothing; the tools in %s are %s",
				strings.Join(g.Actions, ", "), g.Resource, g.Resource.Namespace, strings.Join(inNamespace, ", "))})
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
