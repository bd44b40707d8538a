package config

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sharedos/sharedos-mcp/policy"
)

// TestTheStartersUpstreamExamplesLoadUncommented: the starter's commented
// [[upstream]] examples are what a user uncomments, so they must load as
// they are: the filesystem server with a typed {path:path} and host_paths,
// and the memory server.
func TestTheStartersUpstreamExamplesLoadUncommented(t *testing.T) {
	start := bytes.Index(starter, []byte("\n# [[upstream]]\n"))
	if start < 0 {
		t.Fatal("the starter has no commented [[upstream]] example")
	}
	var doc strings.Builder
	for _, line := range strings.Split(string(starter[start+1:]), "\n") {
		if !strings.HasPrefix(line, "#") {
			break // the examples end at the first line that is not a comment
		}
		doc.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "#"), " ") + "\n")
	}
	c, err := Parse("starter.toml", []byte(doc.String()))
	if err != nil {
		t.Fatalf("the starter's [[upstream]] examples, uncommented, do not load: %v\n%s", err, doc.String())
	}
	fs := c.Upstream("fs")
	if fs == nil || !fs.HostPaths || c.Upstream("memory") == nil {
		t.Fatalf("upstreams %+v, want fs with host_paths and memory", c.Upstreams)
	}
	gh, linear := c.Upstream("github"), c.Upstream("linear")
	if gh == nil || gh.Remote == nil || len(gh.SecretRefs()) != 1 || linear == nil || linear.Remote == nil || linear.Remote.Auth != "oauth" || len(c.Secrets) != 1 {
		t.Errorf("the remote examples: github %+v, linear %+v, secrets %+v", gh, linear, c.Secrets)
	}
	for _, name := range []string{"read_text_file", "write_file"} {
		ts, ok := fs.Tool(name)
		if ph := ts.Resource.Placeholders(); !ok || len(ph) != 1 || ph[0] != (policy.Placeholder{Name: "path", Kind: policy.KindPath}) {
			t.Errorf("fs.%s's resource is %s, want /{path:path}", name, ts.Resource)
		}
	}
}
