package kernel

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/sharedos/sharedos-mcp/hashing"
)

var update = flag.Bool("update", false, "rewrite testdata/toolsnaps from the current registry")

// TestPublishedToolsSnapshot pins what every tool of this kernel says to
// a model: its published MCP form, one file per tool, and the catalogHash
// of the whole registry. A changed description or schema is then a diff a
// reviewer reads, not a side effect; run `make golden` to accept one.
func TestPublishedToolsSnapshot(t *testing.T) {
	var defs []hashing.Definition
	for _, tl := range registry() {
		defs = append(defs, tl.def.Definition)
	}
	tools, err := hashing.Project(defs)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("testdata", "toolsnaps")
	want := map[string][]byte{"catalogHash": []byte(hashing.Hash(tools) + "\n")}
	for _, tl := range tools {
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, hashing.AppendMCP(nil, tl), "", "  "); err != nil {
			t.Fatal(err)
		}
		want[tl.Name+".json"] = append(pretty.Bytes(), '\n')
	}
	if *update {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range want {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("%v (run make golden to create the snapshots)", err)
	}
	for _, e := range entries {
		if _, ok := want[e.Name()]; !ok {
			t.Errorf("%s/%s is a snapshot of no tool the registry has; run make golden", dir, e.Name())
		}
	}
	for name, b := range want {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("no snapshot %s/%s; run make golden", dir, name)
			continue
		}
		if !bytes.Equal(got, b) {
			t.Errorf("%s/%s differs from what the registry publishes; review the change, then run make golden:\n--- snapshot\n%s\n--- now\n%s", dir, name, got, b)
		}
	}
}
