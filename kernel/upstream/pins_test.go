package upstream

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func def(t *testing.T, name, description string) *definition {
	t.Helper()
	d, err := newDefinition(&mcp.Tool{Name: name, Description: description, InputSchema: map[string]any{"type": "object"}})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func stateDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "state")
	return dir
}

var now = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

func TestDefinitionHashIsTheCanonicalJSONOfTheFiveFields(t *testing.T) {
	d, err := newDefinition(&mcp.Tool{
		Name: "t", Description: "d", Title: "not pinned", Meta: mcp.Meta{"x": "not pinned"},
		InputSchema:  map[string]any{"type": "object", "properties": map[string]any{"b": map[string]any{"minimum": 1.0, "minLength": 2.0}}},
		OutputSchema: map[string]any{"type": "object"},
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true, Title: "T"},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Keys in CLDR root collation (minimum before minLength), no
	// whitespace, as docs/catalog-hash.md defines.
	want := `{"annotations":{"idempotentHint":false,"readOnlyHint":true,"title":"T"},"description":"d","inputSchema":{"properties":{"b":{"minimum":1,"minLength":2}},"type":"object"},"name":"t","outputSchema":{"type":"object"}}`
	if string(d.canonical) != want {
		t.Errorf("canonical definition:\n got %s\nwant %s", d.canonical, want)
	}
	if len(d.sha) != 64 {
		t.Errorf("sha %q", d.sha)
	}
	// The same definition, written in another order, hashes the same.
	again, err := newDefinition(&mcp.Tool{
		Name: "t", Description: "d",
		InputSchema:  map[string]any{"type": "object", "properties": map[string]any{"b": map[string]any{"minLength": 2.0, "minimum": 1.0}}},
		OutputSchema: map[string]any{"type": "object"},
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true, Title: "T"},
	})
	if err != nil || again.sha != d.sha {
		t.Errorf("the same definition hashes %s, then %s (%v)", d.sha, again.sha, err)
	}
	if def(t, "t", "d").sha == def(t, "t", "d2").sha {
		t.Error("a different description hashes the same")
	}
}

