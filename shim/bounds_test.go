package shim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kerneltest"
)

// serveLines runs one turn over in and returns stdout's lines, failing
// the test if Serve does not return within limit of stdin EOF.
func serveLines(t *testing.T, cfg Config, in string, limit time.Duration) []string {
	t.Helper()
	var out bytes.Buffer
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- Serve(context.Background(), cfg, strings.NewReader(in), &out) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve = %v, want nil at stdin EOF", err)
		}
	case <-time.After(limit):
		t.Fatalf("Serve did not return within %v of stdin EOF", limit)
	}
	t.Logf("served in %v", time.Since(start).Round(time.Millisecond))
	return strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
}

// answerByID indexes answer lines by their compact id.
func answerByID(t *testing.T, lines []string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, l := range lines {
		var a struct {
			ID json.RawMessage `json:"id"`
		}
		if err := json.Unmarshal([]byte(l), &a); err != nil {
			t.Fatalf("not JSON: %s", l)
		}
		m[string(a.ID)] = l
	}
	return m
}

// TestAStalledKernelCostsAtMostTheCallTimeout is issue 12's stopped
// kernel: one that takes the catalogue request and never answers. Every
// request read is answered within the call timeout (tools/list with its
// JSON-RPC error, calls and the escalation failed/kernel_timeout,
// retryable), a cancel for a waiting call is read and honoured, stdin EOF
// ends the turn, and nothing the model reads names the socket or a Go
// error. Before the fix the reader waited for the catalogue itself: none
// of this was answered and Serve never returned.
func TestAStalledKernelCostsAtMostTheCallTimeout(t *testing.T) {
	k := kerneltest.Start(t, kerneltest.Options{Stall: true})
	const timeout = 300 * time.Millisecond
	cfg := Config{Version: "test", Log: zerolog.Nop(), CallTimeout: timeout}
	cfg.Kernel, cfg.Hello = dialKernel(t, k.Path)
	in := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"/a"}}}` + "\n" +
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"sharedos.escalate","arguments":{"reason":"stuck"}}}` + "\n" +
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"/b"}}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4}}` + "\n" +
		`{"jsonrpc":"2.0","id":5,"method":"ping"}` + "\n"
	// Generous for a loaded machine, far below "never".
	lines := serveLines(t, cfg, in, 20*time.Second)
	got := answerByID(t, lines)
	if len(lines) != 4 || got["4"] != "" {
		t.Fatalf("want answers to 1, 2, 3 and 5 (4 was cancelled), got:\n%s", strings.Join(lines, "\n"))
	}
	if !strings.Contains(got["1"], `"code":-32603`) || !strings.Contains(got["1"], "did not send the catalogue within 300ms") {
		t.Errorf("tools/list: %s", got["1"])
	}
	for _, id := range []string{"2", "3"} {
		if !strings.Contains(got[id], `\"code\":\"kernel_timeout\"`) || !strings.Contains(got[id], `\"retryable\":true`) {
			t.Errorf("call %s: want failed/kernel_timeout, retryable: %s", id, got[id])
		}
	}
	if got["5"] != `{"jsonrpc":"2.0","id":5,"result":{}}` {
		t.Errorf("ping: %s", got["5"])
	}
	for _, l := range lines {
		if strings.Contains(l, k.Path) || strings.Contains(l, "context deadline") || strings.Contains(l, "kernel connection closed:") {
			t.Errorf("an answer carries a socket path or a Go error: %s", l)
		}
	}
	k.Close()
	if ev := strings.Join(k.Events(), ","); strings.Contains(ev, "invoke") || strings.Contains(ev, "escalate") {
		t.Errorf("the kernel received calls without a catalogue: %s", ev)
	}
}

// TestAFetchThatTimedOutIsAskedAgain: a catalogue the kernel was too slow
// to send is not a failure for the turn (the call said retryable): the
// next call asks again.
func TestAFetchThatTimedOutIsAskedAgain(t *testing.T) {
	lists := 0
	k := kerneltest.Start(t, kerneltest.Options{Handler: func(c *kerneltest.Conn, m *jsonrpc.Message) bool {
		if m.Method == "tools.list" {
			lists++
			return lists == 1 // the first is never answered
		}
		return false
	}})
	cfg := Config{Version: "test", Log: zerolog.Nop(), CallTimeout: 200 * time.Millisecond}
	cfg.Kernel, cfg.Hello = dialKernel(t, k.Path)
	inR, inW := io.Pipe()
	out := &lineCounter{grown: make(chan struct{}, 1)}
	done := make(chan error, 1)
	go func() { done <- Serve(context.Background(), cfg, inR, out) }()
	inW.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"/a"}}}` + "\n"))
	if !out.waitFor(1) {
		t.Fatal("the first call was never answered")
	}
	inW.Write([]byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"/b"}}}` + "\n"))
	inW.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "kernel_timeout") || !strings.Contains(lines[1], "contents of /b") {
		t.Errorf("want a timeout, then the call served after a second fetch:\n%s", out.String())
	}
}

