package files

import (
	"context"
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
	fr, err := OpenRoot(root)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { fr.Close() })
	allowAll := func(p string) *Call {
		return &Call{
			Root:      fr,
			Requested: policy.Resource{Namespace: Namespace, Path: p},
			Authorize: func(policy.Resource) (Outcome, bool) { return Outcome{}, true },
			Allowed:   func(policy.Resource, string) bool { return true },
			Commit:    func() (Outcome, bool) { return Outcome{}, true },
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
		res := policy.Resource{Namespace: Namespace, Path: p}
		for name, o := range map[string]Outcome{
			"read":   runRead(context.Background(), allowAll(p), res, nil),
			"list":   runList(context.Background(), allowAll(p), res, nil),
			"search": runSearch(context.Background(), allowAll(p), res, map[string]string{"query": "SECRET"}),
		} {
			got := fmt.Sprintf("%s %s %s", o.Message, o.Text, mustJSON(o.Output))
			if strings.Contains(got, "OUTSIDE") || strings.Contains(got, outside) {
				t.Fatalf("%s %q leaked what lies outside the root: %s", name, p, got)
			}
		}
	})
}
