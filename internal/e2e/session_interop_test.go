package e2e

import (
	"bufio"
	"context"
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

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharedos/sharedos-mcp/internal/kerneltest"
	"github.com/sharedos/sharedos-mcp/internal/testbin"
)

// Tests of MCP sessions as real clients hold them (issue 13): the built
// binary, spawned by an SDK client or driven line by line.

// needsNPM skips a test whose npm packages cannot be had, except in CI
// (CI=true), which installs them (.ci/run): there it fails, so a broken
// install cannot pass as a skip.
func needsNPM(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

func sessionTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "si") // short: socket paths have a limit
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestGoSDKKeepAliveThroughALongCall: the Go SDK client pings every 500 ms
// and closes the session when a ping is not answered in time. A 5 s call
// must not cost the session: the shim answers pings at once, whatever is
// at the kernel (it used to answer them behind the call).
func TestGoSDKKeepAliveThroughALongCall(t *testing.T) {
	t.Parallel() // most of it is a 5 s call
	bin := testbin.Path(t)
	k := kerneltest.Start(t, kerneltest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "keepalive-test", Version: "1"}, &mcp.ClientOptions{KeepAlive: 500 * time.Millisecond})
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: exec.Command(bin, "serve", "--integration", "go-sdk", "--socket", k.Path)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	start := time.Now()
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "hold", Arguments: map[string]any{"ms": 5000}})
	if err != nil {
		t.Fatalf("the 5 s call: %v (the session was dropped?)", err)
	}
	if held := time.Since(start); held < 5*time.Second || res.IsError {
		t.Fatalf("the call took %v, result %+v; want a held, successful call", held, res)
	}
	// The session is still the same one: later requests are served.
	if _, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "files.read", Arguments: map[string]any{"path": "/after"}}); err != nil {
		t.Fatalf("a call after the long one: %v", err)
	}
	if err := session.Ping(ctx, nil); err != nil {
		t.Fatalf("ping after the long call: %v", err)
	}
}

// TestGoSDKProgressForALongCall: a call that asks for progress gets the
// kernel's reports through the SDK's progress handler, increasing, and
// none of those the kernel sends after its answer. (That none is written
// after the answer on the wire is TestNoProgressAfterTheAnswer.)
func TestGoSDKProgressForALongCall(t *testing.T) {
	bin := testbin.Path(t)
	k := kerneltest.Start(t, kerneltest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var (
		mu   sync.Mutex
		seen []float64
		more = make(chan struct{}, 16)
	)
	client := mcp.NewClient(&mcp.Implementation{Name: "progress-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			if req.Params.ProgressToken == "search-1" {
				seen = append(seen, req.Params.Progress)
			}
			more <- struct{}{}
		},
	})
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: exec.Command(bin, "serve", "--integration", "go-sdk", "--socket", k.Path)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	params := &mcp.CallToolParams{Name: "progress", Arguments: map[string]any{"steps": 5, "after": 3}}
	params.SetProgressToken("search-1")
	if _, err := session.CallTool(ctx, params); err != nil {
		t.Fatal(err)
	}
	// The SDK runs its handler on a goroutine of its own, so reports can
	// reach it after the result: wait for the five the kernel sent before
	// its answer, then one more round trip for any the shim should not
	// have sent (the kernel's three after its answer).
	for n := 0; n < 5; n++ {
		select {
		case <-more:
		case <-ctx.Done():
			t.Fatalf("only %d progress reports reached the handler", n)
		}
	}
	if err := session.Ping(ctx, nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 5 {
		t.Fatalf("progress values %v, want the 5 the kernel reported before its answer and none after", seen)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] <= seen[i-1] {
			t.Errorf("progress did not increase: %v", seen)
		}
	}
}

