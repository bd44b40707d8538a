package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sharedos/sharedos-mcp/internal/kerneltest"
	"github.com/sharedos/sharedos-mcp/internal/testbin"
)

// The reliability tests run the built binary as a harness would, in front
// of either the scriptable fake kernel (internal/kerneltest) or the
// reference kernel. Some of them need a process that is not the test: the
// test binary re-executes itself with helperEnv set, and init below turns
// it into that process before any test runs.

const helperEnv = "SHAREDOS_RELIABILITY_HELPER"

func init() {
	switch os.Getenv(helperEnv) {
	case "":
		return
	case "kerneltest":
		os.Exit(helperKernel())
	case "harness":
		os.Exit(helperHarness())
	default:
		fmt.Fprintf(os.Stderr, "unknown %s %q\n", helperEnv, os.Getenv(helperEnv))
		os.Exit(2)
	}
}

// helperKernel serves the fake kernel, prints its socket path, and runs
// until its stdin closes and its connections end, or it is killed (which
// is the point).
func helperKernel() int {
	k, err := kerneltest.New(kerneltest.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Println(k.Path)
	io.Copy(io.Discard, os.Stdin)
	k.WaitIdle()
	k.Close()
	return 0
}

// helperHarness plays a harness: it spawns the shim with its own stdin
// and stdout (so the test, not the harness, holds the shim's pipes),
// reports the shim's pid on stderr, and waits.
func helperHarness() int {
	var args []string
	if err := json.Unmarshal([]byte(os.Getenv("SHAREDOS_RELIABILITY_ARGS")), &args); err != nil || len(args) == 0 {
		fmt.Fprintln(os.Stderr, "harness: bad SHAREDOS_RELIABILITY_ARGS")
		return 2
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout = os.Stdin, os.Stdout
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		return 2
	}
	fmt.Fprintf(os.Stderr, "pid %d\n", cmd.Process.Pid)
	cmd.Wait()
	return 0
}

// shimProc is a running `sharedos-mcp serve`. Every line it writes to
// stdout is checked to be a JSON-RPC 2.0 response (or a batch of them)
// before a test sees it.
type shimProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // stdout lines; closed at stdout EOF
	stderr *syncBuffer
	exited chan struct{}
	err    error // cmd.Wait's, once exited is closed
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startShim runs serve against the kernel socket sock with extra flags.
func startShim(t *testing.T, sock string, flags ...string) *shimProc {
	t.Helper()
	args := append([]string{"serve", "--integration", "reliability", "--socket", sock, "--log-level", "debug"}, flags...)
	cmd := exec.Command(testbin.Path(t), args...)
	p := &shimProc{t: t, cmd: cmd, lines: make(chan string, 64), stderr: &syncBuffer{}, exited: make(chan struct{})}
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer close(p.lines)
		br := bufio.NewReaderSize(stdout, 1<<20)
		for {
			line, err := br.ReadString('\n')
			if line != "" {
				p.lines <- line
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		<-read
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.stdin.Close()
		select {
		case <-p.exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-p.exited
			t.Errorf("serve did not exit within 5s of the test's end\nstderr:\n%s", p.stderr)
		}
	})
	return p
}

// send writes raw bytes to the shim's stdin.
func (p *shimProc) send(s string) {
	p.t.Helper()
	if _, err := io.WriteString(p.stdin, s); err != nil {
		p.t.Fatalf("write to serve: %v\nstderr:\n%s", err, p.stderr)
	}
}

// recv returns the next stdout line, checked to be JSON-RPC; it fails the
// test if none comes within d (a failure guard, not a synchronization).
func (p *shimProc) recv(d time.Duration) []rpcAnswer {
	p.t.Helper()
	select {
	case line, ok := <-p.lines:
		if !ok {
			p.t.Fatalf("serve closed stdout; exit %v\nstderr:\n%s", p.waitErr(), p.stderr)
		}
		answers, err := parseAnswerLine(line)
		if err != nil {
			p.t.Fatalf("stdout line is not JSON-RPC: %v\n%.300q", err, line)
		}
		return answers
	case <-time.After(d):
		p.t.Fatalf("no answer within %v\nstderr:\n%s", d, p.stderr)
	}
	return nil
}

func (p *shimProc) waitErr() error {
	select {
	case <-p.exited:
		return p.err
	case <-time.After(5 * time.Second):
		return fmt.Errorf("still running")
	}
}

// waitExit waits up to d for the shim to exit and returns whether it did
// and its exit error.
func (p *shimProc) waitExit(d time.Duration) (bool, error) {
	select {
	case <-p.exited:
		return true, p.err
	case <-time.After(d):
		return false, nil
	}
}

// rpcAnswer is one JSON-RPC response as a test reads it.
type rpcAnswer struct {
	ID     json.RawMessage
	Result json.RawMessage
	Error  *struct {
		Code    int
		Message string
		Data    json.RawMessage
	}
}

// parseAnswerLine checks that line is one JSON-RPC 2.0 response, or an
// array of them, ending in a newline, and returns them.
func parseAnswerLine(line string) ([]rpcAnswer, error) {
	if !strings.HasSuffix(line, "\n") || strings.Count(line, "\n") != 1 {
		return nil, fmt.Errorf("not one newline-terminated line")
	}
	body := strings.TrimSuffix(line, "\n")
	var raws []json.RawMessage
	if strings.HasPrefix(body, "[") {
		if err := json.Unmarshal([]byte(body), &raws); err != nil || len(raws) == 0 {
			return nil, fmt.Errorf("batch: %v", err)
		}
	} else {
		raws = []json.RawMessage{json.RawMessage(body)}
	}
	var out []rpcAnswer
	for _, raw := range raws {
		a, err := checkResponse(raw)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// checkResponse checks one JSON-RPC 2.0 response object strictly: exactly
// the members jsonrpc "2.0", id (string, number or null), and one of
// result or error {code integer, message string, data?}.
func checkResponse(raw json.RawMessage) (rpcAnswer, error) {
	var a rpcAnswer
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return a, fmt.Errorf("not a JSON object: %v", err)
	}
	if string(m["jsonrpc"]) != `"2.0"` {
		return a, fmt.Errorf("jsonrpc is %s", m["jsonrpc"])
	}
	id, ok := m["id"]
	if !ok || len(id) == 0 {
		return a, fmt.Errorf("no id")
	}
	if c := id[0]; c != '"' && c != '-' && (c < '0' || c > '9') && string(id) != "null" {
		return a, fmt.Errorf("id %s is not a string, number or null", id)
	}
	res, hasRes := m["result"]
	e, hasErr := m["error"]
	if hasRes == hasErr || len(m) != 3 {
		return a, fmt.Errorf("want jsonrpc, id and exactly one of result or error; got %d members", len(m))
	}
	a.ID, a.Result = id, res
	if hasErr {
		var eo map[string]json.RawMessage
		if err := json.Unmarshal(e, &eo); err != nil {
			return a, fmt.Errorf("error is not an object")
		}
		if _, err := strconv.Atoi(string(eo["code"])); err != nil {
			return a, fmt.Errorf("error code %s is not an integer", eo["code"])
		}
		var msg string
		if json.Unmarshal(eo["message"], &msg) != nil || eo["message"] == nil {
			return a, fmt.Errorf("error message %s is not a string", eo["message"])
		}
		if err := json.Unmarshal(e, &a.Error); err != nil {
			return a, err
		}
	}
	return a, nil
}

// startFakeKernelProcess runs internal/kerneltest in a child process (the
// test binary in helper mode) so it can be killed like a real kernel.
func startFakeKernelProcess(t *testing.T) (sock string, proc *os.Process) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=kerneltest")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("fake kernel process: %v", err)
	}
	sock = strings.TrimSpace(line)
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
		os.RemoveAll(filepath.Dir(sock))
	})
	return sock, cmd.Process
}

// processGone reports whether pid has exited (a zombie counts: it runs
// nothing and holds nothing but its exit status).
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the parenthesized command name.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] == 'Z' || stat[i+2] == 'X'
	}
	return false
}

// pollUntil polls cond every few milliseconds until it holds or d passes.
func pollUntil(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}
