package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"

	"github.com/sharedos/sharedos-mcp/policy"
)

// FuzzParseConfig: whatever the TOML, ParseConfig returns a config or an
// error with a message, never panics, and a config it accepts holds only
// grants that validate and resources that read back as written.
func FuzzParseConfig(f *testing.F) {
	files, _ := filepath.Glob("../testdata/kernel/*.toml")
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
		c, err := ParseConfig("fuzz.toml", data)
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

// fuzzTree builds a files root with links that try to leave it:
//
//	root/public/a.txt       "public text"
//	root/public/escape      -> outside/secret.txt
//	root/public/escdir      -> outside
//	root/public/abs         -> /
//	root/public/up          -> ../../outside
//	root/public/loop1       -> loop2, loop2 -> loop1
//	root/public/inside      -> ../private/p.txt
//	root/private/p.txt      "private text"
//	outside/secret.txt      "OUTSIDE SECRET"
func fuzzTree(tb testing.TB) (root, outside string) {
	base := tb.TempDir()
	root, outside = filepath.Join(base, "root"), filepath.Join(base, "outside")
	for name, content := range map[string]string{
		"root/public/a.txt":   "public text\n",
		"root/private/p.txt":  "private text\n",
		"outside/secret.txt":  "OUTSIDE SECRET\n",
		"root/public/sub/b.c": "int b;\n",
	} {
		p := filepath.Join(base, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	for name, target := range map[string]string{
		"root/public/escape": filepath.Join(outside, "secret.txt"),
		"root/public/escdir": outside,
		"root/public/abs":    "/",
		"root/public/up":     "../../outside",
		"root/public/loop1":  "loop2",
		"root/public/loop2":  "loop1",
		"root/public/inside": "../private/p.txt",
	} {
		if err := os.Symlink(target, filepath.Join(base, name)); err != nil {
			tb.Fatal(err)
		}
	}
	return root, outside
}

// FuzzFilePath: a path argument either is refused by filePath for a
// reason the contract names, or becomes a clean absolute path whose
// resolution stays inside the root; reading, listing or searching it never
// returns anything from outside.
func FuzzFilePath(f *testing.F) {
	for _, s := range []string{
		"/", "/public/a.txt", "/public/escape", "/public/escdir/secret.txt", "/public/abs/etc/passwd",
		"/public/up/secret.txt", "/public/loop1", "/public/inside", "/public/../../outside/secret.txt",
		"//public//a.txt/", "/./public/./a.txt", "public/a.txt", "", "/public/a.txt\x00", "/\xff",
		"/public/escdir/../escdir/secret.txt", "/public/%2e%2e/%2e%2e/outside", "/public\\..\\..\\outside",
		"/public/sub/", "/public/escdir/", "/..", "/...", "/public/..a", "/public/a..",
	} {
		f.Add(s)
	}
	root, outside := fuzzTree(f)
	fr, err := openFilesRoot(root)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { fr.Close() })
	allowAll := func(p string) *callEnv {
		return &callEnv{
			files:     fr,
			requested: policy.Resource{Namespace: namespaceFiles, Path: p},
			authorize: func(policy.Resource) (outcome, bool) { return outcome{}, true },
			allowed:   func(policy.Resource, string) bool { return true },
			commit:    func() bool { return true },
			escalate:  func(string) bool { return true },
		}
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := filePath(s)
		hasDotDot := false
		for _, seg := range strings.Split(s, "/") {
			hasDotDot = hasDotDot || seg == ".."
		}
		mustRefuse := !strings.HasPrefix(s, "/") || strings.ContainsRune(s, 0) || !utf8.ValidString(s) || hasDotDot || len(s) > maxPathBytes
		if (err != nil) != mustRefuse {
			t.Fatalf("filePath(%q) = %q, %v; refusal expected: %v", s, p, err, mustRefuse)
		}
		if err != nil {
			return
		}
		if p != path.Clean(p) || !strings.HasPrefix(p, "/") || strings.Contains(p, "/../") || strings.HasSuffix(p, "/..") {
			t.Fatalf("filePath(%q) = %q: not a clean absolute path", s, p)
		}
		if o, err := fr.open(p, os.O_RDONLY|syscall.O_NONBLOCK); err == nil {
			real := filepath.Join(fr.evalReal, filepath.FromSlash(o.path))
			o.f.Close()
			if real != fr.evalReal && !strings.HasPrefix(real, fr.evalReal+string(filepath.Separator)) {
				t.Fatalf("open(%q) reads back %q: outside the root %s", p, o.path, fr.evalReal)
			}
			if again, err := filepath.EvalSymlinks(real); err == nil && again != real {
				t.Fatalf("open(%q) reads back %q, which still holds a link (to %s)", p, o.path, again)
			}
		}
		res := policy.Resource{Namespace: namespaceFiles, Path: p}
		for name, o := range map[string]outcome{
			"read":   runRead(context.Background(), allowAll(p), res, nil),
			"list":   runList(context.Background(), allowAll(p), res, nil),
			"search": runSearch(context.Background(), allowAll(p), res, map[string]string{"query": "SECRET"}),
		} {
			got := fmt.Sprintf("%s %s %s", o.message, o.text, mustJSON(o.output))
			if strings.Contains(got, "OUTSIDE") || strings.Contains(got, outside) {
				t.Fatalf("%s %q leaked what lies outside the root: %s", name, p, got)
			}
		}
	})
}

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
