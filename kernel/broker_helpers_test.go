package kernel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sharedos/sharedos-mcp/internal/testupstream"
	"github.com/sharedos/sharedos-mcp/kernel/config"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
	"github.com/sharedos/sharedos-mcp/policy"
)

// upstreamDeadline bounds every wait for an upstream process; it is
// generous because the machine is slow and shared, and is never the
// expected outcome.
const upstreamDeadline = 60 * time.Second

// testUpstream is the test upstream of internal/testupstream run by a
// kernel under the name "test": this test binary, which records each call
// it receives in record.
type testUpstream struct {
	t        *testing.T
	record   string
	stateDir string
	events   *eventLog
}

// eventLog keeps the upstream events a kernel reports, and lets a test
// wait for one.
type eventLog struct {
	mu    sync.Mutex
	items []upstream.Event
	wake  chan struct{}
}

func newEventLog() *eventLog { return &eventLog{wake: make(chan struct{})} }

func (l *eventLog) add(ev upstream.Event) {
	l.mu.Lock()
	l.items = append(l.items, ev)
	close(l.wake)
	l.wake = make(chan struct{})
	l.mu.Unlock()
}

// waitFrom returns the index of the first event at from or later that
// matches.
func (l *eventLog) waitFrom(t testing.TB, from int, what string, match func(upstream.Event) bool) int {
	t.Helper()
	timer := time.NewTimer(upstreamDeadline)
	defer timer.Stop()
	for {
		l.mu.Lock()
		for i := from; i < len(l.items); i++ {
			if match(l.items[i]) {
				l.mu.Unlock()
				return i
			}
		}
		from = max(from, len(l.items))
		wake := l.wake
		l.mu.Unlock()
		select {
		case <-wake:
		case <-timer.C:
			t.Fatalf("no %s within %v", what, upstreamDeadline)
		}
	}
}

func (l *eventLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.items)
}

// ready waits for upstream name to be ready at event from or later and
// returns the index after that event.
func (l *eventLog) ready(t testing.TB, from int, name string) int {
	t.Helper()
	return 1 + l.waitFrom(t, from, name+" ready", func(e upstream.Event) bool {
		return e.Kind == upstream.EventState && e.Upstream == name && e.Status.State == upstream.StateReady
	})
}

// stderrLog collects the upstream stderr lines a kernel logs, and lets a
// test wait for one.
type stderrLog struct {
	mu    sync.Mutex
	lines []string
	wake  chan struct{}
}

func newStderrLog() *stderrLog { return &stderrLog{wake: make(chan struct{})} }

func (l *stderrLog) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(p, []byte("\n")) {
		var m struct{ Message, Line string }
		if json.Unmarshal(line, &m) != nil || m.Message != "upstream stderr" {
			continue
		}
		l.mu.Lock()
		l.lines = append(l.lines, strings.TrimSpace(m.Line))
		close(l.wake)
		l.wake = make(chan struct{})
		l.mu.Unlock()
	}
	return len(p), nil
}

// wait waits for the upstream to have printed line on its stderr.
func (l *stderrLog) wait(t *testing.T, line string) {
	t.Helper()
	timer := time.NewTimer(upstreamDeadline)
	defer timer.Stop()
	for {
		l.mu.Lock()
		found, wake := slices.Contains(l.lines, line), l.wake
		l.mu.Unlock()
		if found {
			return
		}
		select {
		case <-wake:
		case <-timer.C:
			t.Fatalf("the upstream never printed %q on stderr", line)
		}
	}
}

// logStderr makes the kernel log into l.
func logStderr(l *stderrLog) func(*Server) {
	return func(s *Server) { s.Log = zerolog.New(l) }
}

// upstreamSpecs parses [[upstream]] tables as the kernel's config would.
func upstreamSpecs(t testing.TB, doc string) []upstream.Spec {
	t.Helper()
	c, err := config.Parse("test.toml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return c.Upstreams
}

// testUpstreamTable is the [[upstream]] table of the test upstream named
// name, recording into record, with extra keys and [[upstream.tool]]
// tables and flags for the server.
func testUpstreamTable(t testing.TB, name, record, extra string, flags ...string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	argv := append(testupstream.Command(exe, "-record", record), flags...)
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	// Under the race detector a process sleeps a second before it exits
	// unless told otherwise; extra that sets env must say that too.
	env := "env = { GORACE = \"atexit_sleep_ms=0\" }\n"
	if strings.HasPrefix(extra, "env =") {
		env = ""
	}
	return fmt.Sprintf("[[upstream]]\nname = %q\ncommand = [%s]\n%s%s\n", name, strings.Join(quoted, ", "), env, extra)
}

// withTestUpstream makes a kernel run the test upstream as "test", with
// extra configuration and server flags, and a state directory of its own
// (or dir, when not "").
func withTestUpstream(t *testing.T, u *testUpstream, extra string, flags ...string) func(*Server) {
	t.Helper()
	if u.record == "" {
		u.record = filepath.Join(t.TempDir(), "calls.jsonl")
	}
	if u.stateDir == "" {
		u.stateDir = filepath.Join(t.TempDir(), "state")
	}
	if u.events == nil {
		u.events = newEventLog()
	}
	u.t = t
	specs := upstreamSpecs(t, testUpstreamTable(t, "test", u.record, extra, flags...))
	return func(s *Server) {
		s.Upstreams = specs
		s.StateDir = u.stateDir
		s.upstreamEvents = u.events.add
	}
}

// calls returns the calls that reached the upstream, by tool name.
func (u *testUpstream) calls() []string {
	u.t.Helper()
	rec, err := testupstream.ReadRecord(u.record)
	if err != nil {
		u.t.Fatal(err)
	}
	var names []string
	for _, r := range rec {
		names = append(names, r.Tool)
	}
	return names
}

// arguments returns what the upstream received for its calls of tool.
func (u *testUpstream) arguments(tool string) []string {
	u.t.Helper()
	rec, err := testupstream.ReadRecord(u.record)
	if err != nil {
		u.t.Fatal(err)
	}
	var out []string
	for _, r := range rec {
		if r.Tool == tool {
			out = append(out, string(r.Arguments))
		}
	}
	return out
}

// startBrokered starts a kernel with the test upstream and waits for it
// to be ready.
func startBrokered(t *testing.T, grants []policy.Grant, extra string, opts ...func(*Server)) (*kernelHarness, *testUpstream) {
	t.Helper()
	u := &testUpstream{}
	h := startKernel(t, grants, append([]func(*Server){withTestUpstream(t, u, extra)}, opts...)...)
	u.events.ready(t, 0, "test")
	return h, u
}

// names returns the listed tools' names.
func names(defs []toolDef) []string {
	var out []string
	for _, d := range defs {
		out = append(out, d.Name)
	}
	return out
}

func hasName(defs []toolDef, name string) bool { return slices.Contains(names(defs), name) }

// contentText returns the text of the first content block of a result.
func contentText(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var blocks []struct{ Type, Text string }
	if err := json.Unmarshal(raw, &blocks); err != nil || len(blocks) == 0 {
		t.Fatalf("content %s: want text blocks (%v)", raw, err)
	}
	return blocks[0].Text
}
