package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/sharedos/sharedos-mcp/kernel/secret"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
	"github.com/sharedos/sharedos-mcp/policy"
)

// Changes is what one config changes against another, by name: grants
// (which have none, so by what they say), upstreams, secrets and the
// telemetry settings. The audit's config.loaded records it, so the log
// shows which grants were in force at every decision. Values are never
// in it: an upstream's env or a header is named, not shown, and a secret
// is named, its source (file, command, env) compared but not shown, and
// its value, which no config holds, never read.
type Changes struct {
	Added, Removed, Changed []string
}

// Diff is what next changes against prev. Against the zero Config (a
// kernel starting), everything next holds is Added. Each entry names its
// kind first ("grant …", "integration NAME, child of PARENT", "upstream
// NAME", "secret NAME", "telemetry", "audit arguments"), in the order
// next (or, for Removed, prev) holds them.
func Diff(prev, next Config) Changes {
	var c Changes
	was := grantTexts(prev.Grants)
	now := grantTexts(next.Grants)
	for _, g := range now {
		if !slices.Contains(was, g) {
			c.Added = append(c.Added, g)
		}
	}
	for _, g := range was {
		if !slices.Contains(now, g) {
			c.Removed = append(c.Removed, g)
		}
	}
	for _, in := range next.Integrations {
		i := slices.IndexFunc(prev.Integrations, func(p policy.Integration) bool { return p.Name == in.Name })
		switch {
		case i < 0:
			c.Added = append(c.Added, integrationText(in))
		case prev.Integrations[i] != in:
			c.Changed = append(c.Changed, integrationText(in))
		}
	}
	for _, in := range prev.Integrations {
		if !slices.ContainsFunc(next.Integrations, func(n policy.Integration) bool { return n.Name == in.Name }) {
			c.Removed = append(c.Removed, integrationText(in))
		}
	}
	diffByName(&c, "upstream ", prev.Upstreams, next.Upstreams, func(u upstream.Spec) string { return u.Name })
	diffByName(&c, "secret ", prev.Secrets, next.Secrets, func(s secret.Spec) string { return s.Name })
	switch {
	case prev.Telemetry == nil && next.Telemetry != nil:
		c.Added = append(c.Added, "telemetry")
	case prev.Telemetry != nil && next.Telemetry == nil:
		c.Removed = append(c.Removed, "telemetry")
	case !reflect.DeepEqual(prev.Telemetry, next.Telemetry):
		c.Changed = append(c.Changed, "telemetry")
	}
	switch {
	case prev.Arguments == "" && next.Arguments != "":
		c.Added = append(c.Added, "audit arguments "+next.Arguments)
	case prev.Arguments != next.Arguments:
		c.Changed = append(c.Changed, "audit arguments "+next.Arguments)
	}
	return c
}

// diffByName adds to c, as kind and the name, each item of next that
// prev has no item of that name of (added) or another one (changed),
// then each item of prev that next has none of (removed).
func diffByName[T any](c *Changes, kind string, prev, next []T, name func(T) string) {
	for _, n := range next {
		i := slices.IndexFunc(prev, func(p T) bool { return name(p) == name(n) })
		switch {
		case i < 0:
			c.Added = append(c.Added, kind+name(n))
		case !reflect.DeepEqual(prev[i], n):
			c.Changed = append(c.Changed, kind+name(n))
		}
	}
	for _, p := range prev {
		if !slices.ContainsFunc(next, func(n T) bool { return name(n) == name(p) }) {
			c.Removed = append(c.Removed, kind+name(p))
		}
	}
}

// GrantText says what a grant allows, in one line: its subject, resource
// (and whether below it), actions and expiry.
func GrantText(g policy.Grant) string {
	var b strings.Builder
	fmt.Fprintf(&b, "grant %s %s", g.Subject, g.Resource)
	if g.Descendants {
		b.WriteString(" and below")
	}
	b.WriteString(": " + strings.Join(g.Actions, ", "))
	if !g.Expires.IsZero() {
		b.WriteString(" until " + g.Expires.UTC().Format(time.RFC3339))
	}
	if !g.Limit.IsZero() {
		b.WriteString(", limit " + g.Limit.String())
	}
	if g.TurnLimit > 0 {
		fmt.Fprintf(&b, ", turn_limit %d", g.TurnLimit)
	}
	if g.Ask != "" {
		fmt.Fprintf(&b, ", ask %s for %s", g.Ask, g.AskTTL)
	}
	return b.String()
}

func grantTexts(grants []policy.Grant) []string {
	out := make([]string, len(grants))
	for i, g := range grants {
		out[i] = GrantText(g)
	}
	return out
}

// integrationText names an [[integration]] and its parent.
func integrationText(in policy.Integration) string {
	return "integration " + in.Name + ", child of " + in.Parent
}
