package cmd

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sharedos/sharedos-mcp/install"
	"github.com/sharedos/sharedos-mcp/internal/cli"
)

// installCLI runs the command line args as main would.
func installCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Run(t.Context(), cli.IO{In: strings.NewReader(""), Out: &out, Err: &errOut}, args)
	return code, out.String(), errOut.String()
}

// tempHome points HOME and the working directory at a new temporary
// directory and clears the variables that would move config files.
func tempHome(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("HOME", dir)
	for _, v := range []string{"CODEX_HOME", "DSH_HOME", "PI_CODING_AGENT_DIR", "PI_MCP_CONFIG_MODE", "XDG_CONFIG_HOME", "XDG_RUNTIME_DIR", "SHAREDOS_SOCKET"} {
		t.Setenv(v, "")
	}
	t.Chdir(dir)
	return dir
}

func thisBinary(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

func TestInstallWritesANewUserFileAndSaysHowToVerify(t *testing.T) {
	home := tempHome(t)
	code, stdout, stderr := installCLI(t, "install", "codex", "--socket", "k.sock")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	path := filepath.Join(home, ".codex", "config.toml")
	want := "installed sharedos in " + path + "; verify with: codex mcp list\n"
	if stdout != want {
		t.Errorf("stdout = %q, want %q", stdout, want)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v, want 0600", fi.Mode().Perm())
	}
	if di, _ := os.Stat(filepath.Dir(path)); di.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v, want 0700", di.Mode().Perm())
	}
	h, _ := install.Lookup("codex")
	got, _ := os.ReadFile(path)
	entry, _ := h.Render(nil, install.NewEntry(thisBinary(t), "codex", filepath.Join(home, "k.sock")))
	wantFile := "# Created by 'sharedos-mcp install codex'; 'sharedos-mcp uninstall codex' removes this file while nothing else is in it.\n" + string(entry)
	if string(got) != wantFile {
		t.Errorf("file:\n%s\nwant:\n%s", got, wantFile)
	}
}

// TestUninstallRemovesTheFileInstallCreated: the Codex config install
// made goes with the entry, while nothing else is in it; a file the user
// made, or added to, stays.
func TestUninstallRemovesTheFileInstallCreated(t *testing.T) {
	home := tempHome(t)
	path := filepath.Join(home, ".codex", "config.toml")
	if code, _, stderr := installCLI(t, "install", "codex"); code != 0 {
		t.Fatal(stderr)
	}
	code, stdout, stderr := installCLI(t, "uninstall", "codex")
	if want := "removed sharedos from " + path + ", and the file with it: install created it, and nothing else is in it\n"; code != 0 || stdout != want {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 0 and %q", code, stdout, stderr, want)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the file install created is still there: %v", err)
	}

	if code, _, stderr := installCLI(t, "install", "codex"); code != 0 {
		t.Fatal(stderr)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(f, "\n[mcp_servers.linear]\nurl = \"https://mcp.linear.app/sse\"\n")
	f.Close()
	if code, stdout, _ := installCLI(t, "uninstall", "codex"); code != 0 || stdout != "removed sharedos from "+path+"\n" {
		t.Errorf("exit %d, stdout %q: want the entry removed and the file kept", code, stdout)
	}
	if got, _ := os.ReadFile(path); !strings.Contains(string(got), "[mcp_servers.linear]") {
		t.Errorf("the user's server is gone:\n%s", got)
	}

	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := installCLI(t, "install", "codex"); code != 0 {
		t.Fatal(stderr)
	}
	if code, stdout, _ := installCLI(t, "uninstall", "codex"); code != 0 || stdout != "removed sharedos from "+path+"\n" {
		t.Errorf("exit %d, stdout %q: want the entry removed from the user's own empty file, and the file kept", code, stdout)
	}
	if got, err := os.ReadFile(path); err != nil || len(bytes.TrimSpace(got)) != 0 {
		t.Errorf("the user's empty file is %q (%v), want it back, empty", got, err)
	}
}

func TestASecondInstallSaysNothingChanged(t *testing.T) {
	home := tempHome(t)
	if code, _, stderr := installCLI(t, "install", "gemini"); code != 0 {
		t.Fatal(stderr)
	}
	path := filepath.Join(home, ".gemini", "settings.json")
	before, _ := os.ReadFile(path)
	code, stdout, _ := installCLI(t, "install", "gemini")
	if code != 0 || !strings.Contains(stdout, "nothing changed") {
		t.Errorf("exit %d, stdout %q; want 0 and nothing changed", code, stdout)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("second install rewrote the file")
	}
}

