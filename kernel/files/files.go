// Package files is the kernel's file tools (files.list, files.read,
// files.search, files.write), confined to one directory tree. Each call
// opens what the path it names really is, and the grants are asked about
// that object, not about a second lookup of its name
// (docs/adr/0008-authorize-the-opened-object.md). The kernel registers
// the tools (Tools), decides the grants and records the calls; the tools
// ask it through a Call.
package files

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
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/sharedos/sharedos-mcp/internal/clip"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/policy"
)

// Namespace is the file tools' resource namespace: a grant on files:/docs
// reaches the path /docs of the root.
const Namespace = "files"

// Limits of the file tools. They keep one call from holding the kernel
// or flooding a model's context.
const (
	MaxReadBytes     = 1 << 20  // files.read, files.write, and each file files.search scans
	MaxResultBytes   = 1 << 20  // the JSON of one listing or of one search's matches
	maxListEntries   = 5000     // entries one files.list returns
	MaxSearchMatches = 100      // matches one files.search returns
	maxSearchVisited = 10000    // directory entries one files.search looks at
	MaxSearchBytes   = 64 << 20 // file content one files.search reads, all files together
	maxQueryBytes    = 1024
	maxMatchText     = 240  // bytes of a matching line returned
	maxPathBytes     = 4096 // PATH_MAX on Linux: no longer path can be opened anyway
	maxShownPath     = 200  // bytes of a path a message quotes back
	listChunk        = 256  // directory entries read at a time
)

// Failure codes of the file tools, beyond the protocol's own (a file or
// a content over a limit is kproto.CodeTooLarge).
const (
	CodeOutsideRoot = "outside_root" // denied: the path resolves out of the files root
	CodeHardLink    = "hard_link"    // denied: the file has other names the path does not show
	CodeNotFile     = "not_a_file"
	CodeNotDir      = "not_a_directory"
	CodeNotText     = "not_text"
)

var (
	errOutsideRoot = errors.New("resolves outside the files root")
	errNotFound    = errors.New("does not exist")
	errLinkLoop    = errors.New("does not resolve: a symbolic link on the way loops or cannot be read")
	errNotUTF8     = errors.New("resolves to a name that is not UTF-8")
)

// Outcome is what a file tool call produced: succeeded with Output (a
// value the kernel encodes as JSON) or Text, or failed or denied with a
// Code and a Message for the model. Status is one of kproto's Status
// values.
type Outcome struct {
	Status  string
	Code    string
	Message string
	Output  any
	Text    string
	Acted   bool // the call changed something (a file written)
}

func succeeded(output any, text string) Outcome {
	return Outcome{Status: kproto.StatusSucceeded, Output: output, Text: text}
}

func failed(code, format string, args ...any) Outcome {
	return Outcome{Status: kproto.StatusFailed, Code: code, Message: fmt.Sprintf(format, args...)}
}

