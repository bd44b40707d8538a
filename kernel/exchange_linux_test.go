package kernel

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// exchange swaps two directory entries atomically (renameat2
// RENAME_EXCHANGE), whatever they are: what the racing attacker
// does between the kernel's steps.
func exchange(t *testing.T, a, b string) {
	if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
		t.Error(err)
	}
}

func needExchange(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if err := os.Mkdir(a, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a", b); err != nil {
		t.Fatal(err)
	}
	if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
		t.Skipf("renameat2 RENAME_EXCHANGE is not available here: %v", err)
	}
}
