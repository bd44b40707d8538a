package kernel

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/policy"
)

// Limits of the file tools. They keep one call from holding the kernel
// or flooding a model's context.
const (
	maxReadBytes     = 1 << 20 // files.read, files.write, and each file files.search scans
	maxListEntries   = 5000
	maxSearchMatches = 100
	maxSearchVisited = 10000 // directory entries files.search looks at
	maxQueryBytes    = 1024
	maxMatchText     = 240 // bytes of a matching line returned
)

// Failure codes of the file tools, beyond the protocol's own.
const (
	codeOutsideRoot = "outside_root" // denied: the path resolves out of the files root
	codeNotFile     = "not_a_file"
	codeNotDir      = "not_a_directory"
	codeTooLarge    = "too_large"
	codeNotText     = "not_text"
)

var (
	errOutsideRoot = errors.New("resolves outside the files root")
	errNotFound    = errors.New("does not exist")
)

// filesRoot confines the file tools to one directory tree. Two guards
// stack: a path is resolved (symlinks and all) and refused if its real
// path leaves the root; every open then goes through os.Root with that
// real path. os.Root walks it one component at a time with openat and
// O_NOFOLLOW, resolving any link itself, so a symlink swapped in between
// the check and the open still cannot lead outside.
type filesRoot struct {
	real string // the root with symlinks resolved
	root *os.Root
}

func openFilesRoot(dir string) (*filesRoot, error) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("files root: %w", err)
	}
	r, err := os.OpenRoot(real)
	if err != nil {
		return nil, fmt.Errorf("files root: %w", err)
	}
	return &filesRoot{real: real, root: r}, nil
}

func (fr *filesRoot) Close() error { return fr.root.Close() }

// resolve maps a clean logical path ("/a/b") to its real path relative to
// the root, following symlinks. The error never carries a symlink's
// target: that would leak what lies outside.
func (fr *filesRoot) resolve(logical string) (string, error) {
	real, err := filepath.EvalSymlinks(filepath.Join(fr.real, filepath.FromSlash(logical)))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return "", errNotFound
		}
		return "", errors.New("cannot be resolved")
	}
	rel, err := filepath.Rel(fr.real, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", errOutsideRoot
	}
	return filepath.ToSlash(rel), nil
}

// pathFailure turns a resolve or open error into the call's outcome.
func pathFailure(tool, logical string, err error) outcome {
	switch {
	case errors.Is(err, errOutsideRoot):
		return denied(codeOutsideRoot, "%s: %s %s", tool, logical, errOutsideRoot)
	case errors.Is(err, errNotFound), errors.Is(err, fs.ErrNotExist):
		return failed(kproto.CodeNotFound, "%s: %s does not exist", tool, logical)
	}
	return failed(kproto.CodeInternal, "%s: %s cannot be opened", tool, logical)
}

// openRegular opens a regular file for reading. O_NONBLOCK keeps a FIFO
// from hanging the call; anything not regular is refused after fstat.
func (fr *filesRoot) openRegular(rel string) (*os.File, fs.FileInfo, error) {
	f, err := fr.root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// readText reads at most maxReadBytes of text from f, reporting whether
// the file was larger and whether it is text (valid UTF-8 without NUL).
func readText(f *os.File) (data []byte, tooLarge, text bool, err error) {
	data, err = io.ReadAll(io.LimitReader(f, maxReadBytes+1))
	if err != nil {
		return nil, false, false, err
	}
	if len(data) > maxReadBytes {
		return nil, true, false, nil
	}
	return data, false, utf8.Valid(data) && bytes.IndexByte(data, 0) < 0, nil
}

func runRead(_ context.Context, env *callEnv, res policy.Resource, _ map[string]string) outcome {
	rel, err := env.files.resolve(res.Path)
	if err != nil {
		return pathFailure("files.read", res.Path, err)
	}
	f, fi, err := env.files.openRegular(rel)
	if err != nil {
		return pathFailure("files.read", res.Path, err)
	}
	defer f.Close()
	if fi.IsDir() {
		return failed(codeNotFile, "files.read: %s is a directory; use files.list", res.Path)
	}
	if !fi.Mode().IsRegular() {
		return failed(codeNotFile, "files.read: %s is not a regular file", res.Path)
	}
	if fi.Size() > maxReadBytes {
		return failed(codeTooLarge, "files.read: %s is %d bytes, over the %d-byte limit; use files.search to find what you need", res.Path, fi.Size(), maxReadBytes)
	}
	data, tooLarge, text, err := readText(f)
	switch {
	case err != nil:
		return failed(kproto.CodeInternal, "files.read: %s could not be read", res.Path)
	case tooLarge:
		return failed(codeTooLarge, "files.read: %s is over the %d-byte limit", res.Path, maxReadBytes)
	case !text:
		return failed(codeNotText, "files.read: %s is not UTF-8 text (binary content is not returned)", res.Path)
	}
	return succeeded(nil, string(data))
}

type listEntry struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Size int64  `json:"size"`
}

