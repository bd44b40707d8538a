// Package sockpath finds the kernel socket and decides whether a path can
// be trusted: everything it passes through on the way, directories and
// symlinks alike, must be out of reach of other users.
package sockpath

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
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

// ErrUntrusted is wrapped by the errors that report a path passing
// through something another user owns or can write: a directory, a
// symlink, or the file at its end. Their text names that thing alone.
var ErrUntrusted = errors.New("path is not out of other users' reach")

type untrustedError struct{ msg string }

func (e *untrustedError) Error() string { return e.msg }
func (e *untrustedError) Unwrap() error { return ErrUntrusted }

func untrusted(format string, args ...any) error {
	return &untrustedError{fmt.Sprintf(format, args...)}
}

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

// maxLinks bounds the symlinks one walk follows, as the kernel's own
// lookup does (Linux gives up after 40).
const maxLinks = 40

// CheckDirs walks dir from / one component at a time, without following
// anything it has not checked first: every directory on the way must be
// owned by a trusted uid and not writable by group or others unless it is
// sticky, and every symlink on the way must be owned by a trusted uid (in
// a sticky directory such as /tmp anyone may plant a link, and only its
// owner can re-point it), after which its target is walked the same way.
// Errors about ownership and modes wrap ErrUntrusted; a missing component
// wraps fs.ErrNotExist.
func CheckDirs(dir string, trusted Trusted) error {
	_, err := walk(dir, trusted, false)
	return err
}

// MakeDirs is CheckDirs that creates each missing directory (mode 0700) as
// it reaches it, so nothing is ever created under a directory that has not
// passed the check. It returns dir with every symlink resolved.
func MakeDirs(dir string, trusted Trusted) (string, error) {
	return walk(dir, trusted, true)
}

func walk(path string, trusted Trusted, create bool) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", path, err)
	}
	fi, err := os.Lstat("/")
	if err != nil {
		return "", err
	}
	if err := checkEntry("/", fi, trusted); err != nil {
		return "", err
	}
	cur := "/"
	todo := components(abs)
	links := 0
	for len(todo) > 0 {
		name := todo[0]
		todo = todo[1:]
		if name == ".." {
			// cur holds no symlink, so its parent is the real one.
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, name)
		fi, err := os.Lstat(next)
		if create && errors.Is(err, fs.ErrNotExist) {
			// A name that appears between the Lstat and the Mkdir is not
			// ours: Mkdir then fails or the Lstat below checks its owner.
			if err := os.Mkdir(next, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return "", fmt.Errorf("create %s: %w", next, err)
			}
			fi, err = os.Lstat(next)
		}
		if err != nil {
			return "", err
		}
		if err := checkEntry(next, fi, trusted); err != nil {
			return "", err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			if links++; links > maxLinks {
				return "", fmt.Errorf("%s: more than %d symlinks on the way", path, maxLinks)
			}
			target, err := os.Readlink(next)
			if err != nil {
				return "", err
			}
			if filepath.IsAbs(target) {
				cur = "/"
			}
			todo = append(components(target), todo...)
		case fi.IsDir():
			cur = next
		default:
			return "", fmt.Errorf("%s: %w", next, syscall.ENOTDIR)
		}
	}
	return cur, nil
}

// components splits a path into its names, dropping empty ones and ".".
func components(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

func checkEntry(path string, fi fs.FileInfo, trusted Trusted) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: cannot read its owner", path)
	}
	if !trusted(st.Uid) {
		if fi.Mode()&fs.ModeSymlink != 0 {
			return untrusted("%s is a symlink owned by uid %d, which is not trusted: its owner can re-point it", path, st.Uid)
		}
		return untrusted("%s is owned by uid %d, which is not trusted", path, st.Uid)
	}
	if fi.IsDir() && fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
		return untrusted("%s is writable by other users (mode %v) and not sticky", path, fi.Mode().Perm())
	}
	return nil
}

// CheckFile checks the entry fi, found at path, that a trusted directory
// holds: it must be owned by a trusted uid and, unless it is a directory
// (CheckDirs decides those), not writable by group or others.
func CheckFile(path string, fi fs.FileInfo, trusted Trusted) error {
	if err := checkEntry(path, fi, trusted); err != nil {
		return err
	}
	if !fi.IsDir() && fi.Mode().Perm()&0o022 != 0 {
		return untrusted("%s is writable by other users (mode %v)", path, fi.Mode().Perm())
	}
	return nil
}

// CheckSocket checks a socket path before connecting to it: not a
// symlink, a socket, owned by a trusted uid, in trusted directories.
func CheckSocket(path string, trusted Trusted) error {
	if err := CheckLen(path); err != nil {
		return err
	}
	dir, err := walk(filepath.Dir(path), trusted, false)
	if err != nil {
		return err
	}
	// The directory is trusted and resolved, so what is in it now is what
	// a connect to path will reach.
	fi, err := os.Lstat(filepath.Join(dir, filepath.Base(path)))
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%s is a symlink; point at the socket itself", path)
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("%s is not a socket", path)
	}
	return checkEntry(path, fi, trusted)
}
