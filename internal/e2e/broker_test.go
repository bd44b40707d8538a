package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharedos/sharedos-mcp/internal/testbin"
	"github.com/sharedos/sharedos-mcp/internal/testupstream"
	"github.com/sharedos/sharedos-mcp/kernel/status"
)

// brokerKernel is the built kernel running a config that brokers
// upstreams, with its state directory.
type brokerKernel struct {
	*refKernel
	state  string
	config string // the config file, to rewrite before a SIGHUP
}

// startBrokerKernel writes config (a kernel.toml without state_dir) next
// to a fresh state directory, runs the built kernel on it, and waits
// until each upstream in ready is ready.
func startBrokerKernel(t *testing.T, config string, ready ...string) *brokerKernel {
	t.Helper()
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	file := filepath.Join(dir, "kernel.toml")
	if err := os.WriteFile(file, []byte(fmt.Sprintf("state_dir = %q\n", state)+config), 0o600); err != nil {
		t.Fatal(err)
	}
	sockDir, err := os.MkdirTemp("", "sb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "k.sock")
	k := runKernelProcess(t, sock, filepath.Join(dir, "audit.jsonl"), "--config", file)
	bk := &brokerKernel{refKernel: k, state: state, config: file}
	for _, name := range ready {
		bk.waitReady(t, name)
	}
	return bk
}

// waitReady polls the status the kernel writes until upstream name is
// ready: the kernel's log is lines for a person, the status file a document.
func (k *brokerKernel) waitReady(t *testing.T, name string) status.Upstream {
	t.Helper()
	var st status.Upstream
	ok := pollUntil(90*time.Second, func() bool {
		r, err := status.Read(k.state)
		if err != nil {
			return false
		}
		for _, u := range r.Upstreams {
			if u.Name == name && u.State == "ready" {
				st = u
				return true
			}
		}
		return false
	})
	if !ok {
		t.Fatalf("upstream %s not ready within 90s; kernel stderr:\n%s", name, k.stderr)
	}
	return st
}

// connect runs serve for integration, with the Go SDK client as the
// harness.
func (k *brokerKernel) connect(t *testing.T, integration string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "broker-e2e", Version: "1"}, opts)
	cmd := exec.Command(testbin.Path(t), "serve", "--integration", integration, "--socket", k.sock)
	s, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// auditRecords reads the kernel's audit log as maps.
func (k *brokerKernel) auditRecords(t *testing.T) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(k.audit)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, l := range lines(string(b)) {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("audit line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func toolNames(l *mcp.ListToolsResult) []string {
	var n []string
	for _, t := range l.Tools {
		n = append(n, t.Name)
	}
	slices.Sort(n)
	return n
}

func firstText(t *testing.T, r *mcp.CallToolResult) string {
	t.Helper()
	if len(r.Content) == 0 {
		t.Fatalf("result %+v has no content", r)
	}
	tc, ok := r.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content %T, want text", r.Content[0])
	}
	return tc.Text
}

// TestTheMemoryServerBehindGrants puts @modelcontextprotocol/server-memory
// behind the kernel, as docs/broker.md does: claude-code may read and
// write the graph, and nothing else of it is published; the harness, here
// the Go SDK client, sees the brokered tools through serve, and every
// decision is in the audit log with the upstream's name.
func TestTheMemoryServerBehindGrants(t *testing.T) {
	t.Parallel() // most of it is node starting the memory server
	entry := testupstream.NPMServer(t, "server-memory")
	memory := filepath.Join(t.TempDir(), "memory.jsonl")
	k := startBrokerKernel(t, fmt.Sprintf(`
[[upstream]]
name = "memory"
command = ["node", %q]
env = { MEMORY_FILE_PATH = %q }

[[upstream.tool]]
name = "read_graph"
action = "read"
resource = "/graph"

[[upstream.tool]]
name = "search_nodes"
action = "search"
resource = "/graph"

[[upstream.tool]]
name = "create_entities"
action = "write"
resource = "/graph"

[[grant]]
subject = "integration:claude-code"
resource = "memory:/graph"
actions = ["read", "search", "write"]
`, entry, memory), "memory")
	ctx := context.Background()
	s := k.connect(t, "claude-code", nil)
	list, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := toolNames(list), []string{"memory.create_entities", "memory.read_graph", "memory.search_nodes"}; !slices.Equal(got, want) {
		t.Errorf("claude-code lists %v, want %v", got, want)
	}
	for _, tool := range list.Tools {
		if tool.Meta["sharedos/source"] != "upstream:memory" || tool.Meta["sharedos/namespace"] != "memory" {
			t.Errorf("%s _meta = %v", tool.Name, tool.Meta)
		}
		if raw, _ := json.Marshal(tool); strings.Contains(string(raw), "requiredCapability") {
			t.Errorf("%s publishes a kernel-internal field: %s", tool.Name, raw)
		}
	}
	r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "memory.create_entities", Arguments: map[string]any{
		"entities": []map[string]any{{"name": "sharedos", "entityType": "project", "observations": []string{"brokered by the kernel"}}},
	}})
	if err != nil || r.IsError {
		t.Fatalf("create_entities: %+v, %v", r, err)
	}
	r, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "memory.read_graph", Arguments: map[string]any{}})
	if err != nil || r.IsError || !strings.Contains(firstText(t, r), "brokered by the kernel") {
		t.Errorf("read_graph: %+v, %v", r, err)
	}
	// Not granted, so not published: the name still reaches the kernel,
	// which refuses it without calling the server.
	r, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "memory.delete_entities", Arguments: map[string]any{"entityNames": []string{"sharedos"}}})
	if err != nil || !r.IsError || r.Meta["sharedos/code"] != "tool_unavailable" {
		t.Errorf("delete_entities: %+v, %v", r, err)
	}
	if _, err := os.Stat(memory); err != nil {
		t.Errorf("the server did not write its configured MEMORY_FILE_PATH: %v", err)
	}

	// Another integration has no grant: nothing of the server.
	other := k.connect(t, "codex", nil)
	if l, err := other.ListTools(ctx, nil); err != nil || len(l.Tools) != 0 {
		t.Errorf("codex lists %v, %v", toolNames(l), err)
	}
	s.Close()
	other.Close()

	var calls []string
	pinned := 0
	for _, e := range k.auditRecords(t) {
		switch e["event"] {
		case "tool.invoked":
			calls = append(calls, fmt.Sprintf("%v %v %v %v", e["tool"], e["upstream"], e["resource"], e["status"]))
		case "upstream.tool.pinned":
			pinned++
		}
	}
	want := []string{
		"memory.create_entities memory memory:/graph succeeded",
		"memory.read_graph memory memory:/graph succeeded",
		"memory.delete_entities <nil> <nil> denied",
	}
	if !slices.Equal(calls, want) {
		t.Errorf("tool.invoked records:\n%s\nwant\n%s", strings.Join(calls, "\n"), strings.Join(want, "\n"))
	}
	if pinned < 9 {
		t.Errorf("%d upstream.tool.pinned records, want one per tool the server offers", pinned)
	}
}

