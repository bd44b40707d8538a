package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/testupstream"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
)

func npmSpec(t *testing.T, name, server, extra string) upstream.Spec {
	t.Helper()
	entry := testupstream.NPMServer(t, server)
	cfg := decodeOne(t, extra, upstream.Config{Name: name, Command: []string{"node", entry}})
	// node ignores it; the supervisor, this test binary, reads it.
	if cfg.Env == nil {
		cfg.Env = map[string]string{}
	}
	cfg.Env["GORACE"] = quickExit
	specs, err := upstream.Parse([]upstream.Config{cfg}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return specs[0]
}

func TestNPMMemoryServer(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	memoryFile := filepath.Join(t.TempDir(), "memory.jsonl")
	s := npmSpec(t, "memory", "server-memory", `
env = { MEMORY_FILE_PATH = "`+memoryFile+`" }
[[upstream.tool]]
name = "read_graph"
action = "read"
resource = "/graph"
[[upstream.tool]]
name = "create_entities"
action = "write"
resource = "/graph"
`)
	f := newFixture(t, dir, []upstream.Spec{s}, nil)
	f.readyFrom(0, "memory")
	snap := f.m.Snapshot()
	if len(snap.Withheld) != 0 {
		t.Errorf("withheld: %+v", snap.Withheld)
	}
	read, create := f.tool(snap, "memory.read_graph"), f.tool(snap, "memory.create_entities")
	if read.ReadWrite() != "read" || create.ReadWrite() != "write" || f.tool(snap, "memory.delete_entities").Action != "call" {
		t.Errorf("actions: read_graph %s, create_entities %s", read.Action, create.Action)
	}
	f.allPinned(snap)
	ctx := context.Background()
	if _, err := f.m.Call(ctx, create, forward(t, create, `{"entities":[{"name":"sharedos","entityType":"project","observations":["brokered"]}]}`), nil); err != nil {
		t.Fatal(err)
	}
	r, err := f.m.Call(ctx, read, forward(t, read, ``), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text(t, r), "brokered") {
		t.Errorf("read_graph answered %s", r.Content)
	}
	if _, err := os.Stat(memoryFile); err != nil {
		t.Errorf("the configured MEMORY_FILE_PATH was not used: %v", err)
	}
	pid := f.m.Status()[0].PID
	f.m.Close()
	waitGone(t, pid, "the memory server")

	// The kernel restarts: nothing new to pin, and the server's own
	// state is its own.
	f2 := newFixture(t, dir, []upstream.Spec{s}, nil)
	f2.readyFrom(0, "memory")
	for _, e := range f2.events.all() {
		if e.Kind == upstream.EventToolPinned || e.Kind == upstream.EventToolQuarantined {
			t.Errorf("after a restart: %s %s", e.Kind, e.Tool)
		}
	}
	if r, err := f2.call("memory.read_graph", `{}`); err != nil || !strings.Contains(text(t, r), "brokered") {
		t.Errorf("after a restart: %v, %v", r, err)
	}
}

func TestNPMEverythingServer(t *testing.T) {
	everything := npmSpec(t, "everything", "server-everything", `env = { EVERYTHING_TEST = "configured" }`)
	slow := npmSpec(t, "slow", "server-everything", `call_timeout = "300ms"`)
	t.Setenv("SHAREDOS_TEST_KERNEL_SECRET", "must not leak")
	f := newFixture(t, "", []upstream.Spec{everything, slow}, nil)
	f.readyFrom(0, "everything")
	f.readyFrom(0, "slow")
	snap := f.m.Snapshot()
	ctx := context.Background()

	r, err := f.m.Call(ctx, f.tool(snap, "everything.echo"), forward(t, f.tool(snap, "everything.echo"), `{"message":"hello"}`), nil)
	if err != nil || text(t, r) != "Echo: hello" {
		t.Errorf("echo: %v, %v", r, err)
	}

	r, err = f.m.Call(ctx, f.tool(snap, "everything.get-env"), forward(t, f.tool(snap, "everything.get-env"), ``), nil)
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]string
	if err := json.Unmarshal([]byte(text(t, r)), &env); err != nil {
		t.Fatal(err)
	}
	var names []string
	for k := range env {
		names = append(names, k)
	}
	slices.Sort(names)
	// EVERYTHING_TEST and GORACE are configured (npmSpec adds GORACE);
	// the kernel's own environment, its secret included, stays out.
	if want := []string{"EVERYTHING_TEST", "GORACE", "HOME", "PATH"}; !slices.Equal(names, want) {
		t.Errorf("the npm server's environment has %q, want exactly %q", names, want)
	}

	structured := f.tool(snap, "everything.get-structured-content")
	if structured.OutputSchema == nil {
		t.Error("get-structured-content's outputSchema is not published")
	}
	r, err = f.m.Call(ctx, structured, forward(t, structured, `{"location":"New York"}`), nil)
	if err != nil || r.StructuredContent == nil {
		t.Errorf("get-structured-content: %v, %v", r, err)
	}

	var mu sync.Mutex
	var reports []float64
	r, err = f.m.Call(ctx, f.tool(snap, "everything.trigger-long-running-operation"), forward(t, f.tool(snap, "everything.trigger-long-running-operation"), `{"duration":1,"steps":4}`), func(p, total float64, _ string) {
		mu.Lock()
		defer mu.Unlock()
		if total != 4 {
			t.Errorf("progress total %v", total)
		}
		reports = append(reports, p)
	})
	if err != nil || !strings.Contains(text(t, r), "completed") {
		t.Fatalf("long running operation: %v, %v", r, err)
	}
	mu.Lock()
	// The last report may arrive after the answer and be dropped; the
	// earlier ones are a quarter of a second ahead of it.
	if len(reports) == 0 || !slices.IsSorted(reports) {
		t.Errorf("progress reports %v", reports)
	}
	mu.Unlock()

	// A call that outlives call_timeout fails retryable, and the server
	// goes on.
	_, err = f.m.Call(ctx, f.tool(snap, "slow.trigger-long-running-operation"), forward(t, f.tool(snap, "slow.trigger-long-running-operation"), `{"duration":30,"steps":2}`), nil)
	callError(t, err, upstream.CodeUpstreamTimeout)
	if r, err := f.call("slow.echo", `{"message":"after"}`); err != nil || text(t, r) != "Echo: after" {
		t.Errorf("after a timeout: %v, %v", r, err)
	}

	// A cancelled call is answered at once.
	cctx, cancel := context.WithCancel(ctx)
	first := make(chan struct{})
	var once sync.Once
	done := make(chan error, 1)
	go func() {
		_, err := f.m.Call(cctx, f.tool(snap, "everything.trigger-long-running-operation"), forward(t, f.tool(snap, "everything.trigger-long-running-operation"), `{"duration":30,"steps":60}`), func(float64, float64, string) {
			once.Do(func() { close(first) })
		})
		done <- err
	}()
	<-first
	cancel()
	callError(t, <-done, upstream.CodeCancelled)

	for _, st := range f.m.Status() {
		if st.State != upstream.StateReady || st.Restarts != 0 {
			t.Errorf("%s: %+v", st.Name, st)
		}
	}
}
