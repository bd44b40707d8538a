package config

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/sharedos/sharedos-mcp/policy"
)

// TestTheStartersUpstreamExamplesLoadUncommented: the starter's commented
// [[upstream]] examples are what a user uncomments, so they must load as
// they are: the filesystem server with a typed {path:path} and host_paths,
// and the memory server.
func TestTheStartersUpstreamExamplesLoadUncommented(t *testing.T) {
	doc := uncommentedExample(t, "[[upstream]]")
	c, err := Parse("starter.toml", []byte(doc))
	if err != nil {
		t.Fatalf("the starter's [[upstream]] examples, uncommented, do not load: %v\n%s", err, doc)
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

// TestTheStartersTelemetryExampleLoadsUncommented: the commented
// [telemetry] example, with the [[secret]] its header names, loads as it
// is once uncommented.
func TestTheStartersTelemetryExampleLoadsUncommented(t *testing.T) {
	doc := uncommentedExample(t, "[telemetry]")
	c, err := Parse("starter.toml", []byte(doc))
	if err != nil {
		t.Fatalf("the starter's [telemetry] example, uncommented, does not load: %v\n%s", err, doc)
	}
	if c.Telemetry == nil || !slices.Equal(c.Telemetry.SecretNames(), []string{"otlp-token"}) || len(c.Secrets) != 1 {
		t.Errorf("telemetry %+v, secrets %+v: want a header naming the one secret otlp-token", c.Telemetry, c.Secrets)
	}
}

// uncommentedExample is the starter's commented example that begins with
// the line "# HEADER", uncommented: the lines from it to the first that
// is not a comment.
func uncommentedExample(t *testing.T, header string) string {
	t.Helper()
	start := bytes.Index(starter, []byte("\n# "+header+"\n"))
	if start < 0 {
		t.Fatalf("the starter has no commented %s example", header)
	}
	var doc strings.Builder
	for _, line := range strings.Split(string(starter[start+1:]), "\n") {
		if !strings.HasPrefix(line, "#") {
			break
		}
		doc.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "#"), " ") + "\n")
	}
	return doc.String()
}
