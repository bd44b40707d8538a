package e2e

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sharedos/sharedos-mcp/internal/testupstream"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
)

func TestAListChangeShowsInTheNextSnapshotOnly(t *testing.T) {
	f := newFixture(t, "", []upstream.Spec{spec(t, "test", "")}, nil)
	f.readyFrom(0, "test")
	before := f.m.Snapshot()
	echo := f.tool(before, "test.echo")
	mark := len(f.events.all())
	if _, err := f.call("test.change", `{}`); err != nil {
		t.Fatal(err)
	}
	f.events.waitFrom(t, mark, "the list change", func(e upstream.Event) bool { return e.Kind == upstream.EventToolsChanged })

	// The snapshot taken before is as it was.
	if echo.Description != testupstream.EchoDescription(0) || slices.ContainsFunc(before.Tools, func(t *upstream.Tool) bool { return t.Name == "test.added" }) {
		t.Errorf("the earlier snapshot changed: echo %q", echo.Description)
	}
	after := f.m.Snapshot()
	// A new tool is pinned on first sight and published; echo's new
	// description is not its pinned one: quarantined, with what changed.
	f.tool(after, "test.added")
	w := f.withheld(after, "test.echo")
	if w.Reason != upstream.ReasonQuarantined || !slices.Equal(w.Changed, []string{"description"}) || w.Pinned != echo.Hash || w.Hash == echo.Hash {
		t.Errorf("echo after the change: %+v", w)
	}
	kinds := map[string]string{}
	for _, e := range f.events.all()[mark:] {
		if e.Tool != "" {
			kinds[e.Tool] = e.Kind
		}
	}
	if kinds["added"] != upstream.EventToolPinned || kinds["echo"] != upstream.EventToolQuarantined {
		t.Errorf("events after the change: %v", kinds)
	}
	// The earlier snapshot's echo is not the definition the upstream
	// offers now: calling it is refused without reaching the upstream.
	_, err := f.m.Call(context.Background(), echo, forward(t, echo, `{"text":"x"}`), nil)
	callError(t, err, upstream.CodeToolUnavailable)

	// Approval pins the new definition; the running Manager sees it in
	// its next snapshot.
	got, err := upstream.Approve(f.dir, "test", "echo", "", time.Now())
	if err != nil || len(got) != 1 || got[0].Hash != w.Hash || got[0].Previous != echo.Hash {
		t.Fatalf("Approve = %+v, %v", got, err)
	}
	approved := f.tool(f.m.Snapshot(), "test.echo")
	if approved.Description != testupstream.EchoDescription(100) || approved.Hash != w.Hash {
		t.Errorf("after approval: %+v", approved)
	}
	if r, err := f.m.Call(context.Background(), approved, forward(t, approved, `{"text":"approved"}`), nil); err != nil || text(t, r) != "approved" {
		t.Errorf("calling the approved tool: %v, %v", r, err)
	}
}

func TestAChangedDefinitionStaysQuarantinedAcrossRestartsUntilApproved(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	run := func(variant string) (*fixture, *upstream.Snapshot) {
		f := newFixture(t, dir, []upstream.Spec{spec(t, "test", "", "-variant", variant)}, nil)
		f.readyFrom(0, "test")
		return f, f.m.Snapshot()
	}
	count := func(f *fixture, kind string) int {
		n := 0
		for _, e := range f.events.all() {
			if e.Kind == kind {
				n++
			}
		}
		return n
	}

	f1, s1 := run("0")
	first := f1.tool(s1, "test.echo")
	if n := count(f1, upstream.EventToolPinned); n != len(s1.Tools) {
		t.Errorf("first run pinned %d tools, published %d", n, len(s1.Tools))
	}
	f1.m.Close()

	// The kernel restarts and the upstream now describes echo otherwise.
	f2, s2 := run("1")
	w := f2.withheld(s2, "test.echo")
	if w.Reason != upstream.ReasonQuarantined || w.Pinned != first.Hash {
		t.Errorf("second run: %+v", w)
	}
	if count(f2, upstream.EventToolPinned) != 0 || count(f2, upstream.EventToolQuarantined) != 1 {
		t.Errorf("second run events: %+v", f2.events.all())
	}
	f2.m.Close()

	// Still quarantined after another restart, and reported once only.
	f3, s3 := run("1")
	f3.withheld(s3, "test.echo")
	if n := count(f3, upstream.EventToolQuarantined); n != 0 {
		t.Errorf("the same pending definition was reported again: %d events", n)
	}
	q, err := upstream.Quarantined(dir)
	if err != nil || len(q) != 1 || q[0].Tool != "echo" || !slices.Equal(q[0].Changed, []string{"description"}) {
		t.Errorf("Quarantined = %+v, %v", q, err)
	}
	if _, err := upstream.Approve(dir, "test", "", "", time.Now()); err != nil {
		t.Fatal(err)
	}
	if got := f3.tool(f3.m.Snapshot(), "test.echo"); got.Description != testupstream.EchoDescription(1) {
		t.Errorf("after approval: %q", got.Description)
	}
	f3.m.Close()

	f4, s4 := run("1")
	f4.tool(s4, "test.echo")
	if n := count(f4, upstream.EventToolQuarantined) + count(f4, upstream.EventToolPinned); n != 0 {
		t.Errorf("a restart after approval reported %d pin events", n)
	}
	if _, err := upstream.Approve(dir, "test", "echo", "", time.Now()); !errors.Is(err, upstream.ErrNothingPending) {
		t.Errorf("approving again: %v", err)
	}
}

func TestToolsThatCannotBePublishedSayWhy(t *testing.T) {
	f := newFixture(t, "", []upstream.Spec{spec(t, "test", `
[[upstream.tool]]
name = "nosuch"
[[upstream.tool]]
name = "get_repo"
resource = "/repos/{owner}/{name}"
[[upstream.tool]]
name = "huge"
resource = "/sizes/{bytes}"
[[upstream.tool]]
name = "echo"
action = "read"
resource = "/echo/{text}"
`, "-bad")}, nil)
	f.readyFrom(0, "test")
	snap := f.m.Snapshot()
	want := map[string]string{
		"test.nosuch":      upstream.ReasonNotOffered,
		"test.get_repo":    upstream.ReasonBadPlaceholder,
		"test.has space":   upstream.ReasonInvalidName,
		"test.undescribed": upstream.ReasonInvalidDefinition,
	}
	got := map[string]string{}
	for _, w := range snap.Withheld {
		got[w.Name] = w.Reason
		if w.Detail == "" {
			t.Errorf("%s is withheld without a word why", w.Name)
		}
	}
	for name, reason := range want {
		if got[name] != reason {
			t.Errorf("%s: withheld %q, want %q", name, got[name], reason)
		}
	}
	if len(got) != len(want) {
		t.Errorf("withheld %v, want %v", got, want)
	}
	// An integer and a string placeholder are both fine.
	f.tool(snap, "test.huge")
	if e := f.tool(snap, "test.echo"); e.Action != "read" || e.ReadWrite() != "read" {
		t.Errorf("echo %+v", e)
	}
	// The log says why, too.
	f.logs.waitFrom(t, 0, "a log line about get_repo", func(m map[string]any) bool {
		return m["message"] == "upstream tool not published" && m["tool"] == "get_repo" && m["reason"] == upstream.ReasonBadPlaceholder
	})
}
