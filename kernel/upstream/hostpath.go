package upstream

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/sharedos/sharedos-mcp/policy"
)

// hostPath is how a path placeholder is resolved for an upstream that
// reads this host's files ([[upstream]] host_paths): where the path
// really leads, links followed, the way the file tools decide on where a
// path leads rather than on how it is written (docs/adr/0008). A
// relative path is taken from dir, the upstream's working directory.
//
// A path whose last components do not exist yet (a file or directories
// to be created) resolves through its deepest existing ancestor, with the
// missing names after it; the first missing name must not be a link that
// leads nowhere, which the upstream's create would follow.
//
// The kernel resolves, the upstream then opens: what changes on disk in
// between (a link swapped in by someone who can write there) is not seen.
func hostPath(dir string) policy.HostPath {
	return func(p string) (string, error) {
		if !filepath.IsAbs(p) {
			if dir == "" {
				return "", errors.New("is relative, and the upstream's working directory is not known; give an absolute path")
			}
			p = filepath.Join(dir, p)
		}
		return resolveHostPath(filepath.Clean(p))
	}
}

func resolveHostPath(p string) (string, error) {
	var missing []string // innermost first
	for cur := p; ; {
		real, err := filepath.EvalSymlinks(cur)
		if err == nil {
			if len(missing) > 0 {
				if _, err := os.Lstat(filepath.Join(real, missing[len(missing)-1])); err == nil {
					return "", errors.New("goes through a link that leads nowhere on this host")
				}
			}
			slices.Reverse(missing)
			return filepath.Join(append([]string{real}, missing...)...), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", errors.New("cannot be followed on this host (a part of it is not a directory, or cannot be read)")
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return "", errors.New("cannot be followed on this host")
		}
		missing = append(missing, filepath.Base(cur))
		cur = parent
	}
}
