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