func denied(code, format string, args ...any) Outcome {
	return Outcome{Status: kproto.StatusDenied, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Call is what a running file tool may use besides its arguments: the
// root, and the kernel's decisions, asked at the moments the tool
// reaches them.
type Call struct {
	Root *Root
	// HardLinks serves regular files that have more than one name.
	HardLinks bool
	// Requested is the resource the call named.
	Requested policy.Resource
	// Authorize decides the call's grant on the resource the tool has
	// resolved, the one it is about to touch, and reports the denial to
	// answer when no grant allows it. A tool calls it exactly once,
	// before it reads or acts.
	Authorize func(r policy.Resource) (denial Outcome, ok bool)
	// Allowed checks a grant for resources a tool reaches beyond its own
	// (files.search reads many files, files.list shows where links lead).
	Allowed func(r policy.Resource, action string) bool
	// Commit records, durably, that the call is about to change
	// something. When it is not ok the record could not be written: the
	// tool must not act, and answers the refusal it was given.
	Commit func() (refusal Outcome, ok bool)
	// Progress reports how far the call has got (total 0: unknown). A
	// tool may call it any number of times while it runs, never after.
	// It may be nil.
	Progress func(progress, total float64, message string)
}

// Root confines the file tools to one directory tree and tells them
// where, inside it, what they opened really is.
//
// Every object is opened through os.Root, which walks the path one
// component at a time with openat and O_NOFOLLOW and follows a link only
// while it stays inside the root. The path the kernel authorizes is then
// read back from the open handle itself (readBack: /proc/self/fd on
// Linux, F_GETPATH on macOS), so the grant is decided on the object the
// call holds, not on a second lookup of its name that a swapped link could
// send elsewhere (docs/adr/0008-authorize-the-opened-object.md).
type Root struct {
	root *os.Root
	// real is the root's own path as readBack reports it: the prefix of
	// every path read back from inside it.
	real string
	// evalReal is the root with its symlinks resolved by EvalSymlinks,
	// the base of the hints resolveHint computes.
	evalReal string
	// escapes is the error os.Root returns for a path that would leave it.
	// The os package does not export it; OpenRoot provokes it once.
	escapes error
	// private is what of the kernel's own is never served (SetPrivate).
	private atomic.Pointer[[]privateEntry]
}

func OpenRoot(dir string) (*Root, error) {
	evalReal, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("files root: %w", err)
	}
	r, err := os.OpenRoot(evalReal)
	if err != nil {
		return nil, fmt.Errorf("files root: %w", err)
	}
	fr := &Root{root: r, evalReal: evalReal}
	var pe *fs.PathError
	if _, err := r.Open(".."); !errors.As(err, &pe) {
		r.Close()
		return nil, fmt.Errorf("files root: os.Root did not refuse a path out of it (%v)", err)
	}
	fr.escapes = pe.Err
	d, err := r.Open(".")
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("files root: %w", err)
	}
	defer d.Close()
	if fr.real, _, err = readBack(d); err != nil {
		r.Close()
		return nil, fmt.Errorf("files root: read back the path of an open directory: %w", err)
	}
	return fr, nil
}

func (fr *Root) Close() error { return fr.root.Close() }

// object is a file or directory the kernel holds open, with what fstat
// said of it and the clean logical path ("/a/b") it has in the root.
type object struct {
	f    *os.File
	info fs.FileInfo
	path string
}

func (o *object) resource() policy.Resource {
	return policy.Resource{Namespace: Namespace, Path: o.path}
}

// open opens logical ("/a/b"), following links as long as they stay in
// the root, and reports where the object it opened really is. flag is
// passed to openat; O_NONBLOCK keeps a FIFO from hanging the call.
func (fr *Root) open(logical string, flag int) (*object, error) {
	f, err := fr.root.OpenFile(relPath(logical), flag, 0)
	if err != nil && errors.Is(err, fr.escapes) {
		// os.Root refuses an absolute link even when it points back
		// into the root. EvalSymlinks knows where such links lead; what
		// it says is only a hint, for the handle's own path decides.
		rel, herr := fr.resolveHint(logical)
		if herr != nil {
			return nil, herr
		}
		f, err = fr.root.OpenFile(rel, flag, 0)
	}
	if err != nil {
		if errors.Is(err, fr.escapes) {
			return nil, errOutsideRoot // a link swapped in while os.Root walked
		}
		return nil, err
	}
	o, err := fr.identify(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return o, nil
}

// identify takes f's fstat, then reads back its path. In that order: a
// regular file seen with one link at fstat whose path then reads back
// had that path as its only name at the time of the fstat, so a caller
// that refuses files with more names knows where the content lives.
func (fr *Root) identify(f *os.File) (*object, error) {
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	raw, confirm, err := readBack(f)
	if err != nil {
		return nil, err
	}
	logical, ok := fr.logical(raw)
	if !ok {
		return nil, errOutsideRoot
	}
	if !utf8.ValidString(logical) {
		return nil, errNotUTF8
	}
	if confirm {
		// The path read back may name a removed entry or another name of
		// the file; it counts only if it still leads to this object.
		again, err := fr.root.Lstat(relPath(logical))
		if err != nil || !os.SameFile(info, again) {
			return nil, errNotFound
		}
	}
	if fr.privateInfo(logical, info) {
		return nil, errKernelPrivate
	}
	return &object{f: f, info: info, path: logical}, nil
}

// logical maps a path read back from a handle to its logical path in the
// root, refusing anything outside.
func (fr *Root) logical(raw string) (string, bool) {
	if raw == fr.real {
		return "/", true
	}
	prefix := fr.real
	if prefix != "/" {
		prefix += "/"
	}
	rest, ok := strings.CutPrefix(raw, prefix)
	if !ok || rest == "" {
		return "", false
	}
	p := "/" + rest
	return p, path.Clean(p) == p
}

// resolveHint resolves logical's links with EvalSymlinks and returns the
// path relative to the root, or errOutsideRoot. It is a second lookup
// and decides nothing; open uses it to get past absolute links. The
// error never carries a link's target: that would leak what lies outside.
func (fr *Root) resolveHint(logical string) (string, error) {
	real, err := filepath.EvalSymlinks(filepath.Join(fr.evalReal, filepath.FromSlash(logical)))
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return "", errNotFound
	case errors.Is(err, syscall.ENAMETOOLONG):
		return "", err
	case err != nil:
		return "", errLinkLoop
	}
	rel, err := filepath.Rel(fr.evalReal, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", errOutsideRoot
	}
	return filepath.ToSlash(rel), nil
}

