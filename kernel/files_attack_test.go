package kernel

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/internal/testfs"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
	"github.com/sharedos/sharedos-mcp/kernel/config"
	"github.com/sharedos/sharedos-mcp/kernel/files"
	"github.com/sharedos/sharedos-mcp/policy"
)

// The attacks of issue 12 on the file tools, each against a real tree in
// a temporary directory and a kernel on a real socket.

const demoSecret = "Only listed, never read: no grant covers this file.\n"

// demoKernel copies testdata/kernel/demo-root to a temporary root, adds
// the link the issue used (docs/drafts/shared -> ../..), and serves it
// with the grants of testdata/kernel/example.toml.
func demoKernel(t *testing.T, opts ...func(*Server)) (*kernelHarness, string) {
	t.Helper()
	cfg, err := config.Load(filepath.Join("..", "testdata", "kernel", "example.toml"))
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(t.TempDir(), "demo-root")
	src := filepath.Join("..", "testdata", "kernel", "demo-root")
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(root, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(root, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../..", filepath.Join(root, "docs", "drafts", "shared")); err != nil {
		t.Fatal(err)
	}
	opts = append([]func(*Server){func(s *Server) { s.Root = root }}, opts...)
	return startKernel(t, cfg.Grants, opts...), root
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestLinksAreAuthorizedWhereTheyLead is issue 12 item 1: a grant on
// /docs must not reach /private.txt through a link inside /docs.
func TestLinksAreAuthorizedWhereTheyLead(t *testing.T) {
	h, root := demoKernel(t)
	readme := mustRead(t, filepath.Join(root, "docs", "README.md"))
	c := h.dial()
	c.hello("claude-code")
	c.list()

	tests := []struct {
		name, tool, path string
		status, code     string
	}{
		{"the file itself", "files.read", "/private.txt", "denied", kproto.CodeNoMatchingGrant},
		{"the file through the link", "files.read", "/docs/drafts/shared/private.txt", "denied", kproto.CodeNoMatchingGrant},
		{"overwriting it through the link", "files.write", "/docs/drafts/shared/private.txt", "denied", kproto.CodeNoMatchingGrant},
		{"a readable file written through the link", "files.write", "/docs/drafts/shared/docs/README.md", "denied", kproto.CodeNoMatchingGrant},
		{"a new file at the top through the link", "files.write", "/docs/drafts/shared/new.txt", "denied", kproto.CodeNoMatchingGrant},
		{"searching the link", "files.search", "/docs/drafts/shared", "denied", kproto.CodeNoMatchingGrant},
		{"a missing file through the link", "files.read", "/docs/drafts/shared/missing.txt", "denied", kproto.CodeNoMatchingGrant},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := map[string]string{"path": tt.path}
			switch tt.tool {
			case "files.write":
				args["content"] = "pwned"
			case "files.search":
				args["query"] = "never"
			}
			r := c.invoke(tt.tool, args)
			if r.Status != tt.status || r.Code != tt.code {
				t.Errorf("%+v, want %s %s", r, tt.status, tt.code)
			}
			if all := string(r.Output) + string(r.Content) + r.Message; strings.Contains(all, "never read") {
				t.Errorf("the answer leaks /private.txt: %+v", r)
			}
		})
	}
	if got := mustRead(t, filepath.Join(root, "private.txt")); got != demoSecret {
		t.Errorf("/private.txt now holds %q", got)
	}
	if got := mustRead(t, filepath.Join(root, "docs", "README.md")); got != readme {
		t.Errorf("/docs/README.md now holds %q", got)
	}
	if _, err := os.Lstat(filepath.Join(root, "new.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a write through the link created /new.txt (%v)", err)
	}

	// Where the link leads is granted, the call goes through, and the
	// audit names both resources.
	r := c.invoke("files.read", map[string]string{"path": "/docs/drafts/shared/docs/README.md"})
	if r.Status != kproto.StatusSucceeded || text(t, r) != readme {
		t.Errorf("reading a granted file through the link: %+v", r)
	}
	r = c.invoke("files.write", map[string]string{"path": "/docs/drafts/shared/docs/drafts/NOTE.txt", "content": "via the link"})
	if r.Status != kproto.StatusSucceeded || string(r.Output) != `{"path":"/docs/drafts/NOTE.txt","bytes":12}` {
		t.Errorf("writing a granted file through the link: %+v %s", r, r.Output)
	}
	// Searching /docs does not follow the link up to the top.
	r = c.invoke("files.search", map[string]string{"path": "/docs", "query": "never"})
	if r.Status != kproto.StatusSucceeded || strings.Contains(string(r.Output), "never read") {
		t.Errorf("searching /docs: %+v %s", r, r.Output)
	}

	c.conn.Close()
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	// The path each read or search named -> the resource and the
	// requested resource its tool.invoked records.
	want := map[string][2]string{
		"files:/private.txt":                       {"files:/private.txt", ""},
		"files:/docs/drafts/shared/private.txt":    {"files:/private.txt", "files:/docs/drafts/shared/private.txt"},
		"files:/docs/drafts/shared":                {"files:/", "files:/docs/drafts/shared"},
		"files:/docs/drafts/shared/docs/README.md": {"files:/docs/README.md", "files:/docs/drafts/shared/docs/README.md"},
	}
	seen := map[string]bool{}
	for _, e := range eventsNamed(h.events(), audit.EventToolInvoked) {
		named := e.Requested
		if named == "" {
			named = e.Resource
		}
		if w, ok := want[named]; ok && e.Tool != "files.write" {
			seen[named] = true
			if e.Resource != w[0] || e.Requested != w[1] {
				t.Errorf("%s %s recorded resource %q requested %q, want %q %q", e.Tool, named, e.Resource, e.Requested, w[0], w[1])
			}
		}
	}
	if len(seen) != len(want) {
		t.Errorf("found %d of the %d calls in the audit log", len(seen), len(want))
	}
}