// TestTheEverythingServerThroughServe: structured content, progress and
// the environment, from the reference server-everything through the
// kernel and serve to the Go SDK client.
func TestTheEverythingServerThroughServe(t *testing.T) {
	entry := testupstream.NPMServer(t, "server-everything")
	t.Setenv("SHAREDOS_E2E_KERNEL_SECRET", "kernel-only")
	k := startBrokerKernel(t, fmt.Sprintf(`
[[upstream]]
name = "everything"
command = ["node", %q]
env = { GIVEN = "configured" }

[[upstream.tool]]
name = "get-structured-content"
action = "read"
resource = "/weather/{location}"

[[grant]]
subject = "integration:claude-code"
resource = "everything:/"
descendants = true
actions = ["call"]

[[grant]]
subject = "integration:claude-code"
resource = "everything:/weather/New York"
actions = ["read"]
`, entry), "everything")
	ctx := context.Background()
	var mu sync.Mutex
	var progress []float64
	s := k.connect(t, "claude-code", &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, req.Params.Progress)
			mu.Unlock()
		},
	})
	r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "everything.echo", Arguments: map[string]any{"message": "hi"}})
	if err != nil || r.IsError || firstText(t, r) != "Echo: hi" {
		t.Errorf("echo: %+v, %v", r, err)
	}
	r, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "everything.get-structured-content", Arguments: map[string]any{"location": "New York"}})
	if err != nil || r.IsError || r.StructuredContent == nil {
		t.Errorf("get-structured-content New York: %+v, %v", r, err)
	}
	r, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "everything.get-structured-content", Arguments: map[string]any{"location": "Chicago"}})
	if err != nil || !r.IsError || r.Meta["sharedos/code"] != "no_matching_grant" {
		t.Errorf("get-structured-content Chicago: %+v, %v", r, err)
	}
	r, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "everything.get-env", Arguments: map[string]any{}})
	if err != nil || r.IsError {
		t.Fatalf("get-env: %+v, %v", r, err)
	}
	var env map[string]string
	if err := json.Unmarshal([]byte(firstText(t, r)), &env); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"GIVEN", "HOME", "PATH"}; !slices.Equal(keys, want) {
		t.Errorf("the server's environment has %v, want %v", keys, want)
	}
	params := &mcp.CallToolParams{Name: "everything.trigger-long-running-operation", Arguments: map[string]any{"duration": 1, "steps": 4}}
	params.SetProgressToken("p1")
	r, err = s.CallTool(ctx, params)
	if err != nil || r.IsError {
		t.Fatalf("long running operation: %+v, %v", r, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(progress) == 0 || !slices.IsSorted(progress) {
		t.Errorf("the client saw progress %v, want increasing reports", progress)
	}
}

// TestAKilledKernelLeavesNoUpstreamBehind: SIGKILL the built kernel while
// its upstream runs and has started a child that ignores SIGTERM; the
// supervisor in the same binary ends both.
func TestAKilledKernelLeavesNoUpstreamBehind(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	k := startBrokerKernel(t, fmt.Sprintf(`
[[upstream]]
name = "test"
command = [%q, %q]
env = { GORACE = "atexit_sleep_ms=0" }

[[grant]]
subject = "integration:claude-code"
resource = "test:/spawn"
actions = ["call"]
`, exe, testupstream.Arg))
	st := k.waitReady(t, "test")
	s := k.connect(t, "claude-code", nil)
	r, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "test.spawn", Arguments: map[string]any{}})
	if err != nil || r.IsError {
		t.Fatalf("spawn: %+v, %v", r, err)
	}
	child, err := strconv.Atoi(firstText(t, r))
	if err != nil {
		t.Fatal(err)
	}
	if processGone(st.PID) || processGone(child) {
		t.Fatalf("upstream %d or its child %d is not running", st.PID, child)
	}
	s.Close()
	if err := k.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-k.done
	if !pollUntil(30*time.Second, func() bool { return processGone(st.PID) && processGone(child) }) {
		t.Errorf("after SIGKILL of the kernel: upstream %d gone %v, its child %d gone %v", st.PID, processGone(st.PID), child, processGone(child))
	}
}
