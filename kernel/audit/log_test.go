package audit

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos-mcp/internal/testfs"
)

// The tests in this file use only the audit log's entry points that
// predate the hash chain, so each can be run against older code.

// emptyCatalogHash is the catalogHash of an empty catalogue, as a turn
// that lists nothing records it.
const emptyCatalogHash = "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"

func testEvent(i int) Event {
	d := int64(i)
	return Event{
		Time: Stamp(time.Now()), Event: EventToolInvoked, ExecutionID: "exe_0123456789abcdef", Integration: "claude-code",
		Peer: Peer{UID: 1000, PID: 4242}, CallID: "c" + strconv.Itoa(i), Tool: "files.write", Resource: "files:/notes/n" + strconv.Itoa(i) + ".txt",
		Action: "write", Status: "succeeded", CatalogHash: emptyCatalogHash, DurationUs: &d,
	}
}

func openLog(t *testing.T, path string) *Log {
	t.Helper()
	a, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func writeEvents(t *testing.T, a *Log, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := a.Write(testEvent(i)); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
}

// logLines returns the lines of the file at path, failing unless it ends
// in a newline.
func logLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		t.Fatalf("%s ends in a torn line: %q", path, data[max(0, len(data)-60):])
	}
	if len(data) == 0 {
		return nil
	}
	return strings.Split(string(data[:len(data)-1]), "\n")
}

// fields decodes one line, failing unless it is a JSON object.
func fields(t *testing.T, line string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatalf("line %q is not one JSON object: %v", line, err)
	}
	return m
}