// TestListShowsLinksOnlyWhereTheCallerMayList: a listing shows a link as
// its target only when the caller could list the target's directory.
func TestListShowsLinksOnlyWhereTheCallerMayList(t *testing.T) {
	h := startKernel(t, []policy.Grant{
		grant(t, "integration:cc", "files:/public", true, "list", "read"),
		grant(t, "integration:cc", "files:/", false, "list"),
	})
	for name, target := range map[string]string{
		"to-sub":     "sub",                   // /public/sub: listable
		"to-top":     "..",                    // /: listable (exact grant)
		"to-private": "../private/secret.txt", // /private: not listable
		"dangling":   "nowhere",
	} {
		if err := os.Symlink(target, filepath.Join(h.root, "public", name)); err != nil {
			t.Fatal(err)
		}
	}
	c := h.dial()
	c.hello("cc")
	c.list()
	r := c.invoke("files.list", map[string]string{"path": "/public"})
	want := `{"entries":[{"name":"a.txt","type":"file","size":24},{"name":"bin.dat","type":"file","size":7},` +
		`{"name":"sub","type":"dir","size":0},{"name":"to-sub","type":"dir","size":0},{"name":"to-top","type":"dir","size":0}],"truncated":false}`
	if r.Status != kproto.StatusSucceeded || string(r.Output) != want {
		t.Errorf("files.list: %+v\n output %s\n want   %s", r, r.Output, want)
	}
}

// hardLinkTree links root/public/alias to outside/secret.txt (one file,
// two names) and root/public/twin to root/public/a.txt.
func hardLinkTree(t *testing.T, h *kernelHarness) {
	t.Helper()
	if err := os.Link(filepath.Join(h.outside, "secret.txt"), filepath.Join(h.root, "public", "alias")); err != nil {
		t.Skipf("cannot make a hard link here: %v", err)
	}
	if err := os.Link(filepath.Join(h.root, "public", "a.txt"), filepath.Join(h.root, "public", "twin")); err != nil {
		t.Fatal(err)
	}
}

