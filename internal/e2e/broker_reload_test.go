package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharedos/sharedos-mcp/internal/testupstream"
	"github.com/sharedos/sharedos-mcp/kernel/status"
)

// TestASIGHUPThatReclassifiesAToolReachesOpenTurns is issue 24's finding
// 2 on the built kernel: config A maps the upstream's purge to read on
// /graph, which claude-code may read; a turn lists it and makes a first
// call; the operator rewrites the config to B, which maps purge to write
// on /purge, granted to nobody, and sends SIGHUP; the same turn's call of
// purge is refused tool_unavailable, saying a reload reclassified it. The
// upstream never runs it, and the audit never records it as a read of
// /graph. On the code before, the upstream ran it.
func TestASIGHUPThatReclassifiesAToolReachesOpenTurns(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	record := filepath.Join(t.TempDir(), "calls.jsonl")
	config := func(action, resource string) string {
		return fmt.Sprintf(`
[[upstream]]
name = "test"
command = [%q, %q, "-record", %q]
env = { GORACE = "atexit_sleep_ms=0" }

[[upstream.tool]]
name = "echo"
action = "read"
resource = "/echo"

[[upstream.tool]]
name = "purge"
action = %q
resource = %q

[[grant]]
subject = "integration:claude-code"
resource = "test:/echo"
actions = ["read"]

[[grant]]
subject = "integration:claude-code"
resource = "test:/graph"
actions = ["read"]
`, exe, testupstream.Arg, record, action, resource)
	}
	k := startBrokerKernel(t, config("read", "/graph"))
	first := k.waitReady(t, "test")
	ctx := context.Background()
	s := k.connect(t, "claude-code", nil)
	list, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := toolNames(list); !slices.Equal(got, []string{"test.echo", "test.purge"}) {
		t.Fatalf("config A lists %v", got)
	}
	if r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "test.echo", Arguments: map[string]any{"text": "before"}}); err != nil || r.IsError {
		t.Fatalf("echo before the reload: %+v, %v", r, err)
	}

	if err := os.WriteFile(k.config, []byte(fmt.Sprintf("state_dir = %q\n", k.state)+config("write", "/purge")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := k.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if !pollUntil(30*time.Second, func() bool { return strings.Contains(k.stderr.String(), "sharedos-mcp: config reloaded") }) {
		t.Fatalf("the kernel did not reload within 30s; its stderr:\n%s", k.stderr)
	}
	r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "test.purge", Arguments: map[string]any{}})
	if err != nil || !r.IsError || r.Meta["sharedos/code"] != "tool_unavailable" ||
		!strings.Contains(firstText(t, r), "test.purge was reclassified by a reload of the kernel's config") {
		t.Errorf("purge in the turn opened under config A, after the reload to B: %+v, %v; want tool_unavailable, saying a reload reclassified it", r, err)
	}
	// The changed [[upstream]] restarts the upstream: wait for the new
	// process, so that the call below reaches a ready upstream.
	if !pollUntil(90*time.Second, func() bool {
		st, err := status.Read(k.state)
		return err == nil && len(st.Upstreams) == 1 && st.Upstreams[0].State == "ready" && st.Upstreams[0].PID != first.PID
	}) {
		t.Fatalf("the upstream was not restarted within 90s; kernel stderr:\n%s", k.stderr)
	}
	if r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "test.purge", Arguments: map[string]any{}}); err != nil || !r.IsError || r.Meta["sharedos/code"] != "tool_unavailable" {
		t.Errorf("purge once the restarted upstream is ready: %+v, %v; want tool_unavailable", r, err)
	}
	other := k.connect(t, "claude-code", nil)
	if l, err := other.ListTools(ctx, nil); err != nil || slices.Contains(toolNames(l), "test.purge") {
		t.Errorf("a turn opened after the reload lists %v, %v; config B grants purge to nobody", toolNames(l), err)
	}
	s.Close()
	other.Close()

	rec, err := testupstream.ReadRecord(record)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rec {
		if c.Tool == "purge" {
			t.Errorf("the upstream ran purge: %+v", rec)
		}
	}
	for _, e := range k.auditRecords(t) {
		if e["tool"] == "test.purge" && (e["event"] == "tool.invoked" || e["event"] == "tool.authorized") &&
			(e["action"] != "write" || e["resource"] != nil || e["status"] != "denied") {
			t.Errorf("the audit records purge after the reload as %v", e)
		}
	}
}
