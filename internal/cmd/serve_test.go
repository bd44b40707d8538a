package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/kerneltest"
)

// TestServeRefusesBeforeReadingStdin: every start-up failure is one error
// line with a hint, exit 1, nothing on stdout and nothing sent to a kernel.
func TestServeRefusesBeforeReadingStdin(t *testing.T) {
	tempHome(t)
	k := kerneltest.Start(t, kerneltest.Options{})
	notSocket := filepath.Join(shortTempDir(t), "file.sock")
	if err := os.WriteFile(notSocket, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  []string
	}{
		{"an invalid integration name is a usage error, and never rewritten", []string{"--integration", "claude/code", "--socket", k.Path}, 2,
			[]string{`serve: invalid integration name "claude/code"`, "hint: an integration name is 1-64 letters"}},
		{"a call timeout without a unit says what one looks like", []string{"--integration", "x", "--socket", k.Path, "--call-timeout", "5"}, 2,
			[]string{`serve: --call-timeout "5": a duration needs a unit, e.g. 5s or 5m`}},
		{"a missing integration is a usage error", []string{"--socket", k.Path}, 2,
			[]string{"--integration is required", "hint: say which harness"}},
		{"no kernel listening names the socket and how to start one", []string{"--integration", "x", "--socket", filepath.Join(shortTempDir(t), "none.sock")}, 1,
			[]string{"no kernel is running at", "none.sock: there is no socket", "hint: start it with 'sharedos-mcp kernel --root DIR --socket "}},
		{"a path that is not a socket is refused", []string{"--integration", "x", "--socket", notSocket}, 1,
			[]string{"is not a socket"}},
		{"a socket path too long for the OS is refused", []string{"--integration", "x", "--socket", "/tmp/" + strings.Repeat("s", 200)}, 1,
			[]string{"socket path too long", "hint: use a shorter socket path"}},
		{"a negative call timeout is a usage error", []string{"--integration", "x", "--socket", k.Path, "--call-timeout", "-1s"}, 2,
			[]string{"--call-timeout must not be negative"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, append([]string{"serve"}, tt.args...)...)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.wantCode, stderr)
			}
			if stdout != "" {
				t.Errorf("stdout carries %q; it must carry MCP messages only", stdout)
			}
			if !strings.HasPrefix(stderr, "sharedos-mcp: error: ") && !strings.Contains(stderr, "\nsharedos-mcp: error: ") {
				t.Errorf("stderr has no error line:\n%s", stderr)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
		})
	}
	k.WaitIdle()
	for _, ev := range k.Events() {
		if ev != "closed" {
			t.Errorf("the kernel received %q from a serve that should have refused to start", ev)
		}
	}
}
