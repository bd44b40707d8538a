// Package sockpath finds the kernel socket and decides whether a socket
// path can be trusted: the socket itself, and every directory above it,
// must be out of reach of other users.
package sockpath

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
)

// MaxLen returns the longest socket path the OS accepts (sun_path less
// its NUL): 103 bytes on macOS, 107 on Linux.
func MaxLen() int {
	if runtime.GOOS == "darwin" {
		return 103
	}
	return 107
}

// Default returns the socket path the kernel and the shim agree on when
// none is given: $SHAREDOS_SOCKET, else $XDG_RUNTIME_DIR/sharedos/kernel.sock,
// else <temp dir>/sharedos-<uid>/kernel.sock (a directory the kernel
// creates with mode 0700).
func Default(getenv func(string) string) string {
	if p := getenv("SHAREDOS_SOCKET"); p != "" {
		return p
	}
	if d := getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "sharedos", "kernel.sock")
	}
	tmp := getenv("TMPDIR")
	if tmp == "" {
		tmp = "/tmp"
	}
	return filepath.Join(tmp, "sharedos-"+strconv.Itoa(os.Getuid()), "kernel.sock")
}

// ErrTooLong reports a socket path longer than the OS allows.
var ErrTooLong = errors.New("socket path too long")

// CheckLen returns ErrTooLong (wrapped, with the limit) for a path the
// kernel could never bind or the shim never dial.
func CheckLen(path string) error {
	if len(path) > MaxLen() {
		return fmt.Errorf("%w: %d bytes, the limit on %s is %d", ErrTooLong, len(path), runtime.GOOS, MaxLen())
	}
	return nil
}

// Trusted reports whether a uid may own the socket and the directories
// above it. Root is always trusted by callers that build this.
type Trusted func(uid uint32) bool

// CheckDirs checks dir and every directory above it (after resolving
// symlinks in them): each must be owned by a trusted uid and must not be
// writable by group or others unless the sticky bit is set.
func CheckDirs(dir string, trusted Trusted) error {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("resolve %s: %w", dir, err)
	}
	real, err = filepath.Abs(real)
	if err != nil {
		return err
	}
	for d := real; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if err := checkEntry(d, fi, trusted); err != nil {
			return err
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

func checkEntry(path string, fi fs.FileInfo, trusted Trusted) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: cannot read its owner", path)
	}
	if !trusted(st.Uid) {
		return fmt.Errorf("%s is owned by uid %d, which is not trusted", path, st.Uid)
	}
	if fi.IsDir() && fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
		return fmt.Errorf("%s is writable by other users (mode %v) and not sticky", path, fi.Mode().Perm())
	}
	return nil
}

// CheckSocket checks a socket path before connecting to it: not a
// symlink, a socket, owned by a trusted uid, in trusted directories.
func CheckSocket(path string, trusted Trusted) error {
	if err := CheckLen(path); err != nil {
		return err
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%s is a symlink; point at the socket itself", path)
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("%s is not a socket", path)
	}
	if err := checkEntry(path, fi, trusted); err != nil {
		return err
	}
	return CheckDirs(filepath.Dir(path), trusted)
}
