package audit

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var testLog = LogID{Host: "devbox", Path: "/home/me/.local/state/sharedos/audit.jsonl"}

// exportOf writes lines as an OpenTelemetry Collector's file exporter
// writes the records kernel/telemetry sends of them: one OTLP/JSON
// request per batch, each line the body, its hash and, on an event, its
// prev as attributes, the log named on the resource.
func exportOf(t *testing.T, id LogID, batches ...[]string) string {
	t.Helper()
	var out strings.Builder
	for _, batch := range batches {
		var records []any
		for _, l := range batch {
			attrs := []any{strAttr(AttrHash, sha(l)), strAttr("event", "x")}
			var e Event
			if json.Unmarshal([]byte(l), &e) == nil && e.Event != "" {
				attrs = append(attrs, strAttr(AttrPrev, e.Prev))
			}
			records = append(records, map[string]any{"timeUnixNano": "1", "body": map[string]any{"stringValue": l}, "attributes": attrs})
		}
		req := map[string]any{"resourceLogs": []any{map[string]any{
			"resource":  map[string]any{"attributes": []any{strAttr("service.name", "sharedos-kernel"), strAttr(AttrHost, id.Host), strAttr(AttrLog, id.Path)}},
			"scopeLogs": []any{map[string]any{"scope": map[string]any{"name": "sharedos"}, "logRecords": records}},
		}}}
		b, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		out.Write(append(b, '\n'))
	}
	return out.String()
}

func strAttr(k, v string) map[string]any {
	return map[string]any{"key": k, "value": map[string]any{"stringValue": v}}
}

func against(t *testing.T, local []string, export string) (Against, error) {
	t.Helper()
	text := ""
	if len(local) > 0 {
		text = strings.Join(local, "\n") + "\n"
	}
	return VerifyAgainst(strings.NewReader(text), strings.NewReader(export), testLog)
}

// TestVerifyAgainstAnExportedCopy: a local log that holds what was
// exported passes, also when the copy has duplicates (the export is at
// least once) and lags behind; every way a kernel-uid attacker can make a
// local log that verifies alone differ from what was exported is named at
// the first line where they differ.
func TestVerifyAgainstAnExportedCopy(t *testing.T) {
	_, lines := chainedLog(t, 6)
	whole := exportOf(t, testLog, lines[:3], lines[2:4], lines[4:])

	a, err := against(t, lines, whole)
	if err != nil {
		t.Fatalf("the log as exported: %v", err)
	}
	if !reflect.DeepEqual(a, Against{Lines: 6, Exported: 6, Records: 6, Duplicates: 1}) {
		t.Errorf("got %+v", a)
	}
	a, err = against(t, lines, exportOf(t, testLog, lines[:4]))
	if err != nil || a.NotYet != 2 || a.Exported != 4 {
		t.Errorf("a copy that lags two lines behind: %+v, %v; want NotYet 2", a, err)
	}

	// The same attacks as TestAKeptHeadCatchesARewrite, through the
	// kernel's own writer, so each rewritten log verifies alone.
	rewritten := func(n int, edit func(i int, e *Event)) []string {
		path := filepath.Join(t.TempDir(), "audit.jsonl")
		l := openLog(t, path)
		for i := range n {
			e := testEvent(i)
			edit(i, &e)
			if err := l.Write(e); err != nil {
				t.Fatal(err)
			}
		}
		l.Close()
		if _, err := verifyFile(t, path); err != nil {
			t.Fatalf("the rewritten log does not verify alone: %v", err)
		}
		return logLines(t, path)
	}
	// The original's times, so only the edit differs.
	var times []string
	for _, l := range lines {
		times = append(times, fields(t, l)["time"].(string))
	}
	same := func(i int, e *Event) { e.Time = times[i] }
	if got := rewritten(6, same); strings.Join(got, "\n") != strings.Join(lines, "\n") {
		t.Fatal("the writer does not reproduce the log; the attacks below would prove nothing")
	}

	tests := []struct {
		name  string
		local []string
		line  int
		says  string
	}{
		{"line 4 rewritten with everything after it", rewritten(6, func(i int, e *Event) {
			same(i, e)
			if i == 3 {
				e.Status, e.Code = "denied", "no_matching_grant"
			}
		}), 4, "another line after line 3"},
		{"the last two lines cut", lines[:4], 5, "cut from its end"},
		{"the first line rewritten, a fresh chain", rewritten(6, func(i int, e *Event) {
			same(i, e)
			if i == 0 {
				e.Integration = "someone-else"
			}
		}), 1, "another line"},
		{"a line removed in the middle and the chain rebuilt", rewritten(5, func(i int, e *Event) {
			if i >= 2 {
				i++
			}
			*e = testEvent(i)
			e.Time = times[i]
		}), 3, "another line after line 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := against(t, tt.local, whole)
			var br *ChainBreak
			if !errors.As(err, &br) || br.Line != tt.line || !strings.Contains(br.Reason, tt.says) {
				t.Fatalf("got %v; want a break at line %d that says %q", err, tt.line, tt.says)
			}
			// The attacker makes the kernel export the rewritten log too:
			// the copy keeps what it had, which is still the divergence.
			_, err = against(t, tt.local, whole+exportOf(t, testLog, tt.local))
			if !errors.As(err, &br) || br.Line != tt.line {
				t.Fatalf("with the rewritten log exported after the original: %v; want the break at line %d still", err, tt.line)
			}
		})
	}
}

