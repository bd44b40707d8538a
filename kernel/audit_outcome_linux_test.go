package kernel

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
	"github.com/sharedos/sharedos-mcp/policy"
)

// fullDisk is a small tmpfs that holds the audit log, the files root and
// what the brokered test upstream writes, filled so that a call's
// decision fits on it and its outcome record does not once the call has
// acted: the disk fills up between the two, as it does when the write
// itself takes the last free space.
type fullDisk struct {
	t      *testing.T
	dir    string
	log    string
	filler string
	page   int64
}

// mountTmpfs mounts a tmpfs of size bytes (a mount option: "256k") on a
// directory of the test's, until it ends, or skips the test when it
// cannot.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs for the audit log needs root; skipped")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs (%v); skipped", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// mountFullDisk mounts the tmpfs for a fullDisk.
func mountFullDisk(t *testing.T) *fullDisk {
	t.Helper()
	dir := mountTmpfs(t, "1m")
	return &fullDisk{t: t, dir: dir, log: filepath.Join(dir, "audit.jsonl"), filler: filepath.Join(dir, "filler"), page: int64(os.Getpagesize())}
}

// fill leaves room for exactly one more line of about line bytes in the
// log's last page (the readers skip the empty lines that pad it there)
// and exactly pages free pages on the file system, for the call's effect
// to take.
func (d *fullDisk) fill(line int64, pages int) {
	d.t.Helper()
	fi, err := os.Stat(d.log)
	if err != nil {
		d.t.Fatal(err)
	}
	// The line fits with 100 bytes to spare for a longer time stamp,
	// call id or seq; no outcome record (over 300 bytes) fits after it.
	room := line + 100
	pad := ((d.page-room-fi.Size()%d.page)%d.page + d.page) % d.page
	f, err := os.OpenFile(d.log, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		d.t.Fatal(err)
	}
	if _, err := f.Write(bytes.Repeat([]byte("\n"), int(pad))); err != nil {
		d.t.Fatal(err)
	}
	f.Close()
	filler, err := os.OpenFile(d.filler, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		d.t.Fatal(err)
	}
	defer filler.Close()
	var size int64
	for {
		n, err := filler.Write(make([]byte, d.page))
		size += int64(n)
		if errors.Is(err, syscall.ENOSPC) {
			break
		}
		if err != nil {
			d.t.Fatal(err)
		}
	}
	size -= size % d.page
	if size < int64(pages)*d.page {
		d.t.Fatalf("the tmpfs held only %d bytes of filler", size)
	}
	if err := filler.Truncate(size - int64(pages)*d.page); err != nil {
		d.t.Fatal(err)
	}
}

// free makes room on the file system again.
func (d *fullDisk) free() {
	d.t.Helper()
	if err := os.Remove(d.filler); err != nil {
		d.t.Fatal(err)
	}
}

// events reads the log's whole events, skipping the lines a failed write
// left, which the log sets aside.
func (d *fullDisk) events() []audit.Event {
	d.t.Helper()
	data, err := os.ReadFile(d.log)
	if err != nil {
		d.t.Fatal(err)
	}
	var evs []audit.Event
	for _, line := range bytes.Split(data, []byte("\n")) {
		var e audit.Event
		if json.Unmarshal(line, &e) == nil && e.Event != "" {
			evs = append(evs, e)
		}
	}
	return evs
}

