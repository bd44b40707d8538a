package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/testbin"
	"github.com/sharedos/sharedos-mcp/internal/testfs"
)

// A subagent's grants inside its agent's: the explorer may read only
// /public, and may write anywhere by its own grant, but its parent
// claude-code may write only /public.
const childGrants = `
[[grant]]
subject = "integration:claude-code"
resource = "files:/"
descendants = true
actions = ["read", "list"]

[[grant]]
subject = "integration:claude-code"
resource = "files:/public"
descendants = true
actions = ["write"]

[[grant]]
subject = "integration:claude-code.explorer"
resource = "files:/public"
descendants = true
actions = ["read", "list"]

[[grant]]
subject = "integration:claude-code.explorer"
resource = "files:/"
descendants = true
actions = ["write"]

[[integration]]
name = "claude-code.explorer"
parent = "claude-code"
`

// installedEntry is one server of a harness config, as the harness runs it.
type installedEntry struct {
	Command string   `json:"command"`
	Args    []string `json:"args"`
}

// runEntry runs an installed entry as Claude Code would, with lines on its
// stdin, and returns its answers by id.
func runEntry(t *testing.T, e installedEntry, home string, in ...string) map[string]map[string]any {
	t.Helper()
	cmd := exec.Command(e.Command, e.Args...)
	cmd.Env = append(os.Environ(), "HOME="+home)
	cmd.Stdin = strings.NewReader(strings.Join(in, "\n") + "\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s", e.Command, e.Args, err, &stderr)
	}
	answers := map[string]map[string]any{}
	for _, line := range lines(stdout.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("the entry wrote %q: %v", line, err)
		}
		id, _ := json.Marshal(m["id"])
		answers[string(id)] = m
	}
	return answers
}

// refusal is the status and code of a refused call's answer, "" when it
// was not refused.
func refusal(m map[string]any) (status, code, text string) {
	if dig(m, "result", "isError") != true {
		return "", "", ""
	}
	status, _ = dig(m, "result", "_meta", "sharedos/status").(string)
	code, _ = dig(m, "result", "_meta", "sharedos/code").(string)
	text, _ = dig(m, "result", "content", 0, "text").(string)
	return status, code, text
}

// TestAChildEntryIsDeniedWhatItsParentMayDo: install writes the parent's
// entry and the subagent's further entry into one harness's config; run
// as the harness would, each is decided on its own integration's chain:
// the child is refused a read its parent is allowed, and a write its own
// grant gives but its parent's does not; kernel explain, asking the
// running kernel, names the grant of each level and why.
func TestAChildEntryIsDeniedWhatItsParentMayDo(t *testing.T) {
	root, _ := testfs.WriteTree(t)
	k := startKernelProcess(t, childGrants, root)
	bin := testbin.Path(t)
	home := t.TempDir()
	env := append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME=", "XDG_STATE_HOME="+filepath.Join(home, "state"))
	for _, args := range [][]string{
		{"install", "claude-code", "--socket", k.sock},
		{"install", "claude-code", "--integration", "claude-code.explorer", "--socket", k.sock},
	} {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	raw, err := os.ReadFile(filepath.Join(home, ".claude.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		MCPServers map[string]installedEntry `json:"mcpServers"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range cfg.MCPServers {
		names = append(names, n)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"sharedos", "sharedos-claude-code_explorer"}) {
		t.Fatalf("entries %v, want the parent's and the child's", names)
	}

	readSecret := mcpCall(1, "files.read", map[string]string{"path": "/private/secret.txt"})
	writeOutside := mcpCall(2, "files.write", map[string]string{"path": "/private/notes.txt", "content": "x"})
	parent := runEntry(t, cfg.MCPServers["sharedos"], home, mcpInit, readSecret)
	if st, code, _ := refusal(parent["1"]); st != "" {
		t.Errorf("the parent's read was refused %s/%s", st, code)
	}
	child := runEntry(t, cfg.MCPServers["sharedos-claude-code_explorer"], home, mcpInit, readSecret, writeOutside)
	if st, code, text := refusal(child["1"]); st != "denied" || code != "no_matching_grant" || !strings.Contains(text, "no grant allows read on files:/private/secret.txt") {
		t.Errorf("the child's read of what its parent may read: %s %s %q", st, code, text)
	}
	if st, code, text := refusal(child["2"]); st != "denied" || code != "no_matching_grant" ||
		!strings.Contains(text, "to claude-code, whose child this integration is (a child may do only what its parent may)") {
		t.Errorf("the child's write its own grant gives but its parent's does not: %s %s %q", st, code, text)
	}

	explain := exec.Command(bin, "kernel", "explain", "--socket", k.sock, "--integration", "claude-code.explorer",
		"files.read", `{"path":"/private/secret.txt"}`)
	explain.Env = env
	var out, errOut bytes.Buffer
	explain.Stdout, explain.Stderr = &out, &errOut
	err = explain.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("kernel explain: %v, want exit 1\n%s%s", err, &out, &errOut)
	}
	for _, want := range []string{
		"files.read by claude-code.explorer (child of claude-code), decided by the running kernel\n",
		"denied no_matching_grant: no grant allows read on files:/private/secret.txt\n",
		"  claude-code           #1, line 4   -         allows it\n",
		"  claude-code.explorer  #3, line 16  resource  covers files:/public and below, not files:/private/secret.txt\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("kernel explain lacks %q:\n%s", want, &out)
		}
	}

	// The record names the grants that came nearest for what the child
	// was refused: its parent's that allows the read, its own that does
	// not reach /private.
	k.stop(t)
	b, err := os.ReadFile(k.audit)
	if err != nil {
		t.Fatal(err)
	}
	var invoked []map[string]any
	for _, l := range lines(string(b)) {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		if m["event"] == "tool.invoked" && m["integration"] == "claude-code.explorer" {
			invoked = append(invoked, m)
		}
	}
	if len(invoked) != 2 || dig(invoked[0], "nearest", 0, "integration") != "claude-code" || dig(invoked[0], "nearest", 0, "grant") != 1.0 ||
		dig(invoked[0], "nearest", 2, "grant") != 3.0 || dig(invoked[0], "nearest", 2, "failed") != "resource" || dig(invoked[0], "nearest", 2, "line") != 16.0 {
		t.Errorf("the child's records: %v", invoked)
	}
}