// relPath is logical as os.Root names it.
func relPath(logical string) string {
	if logical == "/" {
		return "."
	}
	return strings.TrimPrefix(logical, "/")
}

// shown is a client's path as a message may quote it: never unbounded.
func shown(p string) string { return clip.String(p, maxShownPath) }

// pathFailure turns an open or resolve error into the call's Outcome.
func pathFailure(tool, logical string, err error) Outcome {
	p := shown(logical)
	switch {
	case errors.Is(err, errOutsideRoot):
		return denied(CodeOutsideRoot, "%s: %s %s", tool, p, errOutsideRoot)
	case errors.Is(err, errKernelPrivate):
		return denied(CodeKernelPrivate, "%s: %s %s", tool, p, errKernelPrivate)
	case notFound(err):
		return failed(kproto.CodeNotFound, "%s: %s does not exist", tool, p)
	case errors.Is(err, syscall.ENAMETOOLONG):
		return failed(kproto.CodeInvalidArguments, "%s: a name in %s is too long for the file system", tool, p)
	case errors.Is(err, errLinkLoop), errors.Is(err, syscall.ELOOP):
		return failed(kproto.CodeNotFound, "%s: %s %s", tool, p, errLinkLoop)
	case errors.Is(err, errNotUTF8):
		return failed(kproto.CodeInvalidArguments, "%s: %s %s", tool, p, errNotUTF8)
	}
	return failed(kproto.CodeInternal, "%s: %s cannot be opened", tool, p)
}

// failure answers a call whose object could not be opened. Why it could
// not is told only to a caller the grants allow on the path it named:
// anyone else is refused as if the path had resolved, so nothing about
// the tree outside their grants leaks through not_found or outside_root.
func (env *Call) failure(tool string, err error) Outcome {
	r := env.Requested
	if notFound(err) {
		r.Path = env.Root.whereMissing(r.Path)
	}
	if o, ok := env.Authorize(r); !ok {
		return o
	}
	return pathFailure(tool, env.Requested.Path, err)
}

// openAuthorized opens the object at logical for reading and asks the
// grants about it as opened (ADR 0008), not about the path as named. When
// ok is false the call is answered already (a failure or a denial) and
// nothing is left open; otherwise the caller closes o.f.
func (env *Call) openAuthorized(tool, logical string) (o *object, answer Outcome, ok bool) {
	o, err := env.Root.open(logical, os.O_RDONLY|syscall.O_NONBLOCK)
	if err != nil {
		return nil, env.failure(tool, err), false
	}
	if d, ok := env.Authorize(o.resource()); !ok {
		o.f.Close()
		return nil, d, false
	}
	return o, Outcome{}, true
}