// TestHardLinksAreRefusedUnlessAllowed: a hard link inside the root to a
// file outside it is the same file under a name the grants cover.
func TestHardLinksAreRefusedUnlessAllowed(t *testing.T) {
	g := []policy.Grant{grant(t, "integration:cc", "files:/public", true, "read", "list", "search", "write")}
	t.Run("refused by default", func(t *testing.T) {
		h := startKernel(t, g)
		hardLinkTree(t, h)
		c := h.dial()
		c.hello("cc")
		c.list()
		for _, p := range []string{"/public/alias", "/public/twin"} {
			r := c.invoke("files.read", map[string]string{"path": p})
			if r.Status != kproto.StatusDenied || r.Code != files.CodeHardLink || r.Retryable == nil || *r.Retryable {
				t.Errorf("files.read %s: %+v, want denied hard_link", p, r)
			}
			if strings.Contains(string(r.Content), "OUTSIDE") {
				t.Errorf("files.read %s leaked the file outside: %+v", p, r)
			}
		}
		r := c.invoke("files.search", map[string]string{"path": "/public", "query": "e"})
		if strings.Contains(string(r.Output), "OUTSIDE") || strings.Contains(string(r.Output), "/public/twin") ||
			!strings.Contains(string(r.Output), "/public/sub/b.txt") {
			t.Errorf("files.search over hard links: %s", r.Output)
		}
		r = c.invoke("files.search", map[string]string{"path": "/public/alias", "query": "SECRET"})
		if r.Code != files.CodeHardLink {
			t.Errorf("files.search of a hard link: %+v", r)
		}
		// Writing replaces the entry, so the file's other name keeps the
		// old content: nothing outside changes.
		r = c.invoke("files.write", map[string]string{"path": "/public/alias", "content": "replaced"})
		if r.Status != kproto.StatusSucceeded {
			t.Errorf("files.write over a hard link: %+v", r)
		}
		if got := mustRead(t, filepath.Join(h.outside, "secret.txt")); got != "OUTSIDE SECRET needle" {
			t.Errorf("the file outside now holds %q", got)
		}
		if got := mustRead(t, filepath.Join(h.root, "public", "alias")); got != "replaced" {
			t.Errorf("the written name holds %q", got)
		}
	})
	t.Run("served when allowed", func(t *testing.T) {
		h := startKernel(t, g, func(s *Server) { s.AllowHardLinks = true })
		hardLinkTree(t, h)
		c := h.dial()
		c.hello("cc")
		c.list()
		r := c.invoke("files.read", map[string]string{"path": "/public/twin"})
		if r.Status != kproto.StatusSucceeded || text(t, r) != "hello world\nsecond line\n" {
			t.Errorf("files.read of a hard link, allowed: %+v", r)
		}
		r = c.invoke("files.search", map[string]string{"path": "/public", "query": "hello"})
		if !strings.Contains(string(r.Output), "/public/twin") {
			t.Errorf("files.search with hard links allowed: %s", r.Output)
		}
	})
}

// raceRounds is how many calls each race makes while the tree is
// swapped under them; maxSwaps bounds the swapping.
const (
	raceRounds = 2000
	maxSwaps   = 1_000_000
)

// swapping runs swap(0), swap(1), ... on its own goroutine, at most
// maxSwaps times, until the returned stop is called; stop returns how
// many ran. The test's cleanup stops it too.
func swapping(t *testing.T, swap func(i int)) (stop func() int) {
	quit, ran := make(chan struct{}), make(chan int, 1)
	go func() {
		i := 0
		for ; i < maxSwaps; i++ {
			select {
			case <-quit:
				ran <- i
				return
			default:
			}
			swap(i)
		}
		ran <- i
	}()
	var once sync.Once
	n := 0
	stop = func() int {
		once.Do(func() {
			close(quit)
			n = <-ran
		})
		return n
	}
	t.Cleanup(func() { stop() })
	return stop
}

