package upstream

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestJudgeReportsATypedPlaceholderOnAnArgumentOfAnotherType: a path or
// URL placeholder needs a string argument, a plain one a string or an
// integer; a schema that types the argument otherwise withholds the tool
// as bad_placeholder, which kernel check and doctor report.
func TestJudgeReportsATypedPlaceholderOnAnArgumentOfAnotherType(t *testing.T) {
	spec := mustSpec(t, `
[[upstream]]
name = "fs"
command = ["x"]
host_paths = true
[[upstream.tool]]
name = "read_file"
action = "read"
resource = "/{path:path}"
[[upstream.tool]]
name = "by_number"
action = "read"
resource = "/{path:path}"
[[upstream.tool]]
name = "fetch"
action = "read"
resource = "/{url:url}"
[[upstream.tool]]
name = "fetch_id"
action = "read"
resource = "/{url:url}"
`)
	str, num := map[string]any{"type": "string"}, map[string]any{"type": "integer"}
	tools := []*mcp.Tool{
		tool("read_file", "Read a file.", map[string]any{"path": str}),
		tool("by_number", "Read by number.", map[string]any{"path": num}),
		tool("fetch", "Fetch a URL.", map[string]any{"url": str}),
		tool("fetch_id", "Fetch by id.", map[string]any{"url": map[string]any{"type": []any{"string", "null"}}}),
	}
	got := map[string]string{}
	for _, l := range judge(&spec, tools) {
		if l.withheld != nil {
			got[l.withheld.Tool] = l.withheld.Reason + ": " + l.withheld.Detail
		}
	}
	if w := got["by_number"]; w != `bad_placeholder: resource /{path:path}: placeholder {path:path}: the argument's type is "integer", want "string"` {
		t.Errorf("by_number: %q", w)
	}
	if w := got["fetch_id"]; !strings.HasPrefix(w, `bad_placeholder: resource /{url:url}: placeholder {url:url}: the argument's type is ["string","null"], want "string"`) {
		t.Errorf("fetch_id: %q", w)
	}
	if len(got) != 2 {
		t.Errorf("withheld %v, want only by_number and fetch_id", got)
	}
}

// TestHostPathsAreDecidedWhereTheyLead: with host_paths, a path
// placeholder names where the path really leads on this host, links
// followed (docs/adr/0008's rule), and that path is what is forwarded; a
// file to be created resolves through its parent.
func TestHostPathsAreDecidedWhereTheyLead(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	work, outside := filepath.Join(root, "work"), filepath.Join(root, "outside")
	for _, d := range []string{work, outside, filepath.Join(work, "docs")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(work, "docs", "a.md"), []byte("a"), 0o600); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"out": outside, "docs-link": "docs", "nowhere": filepath.Join(root, "missing")} {
		if err := os.Symlink(target, filepath.Join(work, link)); err != nil {
			t.Fatal(err)
		}
	}
	spec := mustSpec(t, `
[[upstream]]
name = "fs"
command = ["x"]
host_paths = true
cwd = "`+work+`"
[[upstream.tool]]
name = "read_file"
action = "read"
resource = "/{path:path}"
`)
	var rf *Tool
	for _, l := range judge(&spec, []*mcp.Tool{tool("read_file", "Read a file.", map[string]any{"path": map[string]any{"type": "string"}})}) {
		rf = l.tool
	}
	if rf == nil {
		t.Fatal("read_file is not published")
	}
	for _, tt := range []struct{ arg, want string }{
		{work + "/docs/a.md", work + "/docs/a.md"},
		{work + "/docs-link/a.md", work + "/docs/a.md"},
		{work + "/out/secret", outside + "/secret"},
		{work + "/docs/./../docs/a.md", work + "/docs/a.md"},
		{"docs/a.md", work + "/docs/a.md"},
		{work + "/docs/new.md", work + "/docs/new.md"},
		{work + "/out/new/deeper/x.md", outside + "/new/deeper/x.md"},
	} {
		args, _ := json.Marshal(map[string]string{"path": tt.arg})
		r, fw, err := rf.Resolve(args)
		if err != nil || r.String() != "fs:"+tt.want {
			t.Errorf("Resolve(%s) = %v, %v; want fs:%s", args, r, err, tt.want)
			continue
		}
		if want, _ := json.Marshal(map[string]string{"path": tt.want}); string(fw.Bytes()) != string(want) {
			t.Errorf("Resolve(%s) forwards %s, want %s", args, fw.Bytes(), want)
		}
	}
	for _, arg := range []string{work + "/nowhere", work + "/nowhere/x", work + "/docs/a.md/x", "../outside"} {
		args, _ := json.Marshal(map[string]string{"path": arg})
		if r, _, err := rf.Resolve(args); !errors.Is(err, ErrInvalidArguments) {
			t.Errorf("Resolve(%s) = %v, %v; want ErrInvalidArguments", args, r, err)
		}
	}
}