func notFound(err error) bool {
	return errors.Is(err, errNotFound) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// maxMissingWalk bounds how many ancestors whereMissing opens.
const maxMissingWalk = 4

// whereMissing says where a path that does not exist would be: under the
// nearest ancestor that opens, where that ancestor really is. A missing
// name behind a link is then refused by the grants of where the link
// leads, like an existing one. Past maxMissingWalk levels (or an ancestor
// that fails otherwise) it gives up and returns logical: whether a deep
// path exists is the side channel the threat model leaves out of scope.
func (fr *Root) whereMissing(logical string) string {
	rest := ""
	for p, i := logical, 0; p != "/" && i < maxMissingWalk; i++ {
		rest = path.Join(path.Base(p), rest)
		p = path.Dir(p)
		o, err := fr.open(p, os.O_RDONLY|syscall.O_NONBLOCK)
		if err == nil {
			o.f.Close()
			return path.Join(o.path, rest)
		}
		if !notFound(err) {
			break
		}
	}
	return logical
}

// hardLink reports whether a regular file has other names than the one
// it was opened by, and so may be an alias of a file the grants do not
// cover (even one outside the root).
func hardLink(info fs.FileInfo) bool {
	st, ok := info.Sys().(*syscall.Stat_t)
	return ok && info.Mode().IsRegular() && uint64(st.Nlink) > 1
}

func hardLinkDenied(tool, p string) Outcome {
	return denied(CodeHardLink, "%s: %s has more than one name (a hard link), so the grants cannot tell whose file it is; "+
		"the kernel serves hard-linked files only when its config sets [files] allow_hard_links", tool, shown(p))
}

// readText reads at most MaxReadBytes of text from f, whose fstat said
// size, reporting whether it was larger and whether it is text (valid
// UTF-8 without NUL). The buffer is sized once from size.
func readText(f *os.File, size int64) (data []byte, tooLarge, text bool, err error) {
	var b bytes.Buffer
	b.Grow(int(min(max(size, 0), MaxReadBytes)) + bytes.MinRead)
	if _, err := b.ReadFrom(io.LimitReader(f, MaxReadBytes+1)); err != nil {
		return nil, false, false, err
	}
	data = b.Bytes()
	if len(data) > MaxReadBytes {
		return nil, true, false, nil
	}
	return data, false, isText(data), nil
}

func isText(data []byte) bool { return bytes.IndexByte(data, 0) < 0 && utf8.Valid(data) }

func runRead(_ context.Context, env *Call, res policy.Resource, _ map[string]string) Outcome {
	o, answer, ok := env.openAuthorized("files.read", res.Path)
	if !ok {
		return answer
	}
	defer o.f.Close()
	fi := o.info
	switch {
	case fi.IsDir():
		return failed(CodeNotFile, "files.read: %s is a directory; use files.list", shown(res.Path))
	case !fi.Mode().IsRegular():
		return failed(CodeNotFile, "files.read: %s is not a regular file", shown(res.Path))
	case hardLink(fi) && !env.HardLinks:
		return hardLinkDenied("files.read", res.Path)
	case fi.Size() > MaxReadBytes:
		return failed(kproto.CodeTooLarge, "files.read: %s is %d bytes, over the %d-byte limit; use files.search to find what you need", shown(res.Path), fi.Size(), MaxReadBytes)
	}
	data, tooLarge, text, err := readText(o.f, fi.Size())
	switch {
	case err != nil:
		return failed(kproto.CodeInternal, "files.read: %s could not be read", shown(res.Path))
	case tooLarge:
		return failed(kproto.CodeTooLarge, "files.read: %s is over the %d-byte limit", shown(res.Path), MaxReadBytes)
	case !text:
		return failed(CodeNotText, "files.read: %s is not UTF-8 text (binary content is not returned)", shown(res.Path))
	}
	return succeeded(nil, string(data))
}

// ListEntry is one entry of files.list's output.
type ListEntry struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Size int64  `json:"size"`
}

// ListOutput is files.list's output (its outputSchema).
type ListOutput struct {
	Entries   []ListEntry `json:"entries"`
	Truncated bool        `json:"truncated"`
}

// listEntryCost bounds the JSON bytes an entry named name takes in a
// listing: its name escaped, the fixed keys, the longest size.
func listEntryCost(name string) int {
	return jsonStringCost(name) + len(`{"name":,"type":"file","size":18446744073709551615},`)
}

// jsonStringCost bounds the bytes encoding/json writes for s as a string:
// two quotes, and up to six bytes (\u00XX) for a byte it escapes.
func jsonStringCost(s string) int {
	n := 2 + len(s)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20, c == '<', c == '>', c == '&', c >= 0x80:
			n += 5 // \u00XX, or \ufffd for a byte of an invalid sequence
		case c == '"', c == '\\':
			n++
		}
	}
	return n
}

func runList(ctx context.Context, env *Call, res policy.Resource, _ map[string]string) Outcome {
	o, answer, ok := env.openAuthorized("files.list", res.Path)
	if !ok {
		return answer
	}
	defer o.f.Close()
	if !o.info.IsDir() {
		return failed(CodeNotDir, "files.list: %s is not a directory; use files.read", shown(res.Path))
	}
	names, truncated, err := firstNames(ctx, o.f)
	if err != nil {
		if ctx.Err() != nil {
			return failed(kproto.CodeCancelled, "files.list: cancelled")
		}
		return failed(kproto.CodeInternal, "files.list: %s could not be read", shown(res.Path))
	}
	out := ListOutput{Entries: make([]ListEntry, 0, len(names)), Truncated: truncated}
	for _, name := range names {
		if e, ok := env.listEntry(o, name); ok {
			out.Entries = append(out.Entries, e)
		}
	}
	return succeeded(out, "")
}

