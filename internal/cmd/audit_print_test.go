package cmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos-mcp/kernel/audit"
)

// TestAuditJSONIsTerminalSafe: audit --json prints what a client sent
// with its C1 controls, DEL and bidi overrides escaped, as valid JSON
// with the same values; a line the kernel wrote comes out as stored, so
// it still hashes to the next line's prev.
func TestAuditJSONIsTerminalSafe(t *testing.T) {
	hostile := "a\u009b31m\u202egnp.exe\u2066\x7fz\u200d\U000e0041"
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a, err := audit.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ev := audit.Event{
		Time: audit.Stamp(time.Now()), Event: audit.EventToolInvoked, ExecutionID: "exe_0123456789abcdef", Integration: "claude-code",
		Peer: audit.Peer{UID: 1000, PID: 4242}, CallID: "c0", Tool: hostile, Resource: "files:/" + hostile, Action: "write", Status: "succeeded",
	}
	if err := a.Write(ev); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	// A line no kernel of this version wrote: the same strings raw.
	legacy := fmt.Sprintf(`{"time":%q,"event":"tool.invoked","executionId":"exe_2","integration":"cc","peer":{"uid":1,"pid":1},"tool":"%s"}`, audit.Stamp(time.Now()), hostile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, legacy)
	f.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	stored := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")

	in, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var out bytes.Buffer
	p := &auditPrinter{w: &out, json: true}
	if _, err := audit.Read(in, audit.Filter{}, p.print); err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(got) != 2 {
		t.Fatalf("%d lines out", len(got))
	}
	for _, r := range []rune{0x9b, 0x202e, 0x2066, 0x7f, 0x200d, 0xe0041} {
		if strings.ContainsRune(out.String(), r) {
			t.Errorf("audit --json printed %U raw", r)
		}
	}
	if got[0] != stored[0] {
		t.Errorf("the kernel's line was not printed as stored:\nstored %s\nout    %s", stored[0], got[0])
	}
	for i, l := range got {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %d is not one JSON object: %v", i+1, err)
		}
		if tool := m["tool"]; tool != hostile {
			t.Errorf("line %d: tool %q, want %q", i+1, tool, hostile)
		}
	}
}

// TestAuditFollowSizesItsColumnsOnTheEventsBefore: a follower writes
// each row as it comes, in the widths of the events already in the log,
// and a longer value later pushes its row right rather than being cut.
func TestAuditFollowSizesItsColumnsOnTheEventsBefore(t *testing.T) {
	var out bytes.Buffer
	p := &auditPrinter{w: &out, follow: true}
	ev := func(tool, resource string) audit.Event {
		return audit.Event{Time: "2026-06-01T10:00:00Z", Event: audit.EventToolInvoked, ExecutionID: "exe_1", Integration: "cc", Seq: 1, Tool: tool, Resource: resource, Status: "succeeded"}
	}
	if err := p.measure(ev("files.write", "files:/docs/drafts/plan.md"), nil); err != nil {
		t.Fatal(err)
	}
	for _, e := range []audit.Event{ev("files.read", "files:/a"), ev("files.read", "files:/a/much/longer/path/than/before.md")} {
		if err := p.print(e, nil); err != nil {
			t.Fatal(err)
		}
	}
	want := "TIME                  EXECUTION  SEQ  INTEGRATION  EVENT         TOOL         RESOURCE                    STATUS\n" +
		"2026-06-01T10:00:00Z  exe_1        1  cc           tool.invoked  files.read   files:/a                    succeeded\n" +
		"2026-06-01T10:00:00Z  exe_1        1  cc           tool.invoked  files.read   files:/a/much/longer/path/than/before.md  succeeded\n"
	if out.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", out.String(), want)
	}
}
