package cmd

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos-mcp/internal/cli"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
)

// writeAuditLog writes events through the kernel's own writer, plus a
// line cut short as a crash would leave it.
func writeAuditLog(t *testing.T, evs []audit.Event) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a, err := audit.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if err := a.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(`{"time":"2026-`); err != nil {
		t.Fatal(err)
	}
	return path
}

func auditFixture(t *testing.T) string {
	now := time.Now().UTC()
	at := func(ago time.Duration) string { return now.Add(-ago).Format(time.RFC3339Nano) }
	return writeAuditLog(t, []audit.Event{
		{Time: at(3 * time.Hour), Event: audit.EventTurnOpened, ExecutionID: "exe_1", Integration: "cc"},
		{Time: at(3 * time.Hour), Event: audit.EventToolInvoked, ExecutionID: "exe_1", Integration: "cc", Tool: "files.read", Resource: "files:/a", Status: "succeeded"},
		{Time: at(2 * time.Hour), Event: audit.EventTurnOpened, ExecutionID: "exe_2", Integration: "codex"},
		{Time: at(2 * time.Hour), Event: audit.EventToolInvoked, ExecutionID: "exe_2", Integration: "codex", Tool: "files.write", Resource: "files:/b", Status: "denied", Code: "no_matching_grant"},
		{Time: at(time.Hour), Event: audit.EventTurnOpened, ExecutionID: "exe_3", Integration: "cc-2"},
		{Time: at(time.Hour), Event: audit.EventTurnRefused, ExecutionID: "exe_4", Reason: "uid 4242 is not served"},
		{Time: at(time.Minute), Event: audit.EventToolInvoked, ExecutionID: "exe_5", Integration: "cc", Tool: "files.read\x1b[31m\tx", Resource: "files:/c", Status: "denied", Code: "tool_unavailable"},
	})
}

func TestAuditJSONIsExactlyOneIntegrationsLines(t *testing.T) {
	path := auditFixture(t)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, `"integration":"cc"`) {
			want = append(want, l)
		}
	}
	if len(want) != 3 {
		t.Fatalf("fixture has %d cc lines, want 3", len(want))
	}
	code, stdout, stderr := runCLI(t, "audit", "--file", path, "--integration", "cc", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got := lines(stdout); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("audit --integration cc --json:\n%s\nwant the stored lines:\n%s", stdout, strings.Join(want, "\n"))
	}
	if !strings.Contains(stderr, "skipped 1 line of "+path+" that is not an event (a crash cut it short; the kernel set it aside)") {
		t.Errorf("stderr %q: want a note about the torn last line", stderr)
	}
}