type listOutput struct {
	Entries   []listEntry `json:"entries"`
	Truncated bool        `json:"truncated"`
}

func runList(_ context.Context, env *callEnv, res policy.Resource, _ map[string]string) outcome {
	rel, err := env.files.resolve(res.Path)
	if err != nil {
		return pathFailure("files.list", res.Path, err)
	}
	d, err := env.files.root.Open(rel)
	if err != nil {
		return pathFailure("files.list", res.Path, err)
	}
	defer d.Close()
	if fi, err := d.Stat(); err != nil || !fi.IsDir() {
		return failed(codeNotDir, "files.list: %s is not a directory; use files.read", res.Path)
	}
	dirents, err := d.ReadDir(-1)
	if err != nil {
		return failed(kproto.CodeInternal, "files.list: %s could not be read", res.Path)
	}
	sort.Slice(dirents, func(i, j int) bool { return dirents[i].Name() < dirents[j].Name() })
	out := listOutput{Entries: []listEntry{}}
	for _, de := range dirents {
		if len(out.Entries) == maxListEntries {
			out.Truncated = true
			break
		}
		var fi fs.FileInfo
		if de.Type()&fs.ModeSymlink != 0 {
			// Show a link as what it points to, and only when that is
			// inside the root.
			target, err := env.files.resolve(path.Join(res.Path, de.Name()))
			if err != nil {
				continue
			}
			fi, err = env.files.root.Stat(target)
			if err != nil {
				continue
			}
		} else if fi, err = de.Info(); err != nil {
			continue
		}
		switch {
		case fi.IsDir():
			out.Entries = append(out.Entries, listEntry{Name: de.Name(), Type: "dir"})
		case fi.Mode().IsRegular():
			out.Entries = append(out.Entries, listEntry{Name: de.Name(), Type: "file", Size: fi.Size()})
		}
	}
	return succeeded(out, "")
}

type searchMatch struct {
	Path string `json:"path"`
	Line int    `json:"line"`
	Text string `json:"text"`
}

type searchOutput struct {
	Matches   []searchMatch `json:"matches"`
	Truncated bool          `json:"truncated"`
}

// errSearchDone stops the walk once a limit is reached.
var errSearchDone = errors.New("search limit reached")