func TestPinsFirstSightPinsAChangeIsPendingAndTheFileSurvives(t *testing.T) {
	dir := stateDir(t)
	s, err := openPins(dir)
	if err != nil {
		t.Fatal(err)
	}
	v1, v2, v3 := def(t, "echo", "one"), def(t, "echo", "two"), def(t, "echo", "three")
	changes, err := s.observe("up", []*definition{v1}, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 || changes[0].kind != EventToolPinned || changes[0].hash != v1.sha {
		t.Fatalf("first sight: %+v", changes)
	}
	if ok, _ := s.verdict("up", v1); !ok {
		t.Error("the pinned definition is not publishable")
	}
	if changes, _ := s.observe("up", []*definition{v1}, now); len(changes) != 0 {
		t.Errorf("seeing the pinned definition again changed %+v", changes)
	}
	changes, err = s.observe("up", []*definition{v2}, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 || changes[0].kind != EventToolQuarantined || changes[0].previous != v1.sha || !reflect.DeepEqual(changes[0].changed, []string{"description"}) {
		t.Fatalf("a changed definition: %+v", changes)
	}
	if ok, pinned := s.verdict("up", v2); ok || pinned == nil || pinned.SHA256 != v1.sha {
		t.Errorf("the changed definition: ok %v pinned %+v", ok, pinned)
	}
	if changes, _ := s.observe("up", []*definition{v2}, now); len(changes) != 0 {
		t.Errorf("the same pending definition was reported again: %+v", changes)
	}
	if changes, _ := s.observe("up", []*definition{v3}, now); len(changes) != 1 || changes[0].hash != v3.sha {
		t.Errorf("a third definition: %+v", changes)
	}
	// A new store on the same directory, as after a restart.
	again, err := openPins(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ok, pinned := again.verdict("up", v3); ok || pinned.SHA256 != v1.sha {
		t.Errorf("after a restart: ok %v pinned %+v", ok, pinned)
	}
	q, err := Quarantined(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(q) != 1 || q[0].Tool != "echo" || q[0].Pending != v3.sha || q[0].Pinned != v1.sha || !reflect.DeepEqual(q[0].Changed, []string{"description"}) {
		t.Errorf("Quarantined = %+v", q)
	}
	// Back to the pinned definition: nothing is pending any more.
	if _, err := again.observe("up", []*definition{v1}, now); err != nil {
		t.Fatal(err)
	}
	if q, _ := Quarantined(dir); len(q) != 0 {
		t.Errorf("still quarantined after returning to the pin: %+v", q)
	}
}

func TestApprove(t *testing.T) {
	dir := stateDir(t)
	s, err := openPins(dir)
	if err != nil {
		t.Fatal(err)
	}
	a1, a2, b1, b2, c := def(t, "a", "1"), def(t, "a", "2"), def(t, "b", "1"), def(t, "b", "2"), def(t, "c", "1")
	if _, err := s.observe("up", []*definition{a1, b1, c}, now); err != nil {
		t.Fatal(err)
	}
	if _, err := Approve(dir, "up", "a", "", now); !errors.Is(err, ErrNothingPending) {
		t.Errorf("approving a tool at its pin: %v, want ErrNothingPending", err)
	}
	if _, err := s.observe("up", []*definition{a2, b2, c}, now); err != nil {
		t.Fatal(err)
	}
	if _, err := Approve(dir, "other", "", "", now); !errors.Is(err, ErrUnknownUpstream) {
		t.Errorf("an unknown upstream: %v", err)
	}
	if _, err := Approve(dir, "up", "zzz", "", now); !errors.Is(err, ErrUnknownTool) {
		t.Errorf("an unknown tool: %v", err)
	}
	got, err := Approve(dir, "up", "a", "", now)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Tool != "a" || got[0].Previous != a1.sha || got[0].Hash != a2.sha || !reflect.DeepEqual(got[0].Changed, []string{"description"}) {
		t.Errorf("Approve(a) = %+v", got)
	}
	// The running store sees the approval on its next refresh, but
	// publishes it only once a kernel has recorded it; b is still
	// quarantined.
	if err := s.refresh(); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.verdict("up", a2); ok {
		t.Error("an approval no kernel has recorded is publishable")
	}
	pending := s.unrecorded("up")
	if len(pending) != 1 || pending[0].Tool != "a" || pending[0].Reason != ReasonApproved || pending[0].Previous != a1.sha ||
		pending[0].Hash != a2.sha || !reflect.DeepEqual(pending[0].Changed, []string{"description"}) {
		t.Fatalf("unrecorded = %+v", pending)
	}
	if err := s.markRecorded(pending[0]); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.verdict("up", a2); !ok {
		t.Error("the approved and recorded definition is not publishable")
	}
	if got := s.unrecorded("up"); len(got) != 0 {
		t.Errorf("unrecorded after marking = %+v", got)
	}
	if ok, _ := s.verdict("up", b2); ok {
		t.Error("b was approved with a")
	}
	got, err = Approve(dir, "up", "", "", now)
	if err != nil || len(got) != 1 || got[0].Tool != "b" {
		t.Errorf("Approve(all) = %+v, %v", got, err)
	}
	if _, err := Approve(dir, "up", "", "", now); !errors.Is(err, ErrNothingPending) {
		t.Errorf("approving all again: %v", err)
	}
}

func TestPinsAreWrittenPrivatelyAndRefusedWhenNot(t *testing.T) {
	dir := stateDir(t)
	s, err := openPins(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.observe("up", []*definition{def(t, "a", "1")}, now); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, PinsFile): 0o600} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s has mode %v, want %v", p, fi.Mode().Perm(), want)
		}
	}
	// Whoever can write the pins can approve anything.
	if err := os.Chmod(filepath.Join(dir, PinsFile), 0o620); err != nil {
		t.Fatal(err)
	}
	if _, err := openPins(dir); !errors.Is(err, ErrUnsafePins) {
		t.Errorf("a group-writable pins file: %v, want ErrUnsafePins", err)
	}
	if err := os.Chmod(filepath.Join(dir, PinsFile), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := openPins(dir); !errors.Is(err, ErrUnsafePins) {
		t.Errorf("a world-writable state directory: %v, want ErrUnsafePins", err)
	}
	if _, err := Approve(dir, "up", "", "", now); !errors.Is(err, ErrUnsafePins) {
		t.Errorf("Approve in a world-writable directory: %v, want ErrUnsafePins", err)
	}
}

func TestPinsFileThatCannotBeReadIsAnError(t *testing.T) {
	dir := stateDir(t)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"not JSON":        "{",
		"another version": `{"version":2,"upstreams":{}}`,
		"an unknown key":  `{"version":1,"upstreams":{},"approved":true}`,
	} {
		if err := os.WriteFile(filepath.Join(dir, PinsFile), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := openPins(dir); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestObserveAndApproveDoNotLoseEachOther runs a kernel recording new
// tools while approvals are written, each from a fresh read under the
// lock: every tool ends up pinned and every approval stays.
func TestObserveAndApproveDoNotLoseEachOther(t *testing.T) {
	dir := stateDir(t)
	s, err := openPins(dir)
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	olds, news := make([]*definition, n), make([]*definition, n)
	for i := range n {
		name := string(rune('a' + i))
		olds[i], news[i] = def(t, name, "old"), def(t, name, "new")
	}
	if _, err := s.observe("up", olds, now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.observe("up", news, now); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if _, err := Approve(dir, "up", news[i].name, "", now); err != nil {
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			if _, err := s.observe("other", []*definition{def(t, news[i].name, "x")}, now); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if err := s.refresh(); err != nil {
		t.Fatal(err)
	}
	if got := s.unrecorded("up"); len(got) != n {
		t.Fatalf("%d approvals to record, want %d", len(got), n)
	}
	for _, ev := range s.unrecorded("up") {
		if err := s.markRecorded(ev); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		if ok, _ := s.verdict("up", news[i]); !ok {
			t.Errorf("approval of %s was lost", news[i].name)
		}
		if ok, _ := s.verdict("other", def(t, news[i].name, "x")); !ok {
			t.Errorf("pin of other.%s was lost", news[i].name)
		}
	}
}

func TestChangedFields(t *testing.T) {
	a := json.RawMessage(`{"description":"x","inputSchema":{"type":"object"},"name":"t"}`)
	b := json.RawMessage(`{"annotations":{"readOnlyHint":true},"description":"x","inputSchema":{"properties":{},"type":"object"},"name":"t"}`)
	if got := changedFields(a, b); !reflect.DeepEqual(got, []string{"inputSchema", "annotations"}) {
		t.Errorf("changedFields = %q", got)
	}
	if got := changedFields(a, a); got != nil {
		t.Errorf("changedFields of equal definitions = %q", got)
	}
}

func TestDefaultStateDir(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if d, _ := DefaultStateDir(env(map[string]string{"XDG_STATE_HOME": "/x", "HOME": "/h"})); d != "/x/sharedos" {
		t.Errorf("with XDG_STATE_HOME: %q", d)
	}
	if d, _ := DefaultStateDir(env(map[string]string{"HOME": "/h"})); d != "/h/.local/state/sharedos" {
		t.Errorf("with HOME only: %q", d)
	}
	if _, err := DefaultStateDir(env(nil)); err == nil {
		t.Error("no error without HOME")
	}
}

// TestApproveOnlyWhatWasReviewed (issue 24, finding 3): definition B is
// pending and reviewed; the upstream switches to C before the approval.
// Approving B by its hash refuses, names C's hash and what differs, and
// pins nothing; C is approved only by its own hash.
func TestApproveOnlyWhatWasReviewed(t *testing.T) {
	dir := stateDir(t)
	s, err := openPins(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := def(t, "a", "1"), def(t, "a", "2"), def(t, "a", "3")
	for _, d := range []*definition{a, b, c} {
		if _, err := s.observe("up", []*definition{d}, now); err != nil {
			t.Fatal(err)
		}
		if d == b {
			// Reviewed here, as doctor shows it.
			q, err := Quarantined(dir)
			if err != nil || len(q) != 1 || q[0].Pending != b.sha {
				t.Fatalf("Quarantined = %+v, %v", q, err)
			}
		}
	}
	_, err = Approve(dir, "up", "a", b.sha[:12], now)
	var nr *NotReviewedError
	if !errors.As(err, &nr) || !errors.Is(err, ErrNotReviewed) || nr.Pending != c.sha || !reflect.DeepEqual(nr.Changed, []string{"description"}) {
		t.Fatalf("approving B while C is pending: %v (%+v)", err, nr)
	}
	if q, _ := Quarantined(dir); len(q) != 1 || q[0].Pending != c.sha || q[0].Pinned != a.sha {
		t.Fatalf("after the refusal: %+v, want C still pending over A", q)
	}
	for _, bad := range []struct{ tool, sha string }{{"a", c.sha[:11]}, {"", c.sha}} {
		if _, err := Approve(dir, "up", bad.tool, bad.sha, now); err == nil {
			t.Errorf("Approve(%q, %q) accepted", bad.tool, bad.sha)
		}
	}
	got, err := Approve(dir, "up", "a", c.sha[:12], now)
	if err != nil || len(got) != 1 || got[0].Hash != c.sha {
		t.Fatalf("approving C by its hash = %+v, %v", got, err)
	}
	if got, err := Approve(dir, "up", "a", c.sha, now); !errors.Is(err, ErrNothingPending) {
		t.Errorf("approving C again = %+v, %v", got, err)
	}
}
