package upstream

import (
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// upstreamTable is one [[upstream]] with one [[upstream.tool]], as the
// cases below vary it.
type upstreamTable struct {
	name, command, cwd     string
	hostPaths              bool
	tool, action, resource string
}

func (u upstreamTable) toml() string {
	doc := fmt.Sprintf("[[upstream]]\nname = %q\ncommand = [%q]\ncwd = %q\nhost_paths = %v\n", u.name, u.command, u.cwd, u.hostPaths)
	if u.tool != "" {
		doc += fmt.Sprintf("[[upstream.tool]]\nname = %q\naction = %q\nresource = %q\n", u.tool, u.action, u.resource)
	}
	return doc
}

// TestAReloadThatChangesHowAToolIsAuthorizedReclassifiesIt: a tool taken
// from a snapshot is classified by a later [[upstream]] only when that
// one authorizes its calls the same way; what else a reload changes (the
// command, a working directory no path is resolved from) leaves it as it
// was.
func TestAReloadThatChangesHowAToolIsAuthorizedReclassifiesIt(t *testing.T) {
	purge := upstreamTable{name: "mem", command: "x", cwd: "/srv/a", hostPaths: true, tool: "purge", action: "read", resource: "/graph"}
	read := upstreamTable{name: "mem", command: "x", cwd: "/srv/a", hostPaths: true, tool: "read_file", action: "read", resource: "/{path:path}"}
	tools := map[string]*Tool{}
	for _, u := range []upstreamTable{purge, read} {
		spec := mustSpec(t, u.toml())
		offered := []*mcp.Tool{tool("purge", "Purge.", nil), tool("read_file", "Read.", map[string]any{"path": map[string]any{"type": "string"}})}
		for _, l := range judge(&spec, offered) {
			if l.tool != nil && l.tool.UpstreamTool == u.tool {
				tools[u.tool] = l.tool
			}
		}
	}
	with := func(u upstreamTable, change func(*upstreamTable)) upstreamTable {
		change(&u)
		return u
	}
	for _, c := range []struct {
		name  string
		now   upstreamTable
		same  bool
		which string
	}{
		{"the same config", purge, true, "purge"},
		{"another command", with(purge, func(u *upstreamTable) { u.command = "y" }), true, "purge"},
		{"another action", with(purge, func(u *upstreamTable) { u.action = "write" }), false, "purge"},
		{"another resource", with(purge, func(u *upstreamTable) { u.resource = "/purge" }), false, "purge"},
		{"its [[upstream.tool]] removed: the default call on /purge", with(purge, func(u *upstreamTable) { u.tool = "" }), false, "purge"},
		{"another upstream's name", with(purge, func(u *upstreamTable) { u.name = "other" }), false, "purge"},
		{"no path placeholder, another cwd, host_paths off", with(purge, func(u *upstreamTable) { u.cwd, u.hostPaths = "/srv/b", false }), true, "purge"},
		{"host_paths turned off", with(read, func(u *upstreamTable) { u.hostPaths = false }), false, "read_file"},
		{"paths resolved from another directory", with(read, func(u *upstreamTable) { u.cwd = "/srv/b" }), false, "read_file"},
		{"the typed placeholder made plain", with(read, func(u *upstreamTable) { u.resource = "/{path}" }), false, "read_file"},
	} {
		spec := mustSpec(t, c.now.toml())
		if got := tools[c.which].ClassifiedBy(&spec); got != c.same {
			t.Errorf("%s: %s.ClassifiedBy = %v, want %v", c.name, c.which, got, c.same)
		}
	}
}

// TestClassifiedByAllocatesNothing: every brokered call asks it, so the
// common answer (nothing changed) costs no allocation.
func TestClassifiedByAllocatesNothing(t *testing.T) {
	u := upstreamTable{name: "fs", command: "x", cwd: "/srv", hostPaths: true, tool: "read_file", action: "read", resource: "/{path:path}"}
	spec := mustSpec(t, u.toml())
	ls := judge(&spec, []*mcp.Tool{tool("read_file", "Read.", map[string]any{"path": map[string]any{"type": "string"}})})
	if ls[0].tool == nil {
		t.Fatalf("withheld: %+v", ls[0].withheld)
	}
	if n := testing.AllocsPerRun(100, func() {
		if !ls[0].tool.ClassifiedBy(&spec) {
			t.Fatal("not classified by its own spec")
		}
	}); n != 0 {
		t.Errorf("ClassifiedBy allocates %v times per call, want 0", n)
	}
}
