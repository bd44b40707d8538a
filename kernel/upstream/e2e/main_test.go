// Package e2e tests the upstream package against real processes: the
// Go SDK server of internal/testupstream, run from this test binary, and
// the reference servers from npm. They live apart from the package's unit
// tests so that those run alone in a second.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pelletier/go-toml/v2"
	"github.com/rs/zerolog"

	"github.com/sharedos/sharedos-mcp/internal/testupstream"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
)

// exe is this test binary: the supervisor and the test upstream both run
// from it.
var exe string

func TestMain(m *testing.M) {
	upstream.MaybeSupervise()
	testupstream.MaybeRun()
	maybeMiniKernel()
	var err error
	if exe, err = os.Executable(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	testupstream.RemoveNPM()
	os.Exit(code)
}

// quickExit is given to every process this test binary starts: under
// the race detector a process otherwise sleeps a second before it exits.
const quickExit = "atexit_sleep_ms=0"

// deadline bounds every wait for something a subprocess does; it is
// generous because the machine is slow and shared, and is never the
// expected outcome.
const deadline = 60 * time.Second

// recorder keeps what arrives (events, log lines) and lets a test wait
// for one that matches.
type recorder[T any] struct {
	mu    sync.Mutex
	items []T
	wake  chan struct{} // closed when an item arrives
}

func newRecorder[T any]() *recorder[T] { return &recorder[T]{wake: make(chan struct{})} }

func (r *recorder[T]) add(v T) {
	r.mu.Lock()
	r.items = append(r.items, v)
	close(r.wake)
	r.wake = make(chan struct{})
	r.mu.Unlock()
}

// waitFrom returns the first item at index from or later that matches,
// and its index.
func (r *recorder[T]) waitFrom(t *testing.T, from int, what string, match func(T) bool) (T, int) {
	t.Helper()
	timer := time.NewTimer(deadline)
	defer timer.Stop()
	for {
		r.mu.Lock()
		for i := from; i < len(r.items); i++ {
			if match(r.items[i]) {
				v := r.items[i]
				r.mu.Unlock()
				return v, i
			}
		}
		from = max(from, len(r.items))
		wake := r.wake
		r.mu.Unlock()
		select {
		case <-wake:
		case <-timer.C:
			var zero T
			t.Fatalf("no %s within %v", what, deadline)
			return zero, 0
		}
	}
}

func (r *recorder[T]) all() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]T(nil), r.items...)
}

// logWriter turns the Manager's JSON log lines into recorded maps.
type logWriter struct{ r *recorder[map[string]any] }

func (w logWriter) Write(p []byte) (int, error) {
	sc := bufio.NewScanner(bytes.NewReader(p))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			w.r.add(m)
		}
	}
	return len(p), nil
}

type fixture struct {
	t      *testing.T
	m      *upstream.Manager
	dir    string
	events *recorder[upstream.Event]
	logs   *recorder[map[string]any]
}

// newFixture starts a Manager on specs with a fresh state directory
// (or dir, when given) and closes it when the test ends.
func newFixture(t *testing.T, dir string, specs []upstream.Spec, change func(*upstream.Options)) *fixture {
	t.Helper()
	if dir == "" {
		dir = filepath.Join(t.TempDir(), "state")
	}
	f := &fixture{t: t, dir: dir, events: newRecorder[upstream.Event](), logs: newRecorder[map[string]any]()}
	opts := upstream.Options{
		StateDir: dir,
		Log:      zerolog.New(logWriter{f.logs}).Level(zerolog.DebugLevel),
		OnEvent:  f.events.add,
		Backoff:  upstream.Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond},
	}
	if change != nil {
		change(&opts)
	}
	m, err := upstream.Start(specs, opts)
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	t.Cleanup(func() { m.Close() })
	return f
}

