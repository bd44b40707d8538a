package install

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestInstallPiTurnsScriptModeOffUnlessKept(t *testing.T) {
	h := mustHarness(t, "pi")
	e := NewEntry(testCommand, "pi", "")
	tests := []struct {
		name string
		src  string
		opts Options
		edit ScriptModeEdit
		off  bool
	}{
		{"a new file", "", Options{}, ScriptModeTurnedOff, true},
		{"a file that leaves it at the default", string(readInput(t, "pi")), Options{}, ScriptModeTurnedOff, true},
		{"a file that turned it on", `{"settings": {"scriptMode": true}}`, Options{}, ScriptModeTurnedOff, true},
		{"a file that already turned it off", `{"settings": {"scriptMode": false, "toolPrefix": "none"}}`, Options{}, ScriptModeAlreadyOff, true},
		{"--keep-script-mode", string(readInput(t, "pi")), Options{KeepScriptMode: true}, ScriptModeKept, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, edit, err := h.RenderInstall([]byte(tt.src), e, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if edit != tt.edit || h.ScriptModeOff(out) != tt.off {
				t.Errorf("edit %v, off %v; want %v, %v:\n%s", edit, h.ScriptModeOff(out), tt.edit, tt.off, out)
			}
			if found, got, _ := h.Find(out); !found || got.Command != testCommand {
				t.Errorf("the entry is not there:\n%s", out)
			}
			again, edit, err := h.RenderInstall(out, e, tt.opts)
			if err != nil || string(again) != string(out) || (edit != ScriptModeAlreadyOff && edit != ScriptModeKept) {
				t.Errorf("a second install changed the file or said %v: %v\n%s", edit, err, again)
			}
		})
	}
}

func TestOtherHarnessesHaveNoScriptMode(t *testing.T) {
	for _, id := range Harnesses() {
		h := mustHarness(t, id)
		if h.HasScriptMode() != (id == "pi") {
			t.Errorf("%s: HasScriptMode = %v", id, h.HasScriptMode())
		}
		if id == "pi" {
			continue
		}
		if _, edit, err := h.RenderInstall(nil, NewEntry(testCommand, id, ""), Options{}); err != nil || edit != ScriptModeNone {
			t.Errorf("%s: edit %v, %v; want none", id, edit, err)
		}
	}
}

// Uninstall removes only our entry: settings.scriptMode stays false, as
// it also keeps mcpScript away from the user's other servers.
func TestUninstallPiLeavesScriptModeOff(t *testing.T) {
	h := mustHarness(t, "pi")
	orig := readInput(t, "pi")
	out, _, err := h.RenderInstall(orig, NewEntry(testCommand, "pi", ""), Options{})
	if err != nil {
		t.Fatal(err)
	}
	back, err := h.Remove(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := jsonSet(orig, scriptModePath, false)
	if err != nil {
		t.Fatal(err)
	}
	if string(back) != string(want) || !h.ScriptModeOff(back) {
		t.Errorf("after uninstall:\n%s\nwant\n%s", back, want)
	}
}

func TestPiScriptModeFollowsTheAdaptersFileOrder(t *testing.T) {
	h := mustHarness(t, "pi")
	home, dir := t.TempDir(), t.TempDir()
	write := func(path, data string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	vars := map[string]string{}
	e := Env{Home: home, Dir: dir, Getenv: func(k string) string { return vars[k] }}
	check := func(wantOn bool, wantFile string) {
		t.Helper()
		st, err := h.ScriptMode(e)
		if err != nil || st.On != wantOn || st.File != wantFile {
			t.Errorf("ScriptMode = %+v, %v; want on=%v from %q", st, err, wantOn, wantFile)
		}
	}
	agent := filepath.Join(home, ".pi", "agent", "mcp.json")
	check(true, "")
	write(agent, `{"mcpServers": {}}`)
	check(true, "")
	write(agent, `{"settings": {"scriptMode": false}}`)
	check(false, agent)
	// A shared file earlier in the order does not override Pi's own.
	write(filepath.Join(home, ".config", "mcp", "mcp.json"), `{"settings": {"scriptMode": true}}`)
	check(false, agent)
	// A project file later in the order does.
	project := filepath.Join(dir, ".mcp.json")
	write(project, `{"settings": {"scriptMode": true}}`)
	check(true, project)
	// Anything but the literal false is on, as the adapter tests !== false.
	piProject := filepath.Join(dir, ".pi", "mcp.json")
	write(piProject, `{"settings": {"scriptMode": "false"}}`)
	check(true, piProject)
	// A file the adapter would skip decides nothing.
	write(piProject, `{"settings": {"scriptMode": false`)
	check(true, project)
	write(piProject, `{"settings": [false]}`)
	check(true, project)
	// Exclusive mode reads the agent file alone.
	vars["PI_MCP_CONFIG_MODE"] = "exclusive"
	check(false, agent)
	// PI_CODING_AGENT_DIR moves it, with ~ for home as Pi reads it.
	vars["PI_CODING_AGENT_DIR"] = "~/elsewhere"
	check(true, "")
	moved := filepath.Join(home, "elsewhere", "mcp.json")
	write(moved, `// comments are fine
{"settings": {"scriptMode": false,},}`)
	check(false, moved)
}

func TestLookupOrSuggest(t *testing.T) {
	for in, want := range map[string]string{"claude": "claude-code", "gemini-cli": "gemini", "Claude Code": "claude-code", "code": "vscode", "emacs": ""} {
		_, err := LookupOrSuggest(in)
		ue, ok := err.(*UnknownHarnessError)
		if !ok || ue.Suggestion != want || ue.ID != in || !strings.Contains(err.Error(), `"`+in+`"`) {
			t.Errorf("LookupOrSuggest(%q) = %v (%+v), want the suggestion %q", in, err, ue, want)
		}
	}
	if h, err := LookupOrSuggest("codex"); err != nil || h.ID != "codex" {
		t.Errorf("LookupOrSuggest(codex) = %v, %v", h.ID, err)
	}
}