// TestLinkSwapRaceReadsNothingUngranted swaps /docs/drafts/shared between a
// real directory (holding a decoy private.txt) and the link to the top,
// raceRounds times, while the same path is read: no read returns the real
// /private.txt.
func TestLinkSwapRaceReadsNothingUngranted(t *testing.T) {
	needExchange(t)
	h, root := demoKernel(t)
	shared := filepath.Join(root, "docs", "drafts", "shared")
	decoy := filepath.Join(root, "docs", "drafts", "decoy")
	if err := os.Mkdir(decoy, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(decoy, "private.txt"), []byte("decoy"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := h.dial()
	c.hello("claude-code")
	c.list()
	stop := swapping(t, func(int) { exchange(t, shared, decoy) })
	var reads, decoys, refused, escapes int
	for ; reads < raceRounds; reads++ {
		r := c.invoke("files.read", map[string]string{"path": "/docs/drafts/shared/private.txt"})
		switch {
		case r.Status == kproto.StatusSucceeded && text(t, r) == "decoy":
			decoys++
		case r.Status == kproto.StatusSucceeded:
			escapes++
		case r.Code == kproto.CodeNoMatchingGrant, r.Code == kproto.CodeNotFound:
			refused++
		default:
			t.Errorf("read %d: %+v", reads, r)
		}
	}
	t.Logf("%d swaps, %d reads: %d decoys, %d refused, %d escapes", stop(), reads, decoys, refused, escapes)
	if escapes != 0 {
		t.Errorf("%d reads returned the ungranted /private.txt", escapes)
	}
}

// TestRacingWritesStayInTheirGrantAndLeaveNoTemporaryFiles swaps
// /public/d between a real directory and links (to /private, which the
// write grant does not cover, and to a directory outside the root)
// raceRounds times while files are written into it: no write lands
// outside the grant, no temporary file is left anywhere, and nothing is
// answered internal.
func TestRacingWritesStayInTheirGrantAndLeaveNoTemporaryFiles(t *testing.T) {
	needExchange(t)
	h := startKernel(t, []policy.Grant{grant(t, "integration:cc", "files:/public", true, "write", "read")})
	d := filepath.Join(h.root, "public", "d")
	toPrivate, toOutside := filepath.Join(h.root, "public", "to-private"), filepath.Join(h.root, "public", "to-outside")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../private", toPrivate); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(h.outside, toOutside); err != nil {
		t.Fatal(err)
	}
	before := testfs.Snapshot(t, h.outside)
	private := testfs.Snapshot(t, filepath.Join(h.root, "private"))
	c := h.dial()
	c.hello("cc")
	c.list()
	stop := swapping(t, func(i int) {
		link := toPrivate
		if i%4 >= 2 {
			link = toOutside
		}
		exchange(t, d, link) // d is a link now ...
		exchange(t, d, link) // ... and a directory again
	})
	counts := map[string]int{}
	writes := 0
	for ; writes < raceRounds; writes++ {
		r := c.invoke("files.write", map[string]string{"path": fmt.Sprintf("/public/d/f%d.txt", writes%7), "content": "x"})
		counts[r.Status+" "+r.Code]++
	}
	t.Logf("%d swaps, %d writes: %v", 2*stop(), writes, counts)
	for k, n := range counts {
		switch k {
		case "succeeded ", "denied " + kproto.CodeNoMatchingGrant, "denied " + files.CodeOutsideRoot, "failed " + kproto.CodeNotFound:
		default:
			t.Errorf("%d writes answered %q", n, k)
		}
	}
	if after := testfs.Snapshot(t, h.outside); after != before {
		t.Errorf("a write escaped the root:\nbefore %s\nafter  %s", before, after)
	}
	if after := testfs.Snapshot(t, filepath.Join(h.root, "private")); after != private {
		t.Errorf("a write escaped its grant into /private:\nbefore %s\nafter  %s", private, after)
	}
	var temps []string
	for _, dir := range []string{h.root, h.outside} {
		_ = filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
			if err == nil && strings.Contains(de.Name(), ".sharedos-") {
				temps = append(temps, p)
			}
			return nil
		})
	}
	if len(temps) > 0 {
		t.Errorf("%d temporary files left behind, e.g. %s", len(temps), temps[0])
	}
}

// TestWritesKeepModeAndOwner is issue 12 item 7: an overwritten file
// keeps its permission bits and, when the kernel may set it, its owner.
func TestWritesKeepModeAndOwner(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	h := startKernel(t, []policy.Grant{grant(t, "integration:cc", "files:/public", true, "write")})
	shared := filepath.Join(h.root, "public", "a.txt")
	if err := os.Chmod(shared, 0o664); err != nil {
		t.Fatal(err)
	}
	owned := os.Geteuid() == 0
	if owned {
		if err := os.Chown(shared, 4242, 4343); err != nil {
			t.Fatal(err)
		}
	}
	c := h.dial()
	c.hello("cc")
	c.list()
	if r := c.invoke("files.write", map[string]string{"path": "/public/a.txt", "content": "new"}); r.Status != kproto.StatusSucceeded {
		t.Fatalf("files.write: %+v", r)
	}
	fi, err := os.Stat(shared)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o664 {
		t.Errorf("mode %v after the write, want -rw-rw-r--", fi.Mode().Perm())
	}
	if st := fi.Sys().(*syscall.Stat_t); owned && (st.Uid != 4242 || st.Gid != 4343) {
		t.Errorf("owner %d:%d after the write, want 4242:4343", st.Uid, st.Gid)
	}
	if !owned {
		t.Log("not root: the owner check is skipped (only root may give a file away)")
	}
	// A new file gets the usual mode, under the umask.
	if r := c.invoke("files.write", map[string]string{"path": "/public/fresh.txt", "content": "new"}); r.Status != kproto.StatusSucceeded {
		t.Fatalf("files.write: %+v", r)
	}
	if fi, err := os.Stat(filepath.Join(h.root, "public", "fresh.txt")); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("a new file: %v %v, want -rw-r--r--", fi.Mode(), err)
	}
}

