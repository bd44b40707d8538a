package install

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func testEnv(t *testing.T) Env {
	t.Helper()
	dir := t.TempDir()
	return Env{Home: filepath.Join(dir, "home"), Dir: filepath.Join(dir, "project"), GOOS: "linux"}
}

func writeFile(t *testing.T, path, data string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
}

func TestApplyCreatesPrivateFilesAndDirectories(t *testing.T) {
	env := testEnv(t)
	h := mustHarness(t, "pi")
	c, err := PlanInstall(h, ScopeUser, env, NewEntry("/s", "pi", ""), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Existed || !c.Changed() || !strings.HasPrefix(c.Diff(), "--- /dev/null\n") {
		t.Fatalf("plan for a new file: %+v", c)
	}
	if err := c.Apply(); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{
		filepath.Join(env.Home, ".pi", "agent", "mcp.json"): 0o600,
		filepath.Join(env.Home, ".pi", "agent"):             0o700,
		filepath.Join(env.Home, ".pi"):                      0o700,
	} {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, %v; want mode %v", path, fi.Mode().Perm(), err, want)
		}
	}
	again, err := PlanInstall(h, ScopeUser, env, NewEntry("/s", "pi", ""), Options{})
	if err != nil || again.Changed() || again.Diff() != "" {
		t.Errorf("second plan: changed=%v diff=%q err=%v", again.Changed(), again.Diff(), err)
	}
	in, err := Inspect(h, ScopeUser, env)
	if err != nil || !in.Found || in.Entry.Command != "/s" || in.Integration() != "pi" || in.Path != filepath.Join(env.Home, ".pi", "agent", "mcp.json") {
		t.Errorf("Inspect = %+v, %v", in, err)
	}
}

func TestApplyKeepsTheModeAndWritesThroughSymlinks(t *testing.T) {
	env := testEnv(t)
	h := mustHarness(t, "claude-code")
	real := filepath.Join(env.Dir, "dotfiles", "mcp.json")
	writeFile(t, real, "{}\n", 0o640)
	link := filepath.Join(env.Dir, ".mcp.json")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	c, err := PlanInstall(h, ScopeProject, env, NewEntry("/s", "claude-code", ""), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink was replaced: %v, %v", fi.Mode(), err)
	}
	fi, err := os.Stat(real)
	if err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("target mode %v, %v; want 0640", fi.Mode().Perm(), err)
	}
	if in, _ := Inspect(h, ScopeProject, env); !in.Found {
		t.Error("the entry is not in the symlink's target")
	}
	entries, _ := os.ReadDir(filepath.Dir(real))
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}

func TestApplyRefusesAFileChangedSinceThePlan(t *testing.T) {
	env := testEnv(t)
	h := mustHarness(t, "gemini")
	path := filepath.Join(env.Home, ".gemini", "settings.json")
	writeFile(t, path, "{}\n", 0o600)
	c, err := PlanInstall(h, ScopeUser, env, NewEntry("/s", "gemini", ""), Options{})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, "{\"theme\": \"x\"}\n", 0o600)
	if err := c.Apply(); !errors.Is(err, ErrConcurrentEdit) {
		t.Errorf("Apply = %v, want ErrConcurrentEdit", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "{\"theme\": \"x\"}\n" {
		t.Errorf("the file was overwritten: %s", got)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(); !errors.Is(err, ErrConcurrentEdit) {
		t.Errorf("Apply after the file was removed = %v, want ErrConcurrentEdit", err)
	}
}

func TestPlansForMissingAndBrokenFiles(t *testing.T) {
	env := testEnv(t)
	h := mustHarness(t, "codex")
	c, err := PlanUninstall(h, ScopeUser, env)
	if err != nil || c.Changed() || c.Existed {
		t.Errorf("uninstall from a missing file: %+v, %v", c, err)
	}
	if in, err := Inspect(h, ScopeUser, env); in.Found || err != nil {
		t.Errorf("Inspect of a missing file: %+v, %v", in, err)
	}
	path := filepath.Join(env.Home, ".codex", "config.toml")
	writeFile(t, path, "model = \n", 0o600)
	var pe *ParseError
	if _, err := PlanInstall(h, ScopeUser, env, NewEntry("/s", "codex", ""), Options{}); !errors.As(err, &pe) || !strings.Contains(err.Error(), path+": line 1") {
		t.Errorf("install into a broken file: %v", err)
	}
	if _, err := Inspect(h, ScopeUser, env); !errors.As(err, &pe) {
		t.Errorf("Inspect of a broken file: %v", err)
	}
}