// spec is the test upstream named name, run with flags, configured with
// the extra TOML of its [[upstream.tool]] tables and its other keys.
func spec(t *testing.T, name, extra string, flags ...string) upstream.Spec {
	t.Helper()
	cfg := upstream.Config{Name: name, Command: testupstream.Command(exe, flags...)}
	if extra != "" {
		cfg = decodeOne(t, extra, cfg)
	}
	if cfg.Env == nil {
		cfg.Env = map[string]string{}
	}
	cfg.Env["GORACE"] = quickExit
	specs, err := upstream.Parse([]upstream.Config{cfg}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return specs[0]
}

// readyFrom waits for the upstream to become ready at event index from or
// later, and returns the index after that event.
func (f *fixture) readyFrom(from int, name string) int {
	f.t.Helper()
	_, i := f.events.waitFrom(f.t, from, name+" ready", func(e upstream.Event) bool {
		return e.Kind == upstream.EventState && e.Upstream == name && e.Status.State == upstream.StateReady
	})
	return i + 1
}

func (f *fixture) tool(snap *upstream.Snapshot, name string) *upstream.Tool {
	f.t.Helper()
	for _, t := range snap.Tools {
		if t.Name == name {
			return t
		}
	}
	f.t.Fatalf("%s is not published; withheld: %+v", name, snap.Withheld)
	return nil
}

func (f *fixture) withheld(snap *upstream.Snapshot, name string) upstream.Withheld {
	f.t.Helper()
	for _, w := range snap.Withheld {
		if w.Name == name {
			return w
		}
	}
	f.t.Fatalf("%s is not withheld; published: %d tools", name, len(snap.Tools))
	return upstream.Withheld{}
}

// allPinned checks that every tool of snap was pinned at first sight,
// each once.
func (f *fixture) allPinned(snap *upstream.Snapshot) {
	f.t.Helper()
	pinned := 0
	for _, e := range f.events.all() {
		if e.Kind == upstream.EventToolPinned {
			pinned++
		}
	}
	if pinned != len(snap.Tools) {
		f.t.Errorf("%d tools pinned, %d published", pinned, len(snap.Tools))
	}
}

// call calls a tool of a fresh snapshot.
func (f *fixture) call(name, args string) (*upstream.Result, error) {
	f.t.Helper()
	tl := f.tool(f.m.Snapshot(), name)
	return f.m.Call(context.Background(), tl, forward(f.t, tl, args), nil)
}

// forward resolves a call's arguments, as the kernel does before it
// authorizes and forwards them.
func forward(t testing.TB, tl *upstream.Tool, args string) upstream.Forward {
	t.Helper()
	_, fw, err := tl.Resolve(json.RawMessage(args))
	if err != nil {
		t.Fatalf("resolve %s %s: %v", tl.Name, args, err)
	}
	return fw
}

// text is the first text block of a result.
func text(t *testing.T, r *upstream.Result) string {
	t.Helper()
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(r.Content, &blocks); err != nil || len(blocks) == 0 {
		t.Fatalf("content %s: %v", r.Content, err)
	}
	return blocks[0].Text
}

func callError(t *testing.T, err error, code string) *upstream.CallError {
	t.Helper()
	ce, ok := err.(*upstream.CallError)
	if !ok {
		t.Fatalf("error %v (%T), want a *CallError %s", err, err, code)
	}
	if ce.Code != code {
		t.Fatalf("code %s (%s), want %s", ce.Code, ce.Message, code)
	}
	return ce
}

func stderrLine(want string) func(map[string]any) bool {
	return func(m map[string]any) bool {
		return m["message"] == "upstream stderr" && strings.TrimSpace(fmt.Sprint(m["line"])) == want
	}
}

// decodeOne reads the keys and tool tables of one [[upstream]] from
// extra, a TOML fragment written as if inside it ("call_timeout = ...",
// "[[upstream.tool]] ..."), over base's name and command.
func decodeOne(t *testing.T, extra string, base upstream.Config) upstream.Config {
	t.Helper()
	var doc struct {
		Upstream []upstream.Config `toml:"upstream"`
	}
	if err := toml.NewDecoder(strings.NewReader("[[upstream]]\n" + extra)).DisallowUnknownFields().Decode(&doc); err != nil {
		t.Fatalf("decode %q: %v", extra, err)
	}
	c := doc.Upstream[0]
	if c.Name == "" {
		c.Name = base.Name
	}
	if c.Command == nil {
		c.Command = base.Command
	}
	return c
}

func itoa(n int) string { return strconv.Itoa(n) }
