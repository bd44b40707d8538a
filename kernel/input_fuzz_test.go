package kernel

import (
	"encoding/json"
	"path"
	"strings"
	"testing"

	"github.com/sharedos/sharedos-mcp/policy"
)

// FuzzToolArguments: every registered tool either refuses arguments with a
// message or derives a resource whose path is clean and absolute.
func FuzzToolArguments(f *testing.F) {
	for _, s := range []string{
		`{}`, `null`, `[]`, `{"path":"/a"}`, `{"path":"/a","query":"x"}`, `{"path":"/a","content":"x"}`,
		`{"path":1}`, `{"path":null}`, `{"path":"/a","extra":1}`, `{"reason":"why"}`, `{"path":"/a/../b"}`,
		`{"path":"\u0000"}`, `{"path":"/a","path":"/../b"}`, `{"__proto__":{"path":"/x"}}`, `"str"`, `{"path":"/a"`,
	} {
		f.Add([]byte(s))
	}
	tools := registry()
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, tl := range tools {
			args, msg := tl.parseArgs(json.RawMessage(raw))
			if msg != "" {
				continue
			}
			if len(args) != len(tl.params) {
				t.Fatalf("%s: parsed %d arguments, the tool has %d", tl.def.Name, len(args), len(tl.params))
			}
			res, err := tl.target(args)
			if err != nil {
				continue
			}
			if !strings.HasPrefix(res.Path, "/") || path.Clean(res.Path) != res.Path {
				t.Fatalf("%s(%s): resource %s is not a clean absolute path", tl.def.Name, raw, res)
			}
			if _, err := policy.ParseResource(res.String()); err != nil {
				t.Fatalf("%s(%s): resource %s would not parse as a grant's: %v", tl.def.Name, raw, res, err)
			}
		}
	})
}