// TestOpeningSetsATornTailAside: a crash left the last line cut short
// (20 bytes, as a full disk left it). The next kernel must not glue its
// first event onto it: the fragment stays, as its own line, and a
// segment event counts it before the next event.
func TestOpeningSetsATornTailAside(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a := openLog(t, path)
	writeEvents(t, a, 0, 2)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	const fragment = `{"time":"2026-04-01T`
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(fragment); err != nil {
		t.Fatal(err)
	}
	f.Close()

	a = openLog(t, path)
	writeEvents(t, a, 2, 3)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	lines := logLines(t, path)
	if len(lines) != 5 || lines[2] != fragment {
		t.Fatalf("want two events, the fragment on a line of its own, a segment, an event; got %d lines:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	seg := fields(t, lines[3])
	if seg["event"] != "audit.segment" || seg["reason"] != "torn_tail" || seg["tornLines"] != 1.0 || seg["tornBytes"] != float64(len(fragment)) {
		t.Errorf("line 4 does not set the fragment aside: %s", lines[3])
	}
	if ev := fields(t, lines[4]); ev["callId"] != "c2" {
		t.Errorf("line 5 is not the next event: %s", lines[4])
	}
	if skipped, err := Read(strings.NewReader(strings.Join(lines, "\n")+"\n"), Filter{}, func(Event, []byte) error { return nil }); err != nil || skipped != 1 {
		t.Errorf("audit skipped %d lines (%v), want the one fragment", skipped, err)
	}
}

// TestAuditLogRefusesWhatOthersCanWrite: the log and its directory get
// the socket's checks. In particular another user's 0666 log in their
// 0777 directory (whose history that user can rewrite) is refused, and
// left as it was.
func TestAuditLogRefusesWhatOthersCanWrite(t *testing.T) {
	const history = `{"time":"2026-01-01T00:00:00Z","event":"turn.opened","executionId":"exe_1","integration":"cc","peer":{"uid":1,"pid":1}}` + "\n"
	tests := []struct {
		name    string
		setup   func(t *testing.T, dir string) string // returns the log path
		wantErr string
	}{
		{"a log other users can write", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "audit.jsonl")
			testfs.WriteFile(t, p, history, 0o666)
			return p
		}, "writable by other users"},
		{"a directory other users can write", func(t *testing.T, dir string) string {
			d := filepath.Join(dir, "open")
			testfs.Mkdir(t, d, 0o777)
			return filepath.Join(d, "audit.jsonl")
		}, "writable by other users"},
		{"a symlink where the log should be", func(t *testing.T, dir string) string {
			target := filepath.Join(dir, "elsewhere.jsonl")
			testfs.WriteFile(t, target, history, 0o600)
			p := filepath.Join(dir, "audit.jsonl")
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			return p
		}, "symlink"},
		{"another user's 0666 log in their 0777 directory", func(t *testing.T, dir string) string {
			uid := testfs.OtherUID(t)
			d := filepath.Join(dir, "theirs")
			testfs.Mkdir(t, d, 0o777)
			p := filepath.Join(d, "audit.jsonl")
			testfs.WriteFile(t, p, history, 0o666)
			testfs.Chown(t, d, uid)
			testfs.Chown(t, p, uid)
			return p
		}, "uid"},
		{"another user's 0600 log in a directory of ours", func(t *testing.T, dir string) string {
			uid := testfs.OtherUID(t)
			p := filepath.Join(dir, "audit.jsonl")
			testfs.WriteFile(t, p, history, 0o600)
			testfs.Chown(t, p, uid)
			return p
		}, "uid"},
		{"a directory reached through another user's symlink in a sticky directory", func(t *testing.T, dir string) string {
			uid := testfs.OtherUID(t)
			sticky := filepath.Join(dir, "tmp")
			testfs.Mkdir(t, sticky, 0o777|os.ModeSticky)
			mine := filepath.Join(dir, "mine")
			testfs.Mkdir(t, mine, 0o700)
			link := filepath.Join(sticky, "state")
			if err := os.Symlink(mine, link); err != nil {
				t.Fatal(err)
			}
			if err := os.Lchown(link, uid, uid); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(link, "audit.jsonl")
		}, "symlink"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := tt.setup(t, dir)
			before := testfs.Snapshot(t, dir)
			a, err := Open(path)
			if err == nil {
				a.Write(testEvent(0))
				a.Close()
				t.Fatalf("Open(%s) accepted it", path)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q, want it to mention %q", err, tt.wantErr)
			}
			if after := testfs.Snapshot(t, dir); after != before {
				t.Errorf("a refused log was touched:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
	t.Run("a private log through a symlink of our own is used", func(t *testing.T) {
		dir := t.TempDir()
		mine := filepath.Join(dir, "mine")
		testfs.Mkdir(t, mine, 0o700)
		if err := os.Symlink(mine, filepath.Join(dir, "state")); err != nil {
			t.Fatal(err)
		}
		a := openLog(t, filepath.Join(dir, "state", "audit.jsonl"))
		writeEvents(t, a, 0, 1)
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(filepath.Join(mine, "audit.jsonl")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("log: %v %v, want a 0600 file", fi, err)
		}
	})
}

// TestAuditLogFollowsRotation: renaming or removing the log while the
// kernel runs must not send later events to a file nobody reads.
func TestAuditLogFollowsRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a := openLog(t, path)
	t.Cleanup(func() { a.Close() })
	writeEvents(t, a, 0, 2)
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	writeEvents(t, a, 2, 3)
	if err := a.Sync(); err != nil {
		t.Fatal(err)
	}
	old, cur := logLines(t, path+".1"), logLines(t, path)
	if len(old) != 2 || fields(t, old[1])["callId"] != "c1" {
		t.Errorf("the renamed file holds:\n%s\nwant the first two events", strings.Join(old, "\n"))
	}
	if len(cur) == 0 || fields(t, cur[len(cur)-1])["callId"] != "c2" {
		t.Fatalf("the new file at the path holds:\n%s\nwant the event written after the rename", strings.Join(cur, "\n"))
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("new file: %v %v, want mode 0600", fi, err)
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	writeEvents(t, a, 3, 4)
	if cur := logLines(t, path); len(cur) == 0 || fields(t, cur[len(cur)-1])["callId"] != "c3" {
		t.Fatalf("after removing the log, the path holds:\n%s\nwant the next event", strings.Join(cur, "\n"))
	}
}

// TestAuditLinesAreBounded: no client string is stored whole, and none
// grows on the way in (encoding/json's HTML escaping made each of "<>&"
// six bytes).
func TestAuditLinesAreBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a := openLog(t, path)
	huge := strings.Repeat("x", 1<<20)
	ev := testEvent(0)
	ev.CallID, ev.CatalogHash, ev.Tool, ev.Integration = huge, huge, huge, huge
	ev.Resource = "files:/" + strings.Repeat("<>&", 1<<18)
	ev.Reason, ev.Note = huge, huge
	if err := a.Write(ev); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	lines := logLines(t, path)
	if len(lines) != 1 {
		t.Fatalf("%d lines", len(lines))
	}
	line := lines[0]
	if len(line) > 32<<10 {
		t.Errorf("one event made a %d-byte line", len(line))
	}
	if strings.Contains(line, `\u003c`) || !strings.Contains(line, `"resource":"files:/<>&<>&`) {
		t.Errorf("<>& are not stored as themselves: %.120s", line)
	}
	m := fields(t, line)
	for _, k := range []string{"callId", "catalogHash", "tool", "integration"} {
		if s, _ := m[k].(string); len(s) > 256 || !strings.HasSuffix(s, "…") {
			t.Errorf("%s stored as %d bytes, want it shortened with an ellipsis", k, len(s))
		}
	}
}

// TestAuditReadsEveryLineTheKernelWrites: whatever the strings of an
// event hold (here every string field filled with control characters,
// which encode to six bytes each), audit reads the line back.
func TestAuditReadsEveryLineTheKernelWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a := openLog(t, path)
	ev := testEvent(0)
	fill := strings.Repeat("\x01", 3<<20)
	v := reflect.ValueOf(&ev).Elem()
	for i := range v.NumField() {
		if v.Field(i).Kind() == reflect.String {
			v.Field(i).SetString(fill)
		}
	}
	ev.Integration = "cc"
	if err := a.Write(ev); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	skipped, err := Read(f, Filter{Integration: "cc"}, func(Event, []byte) error { n++; return nil })
	if err != nil || skipped != 0 || n != 1 {
		t.Errorf("audit read %d events and skipped %d (%v): it cannot read a line the kernel wrote", n, skipped, err)
	}
}