// TestServeWithAStoppedKernelEndsWithinTheCallTimeout is issue 12's
// report, with a real kernel process stopped (SIGSTOP) before the first
// tools/list: tools/list, a call and sharedos.escalate are answered
// within --call-timeout, a cancel for the stuck call is read, and stdin
// EOF ends serve with exit 0. Before the fix none of it was answered
// after 90 s and EOF did not end it.
func TestServeWithAStoppedKernelEndsWithinTheCallTimeout(t *testing.T) {
	t.Parallel() // most of it is the call timeout running out
	bin := testbin.Path(t)
	dir := sessionTempDir(t)
	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "k.sock")
	kernel := exec.Command(bin, "kernel", "--root", root, "--socket", sock, "--audit", filepath.Join(dir, "audit.jsonl"))
	kerr, err := kernel.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := kernel.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		kernel.Process.Signal(syscall.SIGCONT)
		kernel.Process.Kill()
		kernel.Wait()
	})
	listening := make(chan string, 1)
	go func() {
		br := bufio.NewReader(kerr)
		line, _ := br.ReadString('\n')
		listening <- line
		io.Copy(io.Discard, br)
	}()
	select {
	case line := <-listening:
		if !strings.Contains(line, "kernel listening") {
			t.Fatalf("kernel: %q", line)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the kernel did not start within 30s")
	}

	serve := exec.Command(bin, "serve", "--integration", "stalled", "--socket", sock, "--call-timeout", "2s", "--log-level", "debug")
	var serveLog strings.Builder
	serve.Stderr = &serveLog
	stdin, err := serve.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { serve.Process.Kill(); serve.Wait() })
	answers := make(chan string, 16)
	go func() {
		br := bufio.NewReader(stdout)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				close(answers)
				return
			}
			answers <- line
		}
	}()
	// serve has said hello once it answers initialize.
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`+"\n")
	select {
	case <-answers:
	case <-time.After(30 * time.Second):
		t.Fatal("initialize was not answered")
	}
	if err := kernel.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitStopped(t, kernel.Process.Pid)
	start := time.Now()
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`+"\n"+
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"/a"}}}`+"\n"+
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"sharedos.escalate","arguments":{"reason":"stuck"}}}`+"\n"+
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"/b"}}}`+"\n"+
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4}}`+"\n")
	stdin.Close()

	exited := make(chan error, 1)
	go func() { exited <- serve.Wait() }()
	var got []string
	deadline := time.After(30 * time.Second) // the bound is 2 s; this only turns a hang into a failure
	for done := false; !done; {
		select {
		case line, ok := <-answers:
			if !ok {
				done = true
				break
			}
			got = append(got, line)
		case <-deadline:
			t.Fatalf("serve hung with a stopped kernel; answered so far:\n%s", strings.Join(got, ""))
		}
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("serve exited %v, want 0\n%s", err, serveLog.String())
		}
	case <-deadline:
		t.Fatal("serve did not exit after stdin EOF")
	}
	t.Logf("answered and exited %v after the kernel stopped", time.Since(start).Round(time.Millisecond))
	if len(got) != 3 {
		t.Fatalf("want answers to 1, 2 and 3 (4 was cancelled), got:\n%s\nserve's log:\n%s", strings.Join(got, ""), serveLog.String())
	}
	byID := map[string]string{}
	for _, l := range got {
		var m struct{ ID json.RawMessage }
		json.Unmarshal([]byte(l), &m)
		byID[string(m.ID)] = l
	}
	if !strings.Contains(byID["1"], `"code":-32603`) {
		t.Errorf("tools/list: %s", byID["1"])
	}
	for _, id := range []string{"2", "3"} {
		if !strings.Contains(byID[id], `kernel_timeout`) || !strings.Contains(byID[id], `\"retryable\":true`) {
			t.Errorf("call %s: %s", id, byID[id])
		}
		if strings.Contains(byID[id], sock) {
			t.Errorf("call %s names the socket: %s", id, byID[id])
		}
	}
}

// waitStopped waits until the process is stopped: SIGSTOP takes effect
// when the process is next scheduled, not when kill returns. Nothing
// signals that, so /proc is polled, within a bound.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	stat := filepath.Join("/proc", strconv.Itoa(pid), "stat")
	if _, err := os.Stat(stat); err != nil {
		t.Skip("needs /proc to see that the kernel has stopped")
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		b, err := os.ReadFile(stat)
		if err != nil {
			t.Fatal(err)
		}
		// pid (comm) state ...: the state follows the last ')'.
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 && strings.HasPrefix(string(b[i+1:]), " T") {
			return
		}
	}
	t.Fatal("the kernel did not stop within 10s of SIGSTOP")
}