// firstNames reads the directory d in chunks and keeps the names that
// sort first, as many as a listing can return (maxListEntries, and
// MaxResultBytes of JSON), so a directory of millions of entries costs
// one listing's memory. It reads names only: what each entry is, is
// asked of the few that are kept (listEntry), and an entry the listing
// does not show (a FIFO, a socket) takes a place among them all the same.
// It returns the names sorted and whether any were left out.
func firstNames(ctx context.Context, d *os.File) ([]string, bool, error) {
	var kept nameHeap
	cost, truncated := 0, false
	for {
		chunk, err := d.Readdirnames(listChunk)
		for _, name := range chunk {
			if kept.full(cost, name) && name > kept.max() {
				truncated = true
				continue
			}
			kept.push(name)
			cost += listEntryCost(name)
			for len(kept) > maxListEntries || cost > MaxResultBytes-64 {
				cost -= listEntryCost(kept.pop())
				truncated = true
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, false, err
		}
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
	}
	return kept.sorted(), truncated, nil
}

// listEntry describes name, an entry of the directory o, as a listing
// shows it. A link is shown as what it points to, and only when that is
// inside the root and the caller may list the directory that holds it:
// a link must not reveal more than listing its target's directory would.
func (env *Call) listEntry(o *object, name string) (ListEntry, bool) {
	var st unix.Stat_t
	if err := statAt(o.f, name, &st); err != nil {
		return ListEntry{}, false
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return ListEntry{Name: name, Type: "dir"}, true
	case unix.S_IFREG:
		return ListEntry{Name: name, Type: "file", Size: st.Size}, true
	case unix.S_IFLNK:
	default:
		return ListEntry{}, false
	}
	t, err := env.Root.open(path.Join(o.path, name), os.O_RDONLY|syscall.O_NONBLOCK)
	if err != nil {
		return ListEntry{}, false
	}
	defer t.f.Close()
	holder := path.Dir(t.path)
	if !env.Allowed(policy.Resource{Namespace: Namespace, Path: holder}, policy.ActionList) {
		return ListEntry{}, false
	}
	switch {
	case t.info.IsDir():
		return ListEntry{Name: name, Type: "dir"}, true
	case t.info.Mode().IsRegular():
		return ListEntry{Name: name, Type: "file", Size: t.info.Size()}, true
	}
	return ListEntry{}, false
}

// SearchMatch is one matching line of files.search's output.
type SearchMatch struct {
	Path string `json:"path"`
	Line int    `json:"line"`
	Text string `json:"text"`
}

// SearchOutput is files.search's output (its outputSchema).
type SearchOutput struct {
	Matches   []SearchMatch `json:"matches"`
	Truncated bool          `json:"truncated"`
}

// searcher is one files.search walking its tree. Its limits bound the
// entries it looks at, the bytes it reads, and the matches it returns,
// in count and in JSON bytes.
type searcher struct {
	env     *Call
	query   []byte
	buf     []byte // one file's content at a time, MaxReadBytes+1
	visited int
	read    int64
	cost    int // JSON bytes of out.Matches
	out     SearchOutput
	done    bool // a limit was reached: stop

	// Progress: files looked at, of the regular files counted under the
	// search's root before it began.
	files, total  int
	reportedFiles int
	reported      time.Time
}

// A search reports its progress every progressFiles files, and when
// progressEvery has passed since the last report, whichever comes first.
const (
	progressFiles = 256
	progressEvery = 100 * time.Millisecond
)

// fileLooked counts one more file looked at and reports progress when
// it is time to.
func (s *searcher) fileLooked() {
	s.files++
	if s.files > s.total {
		s.total = s.files // the tree grew since it was counted
	}
	if s.env.Progress == nil {
		return
	}
	if now := time.Now(); s.files-s.reportedFiles >= progressFiles || now.Sub(s.reported) >= progressEvery {
		s.reported, s.reportedFiles = now, s.files
		s.env.Progress(float64(s.files), float64(s.total), fmt.Sprintf("%d of %d files searched", s.files, s.total))
	}
}

// countFiles counts the regular files a search of d would look at, by
// the walk's rules (no links followed, .git skipped, at most the visit
// budget of entries), reading directories only: it is the total that
// progress reports count toward.
func countFiles(ctx context.Context, d *os.File, budget *int) int {
	n := 0
	for *budget > 0 && ctx.Err() == nil {
		chunk, err := d.ReadDir(min(listChunk, *budget))
		*budget -= len(chunk)
		for _, de := range chunk {
			switch {
			case de.Type().IsRegular():
				n++
			case de.IsDir() && de.Name() != ".git":
				sub, err := openAt(d, de.Name(), unix.O_RDONLY|unix.O_DIRECTORY, 0)
				if err != nil {
					continue
				}
				n += countFiles(ctx, sub, budget)
				sub.Close()
			}
		}
		if err != nil {
			break
		}
	}
	return n
}

func runSearch(ctx context.Context, env *Call, res policy.Resource, args map[string]string) Outcome {
	o, answer, ok := env.openAuthorized("files.search", res.Path)
	if !ok {
		return answer
	}
	defer o.f.Close()
	s := &searcher{env: env, query: []byte(args["query"]), out: SearchOutput{Matches: []SearchMatch{}}}
	var err error
	switch {
	case o.info.IsDir():
		if counter, cerr := openAt(o.f, ".", unix.O_RDONLY|unix.O_DIRECTORY, 0); cerr == nil {
			budget := maxSearchVisited
			s.total = countFiles(ctx, counter, &budget)
			counter.Close()
		}
		s.reported = time.Now()
		err = s.dir(ctx, o.f)
	case o.info.Mode().IsRegular():
		// The call's own grant covers this one file; a hard link is
		// still refused, as files.read would refuse it.
		if hardLink(o.info) && !env.HardLinks {
			return hardLinkDenied("files.search", res.Path)
		}
		s.scan(o)
	}
	if err != nil {
		if ctx.Err() != nil {
			return failed(kproto.CodeCancelled, "files.search: cancelled")
		}
		return failed(kproto.CodeInternal, "files.search: %s could not be searched", shown(res.Path))
	}
	return succeeded(s.out, "")
}

// stop ends the search at a limit, saying the result is partial.
func (s *searcher) stop() {
	s.done = true
	s.out.Truncated = true
}

type dirent struct {
	name string
	typ  fs.FileMode
}

// dir searches the directory d in name order. It reads at most as many
// entries as the visit budget has left, opens each one relative to d
// without following links, and skips .git. Each file is authorized, and
// reported, on the path read back from its handle.
func (s *searcher) dir(ctx context.Context, d *os.File) error {
	var ents []dirent
	for s.visited < maxSearchVisited {
		chunk, err := d.ReadDir(min(listChunk, maxSearchVisited-s.visited))
		for _, de := range chunk {
			ents = append(ents, dirent{de.Name(), de.Type()})
		}
		s.visited += len(chunk)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil // an unreadable directory is skipped, not fatal
		}
	}
	if s.visited >= maxSearchVisited {
		s.out.Truncated = true
	}
	slices.SortFunc(ents, func(a, b dirent) int { return strings.Compare(a.name, b.name) })
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return err
		}
		if s.done {
			return nil
		}
		switch {
		case e.typ.IsDir():
			if e.name == ".git" {
				continue
			}
			sub, err := openAt(d, e.name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
			if err != nil {
				continue
			}
			err = s.dir(ctx, sub)
			sub.Close()
			if err != nil {
				return err
			}
		case e.typ.IsRegular():
			f, err := openAt(d, e.name, unix.O_RDONLY|unix.O_NONBLOCK, 0)
			if err != nil {
				continue
			}
			if o, err := s.env.Root.identify(f); err == nil {
				s.authorizedScan(o)
			}
			f.Close()
			s.fileLooked()
		}
		// Links and special files are not followed.
	}
	return nil
}

