// Package hermetic keeps a test process, and every process it starts, off
// its user's own configuration, state and runtime directories: a test
// that ran `sharedos-mcp kernel` read the kernel config `kernel init` had
// written to the developer's home, and failed there and nowhere else.
//
// Isolate, called from a package's TestMain before its tests run, points
// HOME and the XDG base directories at fresh temporary directories and
// drops the variables that name a user's socket or a harness's home, so a
// test reads only what it wrote, in process or in a subprocess that
// inherits the environment. The Go toolchain and npm keep the user's
// caches and settings (GOPATH, GOCACHE, GOMODCACHE, GOENV and npm's cache
// are pinned to what they were), so a test that builds the binary neither
// rebuilds the world nor reaches a registry for what is cached.
package hermetic

import (
	"os"
	"path/filepath"
)

// Dirs are the variables Isolate gives a fresh directory each, under one
// temporary home.
var Dirs = map[string]string{
	"HOME":            "home",
	"XDG_CONFIG_HOME": "home/.config",
	"XDG_STATE_HOME":  "home/.local/state",
	"XDG_DATA_HOME":   "home/.local/share",
	"XDG_CACHE_HOME":  "home/.cache",
	"XDG_RUNTIME_DIR": "run",
}

// Unset are the variables Isolate removes: each names where a user's
// kernel or harness lives.
var Unset = []string{"SHAREDOS_SOCKET", "CODEX_HOME", "DSH_HOME", "PI_CODING_AGENT_DIR", "PI_MCP_CONFIG_MODE"}

// Isolate sets the process's environment as the package comment says and
// returns a function that removes the temporary directories. Call it in
// TestMain before m.Run; it changes the environment for the whole
// process, which is what the subprocesses of tests inherit.
func Isolate() (cleanup func(), err error) {
	pinTools()
	root, err := os.MkdirTemp("", "smcp-hermetic")
	if err != nil {
		return nil, err
	}
	for name, rel := range Dirs {
		dir := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			os.RemoveAll(root)
			return nil, err
		}
		os.Setenv(name, dir)
	}
	for _, name := range Unset {
		os.Unsetenv(name)
	}
	return func() { os.RemoveAll(root) }, nil
}

// pinTools sets the Go toolchain's directories and npm's cache to where
// they are now, before HOME and XDG_CACHE_HOME move: their defaults are
// under them.
func pinTools() {
	home, _ := os.UserHomeDir()
	cache, _ := os.UserCacheDir()
	config, _ := os.UserConfigDir()
	gopath := os.Getenv("GOPATH")
	if gopath == "" && home != "" {
		gopath = filepath.Join(home, "go")
	}
	defaults := map[string]string{"GOPATH": gopath}
	if cache != "" {
		defaults["GOCACHE"] = filepath.Join(cache, "go-build")
	}
	if gopath != "" {
		defaults["GOMODCACHE"] = filepath.Join(filepath.SplitList(gopath)[0], "pkg", "mod")
	}
	if config != "" {
		defaults["GOENV"] = filepath.Join(config, "go", "env")
	}
	if home != "" {
		defaults["npm_config_cache"] = filepath.Join(home, ".npm")
	}
	for name, value := range defaults {
		if os.Getenv(name) == "" && value != "" {
			os.Setenv(name, value)
		}
	}
}
