// Package testfs holds what the tests of several packages need of the
// file system: another local user to hand files to, and a snapshot of a
// tree to tell whether anything in it changed. Only tests import it.
package testfs

import (
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// OtherUID returns a uid no account uses, to play another local user, or
// skips the test when only root could hand files to it.
func OtherUID(t *testing.T) int {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("two-user case: needs root to give files to another uid (CI runs the tests as root)")
	}
	for uid := 54321; uid < 54421; uid++ {
		if _, err := user.LookupId(strconv.Itoa(uid)); err != nil {
			return uid
		}
	}
	t.Skip("no unused uid between 54321 and 54420")
	return 0
}

// Snapshot lists every entry under dir with its content.
func Snapshot(t *testing.T, dir string) string {
	t.Helper()
	var entries []string
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		data := ""
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			data = string(b)
		}
		entries = append(entries, p+"="+data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(entries)
	return strings.Join(entries, ";")
}

// WriteFile writes data to p with exactly mode, past the umask.
func WriteFile(t *testing.T, p, data string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// Mkdir makes the directory p with exactly mode, past the umask.
func Mkdir(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if err := os.Mkdir(p, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// Chown gives p to uid, as user and group.
func Chown(t *testing.T, p string, uid int) {
	t.Helper()
	if err := os.Chown(p, uid, uid); err != nil {
		t.Fatal(err)
	}
}

// WriteTree creates the tree the kernel's tests serve, in a new
// temporary directory, and returns its root and the directory beside it
// that is never shared:
//
//	root/public/a.txt            "hello world\nsecond line\n"
//	root/public/sub/b.txt        "a needle here\nno match\nneedle again\n"
//	root/public/bin.dat          binary
//	root/public/escape           -> outside/secret.txt
//	root/public/escdir           -> outside
//	root/public/inside           -> ../private/secret.txt (stays in the root)
//	root/private/secret.txt      "private needle"
//	outside/secret.txt           "OUTSIDE SECRET needle"
func WriteTree(t *testing.T) (root, outside string) {
	t.Helper()
	base := t.TempDir()
	root = filepath.Join(base, "root")
	outside = filepath.Join(base, "outside")
	files := map[string]string{
		"root/public/a.txt":       "hello world\nsecond line\n",
		"root/public/sub/b.txt":   "a needle here\nno match\nneedle again\n",
		"root/public/bin.dat":     "bin\x00ary",
		"root/private/secret.txt": "private needle",
		"outside/secret.txt":      "OUTSIDE SECRET needle",
	}
	for name, content := range files {
		p := filepath.Join(base, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"root/public/escape": filepath.Join(outside, "secret.txt"),
		"root/public/escdir": outside,
		"root/public/inside": "../private/secret.txt",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(base, name)); err != nil {
			t.Fatal(err)
		}
	}
	return root, outside
}
