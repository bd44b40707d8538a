package config

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos-mcp/kernel/status"
)

// TestKernelCheckSuggestsATypedPlaceholder: once the kernel has run the
// upstreams, a plain placeholder whose argument the tool's schema says
// takes a path or a URL (by its format, its name or its description) is
// a warning that names the typed placeholder to write, as the resource
// to write when the placeholder is its last segment, and host_paths when
// a path is not yet resolved on this host. Typed placeholders, and
// arguments that take neither, say nothing.
func TestKernelCheckSuggestsATypedPlaceholder(t *testing.T) {
	c, err := Parse("kernel.toml", []byte(`
[[upstream]]
name = "fs"
command = ["x"]

[[upstream]]
name = "web"
command = ["y"]
host_paths = true
`))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	r := status.Report{Written: at, Upstreams: []status.Upstream{
		{Name: "fs", State: "ready", Published: []status.Published{
			{Name: "fs.read_text_file", Action: "read", Resource: "fs:/{path}", Arguments: []status.Argument{{Name: "path", Kind: "segment", Takes: "path", By: "name"}}},
			{Name: "fs.under", Action: "read", Resource: "fs:/{dir}/x", Arguments: []status.Argument{{Name: "dir", Kind: "segment", Takes: "path", By: "description"}}},
			{Name: "fs.typed", Action: "read", Resource: "fs:/{path:path}", Arguments: []status.Argument{{Name: "path", Kind: "path", Takes: "path", By: "name"}}},
			{Name: "fs.get_repo", Action: "read", Resource: "fs:/repos/{owner}", Arguments: []status.Argument{{Name: "owner", Kind: "segment"}}},
		}},
		{Name: "web", State: "ready", Published: []status.Published{
			{Name: "web.fetch", Action: "read", Resource: "web:/sites/{target}", Arguments: []status.Argument{{Name: "target", Kind: "segment", Format: "uri", Takes: "url", By: "format"}}},
			{Name: "web.open", Action: "read", Resource: "web:/{file}", Arguments: []status.Argument{{Name: "file", Kind: "segment", Format: "path", Takes: "path", By: "format"}}},
		}},
	}}
	var s Summary
	s.CheckUpstreamReport(c, r)
	var got []string
	for _, f := range s.Warnings {
		got = append(got, f.String())
	}
	want := []string{
		`kernel.toml:2: upstream fs: fs.read_text_file: placeholder {path} fills one segment, but the tool's schema says by its name that its argument takes a path, so a value with '/' in it is refused before the server sees it: use resource = "/{path:path}", and host_paths = true if the server opens that path on this host (as the kernel reported at 2026-06-01T12:00:00Z)`,
		`kernel.toml:2: upstream fs: fs.under: placeholder {dir} fills one segment, but the tool's schema says by its description that its argument takes a path, so a value with '/' in it is refused before the server sees it: use {dir:path}, as the resource's last segment, and host_paths = true if the server opens that path on this host (as the kernel reported at 2026-06-01T12:00:00Z)`,
		`kernel.toml:6: upstream web: web.fetch: placeholder {target} fills one segment, but the tool's schema says by its format "uri" that its argument takes a URL, so a value with '/' in it is refused before the server sees it: use resource = "/sites/{target:url}" (as the kernel reported at 2026-06-01T12:00:00Z)`,
		`kernel.toml:6: upstream web: web.open: placeholder {file} fills one segment, but the tool's schema says by its format "path" that its argument takes a path, so a value with '/' in it is refused before the server sees it: use resource = "/{file:path}" (as the kernel reported at 2026-06-01T12:00:00Z)`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(s.Problems) != 0 {
		t.Errorf("problems %v; a suggestion is a warning", s.Problems)
	}
}