// authorizedScan searches one file the walk reached, if the grants allow
// searching it where it really is and it is a file search reads.
func (s *searcher) authorizedScan(o *object) {
	fi := o.info
	if !fi.Mode().IsRegular() || fi.Size() > MaxReadBytes || (hardLink(fi) && !s.env.HardLinks) {
		return
	}
	if !s.env.Allowed(o.resource(), policy.ActionSearch) {
		return
	}
	s.scan(o)
}

// scan reads one file into the search's buffer, within the bytes the
// search has left, and collects its matching lines if it is text.
func (s *searcher) scan(o *object) {
	if o.info.Size() > MaxReadBytes {
		return
	}
	if s.read+o.info.Size() > MaxSearchBytes {
		s.stop()
		return
	}
	if s.buf == nil {
		s.buf = make([]byte, MaxReadBytes+1)
	}
	n, err := io.ReadFull(o.f, s.buf)
	s.read += int64(n)
	if (err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF)) || n > MaxReadBytes {
		return
	}
	data := s.buf[:n]
	if !isText(data) {
		return
	}
	line, counted := 1, 0
	for off := 0; off < len(data); {
		i := bytes.Index(data[off:], s.query)
		if i < 0 {
			return
		}
		i += off
		start := bytes.LastIndexByte(data[:i], '\n') + 1
		end := bytes.IndexByte(data[i:], '\n')
		if end < 0 {
			end = len(data)
		} else {
			end += i
		}
		line += bytes.Count(data[counted:start], []byte{'\n'})
		counted = start
		text := bytes.TrimSuffix(data[start:end], []byte{'\r'})
		if len(text) > maxMatchText {
			text = text[:maxMatchText+1] // clip.String cuts it to maxMatchText
		}
		m := SearchMatch{Path: o.path, Line: line, Text: clip.String(string(text), maxMatchText)}
		cost := jsonStringCost(m.Path) + jsonStringCost(m.Text) + len(`{"path":,"line":9999999,"text":},`)
		if len(s.out.Matches) == MaxSearchMatches || s.cost+cost > MaxResultBytes-64 {
			s.stop()
			return
		}
		s.out.Matches = append(s.out.Matches, m)
		s.cost += cost
		off = end + 1
	}
}

