package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos-mcp/kernel"
)

// writeAuditLog writes events through the kernel's own writer, plus a
// line cut short as a crash would leave it.
func writeAuditLog(t *testing.T, evs []kernel.Event) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a, err := kernel.OpenAuditLog(path)
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
	return writeAuditLog(t, []kernel.Event{
		{Time: at(3 * time.Hour), Event: kernel.EventTurnOpened, ExecutionID: "exe_1", Integration: "cc"},
		{Time: at(3 * time.Hour), Event: kernel.EventToolInvoked, ExecutionID: "exe_1", Integration: "cc", Tool: "files.read", Resource: "files:/a", Status: "succeeded"},
		{Time: at(2 * time.Hour), Event: kernel.EventTurnOpened, ExecutionID: "exe_2", Integration: "codex"},
		{Time: at(2 * time.Hour), Event: kernel.EventToolInvoked, ExecutionID: "exe_2", Integration: "codex", Tool: "files.write", Resource: "files:/b", Status: "denied", Code: "no_matching_grant"},
		{Time: at(time.Hour), Event: kernel.EventTurnOpened, ExecutionID: "exe_3", Integration: "cc-2"},
		{Time: at(time.Hour), Event: kernel.EventTurnRefused, ExecutionID: "exe_4", Reason: "uid 4242 is not served"},
		{Time: at(time.Minute), Event: kernel.EventToolInvoked, ExecutionID: "exe_5", Integration: "cc", Tool: "files.read\x1b[31m\tx", Resource: "files:/c", Status: "denied", Code: "tool_unavailable"},
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
	if !strings.Contains(stderr, "skipped 1 unreadable line") {
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
