package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"syscall"
	"testing"
)

// TestWordsLeavesOutTheSystemCalls: a user reads which file and what is
// wrong with it, not lstat, open or connect, and a path once.
func TestWordsLeavesOutTheSystemCalls(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "unix", Addr: &net.UnixAddr{Name: "/run/k.sock", Net: "unix"}, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, tt := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("check socket: %w", &fs.PathError{Op: "lstat", Path: "/a/b", Err: syscall.EACCES}), "check socket: /a/b: permission denied"},
		{fmt.Errorf("read %s: %w", "/c/config.toml", &fs.PathError{Op: "open", Path: "/c/config.toml", Err: syscall.ENOTDIR}), "read /c/config.toml: not a directory"},
		{fmt.Errorf("kernel at %s: %w", "/run/k.sock", dial), "kernel at /run/k.sock: connection refused"},
		{errors.Join(&fs.PathError{Op: "openat", Path: "x", Err: fs.ErrNotExist}, errors.New("second")), "x: file does not exist\nsecond"},
		{errors.New("no system call here: lstat is a word"), "no system call here: lstat is a word"},
	} {
		if got := Words(tt.err); got != tt.want {
			t.Errorf("Words(%q) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
