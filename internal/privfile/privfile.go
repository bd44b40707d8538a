// Package privfile is how the reference kernel keeps the files only its
// uid may touch (upstream pins, OAuth tokens) and reads the ones only its
// uid may read (secrets): checked for owner and mode on what was opened,
// written whole (a temporary file synced and renamed over the old one,
// the directory synced) and changed under an exclusive flock that
// another process of the kernel's (kernel approve, kernel login) takes
// too.
package privfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// Errors of Check.
var (
	ErrNotOwned         = errors.New("it is not owned by the kernel's uid")
	ErrLoosePermissions = errors.New("group or others can read or write it")
)

// Check refuses fi unless uid owns it and its mode has none of the bits
// of forbidden (0o077: nobody else may read or write it; 0o022: nobody
// else may write it). Its errors wrap ErrNotOwned or ErrLoosePermissions
// and say the owner or the mode; they never name the file.
func Check(fi fs.FileInfo, uid int, forbidden fs.FileMode) error {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != uid {
		return fmt.Errorf("%w (it is owned by uid %d, the kernel runs as uid %d)", ErrNotOwned, st.Uid, uid)
	}
	if perm := fi.Mode().Perm(); perm&forbidden != 0 {
		return fmt.Errorf("mode %04o: %w", perm, ErrLoosePermissions)
	}
	return nil
}

// WriteAtomic replaces path, in dir, with data: a new file of mode 0600
// named after pattern (os.CreateTemp's) written and synced beside it,
// renamed over it, the directory synced. A reader sees the old file or
// the new one, and a crash leaves one of them.
func WriteAtomic(dir, path, pattern string, data []byte) error {
	tmp, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // nothing is left by this name after the rename
	_, werr := tmp.Write(data)
	serr := tmp.Sync()
	if err := errors.Join(werr, serr, tmp.Close()); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return SyncDir(dir)
}

// SyncDir syncs a directory, so the names created, renamed or removed in
// it are on disk.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// Locked runs f holding an exclusive flock on the lock file path (created
// 0600 if it is missing), which any process of the kernel's uid takes
// before it changes what the lock guards. Closing the file releases it.
func Locked(path string, f func() error) error {
	l, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("lock %s: %w", filepath.Base(path), err)
	}
	defer l.Close()
	for {
		err = unix.Flock(int(l.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("lock %s: %w", filepath.Base(path), err)
	}
	return f()
}