func TestAuditSince(t *testing.T) {
	path := auditFixture(t)
	code, stdout, stderr := runCLI(t, "audit", "--file", path, "--since", "90m", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got := lines(stdout); len(got) != 3 || !strings.Contains(got[0], "exe_3") {
		t.Errorf("audit --since 90m:\n%s\nwant the last three events", stdout)
	}
}

func TestAuditTable(t *testing.T) {
	path := auditFixture(t)
	code, stdout, stderr := runCLI(t, "audit", "--file", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	rows := lines(stdout)
	if len(rows) != 8 {
		t.Fatalf("table has %d rows, want a header and 7 events:\n%s", len(rows), stdout)
	}
	header := rows[0]
	for _, col := range []string{"TIME", "INTEGRATION", "EVENT", "TOOL", "RESOURCE", "STATUS"} {
		if !strings.Contains(header, col) {
			t.Errorf("header %q lacks %s", header, col)
		}
	}
	// Columns line up: each row has EVENT where the header has it.
	col := strings.Index(header, "EVENT")
	for _, r := range rows[1:] {
		if !strings.HasPrefix(r[col:], "turn.") && !strings.HasPrefix(r[col:], "tool.") {
			t.Errorf("row %q: event not in its column", r)
		}
	}
	if !strings.Contains(rows[4], "denied no_matching_grant") || !strings.Contains(rows[6], "uid 4242 is not served") {
		t.Errorf("status column:\n%s", stdout)
	}
	// What a client sent cannot drive the terminal or break the table.
	if strings.ContainsAny(stdout, "\x1b\t") || !strings.Contains(rows[7], `"files.read\x1b[31m\tx"`) {
		t.Errorf("a tool name with control characters is not quoted:\n%q", rows[7])
	}
}

func TestAuditMissingFileHints(t *testing.T) {
	code, _, stderr := runCLI(t, "audit", "--file", filepath.Join(t.TempDir(), "none.jsonl"))
	if code != 1 || !strings.Contains(stderr, "no audit log at") || !strings.Contains(stderr, "hint: ") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

func TestAuditTableShowsTheTurnAndEachCallsPlace(t *testing.T) {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	path := writeAuditLog(t, []audit.Event{
		{Time: now, Event: audit.EventTurnOpened, ExecutionID: "exe_0123456789abcdef", Integration: "cc"},
		{Time: now, Event: audit.EventToolInvoked, ExecutionID: "exe_0123456789abcdef", Integration: "cc", Seq: 1, Tool: "files.write", Resource: "files:/n.txt", Status: "succeeded"},
		{Time: now, Event: audit.EventToolInvoked, ExecutionID: "exe_0123456789abcdef", Integration: "cc", Seq: 2, Tool: "files.read", Resource: "files:/n.txt", Status: "succeeded"},
	})
	code, stdout, stderr := runCLI(t, "audit", "--file", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	rows := lines(stdout)
	exe, seq := strings.Index(rows[0], "EXECUTION"), strings.Index(rows[0], "SEQ")+len("SEQ")-4 // right-aligned
	if exe < 0 || seq < 0 || len(rows) != 4 {
		t.Fatalf("table:\n%s\nwant EXECUTION and SEQ columns and 3 events", stdout)
	}
	for i, want := range []string{"   -", "   1", "   2"} {
		r := rows[i+1]
		if !strings.HasPrefix(r[exe:], "exe_0123456789abcdef") || r[seq:seq+4] != want {
			t.Errorf("row %q: want the turn under EXECUTION and %q under SEQ", r, want)
		}
	}
}

func TestAuditSaysWhenNoEventMatches(t *testing.T) {
	path := auditFixture(t)
	for _, args := range [][]string{{"--integration", "nobody"}, {"--integration", "nobody", "--json"}} {
		code, stdout, stderr := runCLI(t, append([]string{"audit", "--file", path}, args...)...)
		if code != 0 || stdout != "" || !strings.Contains(stderr, `sharedos-mcp: no events of integration "nobody" in `+path) {
			t.Errorf("audit %q: exit %d, stdout %q, stderr %q; want 0, nothing, and a line saying no events", args, code, stdout, stderr)
		}
	}
}

func TestAuditVerifyNamesTheBreakAndPrintsTheHead(t *testing.T) {
	path := auditFixture(t)
	code, stdout, stderr := runCLI(t, "audit", "verify", "--file", path)
	if code != 0 || !strings.Contains(stdout, "ok "+path+": 7 events in an unbroken chain") ||
		!strings.Contains(stdout, "note: the last 14 bytes are a line a crash cut short") {
		t.Fatalf("verify of an intact log: exit %d\n%s%s", code, stdout, stderr)
	}
	var head string
	for _, l := range lines(stdout) {
		if h, ok := strings.CutPrefix(l, "head "); ok {
			head, _, _ = strings.Cut(h, " ")
		}
	}
	if len(head) != 64 {
		t.Fatalf("no head in:\n%s", stdout)
	}

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(data), `"denied"`, `"succeeded"`, 1)
	if err := os.WriteFile(path, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCLI(t, "audit", "verify", "--file", path)
	if code != 1 || !strings.Contains(stderr, path+":5: the chain breaks: prev does not match line 4") || !strings.Contains(stderr, "hint: ") {
		t.Errorf("verify of an edited log: exit %d, stderr %q; want 1 naming line 5", code, stderr)
	}

	// A whole new chain written over the file verifies on its own; the
	// head kept from before is what catches it.
	fresh := auditFixture(t)
	code, _, stderr = runCLI(t, "audit", "verify", "--file", fresh, "--head", head)
	if code != 1 || !strings.Contains(stderr, "hint: the log no longer holds an event") {
		t.Errorf("verify of a rewritten log with a kept head: exit %d, stderr %q; want 1", code, stderr)
	}
}

// TestAuditFollowPrintsEventsAsTheyAreWrittenAndAcrossRotation runs audit
// --follow against the kernel's own writer: events appended later are
// printed as they come, a rotated log is followed into its new file, and
// the command ends cleanly when interrupted.
func TestAuditFollowPrintsEventsAsTheyAreWrittenAndAcrossRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	log, err := audit.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	write := func(exe string) {
		t.Helper()
		if err := log.Write(audit.Event{Time: time.Now().UTC().Format(time.RFC3339Nano), Event: audit.EventTurnOpened, ExecutionID: exe, Integration: "cc"}); err != nil {
			t.Fatal(err)
		}
	}
	write("exe_before")

	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	code := make(chan int, 1)
	var stderr bytes.Buffer
	go func() {
		code <- Run(ctx, cli.IO{In: strings.NewReader(""), Out: pw, Err: &stderr}, []string{"audit", "--file", path, "--follow", "--json"})
		pw.Close()
	}()
	got := make(chan string)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			got <- sc.Text()
		}
		close(got)
	}()
	expect := func(what string) {
		t.Helper()
		select {
		case l := <-got:
			if !strings.Contains(l, what) {
				t.Fatalf("followed line %q, want %s", l, what)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no line with %s within 10s", what)
		}
	}
	expect(`"executionId":"exe_before"`)
	write("exe_after")
	expect(`"executionId":"exe_after"`)

	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	write("exe_rotated") // the writer notices, begins a new file with a segment event
	expect(`"event":"audit.segment"`)
	expect(`"executionId":"exe_rotated"`)

	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Errorf("audit --follow exited %d after an interrupt: %s", c, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("audit --follow did not end within 10s of the interrupt")
	}
}