type writeOutput struct {
	Path  string `json:"path"`
	Bytes int    `json:"bytes"`
}

// runWrite replaces or creates one file. Everything it does after
// resolving the parent directory goes through that directory's handle
// (fstatat, openat, renameat, unlinkat), so the file it authorized,
// creates and renames is in the directory it authorized, however the
// path is changed meanwhile, and its temporary file can always be
// removed again.
func runWrite(_ context.Context, env *Call, res policy.Resource, args map[string]string) Outcome {
	content := args["content"]
	parent, base := path.Dir(res.Path), path.Base(res.Path)
	d, err := env.Root.open(parent, os.O_RDONLY|syscall.O_NONBLOCK)
	if err != nil {
		if o := env.failure("files.write", err); o.Code != kproto.CodeNotFound {
			return o
		}
		return failed(kproto.CodeNotFound, "files.write: the parent directory %s does not exist", shown(parent))
	}
	defer d.f.Close()
	target := policy.Resource{Namespace: Namespace, Path: path.Join(d.path, base)}
	if o, ok := env.Authorize(target); !ok {
		return o
	}
	if !d.info.IsDir() {
		return failed(CodeNotDir, "files.write: %s is not a directory", shown(parent))
	}
	var old unix.Stat_t
	exists := true
	switch err := statAt(d.f, base, &old); {
	case errors.Is(err, unix.ENOENT):
		exists = false
	case errors.Is(err, unix.ENAMETOOLONG):
		return failed(kproto.CodeInvalidArguments, "files.write: the name %s is too long for the file system", shown(base))
	case err != nil:
		return failed(kproto.CodeInternal, "files.write: %s cannot be checked", shown(res.Path))
	case old.Mode&unix.S_IFMT == unix.S_IFLNK:
		// Replacing the link would surprise whoever made it; writing
		// through it would be a write the grants were not asked about.
		return failed(CodeNotFile, "files.write: %s is a symbolic link; write to the path it points to", shown(res.Path))
	case old.Mode&unix.S_IFMT != unix.S_IFREG:
		return failed(CodeNotFile, "files.write: %s exists and is not a regular file", shown(res.Path))
	}
	var id *fileID
	if exists {
		id = &fileID{uint64(old.Dev), old.Ino}
	}
	if env.Root.isPrivate(target.Path, id) {
		return denied(CodeKernelPrivate, "files.write: %s %s", shown(res.Path), errKernelPrivate)
	}
	if o, ok := env.Commit(); !ok {
		return o
	}
	var keep *unix.Stat_t
	if exists {
		keep = &old
	}
	if err := replaceAt(d.f, base, content, keep); err != nil {
		return writeFailure(res.Path, err)
	}
	o := succeeded(writeOutput{Path: target.Path, Bytes: len(content)}, "")
	o.Acted = true
	return o
}

