package config

import (
	"errors"
	"strings"
	"testing"
)

// TestParseReportsEveryProblemAtOnce: a config with several mistakes
// says all of them in one reading, each with its place and, where one
// edit away, what was likely meant; a document that cannot be read on
// stops at its first.
func TestParseReportsEveryProblemAtOnce(t *testing.T) {
	doc := `allow_uids = []
[files]
root = "/srv"
alow_hard_links = true

[[grant]]
subjet = "integration:claude-code"
resource = "files:/docs"
actions = ["raed", "list"]

[[grant]]
subject = "integration:codex"
resource = "file:/src"
actions = ["write"]
expires = 2027-01-01T00:00:00

[[upstream]]
name = "memory"
command = ["memory-server"]
[[upstream.tool]]
name = "read_graph"
action = "reed"

[[upstream]]
name = "files"
command = ["x"]
`
	_, err := Parse("c.toml", []byte(doc))
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("Parse = %v, want an *Error", err)
	}
	want := []string{
		`c.toml:4:1: unknown key "files.alow_hard_links" (did you mean allow_hard_links?)`,
		`c.toml:7:1: unknown key "grant.subjet" (did you mean subject?)`,
		`c.toml: allow_uids is empty, so no one could connect; remove it to serve your own uid`,
		`c.toml:22:1: upstream #1 tool #1 action: "reed": the action must be one of read, list, search, write, call; did you mean read?`,
		`c.toml:25:1: upstream #2 name: "files": the name is reserved for the kernel's own tools`,
		`c.toml:6: grant #1: subject "": want integration:NAME or integration:*`,
		`c.toml:6: grant #1: action "raed": want one of read, list, search, write, escalate, call; did you mean read?`,
		`c.toml:11: grant #2: resource "file:/src": unknown namespace "file", so the grant could never match (the namespaces are files, sharedos, memory); did you mean files:/src?`,
		`c.toml:11: grant #2: expires must be a date-time with an offset, e.g. 2027-01-01T00:00:00Z`,
	}
	var got []string
	for _, p := range ce.Problems() {
		got = append(got, p.Error())
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if err.Error() != strings.Join(want, "\n") {
		t.Errorf("the error is not its problems, one per line:\n%s", err)
	}

	for name, doc := range map[string]string{
		"bad TOML":           "[files\nroot = 1\n[[grant]]\nsubjet = 1\n",
		"a value's type":     "[files]\nroot = 1\n[[grant]]\nsubjet = \"x\"\n",
		"one problem, alone": "[[grant]]\nsubject = \"integration:x\"\nresource = \"files:/\"\nactions = [\"lsit\"]\n",
	} {
		_, err := Parse("c.toml", []byte(doc))
		if !errors.As(err, &ce) || len(ce.Problems()) != 1 {
			t.Errorf("%s: Parse = %v, want one problem", name, err)
		}
	}
}

// TestParseReportsEachProblemOfOneGrant: a grant wrong in its action and
// its ask says both, and a parent named only by a grant with another
// problem is not reported missing.
func TestParseReportsEachProblemOfOneGrant(t *testing.T) {
	doc := `[[grant]]
subject = "integration:claude-code"
resource = "files:/"
actions = ["raed"]
ask = "boss"

[[integration]]
name = "claude-code.explorer"
parent = "claude-code"
`
	_, err := Parse("c.toml", []byte(doc))
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("Parse = %v, want an *Error", err)
	}
	var got []string
	for _, p := range ce.Problems() {
		got = append(got, p.Error())
	}
	if len(got) != 2 || !strings.Contains(got[0], `c.toml:1: grant #1: action "raed": want one of`) || !strings.HasSuffix(got[0], "; did you mean read?") ||
		!strings.Contains(got[1], `c.toml:1: grant #1: ask "boss": want "harness"`) {
		t.Errorf("problems:\n%s\nwant the action, with what it likely means, and the ask", strings.Join(got, "\n"))
	}
}
