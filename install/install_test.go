package install

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

const testCommand = "/opt/sharedos/bin/sharedos-mcp"

var inputExt = map[string]string{
	"claude-code": "json", "codex": "toml", "gemini": "json", "pi": "json",
	"deepseek": "yml", "cursor": "json", "vscode": "json", "opencode": "json",
}

func mustHarness(t *testing.T, id string) Harness {
	t.Helper()
	h, ok := Lookup(id)
	if !ok {
		t.Fatalf("Lookup(%q) found nothing", id)
	}
	return h
}

func readInput(t *testing.T, id string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "input", id+"."+inputExt[id]))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./install -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file:\n%s", name, Diff(path, "got", want, got))
	}
}

func TestEveryHarnessHasAnInput(t *testing.T) {
	for _, id := range Harnesses() {
		if inputExt[id] == "" {
			t.Errorf("harness %q has no test input", id)
		}
	}
}

// The golden files are what install writes, script-mode edit included.
func TestRenderInstallMatchesGoldenFiles(t *testing.T) {
	for _, id := range Harnesses() {
		h := mustHarness(t, id)
		ext := inputExt[id]
		t.Run(id+" into a new file", func(t *testing.T) {
			got, _, err := h.RenderInstall(nil, NewEntry(testCommand, id, ""), Options{})
			if err != nil {
				t.Fatal(err)
			}
			golden(t, id+"-fresh."+ext, got)
		})
		t.Run(id+" merged into an existing file", func(t *testing.T) {
			got, _, err := h.RenderInstall(readInput(t, id), NewEntry(testCommand, id, "/run/user/1000/sharedos/kernel.sock"), Options{})
			if err != nil {
				t.Fatal(err)
			}
			golden(t, id+"-merged."+ext, got)
		})
	}
}

func TestInstallThenUninstallRestoresTheFileByteForByte(t *testing.T) {
	for _, id := range Harnesses() {
		t.Run(id, func(t *testing.T) {
			h := mustHarness(t, id)
			orig := readInput(t, id)
			merged, err := h.Render(orig, NewEntry(testCommand, id, ""))
			if err != nil {
				t.Fatal(err)
			}
			back, err := h.Remove(merged)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(back, orig) {
				t.Errorf("round trip changed the file:\n%s", Diff("original", "after uninstall", orig, back))
			}
		})
	}
}

func TestASecondInstallChangesNothing(t *testing.T) {
	for _, id := range Harnesses() {
		t.Run(id, func(t *testing.T) {
			h := mustHarness(t, id)
			e := NewEntry(testCommand, id, "")
			for _, src := range [][]byte{nil, readInput(t, id)} {
				once, err := h.Render(src, e)
				if err != nil {
					t.Fatal(err)
				}
				twice, err := h.Render(once, e)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(once, twice) {
					t.Errorf("second install changed the file:\n%s", Diff("once", "twice", once, twice))
				}
			}
		})
	}
}

func TestReinstallingWithAnotherCommandReplacesOnlyOurEntry(t *testing.T) {
	for _, id := range Harnesses() {
		t.Run(id, func(t *testing.T) {
			h := mustHarness(t, id)
			orig := readInput(t, id)
			first, err := h.Render(orig, NewEntry("/old/sharedos-mcp", id, ""))
			if err != nil {
				t.Fatal(err)
			}
			second, err := h.Render(first, NewEntry(testCommand, id, ""))
			if err != nil {
				t.Fatal(err)
			}
			direct, err := h.Render(orig, NewEntry(testCommand, id, ""))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(second, direct) {
				t.Errorf("reinstall differs from a direct install:\n%s", Diff("direct", "reinstall", direct, second))
			}
			found, e, err := h.Find(second)
			if err != nil || !found || e.Command != testCommand {
				t.Errorf("Find = %v, %q, %v; want true, %q, nil", found, e.Command, err, testCommand)
			}
		})
	}
}