// TestAnActedCallIsNeverToldToRetryOnAFullDisk is issue 24's finding 4:
// on a full disk, a call whose effect happened but whose outcome could
// not be recorded was answered failed/audit_unavailable, retryable: a
// model would write the file, or call the brokered write tool, again.
// Here the audit log, the files root and what the brokered write_text
// writes share one small tmpfs, filled so that each call's decision is
// recorded and its own write takes the last free pages. Every such call,
// files.write and test.write_text alike, acted; none may be answered
// refused or retryable, and each has its decision on the record.
func TestAnActedCallIsNeverToldToRetryOnAFullDisk(t *testing.T) {
	d := mountFullDisk(t)
	root := filepath.Join(d.dir, "root")
	out := filepath.Join(d.dir, "out")
	for _, dir := range []string{filepath.Join(root, "public"), out} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	const cc = "integration:claude-code"
	grants := []policy.Grant{grant(t, cc, "files:/public", true, "write"), grant(t, cc, "test:"+out, true, "write")}
	h, u := startBrokered(t, grants, `
[[upstream.tool]]
name = "write_text"
action = "write"
resource = "/{path:path}"
`, func(s *Server) {
		s.Root = root
		if err := s.Audit.Close(); err != nil {
			t.Fatal(err)
		}
		a, err := audit.Open(d.log)
		if err != nil {
			t.Fatal(err)
		}
		s.Audit = a
	})
	c := h.dial()
	c.hello("claude-code")
	c.list()

	const pages = 2
	content := strings.Repeat("x", pages*int(d.page))
	// Each tool writes a file, named by its path argument: files.write
	// in the files root, the brokered write_text where it is told.
	calls := []struct {
		tool, text string              // the tool, and its argument that holds the content
		path, file func(string) string // the path argument for a name, and the file it writes
	}{
		{"files.write", "content",
			func(name string) string { return "/public/" + name }, func(name string) string { return filepath.Join(root, "public", name) }},
		{"test.write_text", "text",
			func(name string) string { return filepath.Join(out, name) }, func(name string) string { return filepath.Join(out, name) }},
	}
	acted, wrong := 0, 0
	for _, a := range calls {
		args := func(i int) map[string]any {
			return map[string]any{"path": a.path(fmt.Sprintf("n%d.txt", i)), a.text: content}
		}
		// With room to spare: the call succeeds, and its decision's
		// record is as long as the next one's will be.
		if r := c.invoke(a.tool, args(0)); r.Status != kproto.StatusSucceeded {
			t.Fatalf("%s with room on the disk = %+v", a.tool, r)
		}
		for i := 1; i <= 3; i++ {
			d.fill(d.authorizedLen(a.tool), pages)
			callID := fmt.Sprintf("call-%d", c.id+1)
			r := c.invoke(a.tool, args(i))
			data, err := os.ReadFile(a.file(fmt.Sprintf("n%d.txt", i)))
			if err != nil || string(data) != content {
				t.Fatalf("%s %d on the full disk did not act (%v): the disk was not filled as the test means to; answered %+v", a.tool, i, err, r)
			}
			acted++
			if r.Status == kproto.StatusDenied || r.Retryable == nil || *r.Retryable || r.Code != codeOutcomeUnrecorded ||
				len(r.Content) > 0 || len(r.Output) > 0 || strings.Contains(r.Message, "nothing was done") {
				wrong++
				t.Errorf("%s %d acted and is answered %+v; want failed outcome_unrecorded, retryable false, its result withheld", a.tool, i, r)
			}
			d.free()
			// With room again, the next record sets aside what the failed
			// one left, and goes through.
			if r := c.invoke("no.such_tool", map[string]any{}); r.Code != kproto.CodeToolUnavailable {
				t.Fatalf("a call once there is room again = %+v", r)
			}
			decided := false
			for _, e := range d.events() {
				if e.Event == audit.EventToolAuthorized && e.CallID == callID && e.Tool == a.tool {
					decided = true
				}
			}
			if !decided {
				t.Errorf("%s %d (%s) acted without its decision on the record", a.tool, i, callID)
			}
		}
	}
	t.Logf("%d calls acted on a full disk; %d of them were answered refused or retryable", acted, wrong)
	if got := u.arguments("write_text"); len(got) != 4 {
		t.Errorf("the upstream received write_text %d times, want 4: each once", len(got))
	}
	// The log works again once there is room.
	if r := c.invoke("files.write", map[string]any{"path": "/public/after.txt", "content": "after"}); r.Status != kproto.StatusSucceeded {
		t.Errorf("a write once there is room = %+v", r)
	}
}

// authorizedLen is the length of the last tool.authorized line of tool
// in the log, its newline included.
func (d *fullDisk) authorizedLen(tool string) int64 {
	d.t.Helper()
	data, err := os.ReadFile(d.log)
	if err != nil {
		d.t.Fatal(err)
	}
	var n int64
	for _, line := range bytes.Split(data, []byte("\n")) {
		var e audit.Event
		if json.Unmarshal(line, &e) == nil && e.Event == audit.EventToolAuthorized && e.Tool == tool {
			n = int64(len(line)) + 1
		}
	}
	if n == 0 {
		d.t.Fatalf("no tool.authorized of %s in the log", tool)
	}
	return n
}
