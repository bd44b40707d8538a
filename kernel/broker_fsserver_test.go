package kernel

import (
	"fmt"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/internal/testupstream"
	"github.com/sharedos/sharedos-mcp/policy"
)

// filesystemServer is docs/broker.md's worked example for
// @modelcontextprotocol/server-filesystem: read tools read on
// /{path:path}, write tools write, the paths resolved on this host.
const filesystemServer = `
[[upstream]]
name = "fs"
command = ["node", %q, %q]
host_paths = true
env = { GORACE = "atexit_sleep_ms=0" }

[[upstream.tool]]
name = "read_text_file"
action = "read"
resource = "/{path:path}"

[[upstream.tool]]
name = "read_media_file"
action = "read"
resource = "/{path:path}"

[[upstream.tool]]
name = "get_file_info"
action = "read"
resource = "/{path:path}"

[[upstream.tool]]
name = "list_directory"
action = "list"
resource = "/{path:path}"

[[upstream.tool]]
name = "directory_tree"
action = "list"
resource = "/{path:path}"

[[upstream.tool]]
name = "search_files"
action = "search"
resource = "/{path:path}"

[[upstream.tool]]
name = "write_file"
action = "write"
resource = "/{path:path}"

[[upstream.tool]]
name = "edit_file"
action = "write"
resource = "/{path:path}"

[[upstream.tool]]
name = "create_directory"
action = "write"
resource = "/{path:path}"
`

// TestTheFilesystemServerBehindGrants runs docs/broker.md's
// server-filesystem example end to end: the npm server may touch the
// whole temporary tree, the grant only work/. A file in work/ is read and
// written; the same names through work/out, a link that leads out, are
// refused by the kernel before the server sees them, though the server
// itself would have served them.
func TestTheFilesystemServerBehindGrants(t *testing.T) {
	entry := testupstream.NPMServer(t, "server-filesystem")
	root := pathTree(t)
	work := root + "/work"
	grants := []policy.Grant{grant(t, "integration:claude-code", "fs:"+work, true, "read", "list", "search", "write")}
	events := newEventLog()
	specs := upstreamSpecs(t, fmt.Sprintf(filesystemServer, entry, root))
	h := startKernel(t, grants, func(s *Server) {
		s.Upstreams = specs
		s.StateDir = filepath.Join(t.TempDir(), "state")
		s.upstreamEvents = events.add
	})
	events.ready(t, 0, "fs")
	c := h.dial()
	c.hello("claude-code")
	defs, _ := c.list()
	for _, n := range []string{"fs.read_text_file", "fs.write_file", "fs.list_directory", "fs.create_directory"} {
		if !hasName(defs, n) {
			t.Fatalf("%s is not published: %v", n, names(defs))
		}
	}
	if hasName(defs, "fs.move_file") {
		t.Error("fs.move_file (two paths, not configured) is published")
	}
	r := c.invoke("fs.read_text_file", map[string]any{"path": work + "/docs/a.md"})
	if r.Status != kproto.StatusSucceeded || !strings.Contains(contentText(t, r.Content), "the doc") {
		t.Errorf("read_text_file work/docs/a.md = %+v", r)
	}
	r = c.invoke("fs.write_file", map[string]any{"path": work + "/docs/new.md", "content": "written"})
	if r.Status != kproto.StatusSucceeded {
		t.Errorf("write_file work/docs/new.md = %+v", r)
	}
	if b, err := os.ReadFile(work + "/docs/new.md"); err != nil || string(b) != "written" {
		t.Errorf("work/docs/new.md = %q, %v", b, err)
	}
	r = c.invoke("fs.list_directory", map[string]any{"path": work})
	if r.Status != kproto.StatusSucceeded || !strings.Contains(contentText(t, r.Content), "docs") {
		t.Errorf("list_directory work = %+v", r)
	}
	// Through the link that leads out: the kernel decides on outside/.
	r = c.invoke("fs.read_text_file", map[string]any{"path": work + "/out/secret"})
	if r.Status != kproto.StatusDenied || r.Code != kproto.CodeNoMatchingGrant || !strings.Contains(r.Message, "fs:"+root+"/outside/secret") {
		t.Errorf("read_text_file work/out/secret = %+v, want no_matching_grant on outside/secret", r)
	}
	r = c.invoke("fs.write_file", map[string]any{"path": work + "/out/planted.md", "content": "x"})
	if r.Status != kproto.StatusDenied || r.Code != kproto.CodeNoMatchingGrant {
		t.Errorf("write_file work/out/planted.md = %+v, want no_matching_grant", r)
	}
	if _, err := os.Lstat(root + "/outside/planted.md"); err == nil {
		t.Error("the refused write reached outside/")
	}
	h.stop()
	var recorded []string
	for _, e := range eventsNamed(h.events(), audit.EventToolInvoked) {
		recorded = append(recorded, e.Tool+" "+strings.TrimPrefix(e.Resource, "fs:"+root)+" "+e.Status)
	}
	want := []string{
		"fs.read_text_file /work/docs/a.md succeeded",
		"fs.write_file /work/docs/new.md succeeded",
		"fs.list_directory /work succeeded",
		"fs.read_text_file /outside/secret denied",
		"fs.write_file /outside/planted.md denied",
	}
	if strings.Join(recorded, "\n") != strings.Join(want, "\n") {
		t.Errorf("recorded:\n%s\nwant:\n%s", strings.Join(recorded, "\n"), strings.Join(want, "\n"))
	}
}