func TestFindReportsOurEntryItsCommandAndItsArguments(t *testing.T) {
	for _, id := range Harnesses() {
		t.Run(id, func(t *testing.T) {
			h := mustHarness(t, id)
			found, e, err := h.Find(readInput(t, id))
			if err != nil || found || e.Command != "" || e.Args != nil {
				t.Errorf("Find(input) = %v, %+v, %v; want false, no entry, nil", found, e, err)
			}
			want := NewEntry(testCommand, "my integration", "/run/k.sock")
			merged, err := h.Render(readInput(t, id), want)
			if err != nil {
				t.Fatal(err)
			}
			found, e, err = h.Find(merged)
			if err != nil || !found || e.Command != testCommand || strings.Join(e.Args, "|") != strings.Join(want.Args, "|") {
				t.Errorf("Find(merged) = %v, %+v, %v; want true, %+v, nil", found, e, err, want)
			}
			if name, _ := e.Flag("integration"); name != "my integration" {
				t.Errorf("integration %q, want %q", name, "my integration")
			}
			if sock, _ := e.Flag("socket"); sock != "/run/k.sock" {
				t.Errorf("socket %q, want /run/k.sock", sock)
			}
		})
	}
}

func TestEntryFlagReadsEverySpelling(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--integration", "x"}, {"serve", "-integration", "x"},
		{"serve", "--integration=x"}, {"serve", "-integration=x", "--socket", "/s"},
	} {
		if got, ok := (Entry{Args: args}).Flag("integration"); !ok || got != "x" {
			t.Errorf("%q: Flag = %q, %v; want x", args, got, ok)
		}
	}
	for _, args := range [][]string{{"serve"}, {"serve", "--integration"}, {"serve", "--", "--integration", "x"}, {"integration", "x"}} {
		if got, ok := (Entry{Args: args}).Flag("integration"); ok {
			t.Errorf("%q: Flag = %q; want none", args, got)
		}
	}
}

func TestUninstallWithoutOurEntryChangesNothing(t *testing.T) {
	for _, id := range Harnesses() {
		t.Run(id, func(t *testing.T) {
			orig := readInput(t, id)
			got, err := mustHarness(t, id).Remove(orig)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, orig) {
				t.Errorf("Remove changed a file without our entry:\n%s", Diff("orig", "got", orig, got))
			}
		})
	}
}

func TestUnparsableFilesAreRefusedWithTheirPosition(t *testing.T) {
	tests := []struct {
		harness string
		src     string
		line    int
	}{
		{"claude-code", "{\n  \"a\": 1\n  \"b\": 2\n}\n", 3},
		{"claude-code", "{\n  \"a\": [1, 2,\n", 3},
		{"vscode", "{\n  /* unterminated\n}\n", 2},
		{"gemini", "{\"a\": tru}", 1},
		{"codex", "model = \"x\"\n[mcp_servers.docs\ncommand = \"y\"\n", 2},
		{"codex", "a = 1\na = 2\n", 2},
		{"deepseek", "- id: a\n- id: b\n  config: x: 1\n", 3},
	}
	for _, tt := range tests {
		t.Run(tt.harness+" "+strings.SplitN(tt.src, "\n", 2)[0], func(t *testing.T) {
			h := mustHarness(t, tt.harness)
			for name, op := range map[string]func() error{
				"install":   func() error { _, err := h.Render([]byte(tt.src), NewEntry(testCommand, "x", "")); return err },
				"uninstall": func() error { _, err := h.Remove([]byte(tt.src)); return err },
				"inspect":   func() error { _, _, err := h.Find([]byte(tt.src)); return err },
			} {
				var pe *ParseError
				if err := op(); !errors.As(err, &pe) {
					t.Errorf("%s: error %v, want a *ParseError", name, err)
				} else if pe.Line != tt.line {
					t.Errorf("%s: %v: line %d, want %d", name, pe, pe.Line, tt.line)
				}
			}
		})
	}
}