func TestVerifyAgainstFollowsRotationsAndOtherLogs(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	l := openLog(t, path)
	writeEvents(t, l, 0, 3)
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	writeEvents(t, l, 3, 5) // the first of them rotates
	l.Close()
	old, cur := logLines(t, path+".1"), logLines(t, path)
	other := LogID{Host: "devbox", Path: "/srv/other.jsonl"}
	_, otherLines := chainedLog(t, 3)
	export := exportOf(t, testLog, old, cur) + exportOf(t, other, otherLines)

	a, err := against(t, cur, export)
	if err != nil {
		t.Fatalf("the file after a rotation, against a copy of both files: %v", err)
	}
	if a.Exported != len(cur) || len(a.Others) != 1 || a.Others[0] != other {
		t.Errorf("got %+v; want every line exported and the other log named", a)
	}
	if a, err := against(t, old, export); err != nil || a.Exported != len(old) {
		t.Errorf("the file rotated away, against the same copy: %+v, %v", a, err)
	}
	if _, err := VerifyAgainst(strings.NewReader(strings.Join(cur, "\n")+"\n"), strings.NewReader(exportOf(t, other, otherLines)), testLog); !errors.Is(err, ErrNoExport) {
		t.Errorf("a copy holding only another log: %v, want ErrNoExport", err)
	}
}

func TestVerifyAgainstRefusesACopyThatIsNotOne(t *testing.T) {
	_, lines := chainedLog(t, 2)
	forged := strings.Replace(exportOf(t, testLog, lines), `"stringValue":"{`, `"stringValue":"{ `, 1)
	var ee *ExportError
	if _, err := against(t, lines, forged); !errors.As(err, &ee) || ee.Line != 1 || !strings.Contains(ee.Reason, "does not hash") {
		t.Errorf("a record whose body is not its hash's line: %v", err)
	}
	if _, err := against(t, lines, "{not json\n"); !errors.As(err, &ee) {
		t.Errorf("a copy that is not JSON: %v", err)
	}
}

func TestCallsOnlyHidesTurnsThatOnlyLooked(t *testing.T) {
	zero, two := 0, 2
	ev := func(exe, name string, fill func(*Event)) Event {
		e := Event{Event: name, ExecutionID: exe}
		if fill != nil {
			fill(&e)
		}
		return e
	}
	in := []Event{
		ev("", EventConfigLoaded, nil),
		ev("exe_look", EventTurnOpened, nil),
		ev("exe_call", EventTurnOpened, nil),
		ev("exe_look", EventCatalogListed, nil),
		ev("exe_call", EventCatalogListed, nil),
		ev("exe_call", EventToolInvoked, func(e *Event) { e.CallID, e.Seq = "c1", 1 }),
		ev("exe_look", EventTurnClosed, func(e *Event) { e.Calls = &zero }),
		ev("exe_refused", EventTurnRefused, nil),
		ev("exe_unrecorded", EventTurnOpened, nil),
		ev("exe_unrecorded", EventTurnClosed, func(e *Event) { e.Calls = &two }),
		ev("exe_call", EventTurnClosed, func(e *Event) { e.Calls = &two }),
		ev("exe_open", EventTurnOpened, nil),
	}
	var got []string
	c := NewCallsOnly(func(e Event, _ []byte) error {
		got = append(got, e.ExecutionID+" "+e.Event)
		return nil
	})
	for _, e := range in {
		if err := c.Event(e, nil); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		" config.loaded",
		"exe_call turn.opened", "exe_call tool.catalog.listed", "exe_call tool.invoked",
		"exe_refused turn.refused",
		"exe_unrecorded turn.opened", "exe_unrecorded turn.closed",
		"exe_call turn.closed",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("passed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestListsAreBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a := openLog(t, path)
	e := Event{Time: Stamp(time.Now()), Event: EventConfigLoaded, Added: make([]string, 100), Removed: []string{strings.Repeat("r", 300)}, Arguments: json.RawMessage(`"` + strings.Repeat("x", MaxArguments) + `"`)}
	for i := range e.Added {
		e.Added[i] = "grant " + strings.Repeat("g", i)
	}
	if err := a.Write(e); err != nil {
		t.Fatal(err)
	}
	a.Close()
	var got Event
	if err := json.Unmarshal([]byte(logLines(t, path)[0]), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Added) != maxListItems || got.Added[maxListItems-1] != "… and 69 more" || got.Added[1] != e.Added[1] {
		t.Errorf("added: %d items, last %q", len(got.Added), got.Added[len(got.Added)-1])
	}
	if len(got.Removed[0]) > maxListItem+len("…") || !strings.HasSuffix(got.Removed[0], "…") {
		t.Errorf("removed[0] is %d bytes", len(got.Removed[0]))
	}
	if got.Arguments != nil {
		t.Errorf("arguments over MaxArguments were kept")
	}
	if len(e.Added) != 100 {
		t.Error("Write changed the caller's list")
	}
}
