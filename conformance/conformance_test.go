package main

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestClaudeCodeColumn runs the Claude Code column for real: the claude CLI
// on PATH, the binary built from this module, the reference kernel and a
// scripted Messages API model. Every case must pass, the cancellation case
// included (Claude Code times the held call out after 2 s and cancels it),
// except one that asks for a tool Claude Code does not offer: Claude Code
// refuses that call itself, so the kernel is never asked and the case is
// "not exercised"; one started while no kernel runs, which Claude Code
// carries on without; and the two a person must approve: Claude Code
// declares elicitation and the shim asks, but a headless run with --bare
// skips hooks and has no dialog, so it answers cancel and the call is
// answered approval_pending ("not exercised"). Claude Code without
// --bare, which names the MCP tools and declares them only through
// ToolSearch, plays a one-call and a two-call turn the same way, and
// the two approval cases with an Elicitation hook answering for the
// person: those must pass.
func TestClaudeCodeColumn(t *testing.T) {
	if testing.Short() {
		t.Skip("drives the claude CLI end to end")
	}
	cli, err := exec.LookPath("claude")
	if err != nil {
		t.Skip("claude is not on PATH (npm install -g @anthropic-ai/claude-code); the Claude Code column was not run")
	}
	dir, err := os.MkdirTemp("", "cft")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin, err := buildBinary(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	toolSearchCases, err := selectCases("read-outside,escalation,ask-approved,ask-declined")
	if err != nil {
		t.Fatal(err)
	}
	for _, col := range []struct {
		h     *harness
		cases []Case
	}{{claudeCode, cases}, {claudeCodeToolSearch, toolSearchCases}} {
		t.Run(col.h.ID, func(t *testing.T) {
			results := runColumn(ctx, col.h, cli, col.cases, options{bin: bin, caseTimeout: time.Minute, parallel: 2})
			var m Manifest
			m.ToolPolicy, m.ProxyTools = col.h.Policy, col.h.proxyTools
			m.summarize(results)
			for i, r := range results {
				c := col.cases[i]
				switch {
				case c.NoKernel:
					// docs/install/claude-code.md and doctor say Claude Code
					// runs on without the server; this keeps them true.
					if r.Grade != gradeCarriesOn {
						t.Errorf("%s: %s: %s; docs/install/claude-code.md and doctor say Claude Code carries on without the server", c.ID, r.Grade, r.Detail)
					}
				case r.Grade == gradePass:
				case c.Elicit != "" && col.h == claudeCode && r.Grade == gradeNotExercised &&
					strings.Contains(r.Detail, "the person at the harness was asked and gave no decision (cancelled)"):
					t.Logf("%s: not exercised, as expected: --bare skips the Elicitation hook and -p shows no dialog: %s", c.ID, r.Detail)
				case r.Grade == gradeNotExercised && !offersAll(r.Offered, c.Steps):
					t.Logf("%s: not exercised, as expected for a tool Claude Code does not offer: %s", c.ID, r.Detail)
				default:
					t.Errorf("%s: %s: %s", c.ID, r.Grade, r.Detail)
				}
			}
			if m.CatalogHash == "" || len(m.PolicyViolations) > 0 {
				t.Errorf("manifest: catalogHash %q, tools outside the strict policy %v", m.CatalogHash, m.PolicyViolations)
			}
		})
	}
}

// offersAll reports whether every tool the steps call was offered.
func offersAll(offered []string, steps [][]Call) bool {
	for _, step := range steps {
		for _, c := range step {
			if !slices.ContainsFunc(offered, func(o string) bool {
				s, ok := managedSuffix(o)
				return ok && s == portable(c.Tool)
			}) {
				return false
			}
		}
	}
	return true
}

func TestToolPolicyValidate(t *testing.T) {
	tests := []struct {
		name   string
		policy ToolPolicy
		ok     bool
	}{
		{"a strict policy with only managed servers is valid", ToolPolicy{Mode: "strict", ManagedMCP: []string{"sharedos"}}, true},
		{"a strict policy cannot reach a server directly", ToolPolicy{Mode: "strict", ManagedMCP: []string{"sharedos"}, ExternalDirect: []string{"github"}}, false},
		{"a strict policy cannot keep harness tools", ToolPolicy{Mode: "strict", ManagedMCP: []string{"sharedos"}, HarnessLocal: []string{"Bash"}}, false},
		{"a hybrid policy names its harness tools", ToolPolicy{Mode: "hybrid", ManagedMCP: []string{"sharedos"}, HarnessLocal: []string{"exec_command"}}, true},
		{"a policy needs a managed server", ToolPolicy{Mode: "hybrid"}, false},
		{"an unknown mode is refused", ToolPolicy{Mode: "open", ManagedMCP: []string{"sharedos"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.policy.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate() = %v, want ok %v", err, tt.ok)
			}
		})
	}
	for _, h := range harnesses {
		if err := h.Policy.Validate(); err != nil {
			t.Errorf("%s declares an invalid policy: %v", h.ID, err)
		}
	}
}

func TestRoundsAreReadFromEchoedCallIDs(t *testing.T) {
	tests := []struct {
		id    string
		round int
		ok    bool
	}{
		{callID(0, 0), 0, true},
		{"toolu_" + callID(3, 1), 3, true},
		{"toolu_01ABC", 0, false},
		{"call_x_1", 0, false},
	}
	for _, tt := range tests {
		r, ok := roundOf(tt.id)
		if r != tt.round || ok != tt.ok {
			t.Errorf("roundOf(%q) = %d, %v; want %d, %v", tt.id, r, ok, tt.round, tt.ok)
		}
	}
}
