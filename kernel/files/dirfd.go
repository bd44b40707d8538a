package files

import (
	"errors"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// What the file tools do relative to a directory they hold open, so that
// nothing is looked up by name from the root a second time.

// withFD runs fn with f's descriptor, which stays open while fn runs.
func withFD(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// openAt opens name, one entry of the directory dir, never following a
// link there. The file's name (for messages only) joins dir's and name.
func openAt(dir *os.File, name string, flag int, perm uint32) (*os.File, error) {
	var nfd int
	err := withFD(dir, func(fd int) error {
		var err error
		for {
			nfd, err = unix.Openat(fd, name, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
			if !errors.Is(err, unix.EINTR) {
				return err
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(nfd), filepath.Join(dir.Name(), name)), nil
}

// statAt is fstatat(dir, name) without following a link.
func statAt(dir *os.File, name string, st *unix.Stat_t) error {
	return withFD(dir, func(fd int) error { return unix.Fstatat(fd, name, st, unix.AT_SYMLINK_NOFOLLOW) })
}

func unlinkAt(dir *os.File, name string) error {
	return withFD(dir, func(fd int) error { return unix.Unlinkat(fd, name, 0) })
}