func runSearch(ctx context.Context, env *callEnv, res policy.Resource, args map[string]string) outcome {
	query := args["query"]
	if query == "" || len(query) > maxQueryBytes {
		return failed(kproto.CodeInvalidArguments, "files.search: query must be 1 to %d bytes", maxQueryBytes)
	}
	if strings.ContainsAny(query, "\n\r") {
		return failed(kproto.CodeInvalidArguments, "files.search: query must be one line (it is matched line by line)")
	}
	rel, err := env.files.resolve(res.Path)
	if err != nil {
		return pathFailure("files.search", res.Path, err)
	}
	out := searchOutput{Matches: []searchMatch{}}
	visited := 0
	// A search reads every file it visits, so each one must be allowed
	// on its own: an exact grant on a directory does not cover its files.
	searchFile := func(fsPath, logical string) error {
		if !env.allowed(policy.Resource{Namespace: namespaceFiles, Path: logical}, policy.ActionSearch) {
			return nil
		}
		f, fi, err := env.files.openRegular(fsPath)
		if err != nil {
			return nil
		}
		defer f.Close()
		if !fi.Mode().IsRegular() || fi.Size() > maxReadBytes {
			return nil
		}
		data, tooLarge, text, err := readText(f)
		if err != nil || tooLarge || !text {
			return nil
		}
		for i, line := range strings.Split(string(data), "\n") {
			if !strings.Contains(line, query) {
				continue
			}
			if len(out.Matches) == maxSearchMatches {
				out.Truncated = true
				return errSearchDone
			}
			out.Matches = append(out.Matches, searchMatch{Path: logical, Line: i + 1, Text: shorten(strings.TrimSuffix(line, "\r"), maxMatchText)})
		}
		return nil
	}
	err = fs.WalkDir(env.files.root.FS(), rel, func(p string, de fs.DirEntry, err error) error {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		if err != nil {
			return nil // unreadable entries are skipped, not fatal
		}
		visited++
		if visited > maxSearchVisited {
			out.Truncated = true
			return errSearchDone
		}
		logical := res.Path
		if p != rel {
			logical = path.Join(res.Path, strings.TrimPrefix(p, rel+"/"))
			if rel == "." {
				logical = path.Join(res.Path, p)
			}
		}
		switch {
		case de.IsDir():
			if de.Name() == ".git" && p != rel {
				return fs.SkipDir
			}
			return nil
		case de.Type().IsRegular():
			return searchFile(p, logical)
		}
		return nil // symlinks and special files are not followed
	})
	if err != nil && !errors.Is(err, errSearchDone) {
		if ctx.Err() != nil {
			return failed(kproto.CodeCancelled, "files.search: cancelled")
		}
		return failed(kproto.CodeInternal, "files.search: %s could not be searched", res.Path)
	}
	return succeeded(out, "")
}

// shorten cuts s to at most n bytes without splitting a UTF-8 sequence.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

type writeOutput struct {
	Path  string `json:"path"`
	Bytes int    `json:"bytes"`
}

func runWrite(_ context.Context, env *callEnv, res policy.Resource, args map[string]string) outcome {
	content := args["content"]
	if len(content) > maxReadBytes {
		return failed(codeTooLarge, "files.write: content is %d bytes, over the %d-byte limit", len(content), maxReadBytes)
	}
	if res.Path == "/" {
		return failed(codeNotFile, "files.write: / is the root directory; name a file under it")
	}
	parentRel, err := env.files.resolve(path.Dir(res.Path))
	if err != nil {
		if errors.Is(err, errNotFound) {
			return failed(kproto.CodeNotFound, "files.write: the parent directory %s does not exist", path.Dir(res.Path))
		}
		return pathFailure("files.write", res.Path, err)
	}
	if fi, err := env.files.root.Stat(parentRel); err != nil || !fi.IsDir() {
		return failed(codeNotDir, "files.write: %s is not a directory", path.Dir(res.Path))
	}
	target := path.Join(parentRel, path.Base(res.Path))
	perm := fs.FileMode(0o644)
	switch fi, err := env.files.root.Lstat(target); {
	case err == nil && fi.Mode()&fs.ModeSymlink != 0:
		// Replacing the link would surprise whoever made it, and
		// writing through it is what the real-path check is there for.
		return failed(codeNotFile, "files.write: %s is a symbolic link; write to the path it points to", res.Path)
	case err == nil && !fi.Mode().IsRegular():
		return failed(codeNotFile, "files.write: %s exists and is not a regular file", res.Path)
	case err == nil:
		perm = fi.Mode().Perm()
	case !errors.Is(err, fs.ErrNotExist):
		return failed(kproto.CodeInternal, "files.write: %s cannot be checked", res.Path)
	}
	if err := env.files.replace(target, []byte(content), perm); err != nil {
		return failed(kproto.CodeInternal, "files.write: %s could not be written", res.Path)
	}
	return succeeded(writeOutput{Path: res.Path, Bytes: len(content)}, "")
}

// replace writes data to a temporary file beside rel, syncs it and renames
// it over rel, so a reader or a crash sees the old content or the new,
// never a part.
func (fr *filesRoot) replace(rel string, data []byte, perm fs.FileMode) error {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:]) // crypto/rand.Read never fails
	tmp := path.Join(path.Dir(rel), "."+path.Base(rel)+".sharedos-"+hex.EncodeToString(rnd[:]))
	f, err := fr.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		_ = fr.root.Remove(tmp)
		return err
	}
	if err := fr.root.Rename(tmp, rel); err != nil {
		_ = fr.root.Remove(tmp)
		return err
	}
	return nil
}
