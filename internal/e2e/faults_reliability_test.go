package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sharedos/sharedos-mcp/internal/kerneltest"
	"github.com/sharedos/sharedos-mcp/internal/testbin"
)

// Fault tests: the peers of the shim die, hang or go away, and the shim
// must answer what it can, never hang, and exit cleanly.

const (
	initLine = `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"faults","version":"1"}}}` + "\n"
	listLine = `{"jsonrpc":"2.0","id":"list","method":"tools/list"}` + "\n"
)

func callLine(id, tool, args string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{"name":%q,"arguments":%s}}`+"\n", id, tool, args)
}

// callOutcome is what a tools/call answer says: "succeeded", or the
// _meta status and code of a refusal.
type callOutcome struct {
	id, status, code string
	retryable        *bool
	text             string
}

func outcomeOf(t *testing.T, a rpcAnswer) callOutcome {
	t.Helper()
	var id string
	json.Unmarshal(a.ID, &id)
	if a.Error != nil {
		t.Fatalf("answer %s is a JSON-RPC error %+v, want a tool result", a.ID, a.Error)
	}
	var r struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		Meta struct {
			Status string `json:"sharedos/status"`
			Code   string `json:"sharedos/code"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(a.Result, &r); err != nil {
		t.Fatalf("answer %s: %v", a.ID, err)
	}
	o := callOutcome{id: id, status: "succeeded"}
	if len(r.Content) > 0 {
		o.text = r.Content[0].Text
	}
	if r.IsError {
		o.status, o.code = r.Meta.Status, r.Meta.Code
		var body struct{ Retryable *bool }
		json.Unmarshal([]byte(o.text), &body)
		o.retryable = body.Retryable
	}
	return o
}

// recvCall reads one answer and returns its outcome, checking its id.
func (p *shimProc) recvCall(id string, d time.Duration) callOutcome {
	p.t.Helper()
	a := p.recv(d)
	if len(a) != 1 {
		p.t.Fatalf("got a batch of %d, want one answer", len(a))
	}
	o := outcomeOf(p.t, a[0])
	if o.id != id {
		p.t.Fatalf("answer for %q, want %q (answers must keep arrival order)", o.id, id)
	}
	return o
}

// recvOK reads one answer, which must be a result with the given id.
func (p *shimProc) recvOK(id string, d time.Duration) json.RawMessage {
	p.t.Helper()
	a := p.recv(d)
	if len(a) != 1 || string(a[0].ID) != `"`+id+`"` || a[0].Error != nil {
		p.t.Fatalf("want a result for %q, got %+v", id, a)
	}
	return a[0].Result
}

// expectCleanExit closes stdin and checks serve exits 0 within d.
func (p *shimProc) expectCleanExit(d time.Duration) {
	p.t.Helper()
	p.stdin.Close()
	ok, err := p.waitExit(d)
	if !ok {
		p.t.Fatalf("serve still running %v after stdin EOF\nstderr:\n%s", d, p.stderr)
	}
	if err != nil {
		p.t.Fatalf("serve exit: %v\nstderr:\n%s", err, p.stderr)
	}
}

func toolCount(t *testing.T, result json.RawMessage) int {
	t.Helper()
	var r struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(result, &r); err != nil {
		t.Fatal(err)
	}
	return len(r.Tools)
}

// waitEvents polls the fake kernel until it has recorded want.
func waitEvents(t *testing.T, k *kerneltest.Kernel, d time.Duration, want ...string) {
	t.Helper()
	ok := pollUntil(d, func() bool {
		have := strings.Join(k.Events(), "\n")
		for _, w := range want {
			if !strings.Contains(have, w) {
				return false
			}
		}
		return true
	})
	if !ok {
		t.Fatalf("kernel events %q, want all of %q", k.Events(), want)
	}
}

func TestKernelKilledMidCall(t *testing.T) {
	sock, kernel := startFakeKernelProcess(t)
	p := startShim(t, sock)
	p.send(initLine)
	p.recvOK("init", 10*time.Second)
	p.send(callLine("1", "files.read", `{"path":"/a"}`))
	if o := p.recvCall("1", 10*time.Second); o.status != "succeeded" {
		t.Fatalf("first call: %+v", o)
	}
	p.send(callLine("2", "hang", `{}`))
	if err := kernel.Kill(); err != nil {
		t.Fatal(err)
	}
	if o := p.recvCall("2", 10*time.Second); o.status != "failed" || o.code != "kernel_unavailable" {
		t.Errorf("the call in flight when the kernel died: %+v", o)
	}
	p.send(callLine("3", "files.read", `{"path":"/b"}`))
	if o := p.recvCall("3", 10*time.Second); o.status != "failed" || o.code != "kernel_unavailable" {
		t.Errorf("a call after the kernel died: %+v", o)
	}
	p.send(listLine)
	if n := toolCount(t, p.recvOK("list", 10*time.Second)); n != len(kerneltest.Catalogue) {
		t.Errorf("tools/list after the kernel died served %d tools, want the memoized %d", n, len(kerneltest.Catalogue))
	}
	p.expectCleanExit(5 * time.Second)
}

