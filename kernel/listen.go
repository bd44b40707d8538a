package kernel

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"

	"github.com/sharedos/sharedos-mcp/internal/cli"
	"github.com/sharedos/sharedos-mcp/internal/sockpath"
)

// ErrAlreadyRunning reports a socket path another kernel answers on.
var ErrAlreadyRunning = errors.New("a kernel is already running")

// Listen prepares path and listens on it. The socket's directory is
// created 0700 if missing and must be out of other users' reach (owned by
// this uid or root, not writable by others); the socket is made 0600. A
// socket file left by a kernel that died is removed, but only when nothing
// answers on it: removing a live kernel's socket would orphan its turns.
//
// Between bind and chmod the socket briefly has the umask's mode; that is
// harmless because the kernel checks every peer's uid before reading a
// byte, which is the real gate.
func Listen(path string) (*net.UnixListener, error) {
	if err := sockpath.CheckLen(path); err != nil {
		return nil, cli.Hintf(err, "pick a shorter --socket path")
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, cli.Hintf(fmt.Errorf("create socket directory: %w", err), "pick a --socket in a directory you can create")
	}
	uid := uint32(os.Getuid())
	trusted := func(u uint32) bool { return u == uid || u == 0 }
	if err := sockpath.CheckDirs(dir, trusted); err != nil {
		return nil, cli.Hintf(fmt.Errorf("socket directory: %w", err), "use a directory only you can write, e.g. $XDG_RUNTIME_DIR/sharedos (chmod 700 it)")
	}
	if err := removeStale(path); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, cli.Hintf(fmt.Errorf("listen: %w", err), "check that %s is writable", dir)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod socket: %w", err)
	}
	return ln, nil
}

func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("check socket path: %w", err)
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return cli.Hintf(fmt.Errorf("%s exists and is not a socket", path), "remove it yourself or pick another --socket")
	}
	c, err := net.Dial("unix", path)
	if err == nil {
		c.Close()
		return cli.Hintf(fmt.Errorf("%w on %s", ErrAlreadyRunning, path), "stop that kernel first, or pass another --socket")
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return cli.Hintf(fmt.Errorf("check socket %s: %w", path, err), "remove it yourself if no kernel uses it")
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove stale socket: %w", err)
	}
	return nil
}
