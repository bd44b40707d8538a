package cmd

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/cli"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
)

// pendingState writes a config naming upstream "test" and a pins file in
// which test.echo's definition "B" (hash bbbb…) is pending over "A".
func pendingState(t *testing.T) (config, pending string) {
	t.Helper()
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	config = filepath.Join(dir, "kernel.toml")
	if err := os.WriteFile(config, []byte("state_dir = \"state\"\n[[upstream]]\nname = \"test\"\ncommand = [\"x\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	def := func(d string) json.RawMessage {
		return json.RawMessage(`{"description":"` + d + `","inputSchema":{"type":"object"},"name":"echo"}`)
	}
	a, b := strings.Repeat("a", 64), strings.Repeat("b", 64)
	pins := map[string]any{"version": 1, "upstreams": map[string]any{"test": map[string]any{"echo": map[string]any{
		"pinned":  map[string]any{"sha256": a, "definition": def("A"), "time": "2026-12-01T11:00:00Z"},
		"pending": map[string]any{"sha256": b, "definition": def("B"), "time": "2026-12-01T11:03:20Z"},
	}}}}
	raw, _ := json.Marshal(pins)
	if err := os.WriteFile(filepath.Join(state, upstream.PinsFile), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return config, b
}

// TestApproveAsksOnATerminal: without --sha256, approve shows the
// pending definition and its hash and asks; "y" approves exactly what
// was shown, anything else nothing.
func TestApproveAsksOnATerminal(t *testing.T) {
	terminal := stdinIsTerminal
	t.Cleanup(func() { stdinIsTerminal = terminal })
	stdinIsTerminal = func(io.Reader) bool { return true }
	for _, tt := range []struct {
		answer string
		code   int
	}{{"n\n", 1}, {"\n", 1}, {"y\n", 0}} {
		config, pending := pendingState(t)
		var out, errOut bytes.Buffer
		code := Run(t.Context(), cli.IO{In: strings.NewReader(tt.answer), Out: &out, Err: &errOut}, []string{"kernel", "approve", "test", "echo", "--config", config})
		want := "test.echo is quarantined: its description changed since it was pinned (seen 2026-12-01T11:03:20Z)\n" +
			"  description pinned:  \"A\"\n" +
			"  description offered: \"B\"\n" +
			"  sha256 " + pending + " (pinned: " + strings.Repeat("a", 64) + ")\n" +
			"approve? [y/N] "
		if code != tt.code || !strings.HasPrefix(out.String(), want) {
			t.Errorf("answer %q: exit %d, stdout:\n%s\nstderr:\n%s\nwant exit %d, stdout beginning:\n%s", tt.answer, code, &out, &errOut, tt.code, want)
		}
		approved := strings.Contains(out.String(), "approved test.echo: description changed\n  description was: \"A\"\n  description now: \"B\"\n")
		if approved != (tt.code == 0) {
			t.Errorf("answer %q: approved %v:\n%s", tt.answer, approved, &out)
		}
		if tt.code != 0 && errOut.String() != "sharedos-mcp: error: kernel approve: not approved; nothing was pinned\nhint: the tools stay unpublished; approve when you trust them\n" {
			t.Errorf("answer %q: stderr %q", tt.answer, &errOut)
		}
		q, err := upstream.Quarantined(filepath.Join(filepath.Dir(config), "state"))
		if err != nil || (len(q) == 0) != (tt.code == 0) {
			t.Errorf("answer %q: quarantined after = %+v, %v", tt.answer, q, err)
		}
	}
}
