package cmd

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
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

// exportedCopy writes, for the audit log at path, what a collector's file
// exporter writes of the audit stream of its first n lines: OTLP/JSON,
// each line the body of a record with its hash and prev, the log named on
// the resource.
func exportedCopy(t *testing.T, path string, n int) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	abs, _ := filepath.Abs(path)
	str := func(k, v string) map[string]any {
		return map[string]any{"key": k, "value": map[string]any{"stringValue": v}}
	}
	var records []any
	for _, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")[:n] {
		var e audit.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(l))
		records = append(records, map[string]any{"body": map[string]any{"stringValue": l},
			"attributes": []any{str(audit.AttrHash, hex.EncodeToString(sum[:])), str("prev", e.Prev)}})
	}
	b, err := json.Marshal(map[string]any{"resourceLogs": []any{map[string]any{
		"resource":  map[string]any{"attributes": []any{str(audit.AttrHost, host), str(audit.AttrLog, abs)}},
		"scopeLogs": []any{map[string]any{"logRecords": records}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "export.jsonl")
	if err := os.WriteFile(out, append(b, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestAuditVerifyAgainstAnExportedCopy: a log as exported passes, with a
// note for lines not exported yet; a rewrite through the kernel's own
// writer, which verifies alone, is named at the line where it stops
// holding what was exported.
func TestAuditVerifyAgainstAnExportedCopy(t *testing.T) {
	evs := []audit.Event{
		{Time: "2026-01-01T00:00:00Z", Event: audit.EventTurnOpened, ExecutionID: "exe_1", Integration: "cc"},
		{Time: "2026-01-01T00:00:01Z", Event: audit.EventToolInvoked, ExecutionID: "exe_1", Integration: "cc", Tool: "files.write", Resource: "files:/a", Status: "succeeded"},
		{Time: "2026-01-01T00:00:02Z", Event: audit.EventToolInvoked, ExecutionID: "exe_1", Integration: "cc", Tool: "files.read", Resource: "files:/b", Status: "succeeded"},
		{Time: "2026-01-01T00:00:03Z", Event: audit.EventTurnClosed, ExecutionID: "exe_1", Integration: "cc"},
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	write := func(evs []audit.Event) {
		os.Remove(path)
		a, err := audit.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if err := a.Write(e); err != nil {
				t.Fatal(err)
			}
		}
		a.Close()
	}
	write(evs)
	export := exportedCopy(t, path, 3)
	code, stdout, stderr := runCLI(t, "audit", "verify", "--file", path, "--against", export)
	if code != 0 || !strings.Contains(stdout, "ok against "+export+": 3 of 4 line(s) exported") || !strings.Contains(stdout, "note: the last 1 line(s) are not in the copy yet") {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}

	rewritten := slices.Clone(evs)
	rewritten[1].Resource = "files:/harmless"
	write(rewritten)
	code, _, stderr = runCLI(t, "audit", "verify", "--file", path, "--against", export)
	if code != 1 || !strings.Contains(stderr, path+":2: the log differs from the exported copy") || !strings.Contains(stderr, "hint: ") {
		t.Errorf("a rewritten log: exit %d, stderr %q; want 1 naming line 2", code, stderr)
	}

	other := exportedCopy(t, auditFixture(t), 2)
	code, _, stderr = runCLI(t, "audit", "verify", "--file", path, "--against", other)
	if code != 1 || !strings.Contains(stderr, "holds no line of") || !strings.Contains(stderr, "audit_logs = true") {
		t.Errorf("a copy of another log: exit %d, stderr %q", code, stderr)
	}
}

// TestAuditVerifyAgainstACopyItCannotReadSaysWhatToDo: a copy that
// opens but cannot be read (a directory) fails with a hint, as every
// error of the command does.
func TestAuditVerifyAgainstACopyItCannotReadSaysWhatToDo(t *testing.T) {
	path, dir := auditFixture(t), t.TempDir()
	code, _, stderr := runCLI(t, "audit", "verify", "--file", path, "--against", dir)
	want := "hint: check that " + path + " and " + dir + " are files you can read\n"
	if code != 1 || !strings.HasPrefix(stderr, "sharedos-mcp: error: audit verify: ") || !strings.HasSuffix(stderr, want) {
		t.Errorf("exit %d, stderr %q; want 1 and an error ending in %q", code, stderr, want)
	}
}

// TestAuditCallsHidesTurnsThatOnlyLooked: --calls leaves out a turn with
// no call (a health check), and shows the rest as they are.
func TestAuditCallsHidesTurnsThatOnlyLooked(t *testing.T) {
	zero, one := 0, 1
	path := writeAuditLog(t, []audit.Event{
		{Time: "2026-01-01T00:00:00Z", Event: audit.EventConfigLoaded, Reason: "start"},
		{Time: "2026-01-01T00:00:01Z", Event: audit.EventTurnOpened, ExecutionID: "exe_look", Integration: "claude-code"},
		{Time: "2026-01-01T00:00:01Z", Event: audit.EventCatalogListed, ExecutionID: "exe_look", Integration: "claude-code"},
		{Time: "2026-01-01T00:00:02Z", Event: audit.EventTurnClosed, ExecutionID: "exe_look", Integration: "claude-code", Calls: &zero},
		{Time: "2026-01-01T00:00:03Z", Event: audit.EventTurnOpened, ExecutionID: "exe_act", Integration: "claude-code"},
		{Time: "2026-01-01T00:00:04Z", Event: audit.EventToolInvoked, ExecutionID: "exe_act", Integration: "claude-code", Seq: 1, CallID: "c1", Tool: "files.read", Status: "succeeded"},
		{Time: "2026-01-01T00:00:05Z", Event: audit.EventTurnClosed, ExecutionID: "exe_act", Integration: "claude-code", Calls: &one},
	})
	code, stdout, stderr := runCLI(t, "audit", "--file", path, "--calls")
	if code != 0 || strings.Contains(stdout, "exe_look") || !strings.Contains(stdout, "exe_act") || !strings.Contains(stdout, "config.loaded") || !strings.Contains(stdout, "1 call\n") {
		t.Errorf("audit --calls: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, _ = runCLI(t, "audit", "--file", path, "--calls", "--json")
	if code != 0 || strings.Count(stdout, "\n") != 4 {
		t.Errorf("audit --calls --json: exit %d\n%s", code, stdout)
	}
}