func writeFailure(p string, err error) Outcome {
	switch {
	case errors.Is(err, unix.ENAMETOOLONG):
		return failed(kproto.CodeInvalidArguments, "files.write: the name of %s is too long for the file system", shown(p))
	case errors.Is(err, unix.EISDIR), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.EEXIST), errors.Is(err, unix.ENOTEMPTY):
		return failed(CodeNotFile, "files.write: %s became something other than a regular file while it was written; nothing was changed", shown(p))
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
		return failed(kproto.CodeInternal, "files.write: %s could not be written: no space left on the file system; nothing was changed", shown(p))
	}
	return failed(kproto.CodeInternal, "files.write: %s could not be written; nothing was changed", shown(p))
}

// replaceAt writes content to a temporary file in dir, syncs it and
// renames it over name, so a reader or a crash sees the old content or
// the new, never a part. When the file existed (old), the new one gets
// its permission bits and, where the kernel may set them, its owner and
// group. Set-id and sticky bits are not carried over: new content under
// an old set-uid bit is not something a model should be able to make.
// A rename replaces the directory entry, so another hard link to the old
// file keeps the old content. On any failure the temporary file is
// removed through the same directory handle it was created in.
func replaceAt(dir *os.File, name, content string, old *unix.Stat_t) error {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:]) // crypto/rand.Read never fails
	// Not derived from name: a name near the file system's limit must
	// not make its temporary name too long.
	tmp := ".sharedos-" + hex.EncodeToString(rnd[:]) + ".tmp"
	perm := uint32(0o644) // a new file: the umask applies, as for any new file
	if old != nil {
		perm = 0o600 // until fchmod sets the old bits exactly
	}
	f, err := openAt(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, werr := f.WriteString(content)
	var aerr error
	if old != nil && werr == nil {
		aerr = keepAttributes(f, old)
	}
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, aerr, serr, cerr); err != nil {
		_ = unlinkAt(dir, tmp)
		return err
	}
	if err := withFD(dir, func(fd int) error { return unix.Renameat(fd, tmp, fd, name) }); err != nil {
		_ = unlinkAt(dir, tmp)
		return err
	}
	return nil
}

// keepAttributes gives f the owner, group and permission bits of old.
// Only root may give a file away; anyone else keeps the group if they
// belong to it, and otherwise the file is theirs.
func keepAttributes(f *os.File, old *unix.Stat_t) error {
	if err := f.Chown(int(old.Uid), int(old.Gid)); err != nil {
		if !errors.Is(err, unix.EPERM) {
			return err
		}
		if err := f.Chown(-1, int(old.Gid)); err != nil && !errors.Is(err, unix.EPERM) {
			return err
		}
	}
	return f.Chmod(fs.FileMode(old.Mode & 0o777))
}

// nameHeap is a max-heap of names: the largest is dropped first when a
// listing is over its bounds, so what stays is what sorts first.
type nameHeap []string

// full reports whether the heap has no room for name within a listing's
// bounds, given the JSON cost of what it holds.
func (h nameHeap) full(cost int, name string) bool {
	return len(h) > 0 && (len(h) >= maxListEntries || cost+listEntryCost(name) > MaxResultBytes-64)
}

func (h nameHeap) max() string { return h[0] }

func (h *nameHeap) push(name string) {
	*h = append(*h, name)
	a := *h
	for i := len(a) - 1; i > 0; {
		up := (i - 1) / 2
		if a[up] >= a[i] {
			break
		}
		a[up], a[i] = a[i], a[up]
		i = up
	}
}

func (h *nameHeap) pop() string {
	a := *h
	top := a[0]
	last := len(a) - 1
	a[0] = a[last]
	a = a[:last]
	for i := 0; ; {
		big, l, r := i, 2*i+1, 2*i+2
		if l < len(a) && a[l] > a[big] {
			big = l
		}
		if r < len(a) && a[r] > a[big] {
			big = r
		}
		if big == i {
			break
		}
		a[i], a[big] = a[big], a[i]
		i = big
	}
	*h = a
	return top
}

func (h nameHeap) sorted() []string {
	slices.Sort(h)
	return h
}
