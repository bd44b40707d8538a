package testupstream

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

// The reference servers from npm, @modelcontextprotocol/server-memory,
// server-everything and server-filesystem, at the versions of the lockfile in
// kernel/upstream/e2e/testdata/npm. .ci/run installs them there (npm ci
// --prefix kernel/upstream/e2e/testdata/npm); without that, the first
// test that needs them installs them into a temporary directory with npm,
// and without npm or node they are skipped.
var (
	npmOnce sync.Once
	npmTmp  string // the temporary install, removed by RemoveNPM
	npmDir  string // the node_modules directory holding the servers
	npmErr  error
)

var errNoNPM = errors.New("npm is not installed")

// npmPackage is the directory of the lockfile, found from this file.
func npmPackage() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot find the test servers' lockfile: no caller information")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "kernel", "upstream", "e2e", "testdata", "npm"), nil
}

// NPMServer returns the entry point (dist/index.js) of the reference
// server of that name ("server-memory", "server-everything",
// "server-filesystem"), to run with
// node. It skips the test under -short, or when npm or node is missing.
func NPMServer(t testing.TB, server string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the npm reference servers")
	}
	npmOnce.Do(installNPM)
	if errors.Is(npmErr, errNoNPM) {
		t.Skip("npm is not installed: install Node.js 20 or later with npm, or run: npm ci --prefix kernel/upstream/e2e/testdata/npm")
	}
	if npmErr != nil {
		t.Fatal(npmErr)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed")
	}
	return filepath.Join(npmDir, "@modelcontextprotocol", server, "dist", "index.js")
}

func installNPM() {
	pkg, err := npmPackage()
	if err != nil {
		npmErr = err
		return
	}
	if installed := filepath.Join(pkg, "node_modules"); haveServers(installed) {
		npmDir = installed
		return
	}
	if _, err := exec.LookPath("npm"); err != nil {
		npmErr = errNoNPM
		return
	}
	if npmTmp, npmErr = os.MkdirTemp("", "upstream-npm"); npmErr != nil {
		return
	}
	for _, f := range []string{"package.json", "package-lock.json"} {
		b, err := os.ReadFile(filepath.Join(pkg, f))
		if err != nil {
			npmErr = err
			return
		}
		if npmErr = os.WriteFile(filepath.Join(npmTmp, f), b, 0o600); npmErr != nil {
			return
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "npm", "ci", "--prefix", npmTmp, "--no-audit", "--no-fund", "--loglevel=error").CombinedOutput()
	if err != nil {
		npmErr = errors.New("npm ci: " + err.Error() + "\n" + string(out))
		return
	}
	npmDir = filepath.Join(npmTmp, "node_modules")
}

func haveServers(modules string) bool {
	for _, s := range []string{"server-memory", "server-everything", "server-filesystem"} {
		if _, err := os.Stat(filepath.Join(modules, "@modelcontextprotocol", s, "dist", "index.js")); err != nil {
			return false
		}
	}
	return true
}

// RemoveNPM removes a temporary install; call it in TestMain after m.Run.
func RemoveNPM() {
	if npmTmp != "" {
		os.RemoveAll(npmTmp)
	}
}
