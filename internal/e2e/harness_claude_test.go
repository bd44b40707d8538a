package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sharedos/sharedos-mcp/internal/testbin"
)

// claudeVersion is the Claude Code release this test was verified with;
// .ci/run installs it.
const claudeVersion = "2.1.332"

// TestClaudeCodeConnectsThroughTheInstalledEntry drives the real Claude
// Code CLI: `install claude-code` writes the entry, `claude mcp list`
// spawns it and runs the MCP handshake (no API key needed), and the
// kernel's audit log shows the catalogue was fetched for claude-code.
// With the kernel stopped, Claude Code reports the server failed and
// doctor says why.
func TestClaudeCodeConnectsThroughTheInstalledEntry(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs Claude Code; skipped in -short mode")
	}
	claude, err := exec.LookPath("claude")
	if err != nil {
		t.Skip("claude is not on PATH; install it with: npm install -g @anthropic-ai/claude-code@" + claudeVersion)
	}
	if out, err := exec.Command(claude, "--version").Output(); err == nil && !strings.HasPrefix(string(out), claudeVersion+" ") {
		t.Logf("claude --version = %q; this test was verified with %s", strings.TrimSpace(string(out)), claudeVersion)
	}
	bin := buildForHarness(t)
	home := t.TempDir()
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "hello.txt"), []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sockDir, err := os.MkdirTemp("", "cc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "k.sock")
	audit := filepath.Join(home, "audit.jsonl")
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TMPDIR=" + os.TempDir()}

	k := startKernelForHarness(t, bin, root, sock, audit)

	install := exec.Command(bin, "install", "claude-code", "--scope", "user", "--socket", sock)
	install.Env, install.Dir = env, home
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}

	entry := "sharedos: " + bin + " serve --integration claude-code --socket " + sock + " - "
	line := claudeMCPList(t, claude, home, env, entry)
	if !strings.Contains(line, "Connected") {
		t.Fatalf("with the kernel running, claude mcp list says %q; want Connected", line)
	}

	k.stop(t)
	listed := false
	for _, ev := range auditEvents(t, audit) {
		if ev.Event == "tool.catalog.listed" && ev.Integration == "claude-code" {
			listed = true
		}
	}
	if !listed {
		t.Error("the audit log has no tool.catalog.listed for claude-code: Claude Code did not fetch the catalogue through the kernel")
	}

	line = claudeMCPList(t, claude, home, env, entry)
	if strings.Contains(line, "Connected") || !strings.Contains(line, "Failed") {
		t.Errorf("with the kernel stopped, claude mcp list says %q; want a failure", line)
	}

	doctor := exec.Command(bin, "doctor", "--socket", sock)
	doctor.Env, doctor.Dir = env, home
	var stdout, stderr bytes.Buffer
	doctor.Stdout, doctor.Stderr = &stdout, &stderr
	err = doctor.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("doctor with the kernel stopped: %v; want exit status 1\n%s%s", err, &stdout, &stderr)
	}
	for _, want := range []string{
		"problem no socket at " + sock + ": no kernel is listening there\n  fix: start a kernel: ",
		"ok      claude-code user: " + filepath.Join(home, ".claude.json") + " runs this binary\n",
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("doctor output lacks %q:\n%s", want, &stdout)
		}
	}
}

// claudeMCPList runs `claude mcp list` in home and returns its line for
// entry. Claude Code gets only PATH, HOME and the variables that keep it
// from updating itself or phoning home, and a minute at most; its
// process group is killed afterwards so no server it spawned outlives
// the test.
func claudeMCPList(t *testing.T, claude, home string, env []string, entry string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, claude, "mcp", "list")
	cmd.Dir = home
	cmd.Env = append(env[:len(env):len(env)],
		"DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if err != nil {
		t.Fatalf("claude mcp list: %v\n%s", err, out)
	}
	for l := range strings.SplitSeq(string(out), "\n") {
		if strings.HasPrefix(l, entry) {
			return l
		}
	}
	t.Fatalf("claude mcp list has no line starting %q:\n%s", entry, out)
	return ""
}

// buildForHarness builds sharedos-mcp into a fresh directory, so the
// entry install writes names a real binary.
func buildForHarness(t *testing.T) string {
	t.Helper()
	// install records the path with symlinks resolved (macOS's /var is one).
	bin, err := filepath.EvalSymlinks(testbin.Path(t))
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// harnessKernel is a `sharedos-mcp kernel` subprocess.
type harnessKernel struct {
	cmd    *exec.Cmd
	sock   string
	stderr bytes.Buffer // written only until done is closed
	done   chan struct{}
	err    error
}

// startKernelForHarness runs the kernel without a config (root shared
// read-only) and returns once it says it is listening; the kernel is
// stopped when the test ends.
func startKernelForHarness(t *testing.T, bin, root, sock, audit string) *harnessKernel {
	t.Helper()
	k := &harnessKernel{
		cmd:  exec.Command(bin, "kernel", "--root", root, "--socket", sock, "--audit", audit),
		sock: sock, done: make(chan struct{}),
	}
	pipe, err := k.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := k.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	listening := make(chan string, 1)
	go func() {
		br := bufio.NewReader(pipe)
		first, _ := br.ReadString('\n')
		listening <- first
		_, _ = br.WriteTo(&k.stderr)
		k.err = k.cmd.Wait()
		close(k.done)
	}()
	t.Cleanup(func() {
		_ = k.cmd.Process.Kill()
		<-k.done
	})
	select {
	case first := <-listening:
		if !strings.Contains(first, "kernel listening on ") {
			_ = k.cmd.Process.Kill()
			<-k.done
			t.Fatalf("kernel did not start: %q\n%s", first, &k.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("kernel did not say it was listening within 30s")
	}
	return k
}

// stop sends SIGTERM and checks that the kernel exits 0 and takes its
// socket with it.
func (k *harnessKernel) stop(t *testing.T) {
	t.Helper()
	if err := k.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-k.done:
	case <-time.After(30 * time.Second):
		t.Fatal("kernel did not exit within 30s of SIGTERM")
	}
	if k.err != nil {
		t.Errorf("kernel exit: %v\n%s", k.err, &k.stderr)
	}
	if _, err := os.Lstat(k.sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("kernel left its socket behind: %v", err)
	}
}

type auditEvent struct {
	Event       string `json:"event"`
	Integration string `json:"integration"`
}

func auditEvents(t *testing.T, file string) []auditEvent {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var evs []auditEvent
	for _, l := range lines(string(b)) {
		var ev auditEvent
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("audit line %q: %v", l, err)
		}
		evs = append(evs, ev)
	}
	return evs
}
