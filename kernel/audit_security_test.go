package kernel

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/internal/testfs"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
	"github.com/sharedos/sharedos-mcp/kernel/files"
	"github.com/sharedos/sharedos-mcp/policy"
)

// forged is what a hostile client would like the audit log to contain.
const forged = `"}` + "\n" + `{"time":"2026-01-01T00:00:00Z","event":"turn.opened","executionId":"exe_forged","integration":"root","peer":{"uid":0,"pid":1}}` + "\r\n\u2028"

// TestAuditLinesCannotBeForged sends the forged line through every string
// a client controls (tool name, callId, catalogHash, path, content,
// query, escalation reason) and checks that each audit line still parses
// as one whole event, that the count of each event is exactly what
// happened, and that no event claims the forged turn.
func TestAuditLinesCannotBeForged(t *testing.T) {
	h := startKernel(t, []policy.Grant{
		grant(t, "integration:*", "files:/", true, "read", "list", "search", "write"),
		grant(t, "integration:*", "sharedos:/escalate", false, "escalate"),
	})
	c := h.dial()
	c.hello("cc")
	c.list()
	calls := []struct {
		tool string
		args map[string]string
	}{
		{"x" + forged, map[string]string{"path": "/"}},
		{"files.read", map[string]string{"path": "/public/a.txt" + forged}},
		{"files.read", map[string]string{"path": "/public/a.txt", "extra" + forged: "x"}},
		{"files.write", map[string]string{"path": "/public/w" + strings.ReplaceAll(forged, "/", "_") + ".txt", "content": forged}},
		{"files.search", map[string]string{"path": "/public", "query": `"}{"event":"turn.opened"}`}},
		{"files.list", map[string]string{"path": "/public" + forged}},
	}
	for i, call := range calls {
		p := c.invokeParams("call"+forged+string(rune('a'+i)), call.tool, call.args)
		if i == 2 {
			p.CatalogHash = forged
		}
		invokeResult(t, c.call(kproto.MethodInvoke, p))
	}
	esc := c.invoke("sharedos.escalate", map[string]string{"reason": forged})
	if esc.Status != kproto.StatusSucceeded {
		t.Fatalf("escalate: %+v", esc)
	}
	c.conn.Close()
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}

	data, err := os.ReadFile(h.auditPath)
	if err != nil {
		t.Fatal(err)
	}
	evs := parseEvents(t, data) // fails on any line that is not one whole event
	if n := bytes.Count(data, []byte("\n")); n != len(evs) {
		t.Fatalf("%d lines hold %d events", n, len(evs))
	}
	count := map[string]int{}
	for _, e := range evs {
		count[e.Event]++
		if e.Event == audit.EventConfigLoaded {
			continue // the kernel's own, at start
		}
		if e.ExecutionID == "exe_forged" || e.Integration != "cc" || e.Peer.UID != uint32(os.Getuid()) {
			t.Errorf("event claims another turn or principal: %+v", e)
		}
	}
	want := map[string]int{
		audit.EventTurnOpened: 1, audit.EventCatalogListed: 1, audit.EventToolInvoked: len(calls) + 1,
		audit.EventToolAuthorized: 1, audit.EventTurnEscalated: 1, audit.EventTurnClosed: 1, // tool.authorized: the write, before it acted
		audit.EventConfigLoaded: 1,
	}
	for ev, n := range want {
		if count[ev] != n {
			t.Errorf("%d %s events, want %d (all: %v)", count[ev], ev, n, count)
		}
	}
	if len(count) != len(want) {
		t.Errorf("unexpected events: %v", count)
	}
	invoked := eventsNamed(evs, audit.EventToolInvoked)
	// Long names are recorded shortened, with an ellipsis.
	if !strings.HasPrefix("x"+forged, strings.TrimSuffix(invoked[0].Tool, "…")) || invoked[0].Code != kproto.CodeToolUnavailable {
		t.Errorf("the forged tool name is not recorded as the string it was: %+v", invoked[0])
	}
}

// TestFileWritesStayInsideTheRoot: with a write grant on everything, no
// write goes through a link out of the root, replaces a link, or changes
// anything outside; reads through a link to "/" are refused too.
func TestFileWritesStayInsideTheRoot(t *testing.T) {
	h := startKernel(t, []policy.Grant{grant(t, "integration:cc", "files:/", true, "read", "list", "search", "write")})
	if err := os.Symlink("/", filepath.Join(h.root, "public", "slash")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(h.outside, "new-dir"), filepath.Join(h.root, "public", "dangling")); err != nil {
		t.Fatal(err)
	}
	before := testfs.Snapshot(t, h.outside)
	c := h.dial()
	c.hello("cc")
	c.list()
	tests := []struct {
		name, tool, path string
		status, code     string
	}{
		{"a new file through a symlinked directory outside", "files.write", "/public/escdir/new.txt", "denied", files.CodeOutsideRoot},
		{"overwriting a file outside through its symlink", "files.write", "/public/escape", "failed", files.CodeNotFile},
		{"a new file under a link to /", "files.write", "/public/slash/tmp/sharedos-escape.txt", "denied", files.CodeOutsideRoot},
		{"a new file under a dangling link that points outside", "files.write", "/public/dangling/x.txt", "failed", kproto.CodeNotFound},
		{"a dot-dot write", "files.write", "/public/../../outside/secret.txt", "failed", kproto.CodeInvalidArguments},
		{"reading /etc/passwd through a link to /", "files.read", "/public/slash/etc/passwd", "denied", files.CodeOutsideRoot},
		{"listing / through a link to /", "files.list", "/public/slash", "denied", files.CodeOutsideRoot},
		{"searching through a link to /", "files.search", "/public/slash/etc", "denied", files.CodeOutsideRoot},
		{"the root directory itself as a file", "files.write", "/", "failed", files.CodeNotFile},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := map[string]string{"path": tt.path}
			switch tt.tool {
			case "files.write":
				args["content"] = "pwned"
			case "files.search":
				args["query"] = "root"
			}
			r := c.invoke(tt.tool, args)
			if r.Status != tt.status || r.Code != tt.code {
				t.Errorf("%+v, want %s %s", r, tt.status, tt.code)
			}
			if all := string(r.Output) + string(r.Content) + r.Message; strings.Contains(all, h.outside) || strings.Contains(all, "root:x:0") {
				t.Errorf("result leaks what lies outside: %+v", r)
			}
		})
	}
	if after := testfs.Snapshot(t, h.outside); after != before {
		t.Errorf("the directory outside the root changed:\nbefore %s\nafter  %s", before, after)
	}
	if _, err := os.Lstat("/tmp/sharedos-escape.txt"); err == nil {
		t.Error("a write escaped to /tmp")
	}
}
