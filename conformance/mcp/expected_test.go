package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var testSets = []string{"2025-11-25", "2026-07-28"}

// TestCommittedExpectedFailures reads the file the runner uses: a typo in
// a key, a kind or a set fails here, without npm.
func TestCommittedExpectedFailures(t *testing.T) {
	got, err := loadExpected("expected-failures.toml", testSets)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 {
		t.Fatal("no expected failures: the file is empty or was not read")
	}
	for k, why := range got {
		if why.Reason == "" || kinds[why.Kind] == "" {
			t.Errorf("%s: kind %q, reason %q", k, why.Kind, why.Reason)
		}
	}
}

func TestParseExpectedRefusesWhatCannotBeTrue(t *testing.T) {
	for _, tc := range []struct {
		name, file, want string
	}{
		{"an unknown kind", `[[failure]]
kind = "flaky"
reason = "r"
checks = ["2025-11-25 ping:ping"]`, `unknown kind "flaky"`},
		{"no reason", `[[failure]]
kind = "fixture"
reason = "  "
checks = ["2025-11-25 ping:ping"]`, "no reason"},
		{"no checks", `[[failure]]
kind = "fixture"
reason = "r"`, "no checks"},
		{"a key without a set", `[[failure]]
kind = "fixture"
reason = "r"
checks = ["ping:ping"]`, `is not "<set> <scenario>:<check id>"`},
		{"a key with a space after the colon", `[[failure]]
kind = "fixture"
reason = "r"
checks = ["2025-11-25 ping: ping"]`, `is not "<set> <scenario>:<check id>"`},
		{"a set the suite does not have", `[[failure]]
kind = "fixture"
reason = "r"
checks = ["2024-11-05 ping:ping"]`, `names requirement set "2024-11-05"`},
		{"a check listed twice", `[[failure]]
kind = "fixture"
reason = "r"
checks = ["2025-11-25 ping:ping"]
[[failure]]
kind = "bridge"
reason = "s"
checks = ["2025-11-25 ping:ping"]`, "listed twice"},
		{"a field the runner does not read", `[[failure]]
kind = "fixture"
reason = "r"
check = ["2025-11-25 ping:ping"]`, "check"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseExpected([]byte(tc.file), testSets)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestJudge(t *testing.T) {
	c := func(set, scenario, id, status string) check {
		return check{Set: set, Scenario: scenario, ID: id, Status: status, Message: id + " said so"}
	}
	checks := []check{
		c("2025-11-25", "ping", "ping", statusSuccess),
		c("2025-11-25", "prompts-list", "prompts-list", statusFailure), // listed
		c("2025-11-25", "tools-call-image", "tools-call-image", statusFailure),
		c("2025-11-25", "fixed", "now-passes", statusSuccess),
		c("2025-11-25", "fixed", "now-warns", statusWarning),
		c("2025-11-25", "fixed", "now-skipped", statusSkipped),
		c("2025-11-25", "server-initialize", "server-info", statusInfo),
	}
	why := expectation{Kind: "not-offered", Reason: "r"}
	expected := map[string]expectation{
		"2025-11-25 prompts-list:prompts-list": why,
		"2025-11-25 fixed:now-passes":          why,
		"2025-11-25 fixed:now-warns":           why,
		"2025-11-25 fixed:now-skipped":         why,
		"2025-11-25 gone:gone":                 why,
		"2026-07-28 prompts-list:prompts-list": why, // its set did not run
	}
	v := judge(checks, expected, []string{"2025-11-25"})
	if v.Passed != 2 {
		t.Errorf("passed %d, want 2", v.Passed)
	}
	if len(v.Expected) != 1 || v.Expected[0].Check.Scenario != "prompts-list" {
		t.Errorf("expected %+v, want prompts-list only", v.Expected)
	}
	if len(v.Unexpected) != 1 || v.Unexpected[0].Scenario != "tools-call-image" {
		t.Errorf("unexpected %+v, want tools-call-image only", v.Unexpected)
	}
	var stale []string
	for _, s := range v.Stale {
		stale = append(stale, s.Key+" "+s.Saw)
	}
	want := []string{
		"2025-11-25 fixed:now-passes SUCCESS",
		"2025-11-25 fixed:now-skipped SKIPPED",
		"2025-11-25 fixed:now-warns WARNING",
		"2025-11-25 gone:gone absent",
	}
	if !slices.Equal(stale, want) {
		t.Errorf("stale %q, want %q", stale, want)
	}
	if v.ok() {
		t.Error("ok with an unexpected failure and stale entries")
	}
	if v := judge(checks[:2], map[string]expectation{"2025-11-25 prompts-list:prompts-list": why}, []string{"2025-11-25"}); !v.ok() {
		t.Errorf("not ok when every failure is listed and fails: %+v", v)
	}
}

func TestReadResults(t *testing.T) {
	dir := t.TempDir()
	write := func(scenario string, checks []suiteCheck) {
		d := filepath.Join(dir, "server-"+scenario+"-2026-12-01T09-20-28-148Z")
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(checks)
		if err := os.WriteFile(filepath.Join(d, "checks.json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("tools-list", []suiteCheck{
		{ID: "tools-list", Status: statusSuccess},
		{ID: "wire-schema-valid", Status: statusSuccess},
		{ID: "wire-schema-valid", Status: statusFailure, ErrorMessage: "second message bad"},
		{ID: "wire-schema-valid", Status: statusWarning},
	})
	write("added-later", []suiteCheck{{ID: "x", Status: statusSuccess}})
	req := requirements{Set: "2025-11-25", Scored: []string{"tools-list", "ping"}, NotScored: []notScored{{Scenario: "json-schema-2020-12", Reason: "pending"}}}
	got, err := readResults(dir, req)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, c := range got {
		keys = append(keys, c.key()+" "+c.Status)
	}
	want := []string{
		"2025-11-25 tools-list:tools-list SUCCESS",
		"2025-11-25 tools-list:wire-schema-valid FAILURE", // the most severe occurrence
		"2025-11-25 ping:result FAILURE",                  // no results: a failure, not nothing
		"2025-11-25 json-schema-2020-12:result FAILURE",
		"2025-11-25 added-later:x SUCCESS",
	}
	if !slices.Equal(keys, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(keys, "\n"), strings.Join(want, "\n"))
	}

	write("bad", []suiteCheck{{ID: "x", Status: "MAYBE"}})
	if _, err := readResults(dir, req); err == nil || !strings.Contains(err.Error(), `status "MAYBE"`) {
		t.Errorf("a status the runner does not know: got %v", err)
	}
}

func TestSSEMessages(t *testing.T) {
	body := "id: 1\nretry: 500\ndata: \n\nevent: message\nid: 2\ndata: {\"jsonrpc\":\"2.0\",\n" +
		"data: \"id\":1,\"result\":{}}\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n"
	got, err := sseMessages([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !json.Valid(got[0]) || !bytes.Contains(got[1], []byte("progress")) {
		t.Fatalf("got %q", got)
	}
	if _, err := sseMessages([]byte("data: {not json\n\n")); err == nil {
		t.Error("event data that is not JSON was accepted")
	}
}

// TestRelayRecordsBeforePassingOn pins what the probe relies on: every
// line, the last one without a newline too, is in the wire log by the time
// the other side can read it, and reaches it byte for byte.
func TestRelayRecordsBeforePassingOn(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "child-1.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := &wireLog{f: f}
	in := "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r\nnot json\n{\"id\":2}"
	dst := &checkingWriter{t: t, log: f}
	relay(strings.NewReader(in), dst, w, "client")
	if dst.String() != in {
		t.Errorf("passed on %q, want %q", dst.String(), in)
	}
	children, err := readWire(filepath.Dir(f.Name()))
	if err != nil {
		t.Fatal(err)
	}
	rs := children[0].Records
	if len(rs) != 3 || string(rs[0].Msg) != `{"jsonrpc":"2.0","id":1,"method":"ping"}` || rs[1].Line != "not json" || string(rs[2].Msg) != `{"id":2}` {
		t.Errorf("records %+v", rs)
	}
}

// checkingWriter fails the test if a line arrives before its record.
type checkingWriter struct {
	bytes.Buffer
	t      *testing.T
	log    *os.File
	writes int
}

func (c *checkingWriter) Write(p []byte) (int, error) {
	c.writes++
	data, _ := os.ReadFile(c.log.Name())
	if n := strings.Count(string(data), "\n"); n < c.writes {
		c.t.Errorf("line %d passed on with %d records in the log", c.writes, n)
	}
	return c.Buffer.Write(p)
}

func TestSessionsPerChild(t *testing.T) {
	rec := func(from, msg string) wireRecord { return wireRecord{From: from, Msg: json.RawMessage(msg)} }
	initialize := rec("client", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)
	children := []wireChild{
		{File: "child-a.jsonl", Records: []wireRecord{initialize, rec("shim", `{"jsonrpc":"2.0","id":1,"result":{}}`)}},
		{File: "child-b.jsonl", Records: []wireRecord{rec("client", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)}},
	}
	legacy, modern, err := sessionsPerChild(children)
	if err != nil || legacy != 1 || modern != 1 {
		t.Fatalf("got %d, %d, %v", legacy, modern, err)
	}
	children[0].Records = append(children[0].Records, initialize)
	if _, _, err := sessionsPerChild(children); err == nil || !strings.Contains(err.Error(), "child-a.jsonl") {
		t.Fatalf("a shim process that served two sessions: got %v", err)
	}
}