func TestKernelHungCallTimesOut(t *testing.T) {
	k := kerneltest.Start(t, kerneltest.Options{})
	p := startShim(t, k.Path, "--call-timeout", "200ms")
	p.send(initLine + callLine("1", "hang", `{}`))
	p.recvOK("init", 10*time.Second)
	start := time.Now()
	o := p.recvCall("1", 10*time.Second)
	if o.status != "failed" || o.code != "kernel_timeout" || o.retryable == nil || !*o.retryable {
		t.Errorf("hung call: %+v, want failed/kernel_timeout, retryable", o)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("the 200ms timeout answered after %v", el)
	}
	waitEvents(t, k, 5*time.Second, "invoke hang", "cancel c1")
	p.send(callLine("2", "files.read", `{"path":"/after"}`))
	if o := p.recvCall("2", 10*time.Second); o.status != "succeeded" {
		t.Errorf("a call after the timeout: %+v", o)
	}
	p.expectCleanExit(5 * time.Second)
}

func TestStdinClosedMidCall(t *testing.T) {
	k := kerneltest.Start(t, kerneltest.Options{})
	p := startShim(t, k.Path, "--call-timeout", "300ms")
	// slow.read is answered only once a later call is; hang only by the
	// timeout. All three are read before EOF, so all three are answered.
	p.send(callLine("1", "slow.read", `{}`) + callLine("2", "files.read", `{"path":"/x"}`) + callLine("3", "hang", `{}`))
	p.stdin.Close()
	if o := p.recvCall("1", 10*time.Second); o.status != "succeeded" {
		t.Errorf("slow.read: %+v", o)
	}
	if o := p.recvCall("2", 10*time.Second); o.status != "succeeded" {
		t.Errorf("files.read: %+v", o)
	}
	if o := p.recvCall("3", 10*time.Second); o.code != "kernel_timeout" {
		t.Errorf("hang: %+v", o)
	}
	p.expectCleanExit(5 * time.Second)
	waitEvents(t, k, 5*time.Second, "closed")
}