func TestInstallThenUninstallLeavesTheUsersFileAsItWas(t *testing.T) {
	home := tempHome(t)
	path := filepath.Join(home, ".cursor", "mcp.json")
	orig := "{\n  \"mcpServers\": {\n    \"linear\": {\"url\": \"https://mcp.linear.app/sse\"}\n  },\n  \"x\": [1, 2]\n}\n"
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := installCLI(t, "install", "cursor"); code != 0 {
		t.Fatal(stderr)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
		t.Errorf("install changed the file mode to %v", fi.Mode().Perm())
	}
	code, stdout, stderr := installCLI(t, "uninstall", "cursor")
	if code != 0 || stdout != "removed sharedos from "+path+"\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if got, _ := os.ReadFile(path); string(got) != orig {
		t.Errorf("after uninstall:\n%s\nwant:\n%s", got, orig)
	}
	code, stdout, _ = installCLI(t, "uninstall", "cursor")
	if code != 0 || !strings.Contains(stdout, "holds no sharedos entry; nothing changed") {
		t.Errorf("second uninstall: exit %d, stdout %q", code, stdout)
	}
}

func TestDryRunPrintsADiffAndWritesNothing(t *testing.T) {
	home := tempHome(t)
	code, stdout, stderr := installCLI(t, "install", "--dry-run", "--scope", "project", "claude-code")
	if code != 0 {
		t.Fatal(stderr)
	}
	path := filepath.Join(home, ".mcp.json")
	for _, want := range []string{"--- /dev/null\n", "+++ " + path + "\n", "@@ -0,0 +1,14 @@\n", "+    \"sharedos\": {\n", "dry run: " + path + " was not written\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("dry run created %s (%v)", path, err)
	}
}

func TestAnUnparsableFileIsRefusedAndLeftUntouched(t *testing.T) {
	home := tempHome(t)
	path := filepath.Join(home, ".claude.json")
	broken := "{\n  \"numStartups\": 3,\n  \"theme\" \"dark\"\n}\n"
	if err := os.WriteFile(path, []byte(broken), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"install", "uninstall"} {
		code, stdout, stderr := installCLI(t, verb, "claude-code")
		if code != 1 || stdout != "" {
			t.Errorf("%s: exit %d, stdout %q; want 1 and nothing", verb, code, stdout)
		}
		if !strings.Contains(stderr, path+": line 3, column 11: ") || !strings.Contains(stderr, "hint: ") {
			t.Errorf("%s: stderr does not name the file and position:\n%s", verb, stderr)
		}
	}
	if got, _ := os.ReadFile(path); string(got) != broken {
		t.Errorf("the file was changed:\n%s", got)
	}
}

func TestUnknownHarnessListsTheKnownOnes(t *testing.T) {
	tempHome(t)
	for _, verb := range []string{"install", "uninstall"} {
		code, _, stderr := installCLI(t, verb, "emacs")
		if code != 2 {
			t.Errorf("%s: exit %d, want 2", verb, code)
		}
		for _, id := range install.Harnesses() {
			if !strings.Contains(stderr, id) {
				t.Errorf("%s: stderr does not list %s:\n%s", verb, id, stderr)
			}
		}
	}
}

func TestInstallUsageErrors(t *testing.T) {
	home := tempHome(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no harness", []string{"install"}, "install: missing HARNESS"},
		{"two harnesses", []string{"install", "codex", "gemini"}, `install: unexpected argument "gemini"`},
		{"bad scope", []string{"install", "codex", "--scope", "system"}, `install: unknown scope "system"`},
		{"bad integration name", []string{"install", "codex", "--integration", "a/b"}, `install: invalid integration name "a/b"`},
		{"a harness by its product name", []string{"install", "claude"}, "install: unknown harness \"claude\"\nhint: did you mean claude-code? the harnesses are claude-code, codex, gemini, pi, deepseek, cursor, vscode, opencode"},
		{"script mode on a harness without one", []string{"install", "codex", "--keep-script-mode"}, "install: --keep-script-mode is for pi only; codex has no script mode"},
		{"uninstall without harness", []string{"uninstall"}, "uninstall: missing HARNESS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := installCLI(t, tt.args...)
			if code != 2 || !strings.Contains(stderr, "sharedos-mcp: error: "+tt.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr, tt.want)
			}
		})
	}
	if entries, _ := os.ReadDir(home); len(entries) != 0 {
		t.Errorf("usage errors wrote files: %v", entries)
	}
}

func TestIntegrationFlagNamesTheIntegration(t *testing.T) {
	home := tempHome(t)
	if code, _, stderr := installCLI(t, "install", "opencode", "--integration", "team tools", "--scope", "project"); code != 0 {
		t.Fatal(stderr)
	}
	got, _ := os.ReadFile(filepath.Join(home, "opencode.json"))
	if !strings.Contains(string(got), "\"--integration\",\n        \"team tools\"") {
		t.Errorf("opencode.json does not pass the integration name:\n%s", got)
	}
}
