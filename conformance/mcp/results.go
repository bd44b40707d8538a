package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// report is one run, for RESULTS.md and the console.
type report struct {
	When     time.Time
	Tree     string
	Versions versions
	Probes   []probeResult
	Sets     []setReport
	// Shim processes the bridge started: one per 2025-era session, one
	// per 2026-07-28 request. ChildrenErr names any that saw a second
	// initialize.
	Legacy, Modern int
	ChildrenErr    error
	Verdict        verdict
	Took           time.Duration
}

// setReport is one requirement set's run.
type setReport struct {
	Req    requirements
	Checks []check
	Took   time.Duration
}

// ok says the run is as expected: the bridge passed its probes and kept a
// process per session, every failing check is listed, and every listed
// check failed.
func (r *report) ok() bool { return r.bridgeOK() && r.Verdict.ok() }

func (r *report) markdown() string {
	var b strings.Builder
	v := r.Verdict
	fmt.Fprintf(&b, "# MCP conformance results\n\n")
	fmt.Fprintf(&b, "Written by `go run ./conformance/mcp` (`make conformance-mcp`; [README.md](README.md) says how to run and read it) at %s, from tree `%s`, in %s.\n\n",
		r.When.Format(time.RFC3339), r.Tree, r.Took.Round(time.Second))
	fmt.Fprintf(&b, "- suite: `@modelcontextprotocol/conformance` %s, server mode, `--requirements SET` for each set below\n", r.Versions.Suite)
	fmt.Fprintf(&b, "- server: `sharedos-mcp serve --integration conformance` in front of `sharedos-mcp kernel --root DIR` (its default: read, list and search under DIR for every integration)\n")
	fmt.Fprintf(&b, "- bridge: `supergateway` %s, stdio → Streamable HTTP, `--stateful`, on node %s\n\n", r.Versions.Bridge, r.Versions.Node)
	if r.ok() {
		fmt.Fprintf(&b, "**As expected.** %d checks passed and %d failed, each failure listed in [expected-failures.toml](expected-failures.toml) with its reason; no listed check passed.\n\n", v.Passed, len(v.Expected))
	} else {
		var wrong []string
		if n := len(v.Unexpected); n > 0 {
			wrong = append(wrong, fmt.Sprintf("%d failing checks are not listed", n))
		}
		if n := len(v.Stale); n > 0 {
			wrong = append(wrong, fmt.Sprintf("%d listed checks did not fail", n))
		}
		if !r.bridgeOK() {
			wrong = append(wrong, "the bridge failed the runner's checks")
		}
		fmt.Fprintf(&b, "**Not as expected:** %s. %d checks passed, %d failed as listed.\n\n", strings.Join(wrong, "; "), v.Passed, len(v.Expected))
	}
	b.WriteString("| requirement set | scenarios | checks passed | failed, listed | failed, not listed | listed, not failing | warnings | skipped | seconds |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range r.Sets {
		c := countChecks(s.Checks, r.Verdict)
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %d | %.1f |\n", s.Req.Set, len(scenarioNames(s.Checks)), c.passed, c.expected, c.unexpected, staleIn(r.Verdict, s.Req.Set), c.warnings, c.skipped, s.Took.Seconds())
	}

	b.WriteString("\n## The bridge\n\n")
	for _, p := range r.Probes {
		if p.Err == nil {
			fmt.Fprintf(&b, "- pass: %s\n", p.Name)
		} else {
			fmt.Fprintf(&b, "- **fail**: %s: %s\n", p.Name, oneLine(p.Err.Error(), 600))
		}
	}
	if r.ChildrenErr == nil {
		fmt.Fprintf(&b, "- pass: one shim process per session: %d served one 2025-era session each, %d served 2026-07-28 requests outside any session (the bridge starts one per request); none was sent a second `initialize`\n", r.Legacy, r.Modern)
	} else {
		fmt.Fprintf(&b, "- **fail**: one shim process per session: %s\n", oneLine(r.ChildrenErr.Error(), 600))
	}

	for _, s := range r.Sets {
		r.writeSet(&b, s)
	}
	if len(v.Stale) > 0 {
		b.WriteString("\n## Listed but not failing (the run fails until expected-failures.toml drops them)\n\n")
		for _, st := range v.Stale {
			fmt.Fprintf(&b, "- `%s` (%s): now %s", st.Key, st.Why.Kind, st.Saw)
			if st.Note != "" {
				fmt.Fprintf(&b, ": %s", oneLine(st.Note, 300))
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

func (r *report) bridgeOK() bool {
	for _, p := range r.Probes {
		if p.Err != nil {
			return false
		}
	}
	return r.ChildrenErr == nil
}

func (r *report) writeSet(b *strings.Builder, s setReport) {
	fmt.Fprintf(b, "\n## %s\n\n", s.Req.Set)
	b.WriteString("| scenario | counts | passed | failed | warnings | skipped |\n|---|---|---|---|---|---|\n")
	for _, name := range scenarioNames(s.Checks) {
		counted := "scored"
		if why, ok := s.Req.notScoredReason(name); ok {
			counted = "not scored (" + why + ")"
		}
		var pass, fail, warn, skip int
		for _, c := range s.Checks {
			if c.Scenario != name {
				continue
			}
			switch c.Status {
			case statusSuccess:
				pass++
			case statusFailure:
				fail++
			case statusWarning:
				warn++
			case statusSkipped:
				skip++
			}
		}
		fmt.Fprintf(b, "| `%s` | %s | %d | %d | %d | %d |\n", name, counted, pass, fail, warn, skip)
	}

	var unexpected []check
	for _, c := range r.Verdict.Unexpected {
		if c.Set == s.Req.Set {
			unexpected = append(unexpected, c)
		}
	}
	if len(unexpected) > 0 {
		fmt.Fprintf(b, "\n### Failed, not listed (the run fails until each is fixed or listed with its reason)\n\n")
		for _, c := range unexpected {
			fmt.Fprintf(b, "- `%s:%s`: %s\n", c.Scenario, c.ID, oneLine(c.Message, 300))
		}
	}

	fmt.Fprintf(b, "\n### Expected failures\n")
	for _, kind := range kindOrder {
		var reasons []string
		byReason := map[string][]check{}
		for _, o := range r.Verdict.Expected {
			if o.Check.Set != s.Req.Set || o.Why.Kind != kind {
				continue
			}
			if _, seen := byReason[o.Why.Reason]; !seen {
				reasons = append(reasons, o.Why.Reason)
			}
			byReason[o.Why.Reason] = append(byReason[o.Why.Reason], o.Check)
		}
		if len(reasons) == 0 {
			continue
		}
		fmt.Fprintf(b, "\n**%s** (`%s`)\n", capitalize(kinds[kind]), kind)
		for _, why := range reasons {
			fmt.Fprintf(b, "\n%s\n\n", oneLine(why, 2000))
			for _, c := range byReason[why] {
				fmt.Fprintf(b, "- `%s:%s`: %s\n", c.Scenario, c.ID, oneLine(c.Message, 240))
			}
		}
	}

	var notes []check
	for _, c := range s.Checks {
		if c.Status == statusWarning || c.Status == statusSkipped {
			notes = append(notes, c)
		}
	}
	if len(notes) > 0 {
		fmt.Fprintf(b, "\n### Warnings and skips (not failures: the suite marks a SHOULD it found unmet, or a check it could not reach)\n\n")
		for _, c := range notes {
			msg := c.Message
			if msg == "" {
				msg = "(no message)"
			}
			fmt.Fprintf(b, "- `%s:%s` %s: %s\n", c.Scenario, c.ID, strings.ToLower(c.Status), oneLine(msg, 300))
		}
	}
}

// summary prints what a person at the terminal needs, ending with the
// count line.
func (r *report) summary(w io.Writer, results, expectedPath string) {
	v := r.Verdict
	for _, p := range r.Probes {
		if p.Err != nil {
			fmt.Fprintf(w, "bridge probe failed: %s: %v\n", p.Name, p.Err)
		}
	}
	if r.ChildrenErr != nil {
		fmt.Fprintf(w, "bridge process check failed: %v\n", r.ChildrenErr)
	}
	for _, c := range v.Unexpected {
		fmt.Fprintf(w, "FAIL (not listed in %s) %s: %s\n", expectedPath, c.key(), oneLine(c.Message, 300))
	}
	for _, st := range v.Stale {
		fmt.Fprintf(w, "STALE (listed in %s, now %s) %s\n", expectedPath, st.Saw, st.Key)
	}
	fmt.Fprintf(w, "%d failures listed with their reasons in %s; %d warnings; results in %s (%s)\n",
		len(v.Expected), expectedPath, len(v.Warnings), results, r.Took.Round(time.Second))
	failed := len(v.Unexpected) + len(v.Stale)
	if !r.bridgeOK() {
		failed++
	}
	fmt.Fprintf(w, "conformance-mcp: %d passed, %d failed\n", v.Passed, failed)
}

// setCounts is one set's share of the verdict.
type setCounts struct {
	passed, expected, unexpected, warnings, skipped int
}

func countChecks(checks []check, v verdict) setCounts {
	var c setCounts
	listed := map[string]bool{}
	for _, o := range v.Expected {
		listed[o.Check.key()] = true
	}
	for _, ch := range checks {
		switch {
		case ch.Status == statusSuccess:
			c.passed++
		case ch.Status == statusFailure && listed[ch.key()]:
			c.expected++
		case ch.Status == statusFailure:
			c.unexpected++
		case ch.Status == statusWarning:
			c.warnings++
		case ch.Status == statusSkipped:
			c.skipped++
		}
	}
	return c
}

// staleIn counts a set's listed checks that did not fail.
func staleIn(v verdict, set string) int {
	n := 0
	for _, st := range v.Stale {
		if strings.HasPrefix(st.Key, set+" ") {
			n++
		}
	}
	return n
}

// scenarioNames lists the scenarios of checks in first-seen order.
func scenarioNames(checks []check) []string {
	var out []string
	for _, c := range checks {
		if !slices.Contains(out, c.Scenario) {
			out = append(out, c.Scenario)
		}
	}
	return out
}

// oneLine makes s fit a Markdown list item: one line, at most max bytes
// (cut on a rune boundary), no backticks that would open code spans.
func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.ReplaceAll(s, "`", "'")
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