func TestStdoutClosedExitsWithoutSpinning(t *testing.T) {
	k := kerneltest.Start(t, kerneltest.Options{})
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testbin.Path(t), "serve", "--integration", "reliability", "--socket", k.Path, "--call-timeout", "0")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	cmd.Stdout = w
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// A call that never ends goes first, so the ping behind it has nothing
	// to write either: once the call is at the kernel, closing the reading
	// end of stdout must be noticed without a failed write, and the call
	// cancelled at the kernel.
	if _, err := stdin.Write([]byte(callLine("1", "hang", `{}`) + `{"jsonrpc":"2.0","id":"p","method":"ping"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	waitEvents(t, k, 5*time.Second, "invoke hang")
	r.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("serve did not exit within 5s of its stdout closing\nstderr:\n%s", stderr)
	}
	cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	if cpu > time.Second {
		t.Errorf("serve used %v of CPU before exiting: it spun", cpu)
	}
	waitEvents(t, k, 5*time.Second, "cancel c1", "closed")
	t.Logf("exit %v after stdout closed, CPU %v", cmd.ProcessState, cpu)
}

func TestSIGTERMWithCallsInFlight(t *testing.T) {
	k := kerneltest.Start(t, kerneltest.Options{})
	p := startShim(t, k.Path, "--call-timeout", "0")
	p.send(callLine("1", "hang", `{}`) + callLine("2", "hang", `{}`) + callLine("3", "hang", `{}`))
	ok := pollUntil(10*time.Second, func() bool { return strings.Count(strings.Join(k.Events(), "\n"), "invoke hang") == 3 })
	if !ok {
		t.Fatalf("kernel events %q, want three hang calls", k.Events())
	}
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited, err := p.waitExit(time.Second)
	if !exited {
		t.Fatalf("serve still running 1s after SIGTERM\nstderr:\n%s", p.stderr)
	}
	if err != nil {
		t.Errorf("serve exit after SIGTERM: %v", err)
	}
	t.Logf("exited %v after SIGTERM", time.Since(start))
	waitEvents(t, k, 5*time.Second, "cancel c1", "cancel c2", "cancel c3", "closed")
}

// TestKilledHarnessLeavesNoOrphan SIGKILLs a harness whose shim's stdin is
// held open by someone else (this test), so only the parent-death signal
// can end the shim.
func TestKilledHarnessLeavesNoOrphan(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the parent-death signal is Linux only")
	}
	k := kerneltest.Start(t, kerneltest.Options{})
	args, _ := json.Marshal([]string{testbin.Path(t), "serve", "--integration", "reliability", "--socket", k.Path})
	harness := exec.Command(os.Args[0], "-test.run=^$")
	harness.Env = append(os.Environ(), helperEnv+"=harness", "SHAREDOS_RELIABILITY_ARGS="+string(args))
	stdin, err := harness.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := harness.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := harness.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := harness.Start(); err != nil {
		t.Fatal(err)
	}
	var shimPID int
	if _, err := fmt.Fscanf(bufio.NewReader(stderr), "pid %d\n", &shimPID); err != nil {
		harness.Process.Kill()
		harness.Wait()
		t.Fatalf("harness: %v", err)
	}
	t.Cleanup(func() { syscall.Kill(shimPID, syscall.SIGKILL) })
	// The shim answers only once it is serving, which is after it set
	// the parent-death signal.
	if _, err := stdin.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.Contains(line, `"id":1`) {
		t.Fatalf("shim did not answer through the harness: %q %v", line, err)
	}
	if err := harness.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	harness.Wait()
	if !pollUntil(time.Second, func() bool { return processGone(shimPID) }) {
		t.Fatalf("shim pid %d still running 1s after its harness was SIGKILLed", shimPID)
	}
}

// refKernel is a running reference kernel (`sharedos-mcp kernel`).
type refKernel struct {
	cmd    *exec.Cmd
	sock   string
	audit  string
	stderr *syncBuffer
	done   chan struct{} // closed when the process has exited
	err    error         // its exit, set before done closes
}

// wait waits for the kernel to exit and returns how it did.
func (k *refKernel) wait() error {
	<-k.done
	return k.err
}

func startRefKernel(t *testing.T, root, sock, audit string) *refKernel {
	t.Helper()
	return runKernelProcess(t, sock, audit, "--root", root)
}

// runKernelProcess runs the built binary as "kernel --socket sock --audit
// audit args..." and waits until it listens. Its stderr after that first
// line is kept. Cleanup ends it with SIGTERM, as an operator would, and
// kills it if it has not exited within 30 s.
func runKernelProcess(t *testing.T, sock, audit string, args ...string) *refKernel {
	t.Helper()
	k := &refKernel{sock: sock, audit: audit, stderr: &syncBuffer{}, done: make(chan struct{})}
	k.cmd = exec.Command(testbin.Path(t), append([]string{"kernel", "--socket", sock, "--audit", audit}, args...)...)
	pipe, err := k.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := k.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(pipe)
	first, err := br.ReadString('\n')
	if err != nil || !strings.Contains(first, "kernel listening on "+sock) {
		k.cmd.Process.Kill()
		k.cmd.Wait()
		t.Fatalf("kernel did not start: %q %v", first, err)
	}
	go func() {
		br.WriteTo(k.stderr)
		k.err = k.cmd.Wait()
		close(k.done)
	}()
	t.Cleanup(func() {
		k.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-k.done:
		case <-time.After(30 * time.Second):
			k.cmd.Process.Kill()
			<-k.done
		}
	})
	return k
}

func TestKernelRestartedWhileShimsRun(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "a.txt"), []byte("alpha"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "rk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "k.sock")
	audit := filepath.Join(t.TempDir(), "audit.jsonl")

	first := startRefKernel(t, root, sock, audit)
	old := startShim(t, sock)
	old.send(initLine + callLine("1", "files.read", `{"path":"/a.txt"}`))
	old.recvOK("init", 10*time.Second)
	if o := old.recvCall("1", 10*time.Second); o.status != "succeeded" || o.text != "alpha" {
		t.Fatalf("old turn before the restart: %+v", o)
	}

	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	first.wait()
	startRefKernel(t, root, sock, audit)

	old.send(callLine("2", "files.read", `{"path":"/a.txt"}`))
	if o := old.recvCall("2", 10*time.Second); o.status != "failed" || o.code != "kernel_unavailable" {
		t.Errorf("old turn after the restart: %+v, want failed/kernel_unavailable", o)
	}
	old.send(listLine)
	if n := toolCount(t, old.recvOK("list", 10*time.Second)); n == 0 {
		t.Error("old turn lost its catalogue")
	}

	fresh := startShim(t, sock)
	fresh.send(initLine + callLine("1", "files.read", `{"path":"/a.txt"}`))
	fresh.recvOK("init", 10*time.Second)
	if o := fresh.recvCall("1", 10*time.Second); o.status != "succeeded" || o.text != "alpha" {
		t.Errorf("new turn after the restart: %+v", o)
	}
	old.expectCleanExit(5 * time.Second)
	fresh.expectCleanExit(5 * time.Second)
}
