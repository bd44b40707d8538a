package kernel

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos-mcp/kernel/config"
	"github.com/sharedos/sharedos-mcp/kernel/status"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
)

var summaryNow = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

func mustParse(t *testing.T, doc string) config.Config {
	t.Helper()
	c, err := config.Parse("k.toml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// rows renders a subject's allowances as "tool action resource[/**] until #grant".
func rows(s config.SubjectSummary) []string {
	var out []string
	for _, r := range s.Rows {
		res := r.Resource.String()
		if r.Descendants {
			res += "/**"
		}
		until := "-"
		if !r.Expires.IsZero() {
			until = r.Expires.Format(time.RFC3339)
		}
		out = append(out, strings.Join([]string{r.Tool, r.Action, res, until, "#" + string(rune('1'+r.Grant))}, " "))
	}
	return out
}

func TestSummarizeTheExample(t *testing.T) {
	c, err := config.Load(filepath.Join("..", "testdata", "kernel", "example.toml"))
	if err != nil {
		t.Fatal(err)
	}
	s := Summarize(c, summaryNow)
	if len(s.Problems) != 0 || len(s.Warnings) != 0 {
		t.Errorf("problems %v, warnings %v; want none", s.Problems, s.Warnings)
	}
	if len(s.Subjects) != 2 || s.Subjects[0].Subject != "integration:*" || s.Subjects[1].Subject != "integration:claude-code" {
		t.Fatalf("subjects %+v; want integration:* first, then integration:claude-code", s.Subjects)
	}
	want := map[int][]string{
		0: {"files.list list files:/ - #3", "sharedos.escalate escalate sharedos:/escalate - #4"},
		1: {"files.list list files:/docs/** - #1", "files.read read files:/docs/** - #1", "files.search search files:/docs/** - #1",
			"files.write write files:/docs/drafts/** 2027-12-31T23:59:59Z #2"},
	}
	for i, w := range want {
		if got := rows(s.Subjects[i]); strings.Join(got, "\n") != strings.Join(w, "\n") {
			t.Errorf("%s:\n%s\nwant\n%s", s.Subjects[i].Subject, strings.Join(got, "\n"), strings.Join(w, "\n"))
		}
	}
}

// TestTheStarterHasNoProblems: the config kernel init writes, with a
// root, is one kernel check passes.
func TestTheStarterHasNoProblems(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "conf", "kernel.toml")
	if err := config.WriteStarter(file, dir); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if s := Summarize(c, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); len(s.Problems) != 0 {
		t.Errorf("the starter has problems: %v", s.Problems)
	}
}

// TestTheConfigKnowsTheRegistrysNamespaces: a grant on any namespace of
// the kernel's own tools parses; the config refuses the others.
func TestTheConfigKnowsTheRegistrysNamespaces(t *testing.T) {
	known := config.Config{}.Namespaces()
	for _, tl := range registry() {
		if !slices.Contains(known, tl.scope.Namespace) {
			t.Errorf("%s is in the namespace %q, which a config refuses (it knows %v)", tl.def.Name, tl.scope.Namespace, known)
		}
	}
}

func TestSummarizeFindsGrantsThatCanNeverMatch(t *testing.T) {
	c := mustParse(t, `[[grant]]
subject = "integration:claude-code"
resource = "files:/docs"
actions = ["read"]
expires = 2020-01-01T00:00:00Z

[[grant]]
subject = "integration:*"
resource = "sharedos:/escalte"
actions = ["escalate"]

[[grant]]
subject = "integration:claude-code"
resource = "files:/src"
descendants = true
actions = ["read", "escalate"]
`)
	s := Summarize(c, summaryNow)
	wantProblems := []string{
		"k.toml:1: grant #1: expired at 2020-01-01T00:00:00Z, so it can never match again; move expires into the future or remove the grant",
		"k.toml:7: grant #2: gives escalate on sharedos:/escalte, which no tool uses, so it grants nothing; the tools in sharedos are sharedos.escalate (escalate on sharedos:/escalate)",
	}
	wantWarnings := []string{"k.toml:12: grant #3: no tool uses escalate on files:/src; the grant's other actions stand"}
	check := func(what string, got []config.Finding, want []string) {
		t.Helper()
		var g []string
		for _, f := range got {
			g = append(g, f.String())
		}
		if strings.Join(g, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s:\n%s\nwant\n%s", what, strings.Join(g, "\n"), strings.Join(want, "\n"))
		}
	}
	check("problems", s.Problems, wantProblems)
	check("warnings", s.Warnings, wantWarnings)
	if len(s.Subjects) != 1 || strings.Join(rows(s.Subjects[0]), ",") != "files.read read files:/src/** - #3" {
		t.Errorf("subjects %+v", s.Subjects)
	}
	// A grant that expires between the check and a later run: the clock
	// decides.
	if s := Summarize(c, time.Date(2019, 1, 1, 0, 0, 0, 0, time.UTC)); len(s.Problems) != 1 {
		t.Errorf("before the expiry: problems %v, want only grant #2's", s.Problems)
	}
}

func TestSummarizeAConfigThatGrantsNothing(t *testing.T) {
	for doc, want := range map[string]string{
		"[files]\nroot = \"/srv\"\n": "the config has no [[grant]]: the kernel denies by default, so every integration's catalogue is empty",
		"[[grant]]\nsubject = \"integration:*\"\nresource = \"files:/\"\nactions = [\"read\"]\nexpires = 2021-01-01T00:00:00Z\n": "no grant gives any tool: every integration's catalogue is empty",
	} {
		s := Summarize(mustParse(t, doc), summaryNow)
		if len(s.Problems) == 0 || s.Problems[len(s.Problems)-1].String() != want {
			t.Errorf("%q: problems %v; want last %q", doc, s.Problems, want)
		}
	}
}

func TestSummarizeTheDefault(t *testing.T) {
	s := Summarize(config.Default("/srv"), summaryNow)
	if len(s.Problems) != 0 || len(s.Subjects) != 1 ||
		strings.Join(rows(s.Subjects[0]), ",") != "files.list list files://** - #1,files.read read files://** - #1,files.search search files://** - #1" {
		t.Errorf("%+v", s)
	}
}

func TestCheckInstalledWarnsByName(t *testing.T) {
	c := mustParse(t, `[[grant]]
subject = "integration:claude_code"
resource = "files:/"
actions = ["read"]

[[grant]]
subject = "integration:later"
resource = "files:/"
actions = ["read"]
`)
	s := Summarize(c, summaryNow)
	s.CheckInstalled(c, []string{"claude-code", "codex"})
	want := []string{
		`k.toml:1: grant #1: subject integration:claude_code: no installed harness entry announces "claude_code" (installed: claude-code, codex); did you mean integration:claude-code?`,
		`k.toml:6: grant #2: subject integration:later: no installed harness entry announces "later" (installed: claude-code, codex); fine if you install it later`,
		`the installed integration "claude-code" has no grant: its catalogue is empty`,
		`the installed integration "codex" has no grant: its catalogue is empty`,
	}
	var got []string
	for _, f := range s.Warnings {
		got = append(got, f.String())
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(s.Problems) != 0 {
		t.Errorf("problems %v: a subject nobody uses yet is a warning, not a failure", s.Problems)
	}
}

func TestSummarizeUpstreams(t *testing.T) {
	c := mustParse(t, `[[upstream]]
name = "gh"
command = ["gh-server"]

[[upstream.tool]]
name = "get_repo"
action = "read"
resource = "/repos/{owner}/{repo}"

[[upstream.tool]]
name = "read_me"
action = "read"
resource = "/readme"

[[grant]]
subject = "integration:claude-code"
resource = "gh:/repos/sharedos"
descendants = true
actions = ["read"]

[[grant]]
subject = "integration:claude-code"
resource = "gh:/"
descendants = true
actions = ["call"]

[[grant]]
subject = "integration:codex"
resource = "gh:/create_issue"
actions = ["call"]

[[grant]]
subject = "integration:codex"
resource = "gh:/other"
actions = ["read"]
`)
	s := Summarize(c, summaryNow)
	if len(s.Upstreams) != 1 || s.Upstreams[0].Name != "gh" || len(s.Upstreams[0].Tools) != 2 ||
		s.Upstreams[0].Tools[0] != (config.ConfiguredTool{Name: "gh.get_repo", Action: "read", Resource: "gh:/repos/{owner}/{repo}"}) {
		t.Errorf("upstreams %+v", s.Upstreams)
	}
	want := map[string][]string{
		"integration:claude-code": {"gh.* call gh://** - #2", "gh.get_repo read gh:/repos/sharedos/** - #1"},
		"integration:codex":       {"gh.create_issue call gh:/create_issue - #3"},
	}
	for _, sub := range s.Subjects {
		if got := rows(sub); strings.Join(got, "\n") != strings.Join(want[sub.Subject], "\n") {
			t.Errorf("%s:\n%s\nwant\n%s", sub.Subject, strings.Join(got, "\n"), strings.Join(want[sub.Subject], "\n"))
		}
	}
	// read on gh:/other reaches no configured tool, and a tool that is
	// not configured needs call.
	if len(s.Problems) != 1 || !strings.Contains(s.Problems[0].String(), "k.toml:32: grant #4: gives read on gh:/other, which no tool uses") ||
		!strings.Contains(s.Problems[0].String(), "gh.* (every other tool: call on gh:/<tool>, known once it runs)") {
		t.Errorf("problems %v", s.Problems)
	}

	// What a running kernel reported joins the problems.
	s.CheckUpstreamReport(c, status.Report{Written: summaryNow, Upstreams: []status.Upstream{
		{Name: "gh", State: "ready", Withheld: []status.Withheld{{Name: "gh.read_me", Reason: upstream.ReasonNotOffered, Detail: `a [[upstream.tool]] names "read_me", which the upstream does not offer`}}},
		{Name: "gone", State: "failed"},
	}})
	if len(s.Problems) != 2 || s.Problems[1].String() != `k.toml:1: upstream gh: gh.read_me is not published (not_offered): a [[upstream.tool]] names "read_me", which the upstream does not offer (as the kernel reported at 2026-06-01T00:00:00Z)` {
		t.Errorf("problems after the report %v", s.Problems)
	}
}

// TestSummarizeChildren: a child's effective rows are its own grants
// narrowed to its parent's, each naming the grant at each level and
// checked to lie within them; a child grant its parent could never
// satisfy is a problem, by its line.
func TestSummarizeChildren(t *testing.T) {
	c := mustParse(t, `[files]
root = "/srv"

[[grant]]
subject = "integration:cc"
resource = "files:/src"
descendants = true
actions = ["read", "write"]

[[grant]]
subject = "integration:cc.explorer"
resource = "files:/"
descendants = true
actions = ["read"]

[[grant]]
subject = "integration:cc.explorer"
resource = "files:/etc"
descendants = true
actions = ["write"]

[[integration]]
name = "cc.explorer"
parent = "cc"
`)
	s := Summarize(c, summaryNow)
	if len(s.Children) != 1 {
		t.Fatalf("children %+v", s.Children)
	}
	ch := s.Children[0]
	var got []string
	for _, r := range ch.Rows {
		got = append(got, fmt.Sprintf("%s %s %s %v", r.Tool, r.Action, r.Scope, r.Grants))
	}
	want := []string{"files.read read files:/src and below [1 0]"}
	if !slices.Equal(got, want) || !ch.Proved || !slices.Equal(ch.Chain, []string{"cc.explorer", "cc"}) || ch.Where != `k.toml:22: integration "cc.explorer"` {
		t.Errorf("child %+v\nrows %q, want %q", ch, got, want)
	}
	wantProblem := "k.toml:16: grant #3: gives integration:cc.explorer write on files:/etc and below, which its ancestor cc may never be allowed (no live grant of cc reaches it), so it can never match"
	if len(s.Problems) != 1 || s.Problems[0].String() != wantProblem {
		t.Errorf("problems %v, want %q", s.Problems, wantProblem)
	}
}
