package main

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos-mcp/internal/kerneltest"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
)

func caseByID(t *testing.T, id string) Case {
	t.Helper()
	for _, c := range cases {
		if c.ID == id {
			return c
		}
	}
	t.Fatalf("no case %s", id)
	return Case{}
}

// TestHoldProxy: the cancellation case's proxy relays everything to the
// kernel behind it except the held read, which it answers
// failed/cancelled only once call.cancel names it, without the kernel
// ever seeing that call or its cancel.
func TestHoldProxy(t *testing.T) {
	k := kerneltest.Start(t, kerneltest.Options{})
	dir, err := os.MkdirTemp("", "hp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p, err := startHoldProxy(filepath.Join(dir, "p.sock"), k.Path, caseByID(t, "cancellation").Hold)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.close)

	conn, err := net.Dial("unix", filepath.Join(dir, "p.sock"))
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	r := bufio.NewReader(conn)
	send := func(id int, method string, params any) {
		t.Helper()
		msg := map[string]any{"jsonrpc": "2.0", "method": method, "params": params}
		if id > 0 {
			msg["id"] = id
		}
		if _, err := conn.Write(append(mustMarshal(msg), '\n')); err != nil {
			t.Fatal(err)
		}
	}
	next := func() (int, kproto.InvokeResult) {
		t.Helper()
		line, err := r.ReadBytes('\n')
		if err != nil {
			t.Fatalf("read an answer: %v", err)
		}
		var m struct {
			ID     int                 `json:"id"`
			Result kproto.InvokeResult `json:"result"`
		}
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("answer %s: %v", line, err)
		}
		return m.ID, m.Result
	}
	invoke := func(id int, callID, path string) {
		send(id, kproto.MethodInvoke, kproto.InvokeParams{CallID: callID, Tool: "files.read",
			Arguments: mustMarshal(map[string]string{"path": path}), CatalogHash: k.Hash})
	}

	send(1, kproto.MethodHello, kproto.HelloParams{Name: "conformance"})
	if id, _ := next(); id != 1 {
		t.Fatalf("hello answered as id %d", id)
	}
	invoke(2, "c1", heldPath)
	invoke(3, "c2", "/granted/readme.txt")
	if id, res := next(); id != 3 || res.Status != kproto.StatusSucceeded {
		t.Fatalf("first answer: id %d %+v, want the relayed call 3 succeeded (the held call 2 unanswered)", id, res)
	}
	send(0, kproto.MethodCancel, kproto.CancelParams{CallID: "c1"})
	if id, res := next(); id != 2 || res.Status != kproto.StatusFailed || res.Code != kproto.CodeCancelled {
		t.Fatalf("after call.cancel: id %d %+v, want the held call 2 failed/cancelled", id, res)
	}
	held := p.calls()
	if len(held) != 1 || held[0].CallID != "c1" || held[0].CancelledAt.IsZero() {
		t.Fatalf("held calls %+v, want c1 cancelled", held)
	}
	conn.Close()
	p.close()
	k.WaitIdle()
	events := k.Events()
	for _, e := range events {
		if strings.Contains(e, heldPath) || strings.HasPrefix(e, "cancel") {
			t.Errorf("the kernel behind the proxy saw %q", e)
		}
	}
	if !slices.Contains(events, "closed") || !slices.ContainsFunc(events, func(e string) bool { return strings.Contains(e, "/granted/readme.txt") }) {
		t.Errorf("kernel events %q: want the relayed read and the end of the connection", events)
	}
}

// TestGradeCancellation: the case passes only when call.cancel came before
// the final answer and the model saw an error result that says why.
func TestGradeCancellation(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	final := start.Add(3 * time.Second)
	timedOut := ToolResult{Round: 0, IsError: true, Text: `MCP server "sharedos" tool "files.read" timed out after 2s`}
	build := func(cancelledAt time.Time, res ToolResult) *evidence {
		return &evidence{
			held: []heldCall{{CallID: "c1", Tool: "files.read", At: start, CancelledAt: cancelledAt}},
			exchanges: []exchange{
				{Round: 0, Answer: "tool_calls", At: start},
				{Round: 1, Answer: "text", At: final, Results: []ToolResult{res}},
			},
		}
	}
	tests := []struct {
		name string
		e    *evidence
		want string
	}{
		{"cancelled when the harness gave up", build(start.Add(2*time.Second), timedOut), gradePass},
		{"never cancelled", build(time.Time{}, timedOut), gradeFail},
		{"cancelled only after the final answer", build(final.Add(time.Second), timedOut), gradeFail},
		{"no error flag on the result", build(start.Add(2*time.Second), ToolResult{Text: timedOut.Text}), gradeFail},
		{"an error that does not say why", build(start.Add(2*time.Second), ToolResult{IsError: true, Text: "boom"}), gradeFail},
		{"the call never reached the kernel", &evidence{}, gradeNotExercised},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, why := gradeCancellation(tt.e, claudeCode)
			if got != tt.want {
				t.Errorf("grade %s (%s), want %s", got, why, tt.want)
			}
		})
	}
}
