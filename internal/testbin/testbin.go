// Package testbin builds the sharedos-mcp binary once per test process,
// for tests that run it as a real subprocess.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/hermetic"
)

var (
	once sync.Once
	dir  string
	bin  string
	err  error
)

// Main runs a package's tests, away from the user's own configuration
// and state (hermetic.Isolate), and then removes the binary, and runs
// cleanups. Call it from TestMain.
func Main(m *testing.M, cleanups ...func()) {
	restore, err := hermetic.Isolate()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testbin:", err)
		os.Exit(1)
	}
	cleanups = append(cleanups, restore)
	code := m.Run()
	for _, c := range cleanups {
		c()
	}
	if dir != "" {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// Path returns the path of a freshly built binary, building it on first
// use. Tests that need it are skipped under -short.
func Path(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	once.Do(func() {
		if dir, err = os.MkdirTemp("", "smcp-bin"); err != nil {
			return
		}
		bin = filepath.Join(dir, "sharedos-mcp")
		// Static, as released.
		cmd := exec.Command("go", "build", "-o", bin, "github.com/sharedos/sharedos-mcp")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, buildErr := cmd.CombinedOutput()
		if buildErr != nil {
			err = fmt.Errorf("go build: %v\n%s", buildErr, out)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return bin
}