// TestTypeScriptSDKPingDuringAHeldCall: the TypeScript SDK client's
// ping({timeout: 1000}) is answered while a call is held at the kernel (it
// timed out before, waiting behind the call). The client is
// testdata/tsclient, installed by its lockfile where it is, as .ci/run
// does (npm ci --prefix internal/e2e/testdata/tsclient); the test reaches
// no registry.
func TestTypeScriptSDKPingDuringAHeldCall(t *testing.T) {
	t.Parallel() // most of it is a held call
	if _, err := exec.LookPath("node"); err != nil {
		needsNPM(t, "node is not installed: this test drives the TypeScript SDK client (CI has node)")
	}
	bin := testbin.Path(t)
	dir, err := filepath.Abs(filepath.Join("testdata", "tsclient"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		needsNPM(t, "the TypeScript SDK client is not installed: run npm ci --prefix internal/e2e/testdata/tsclient, as .ci/run does (%v)", err)
	}

	k := kerneltest.Start(t, kerneltest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := exec.CommandContext(ctx, "node", "ping.mjs", bin, k.Path)
	client.Dir = dir
	var stderr strings.Builder
	client.Stderr = &stderr
	stdout, err := client.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(); err != nil {
		t.Fatal(err)
	}
	var said []string
	br := bufio.NewReader(stdout)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			break
		}
		said = append(said, strings.TrimSpace(line))
		if strings.HasPrefix(line, "pinged") {
			k.Release() // the call was held until now
		}
	}
	if err := client.Wait(); err != nil {
		t.Fatalf("the TypeScript client failed: %v\nsaid %q\n%s", err, said, stderr.String())
	}
	if len(said) != 2 || !strings.HasPrefix(said[0], "pinged") || said[1] != "called ok" {
		t.Fatalf("the client said %q, want a ping answered during the call, then the call's result\n%s", said, stderr.String())
	}
	t.Log(said[0])
}

// TestGoSDKProgressForASlowSearch: the reference kernel's files.search
// reports how many of the files under its root it has looked at, and the
// Go SDK client's progress handler sees those reports, increasing, toward
// the total, through serve.
func TestGoSDKProgressForASlowSearch(t *testing.T) {
	bin := testbin.Path(t)
	root := t.TempDir()
	const files = 1000 // reports come every 256 files at the latest
	for i := range files {
		dir := filepath.Join(root, "src", fmt.Sprintf("d%02d", i%20))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%04d.go", i)), []byte("package x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir, err := os.MkdirTemp("", "pg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "k.sock")
	startRefKernel(t, root, sock, filepath.Join(t.TempDir(), "audit.jsonl"))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	type report struct{ progress, total float64 }
	var (
		mu   sync.Mutex
		seen []report
	)
	client := mcp.NewClient(&mcp.Implementation{Name: "progress-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			if req.Params.ProgressToken == "search" {
				seen = append(seen, report{req.Params.Progress, req.Params.Total})
			}
		},
	})
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: exec.Command(bin, "serve", "--integration", "go-sdk", "--socket", sock)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	params := &mcp.CallToolParams{Name: "files.search", Arguments: map[string]any{"path": "/src", "query": "needle"}}
	params.SetProgressToken("search")
	res, err := session.CallTool(ctx, params)
	if err != nil || res.IsError {
		t.Fatalf("files.search: %+v, %v", res, err)
	}
	// The handler runs on a goroutine of the SDK's: a round trip after the
	// answer lets every report sent before it arrive.
	if err := session.Ping(ctx, nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) < files/256 {
		t.Fatalf("progress reports %v, want at least %d for %d files", seen, files/256, files)
	}
	for i, r := range seen {
		if r.total != files || r.progress > r.total || (i > 0 && r.progress <= seen[i-1].progress) {
			t.Errorf("progress reports %v: want increasing counts of %d files", seen, files)
			break
		}
	}
}
