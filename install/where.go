package install

import (
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/sharedos/sharedos-mcp/internal/sockpath"
)

// BareSocket is the socket serve finds when a harness starts it without
// the environment of the shell install ran in: a harness opened from a
// desktop launcher or an IDE often has neither $SHAREDOS_SOCKET (set in a
// shell profile) nor $XDG_RUNTIME_DIR, so serve falls back to
// <temp dir>/sharedos-<uid>/kernel.sock. $TMPDIR is kept: macOS gives GUI
// applications the same per-user value as the shell.
func BareSocket(getenv func(string) string) string {
	return sockpath.Default(func(k string) string {
		if k == "SHAREDOS_SOCKET" || k == "XDG_RUNTIME_DIR" {
			return ""
		}
		return getenv(k)
	})
}

// SocketArg returns the --socket an entry must carry for serve to find
// the kernel's socket however the harness is started: "" when the bare
// environment finds it anyway, else kernelSocket itself.
func SocketArg(kernelSocket string, getenv func(string) string) string {
	if filepath.Clean(kernelSocket) == filepath.Clean(BareSocket(getenv)) {
		return ""
	}
	return kernelSocket
}

// goRunDir matches the work directory `go run` builds in and runs from:
// $TMPDIR/go-build<digits>/b<digits>/exe/<name>, removed when it exits.
// It is compiled when first needed, not at every start of every command.
var goRunDir = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(^|/)go-build[0-9]+/b[0-9]+/exe/[^/]+$`)
})

// InBuildCache reports whether exe is a binary the Go tool keeps only for
// a while: one `go run` built in its temporary work directory, or one in
// the build cache ($GOCACHE, else the user cache directory's go-build).
// An entry that runs such a binary breaks when go run exits or the cache
// is trimmed.
func InBuildCache(exe string, env Env) bool {
	if goRunDir().MatchString(filepath.ToSlash(exe)) {
		return true
	}
	cache := env.getenv("GOCACHE")
	if cache == "" || cache == "off" {
		base := env.getenv("XDG_CACHE_HOME")
		switch {
		case env.goos() == "darwin" && env.Home != "":
			base = filepath.Join(env.Home, "Library", "Caches")
		case base == "" && env.Home != "":
			base = filepath.Join(env.Home, ".cache")
		}
		if base == "" {
			return false
		}
		cache = filepath.Join(base, "go-build")
	}
	rel, err := filepath.Rel(cache, exe)
	return err == nil && rel != "." && !strings.HasPrefix(rel, "..")
}