// TestNamesTooLongForTheFileSystem: a name at the file system's limit
// can be written (its temporary name is not longer), a longer one is the
// caller's mistake, not the kernel's.
func TestNamesTooLongForTheFileSystem(t *testing.T) {
	h := startKernel(t, []policy.Grant{grant(t, "integration:cc", "files:/public", true, "write", "read")})
	c := h.dial()
	c.hello("cc")
	c.list()
	longest := "/public/" + strings.Repeat("n", 255)
	if r := c.invoke("files.write", map[string]string{"path": longest, "content": "x"}); r.Status != kproto.StatusSucceeded {
		t.Errorf("a 255-byte name: %+v", r)
	}
	tooLong := strings.Repeat("n", 256)
	for _, tt := range []struct {
		tool string
		args map[string]string
	}{
		{"files.write", map[string]string{"path": "/public/" + tooLong, "content": "x"}},
		{"files.read", map[string]string{"path": "/public/" + tooLong}},
		{"files.read", map[string]string{"path": "/public/" + tooLong + "/a.txt"}},
	} {
		r := c.invoke(tt.tool, tt.args)
		if r.Status != kproto.StatusFailed || r.Code != kproto.CodeInvalidArguments {
			t.Errorf("%s %.20s… (a 256-byte name): %+v, want failed invalid_arguments", tt.tool, tt.args["path"], r)
		}
	}
}

