package cmd

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/hermetic"
)

// guardRun marks the run of this package's tests that the hermetic guard
// starts, so that it does not start another.
const guardRun = "SHAREDOS_HERMETIC_GUARD"

// TestTheSuiteIgnoresTheUsersOwnKernelConfig is the guard of
// hermetic.Isolate: a new user who ran `sharedos-mcp kernel init` has a
// kernel config in ~/.config/sharedos, and the tests must pass for them
// as for anyone. It writes that config with `kernel init` into a home of
// its own, then runs this package's tests again with that HOME and no
// XDG variables, as such a user's shell has them. Without Isolate in
// TestMain, the kernel command's tests read the config and fail.
func TestTheSuiteIgnoresTheUsersOwnKernelConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("runs this package's tests again")
	}
	if os.Getenv(guardRun) != "" {
		t.Skip("the run the guard started")
	}
	home := t.TempDir()
	env := userEnv(home)
	// The test binary is sharedos-mcp under that name (TestMain).
	bin := filepath.Join(t.TempDir(), prog)
	if err := os.Symlink(os.Args[0], bin); err != nil {
		t.Fatal(err)
	}
	initCmd := exec.Command(bin, "kernel", "init")
	initCmd.Env, initCmd.Dir = env, home
	if out, err := initCmd.CombinedOutput(); err != nil {
		t.Fatalf("kernel init: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(home, ".config", "sharedos", "kernel.toml")); err != nil {
		t.Fatalf("kernel init wrote no config where a user's kernel reads it: %v", err)
	}
	run := exec.Command(os.Args[0], "-test.count=1", "-test.short", "-test.skip=^TestTheSuiteIgnoresTheUsersOwnKernelConfig$")
	run.Env = append(env, guardRun+"=1")
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("with a kernel config in HOME, this package's tests fail: %v\n%s", err, out)
	}
}

// userEnv is this process's environment with HOME at home and none of the
// variables hermetic.Isolate sets or removes: a user's shell.
func userEnv(home string) []string {
	env := []string{"HOME=" + home}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if _, ok := hermetic.Dirs[name]; ok || slices.Contains(hermetic.Unset, name) {
			continue
		}
		env = append(env, kv)
	}
	return env
}