// TestAnAnswerOverTheLineLimitFailsOnlyItsCall: a kernel answer longer
// than --max-message fails that call too_large, and the turn goes on
// (issue 12, item 5: it used to drop the connection and fail every later
// call kernel_unavailable).
func TestAnAnswerOverTheLineLimitFailsOnlyItsCall(t *testing.T) {
	k := kerneltest.Start(t, kerneltest.Options{})
	cfg := Config{Version: "test", Log: zerolog.Nop(), MaxLine: 4096}
	cfg.Kernel, cfg.Hello = dialKernelLimit(t, k.Path, 4096)
	big := strings.Repeat("x", 3000) // under the limit; echoed twice, over it
	in := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + big + `"}}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"/after"}}}` + "\n"
	lines := serveLines(t, cfg, in, 20*time.Second)
	if len(lines) != 2 || !strings.Contains(lines[0], `\"code\":\"too_large\"`) || !strings.Contains(lines[1], "contents of /after") {
		t.Fatalf("want call 1 too_large and call 2 served:\n%s", strings.Join(lines, "\n"))
	}
}

// TestACallOverTheKernelsLimitIsNeverSent: a tools/call the shim accepts
// can be just over the kernel's line limit once wrapped in tools.invoke;
// it is answered too_large at once and the kernel never sees a line it
// would refuse (it used to answer it with a null id, and the call hung
// until --call-timeout).
func TestACallOverTheKernelsLimitIsNeverSent(t *testing.T) {
	const limit = 2048
	k := kerneltest.Start(t, kerneltest.Options{MaxLine: limit})
	cfg := Config{Version: "test", Log: zerolog.Nop(), MaxLine: limit, CallTimeout: time.Minute}
	cfg.Kernel, cfg.Hello = dialKernel(t, k.Path)
	args := `{"path":"` + strings.Repeat("y", limit-130) + `"}` // the stdin line fits; the invoke does not
	line := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"files.read","arguments":` + args + `}}`
	if len(line) > limit {
		t.Fatalf("test arithmetic: the stdin line is %d bytes, over %d", len(line), limit)
	}
	lines := serveLines(t, cfg, line+"\n"+`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"/ok"}}}`+"\n", 20*time.Second)
	if len(lines) != 2 || !strings.Contains(lines[0], `\"code\":\"too_large\"`) || !strings.Contains(lines[1], "contents of /ok") {
		t.Fatalf("want call 1 too_large and call 2 served:\n%s", strings.Join(lines, "\n"))
	}
	k.WaitIdle()
	for _, ev := range k.Events() {
		if ev == "line too long" {
			t.Error("the kernel received a line over its limit")
		}
	}
}

// TestNoProgressAfterTheAnswer: a kernel that goes on reporting after its
// answer is not heard; every notification for a call precedes its answer
// and increases.
func TestNoProgressAfterTheAnswer(t *testing.T) {
	k := kerneltest.Start(t, kerneltest.Options{})
	for range 20 { // a race would show in some rounds
		cfg := Config{Version: "test", Log: zerolog.Nop()}
		cfg.Kernel, cfg.Hello = dialKernel(t, k.Path)
		in := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"progress","arguments":{"steps":4,"after":5},"_meta":{"progressToken":7}}}` + "\n" +
			`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"progress","arguments":{"steps":2,"after":5},"_meta":{"progressToken":8}}}` + "\n"
		lines := serveLines(t, cfg, in, 20*time.Second)
		last := map[string]float64{}
		answered := map[string]bool{}
		for _, l := range lines {
			var m struct {
				ID     json.RawMessage
				Method string
				Params struct {
					ProgressToken json.RawMessage
					Progress      float64
				}
			}
			json.Unmarshal([]byte(l), &m)
			if m.Method == "" {
				answered[map[string]string{"1": "7", "2": "8"}[string(m.ID)]] = true
				continue
			}
			tok := string(m.Params.ProgressToken)
			if answered[tok] {
				t.Fatalf("progress for token %s after its answer:\n%s", tok, strings.Join(lines, "\n"))
			}
			if m.Params.Progress <= last[tok] {
				t.Fatalf("progress for token %s did not increase:\n%s", tok, strings.Join(lines, "\n"))
			}
			last[tok] = m.Params.Progress
		}
		if !answered["7"] || !answered["8"] {
			t.Fatalf("a call went unanswered:\n%s", strings.Join(lines, "\n"))
		}
	}
}

// TestServeStopsItsReaderOnCancel: Serve's contract is that it returns
// after its goroutines, the reader of a pollable stdin included. The
// reader waits in Read on an empty pipe when the turn is cancelled.
func TestServeStopsItsReaderOnCancel(t *testing.T) {
	k := kerneltest.Start(t, kerneltest.Options{})
	cfg := Config{Version: "test", Log: zerolog.Nop()}
	cfg.Kernel, cfg.Hello = dialKernel(t, k.Path)
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer inR.Close()
	defer inW.Close()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, cfg, inR, outW) }()
	inW.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n"))
	if line, err := bufio.NewReader(outR).ReadString('\n'); err != nil || !strings.Contains(line, `"id":1`) {
		t.Fatalf("ping: %q, %v", line, err)
	}
	cancel() // the reader is now waiting for a line that never comes
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
	buf := make([]byte, 1<<20)
	if stacks := string(buf[:runtime.Stack(buf, true)]); strings.Contains(stacks, "(*server).read(") {
		t.Errorf("the stdin reader outlived Serve:\n%s", stacks)
	}
}