// TestOversizedArgumentsAreRefusedEarly is issue 12 item 4: a 15 MB
// argument (or any over the limit) is refused too_large, and no message
// echoes it.
func TestOversizedArgumentsAreRefusedEarly(t *testing.T) {
	h := startKernel(t, []policy.Grant{grant(t, "integration:cc", "files:/", true, "read", "list", "search", "write")})
	c := h.dial()
	c.hello("cc")
	c.list()
	over := strings.Repeat("A", maxArgumentBytes+1)
	for _, tt := range []struct {
		tool string
		args map[string]string
	}{
		{"files.write", map[string]string{"path": "/public/big.txt", "content": over}},
		{"files.search", map[string]string{"path": "/public", "query": over}},
	} {
		r := c.invoke(tt.tool, tt.args)
		if r.Status != kproto.StatusFailed || r.Code != kproto.CodeTooLarge || len(r.Message) > 512 {
			t.Errorf("%s with a %d-byte argument: status %s code %s, a %d-byte message", tt.tool, len(tt.args["content"]+tt.args["path"]+tt.args["query"]), r.Status, r.Code, len(r.Message))
		}
	}
	if _, err := os.Lstat(filepath.Join(h.root, "public", "big.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Error("the oversized write created its file")
	}
	// Under the limit, what a message quotes of the client's input is
	// shortened.
	for _, tt := range []struct {
		tool string
		args map[string]string
	}{
		{"files.read", map[string]string{"path": strings.Repeat("r", 1<<20)}},
		{"files.read", map[string]string{"path": "/public/" + strings.Repeat("m", 4000)}},
		{"files.read", map[string]string{"path": "/public/a.txt", strings.Repeat("k", 1<<20): "x"}},
	} {
		r := c.invoke(tt.tool, tt.args)
		if r.Status == kproto.StatusSucceeded || len(r.Message) > 512 {
			t.Errorf("%s: status %s code %s, a %d-byte message", tt.tool, r.Status, r.Code, len(r.Message))
		}
	}
}

// TestListingIsBoundedInBytes: 6,000 entries with 250-byte names would
// be 1.6 MB of listing; it stops at files.MaxResultBytes, with the names that
// sort first, and says it is truncated.
func TestListingIsBoundedInBytes(t *testing.T) {
	h := startKernel(t, []policy.Grant{grant(t, "integration:cc", "files:/", true, "list")})
	dir := filepath.Join(h.root, "wide")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	const n = 6000
	for i := range n {
		name := fmt.Sprintf("%05d%s", n-1-i, strings.Repeat("w", 245))
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := h.dial()
	c.hello("cc")
	c.list()
	r := c.invoke("files.list", map[string]string{"path": "/wide"})
	var out files.ListOutput
	if err := json.Unmarshal(r.Output, &out); err != nil {
		t.Fatalf("files.list: %+v (%v)", r, err)
	}
	if len(r.Output) > files.MaxResultBytes || !out.Truncated || len(out.Entries) == 0 || len(out.Entries) == n {
		t.Fatalf("a %d-byte listing of %d entries, truncated %v", len(r.Output), len(out.Entries), out.Truncated)
	}
	for i, e := range out.Entries {
		if want := fmt.Sprintf("%05d", i); !strings.HasPrefix(e.Name, want) {
			t.Fatalf("entry %d is %.8s…, want the names that sort first", i, e.Name)
		}
	}
}

// TestSearchReadsABoundedNumberOfBytes: 80 files of 1 MiB are more than a
// search reads; it stops, says so, and never reaches the last file.
func TestSearchReadsABoundedNumberOfBytes(t *testing.T) {
	h := startKernel(t, []policy.Grant{grant(t, "integration:cc", "files:/", true, "search")})
	dir := filepath.Join(h.root, "big")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	filler := []byte(strings.Repeat(strings.Repeat("f", 1023)+"\n", 1024))
	const nFiles = files.MaxSearchBytes>>20 + 16
	for i := range nFiles {
		data := filler
		if i == nFiles-1 {
			data = append([]byte("needle\n"), filler[:len(filler)-7]...)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d", i)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := h.dial()
	c.hello("cc")
	c.list()
	r := c.invoke("files.search", map[string]string{"path": "/big", "query": "needle"})
	var out files.SearchOutput
	if err := json.Unmarshal(r.Output, &out); err != nil {
		t.Fatalf("files.search: %+v (%v)", r, err)
	}
	if !out.Truncated || len(out.Matches) != 0 {
		t.Errorf("searching %d MiB: truncated %v, %d matches; want it cut short before the last file", nFiles, out.Truncated, len(out.Matches))
	}
}

// TestPathsThatReadBackOddly: an absolute link that points back into the
// root is followed (os.Root alone refuses it), and a file really named
// "… (deleted)", which is how Linux reports a removed file's path, is
// still served.
func TestPathsThatReadBackOddly(t *testing.T) {
	h := startKernel(t, []policy.Grant{grant(t, "integration:cc", "files:/public", true, "read", "list", "search")})
	if err := os.Symlink(filepath.Join(h.root, "public", "sub", "b.txt"), filepath.Join(h.root, "public", "absolute")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.root, "public", "gone (deleted)"), []byte("still here"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := h.dial()
	c.hello("cc")
	c.list()
	if r := c.invoke("files.read", map[string]string{"path": "/public/absolute"}); r.Status != kproto.StatusSucceeded || !strings.Contains(text(t, r), "needle") {
		t.Errorf("an absolute link into the root: %+v", r)
	}
	if r := c.invoke("files.read", map[string]string{"path": "/public/gone (deleted)"}); r.Status != kproto.StatusSucceeded || text(t, r) != "still here" {
		t.Errorf("a file named … (deleted): %+v", r)
	}
	r := c.invoke("files.search", map[string]string{"path": "/public", "query": "still"})
	if !strings.Contains(string(r.Output), `"path":"/public/gone (deleted)"`) {
		t.Errorf("searching a file named … (deleted): %s", r.Output)
	}
	c.conn.Close()
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	for _, e := range eventsNamed(h.events(), audit.EventToolInvoked) {
		if e.Requested == "files:/public/absolute" && e.Resource != "files:/public/sub/b.txt" {
			t.Errorf("the absolute link's read is recorded on %s", e.Resource)
		}
	}
}