func TestPathsFollowHomeScopeAndVariables(t *testing.T) {
	env := Env{Home: "/home/ada", Dir: "/work/app", GOOS: "linux"}
	vars := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	tests := []struct {
		harness string
		scope   Scope
		env     Env
		want    string
	}{
		{"claude-code", ScopeUser, env, "/home/ada/.claude.json"},
		{"claude-code", ScopeProject, env, "/work/app/.mcp.json"},
		{"codex", ScopeUser, env, "/home/ada/.codex/config.toml"},
		{"codex", ScopeUser, Env{Home: "/home/ada", Dir: "/work/app", Getenv: vars("CODEX_HOME", "/etc/codex")}, "/etc/codex/config.toml"},
		{"codex", ScopeUser, Env{Home: "/home/ada", Dir: "/work/app", Getenv: vars("CODEX_HOME", "cx")}, "/work/app/cx/config.toml"},
		{"codex", ScopeProject, env, "/work/app/.codex/config.toml"},
		{"gemini", ScopeUser, env, "/home/ada/.gemini/settings.json"},
		{"gemini", ScopeProject, env, "/work/app/.gemini/settings.json"},
		{"pi", ScopeUser, env, "/home/ada/.pi/agent/mcp.json"},
		{"pi", ScopeProject, env, "/work/app/.pi/mcp.json"},
		{"deepseek", ScopeUser, env, "/home/ada/.dsh/cordis.patch.yml"},
		{"deepseek", ScopeUser, Env{Home: "/home/ada", Getenv: vars("DSH_HOME", "/opt/dsh")}, "/opt/dsh/cordis.patch.yml"},
		{"deepseek", ScopeProject, env, "/work/app/.dsh/cordis.patch.yml"},
		{"cursor", ScopeUser, env, "/home/ada/.cursor/mcp.json"},
		{"cursor", ScopeProject, env, "/work/app/.cursor/mcp.json"},
		{"vscode", ScopeUser, env, "/home/ada/.config/Code/User/mcp.json"},
		{"vscode", ScopeUser, Env{Home: "/Users/ada", GOOS: "darwin"}, "/Users/ada/Library/Application Support/Code/User/mcp.json"},
		{"vscode", ScopeProject, env, "/work/app/.vscode/mcp.json"},
		{"opencode", ScopeUser, env, "/home/ada/.config/opencode/opencode.json"},
		{"opencode", ScopeUser, Env{Home: "/home/ada", Getenv: vars("XDG_CONFIG_HOME", "/xdg")}, "/xdg/opencode/opencode.json"},
		{"opencode", ScopeProject, env, "/work/app/opencode.json"},
	}
	for _, tt := range tests {
		got, err := mustHarness(t, tt.harness).Path(tt.scope, tt.env)
		if err != nil || got != tt.want {
			t.Errorf("%s %s: Path = %q, %v; want %q", tt.harness, tt.scope, got, err, tt.want)
		}
	}
	if _, err := mustHarness(t, "vscode").Path(ScopeUser, Env{Home: "/h", GOOS: "plan9"}); err == nil {
		t.Error("vscode on plan9: want an error")
	}
	if _, err := mustHarness(t, "cursor").Path(ScopeUser, Env{}); err == nil {
		t.Error("no home: want an error")
	}
}

func TestLookupAndHarnessesAgree(t *testing.T) {
	ids := Harnesses()
	want := []string{"claude-code", "codex", "gemini", "pi", "deepseek", "cursor", "vscode", "opencode"}
	if strings.Join(ids, " ") != strings.Join(want, " ") {
		t.Errorf("Harnesses() = %v, want %v", ids, want)
	}
	if _, ok := Lookup("emacs"); ok {
		t.Error("Lookup(emacs) found a harness")
	}
}

func TestNewEntryAddsTheSocketOnlyWhenGiven(t *testing.T) {
	e := NewEntry("/bin/s", "codex", "")
	if strings.Join(e.Args, " ") != "serve --integration codex" {
		t.Errorf("args %q", e.Args)
	}
	e = NewEntry("/bin/s", "my tool", "/run/k.sock")
	if strings.Join(e.Args, "|") != "serve|--integration|my tool|--socket|/run/k.sock" {
		t.Errorf("args %q", e.Args)
	}
}

func TestEntriesThatNoFormatCanCarryAreRefused(t *testing.T) {
	h := mustHarness(t, "claude-code")
	if _, err := h.Render(nil, Entry{}); err == nil {
		t.Error("empty command: want an error")
	}
	if _, err := h.Render(nil, NewEntry("/bin/\xff", "x", "")); err == nil {
		t.Error("invalid UTF-8: want an error")
	}
}

func TestCommandsWithQuotesAndBackslashesSurviveEveryFormat(t *testing.T) {
	cmd := `/home/a "b"/c\d & <e>/sharedos-mcp`
	for _, id := range Harnesses() {
		h := mustHarness(t, id)
		out, err := h.Render(readInput(t, id), NewEntry(cmd, id, "/tmp/tab\there"))
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		found, got, err := h.Find(out)
		if err != nil || !found || got.Command != cmd {
			t.Errorf("%s: Find = %v, %q, %v; want %q", id, found, got.Command, err, cmd)
		}
		if sock, _ := got.Flag("socket"); sock != "/tmp/tab\there" {
			t.Errorf("%s: socket %q, want %q", id, sock, "/tmp/tab\there")
		}
	}
}
