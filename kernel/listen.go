package kernel

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sharedos/sharedos-mcp/internal/sockpath"
)

// Errors Listen returns, wrapped with the path and the cause. Path length
// problems wrap sockpath.ErrTooLong, and a directory or symlink on the way
// that another user owns or can write wraps sockpath.ErrUntrusted as well
// as ErrSocketDir.
var (
	// ErrAlreadyRunning: another kernel holds the path's lock, or answers
	// on the socket.
	ErrAlreadyRunning = errors.New("a kernel is already running")
	// ErrNotASocket: something other than a socket is at the path.
	ErrNotASocket = errors.New("not a socket")
	// ErrSocketDir: the socket's directory cannot be created or used.
	ErrSocketDir = errors.New("socket directory")
	// ErrSocketUnchecked: a socket file is there, and whether a kernel
	// answers on it cannot be told (it is neither answered nor refused).
	ErrSocketUnchecked = errors.New("cannot tell whether a kernel answers on the socket")
	// ErrBind: the socket could not be created in a directory that passed
	// every check.
	ErrBind = errors.New("listen on socket")
)

// Listener is a kernel's socket. While it is open it holds an exclusive
// flock on the lock file beside the socket (path + ".lock"), so exactly
// one kernel serves a path; Close removes the socket only if it is still
// the one this Listener created.
type Listener struct {
	*net.UnixListener

	path     string
	lock     *os.File
	dev, ino uint64

	once     sync.Once
	closeErr error
}

// Listen prepares path and listens on it. Every directory and symlink on
// the way must be out of other users' reach (sockpath.MakeDirs: owned by
// this uid or root, not writable by others unless sticky); missing
// directories are created 0700 as the walk reaches them. The lock beside
// the socket is taken before anything else touches the path, so two
// kernels started at once cannot both decide the socket is stale: the
// loser gets ErrAlreadyRunning. A socket file left by a kernel that died
// is removed, but only when nothing answers on it (a kernel of a version
// without the lock may still be serving it). The socket is made 0600.
//
// Between bind and chmod the socket briefly has the umask's mode; that is
// harmless because the kernel checks every peer's uid before reading a
// byte, which is the real gate.
func Listen(path string) (*Listener, error) {
	if err := sockpath.CheckLen(path); err != nil {
		return nil, err
	}
	uid := uint32(os.Getuid())
	trusted := func(u uint32) bool { return u == uid || u == 0 }
	if _, err := sockpath.MakeDirs(filepath.Dir(path), trusted); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSocketDir, err)
	}
	lock, err := lockBeside(path, trusted)
	if err != nil {
		return nil, err
	}
	l, err := listenLocked(path)
	if err != nil {
		lock.Close()
		return nil, err
	}
	l.lock = lock
	return l, nil
}

// lockBeside opens and flocks path + ".lock". The file is never removed:
// a kernel that removed it on exit would let the next two kernels lock
// two different files of the same name.
func lockBeside(path string, trusted sockpath.Trusted) (*os.File, error) {
	name := path + ".lock"
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%w: open lock file: %w", ErrSocketDir, err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file", name)
	}
	if err == nil {
		err = sockpath.CheckFile(name, fi, trusted)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: lock file: %w", ErrSocketDir, err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w on %s (it holds %s)", ErrAlreadyRunning, path, name)
		}
		return nil, fmt.Errorf("%w: lock %s: %w", ErrSocketDir, name, err)
	}
	return f, nil
}

// listenLocked binds path; the caller holds the path's lock.
func listenLocked(path string) (*Listener, error) {
	if err := removeStale(path); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBind, err)
	}
	// Close decides itself whether the path is still ours to remove.
	ln.SetUnlinkOnClose(false)
	fail := func(err error) (*Listener, error) {
		ln.Close()
		_ = os.Remove(path) // ours: nobody else binds while we hold the lock
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		return fail(fmt.Errorf("chmod socket: %w", err))
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return fail(fmt.Errorf("stat socket: %w", err))
	}
	st := fi.Sys().(*syscall.Stat_t)
	return &Listener{UnixListener: ln, path: path, dev: uint64(st.Dev), ino: uint64(st.Ino)}, nil
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
		return fmt.Errorf("%s exists and is %w", path, ErrNotASocket)
	}
	c, err := net.Dial("unix", path)
	if err == nil {
		c.Close()
		return fmt.Errorf("%w on %s", ErrAlreadyRunning, path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("%w %s: %w", ErrSocketUnchecked, path, err)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove stale socket: %w", err)
	}
	return nil
}

// Path is the socket path the Listener serves.
func (l *Listener) Path() string { return l.path }

// StopAccepting closes the socket without giving up the path: the lock is
// still held, so no other kernel takes the path while this one finishes
// its turns. Close does the rest.
func (l *Listener) StopAccepting() error {
	if err := l.UnixListener.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// Close stops accepting, removes the socket file if it is still the one
// Listen created (same device and inode: a socket another kernel bound
// after this one's was removed is left alone), and releases the lock.
// Calling it again returns the first call's result.
func (l *Listener) Close() error {
	l.once.Do(func() {
		err := l.StopAccepting()
		if fi, serr := os.Lstat(l.path); serr == nil {
			st := fi.Sys().(*syscall.Stat_t)
			if fi.Mode()&fs.ModeSocket != 0 && uint64(st.Dev) == l.dev && uint64(st.Ino) == l.ino {
				if rerr := os.Remove(l.path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
					err = errors.Join(err, fmt.Errorf("remove socket: %w", rerr))
				}
			}
		}
		l.closeErr = errors.Join(err, l.lock.Close()) // closing the file releases the flock
	})
	return l.closeErr
}
