package files

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// CodeKernelPrivate is a call refused because what it reached is the
// kernel's own: its config file, state directory, audit log or a secret
// file. Those are never served, whatever the grants and the root say.
const CodeKernelPrivate = "kernel_private"

var errKernelPrivate = errors.New("is the kernel's own (its config, state, audit log or a secret) and is never served")

// privateEntry is one path of the kernel's, as it really is: links
// resolved, and its device and inode when it exists, so that another
// name of the same file (a hard link) is known too.
type privateEntry struct {
	path     string
	dir      bool // everything beneath it is private too
	dev, ino uint64
	known    bool // dev and ino are set
}

// SetPrivate sets the paths the file tools never serve: the kernel's
// config file, state directory and audit log, the files its secrets are
// read from. A directory covers everything beneath it. A path that does
// not exist yet is kept as written. It may be called while calls run
// (a reload changes the secret files); each call sees one set or the
// other.
func (fr *Root) SetPrivate(paths []string) {
	var entries []privateEntry
	for _, p := range paths {
		if p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			continue
		}
		e := privateEntry{path: abs}
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			e.path = real
		}
		var st syscall.Stat_t
		if syscall.Stat(e.path, &st) == nil {
			e.dir = st.Mode&syscall.S_IFMT == syscall.S_IFDIR
			e.dev, e.ino, e.known = uint64(st.Dev), st.Ino, true
		}
		entries = append(entries, e)
	}
	fr.private.Store(&entries)
}

// fileID is a file's device and inode: what all its names share.
type fileID struct{ dev, ino uint64 }

// isPrivate reports whether the object at logical, which is id (nil when
// it does not exist yet), is the kernel's own.
func (fr *Root) isPrivate(logical string, id *fileID) bool {
	entries := fr.private.Load()
	if entries == nil {
		return false
	}
	host := filepath.Join(fr.real, filepath.FromSlash(logical))
	for _, e := range *entries {
		switch {
		case host == e.path, e.dir && strings.HasPrefix(host, e.path+string(filepath.Separator)):
			return true
		case id != nil && e.known && id.dev == e.dev && id.ino == e.ino:
			return true
		}
	}
	return false
}

// privateInfo is isPrivate for an object opened and stat'ed.
func (fr *Root) privateInfo(logical string, info os.FileInfo) bool {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return fr.isPrivate(logical, nil)
	}
	return fr.isPrivate(logical, &fileID{uint64(st.Dev), st.Ino})
}
