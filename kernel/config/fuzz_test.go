package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sharedos/sharedos-mcp/policy"
)

// FuzzParseConfig: whatever the TOML, Parse returns a config or an
// error with a message, never panics, and a config it accepts holds only
// grants that validate and resources that read back as written.
func FuzzParseConfig(f *testing.F) {
	files, _ := filepath.Glob("../../testdata/kernel/*.toml")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("allow_uids = []\n"))
	f.Add([]byte("allow_uids = [-1, 4294967296]\n"))
	f.Add([]byte("[[grant]]\nsubject = \"integration:*\"\nresource = \"files:/a/../b\"\nactions = [\"read\"]\nexpires = 2027-01-01T00:00:00\n"))
	f.Add([]byte("[[grant]]\nsubject = \"integration:x\"\nresource = \"files:/\"\nactions = [\"read\"]\nexpires = 1979-05-27T07:32:00-08:00\n[files]\nroot = \"\\u0000\"\n"))
	f.Add([]byte("[files]\nroot = '''\n/a\n'''\n[files.x]\n"))
	f.Add([]byte("a = [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.toml", data)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error without a message")
			}
			return
		}
		if c.AllowUIDs != nil && len(c.AllowUIDs) == 0 {
			t.Fatal("accepted an empty allow_uids")
		}
		for i, g := range c.Grants {
			if err := g.Validate(); err != nil {
				t.Fatalf("grant #%d accepted but invalid: %v", i+1, err)
			}
			back, err := policy.ParseResource(g.Resource.String())
			if err != nil || back != g.Resource {
				t.Fatalf("grant #%d resource %q does not read back: %v", i+1, g.Resource, err)
			}
		}
	})
}
