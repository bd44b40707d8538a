package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sharedos/sharedos-mcp/internal/testupstream"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
)

// miniKernelArg makes this test binary a minimal kernel: it starts the
// test upstream, has it spawn a grandchild (as the optional third
// argument says: see the test upstream's spawn), prints "pids UPSTREAM
// GRANDCHILD" and waits to be killed.
const miniKernelArg = "__upstream-test-minikernel"

func maybeMiniKernel() {
	if len(os.Args) < 3 || os.Args[1] != miniKernelArg {
		return
	}
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "minikernel:", err)
		os.Exit(1)
	}
	self, err := os.Executable()
	if err != nil {
		fail(err)
	}
	specs, err := upstream.Parse([]upstream.Config{{Name: "test", Command: testupstream.Command(self), Env: map[string]string{"GORACE": quickExit}}}, "")
	if err != nil {
		fail(err)
	}
	m, err := upstream.Start(specs, upstream.Options{StateDir: os.Args[2], Log: zerolog.New(os.Stderr)})
	if err != nil {
		fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := m.WaitSettled(ctx); err != nil {
		fail(err)
	}
	snap := m.Snapshot()
	i := slices.IndexFunc(snap.Tools, func(t *upstream.Tool) bool { return t.Name == "test.spawn" })
	if i < 0 {
		fail(fmt.Errorf("test.spawn is not published: %+v", snap))
	}
	how := ""
	if len(os.Args) > 3 {
		how = os.Args[3]
	}
	args, _ := json.Marshal(map[string]string{"how": how})
	_, fw, err := snap.Tools[i].Resolve(args)
	if err != nil {
		fail(err)
	}
	r, err := m.Call(ctx, snap.Tools[i], fw, nil)
	if err != nil {
		fail(err)
	}
	var blocks []struct{ Text string }
	if err := json.Unmarshal(r.Content, &blocks); err != nil || len(blocks) == 0 {
		fail(fmt.Errorf("spawn answered %s", r.Content))
	}
	fmt.Printf("pids %d %s\n", snap.Upstreams[0].PID, blocks[0].Text)
	select {}
}

func spawn(t *testing.T, f *fixture) int {
	t.Helper()
	return spawnHow(t, f, "")
}

// spawnHow has the test upstream start a grandchild as how says and
// returns its pid.
func spawnHow(t *testing.T, f *fixture, how string) int {
	t.Helper()
	args, _ := json.Marshal(map[string]string{"how": how})
	r, err := f.call("test.spawn", string(args))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(text(t, r))
	if err != nil {
		t.Fatal(err)
	}
	if !alive(pid) {
		t.Fatalf("the grandchild %d is not running", pid)
	}
	return pid
}

func TestCloseEndsTheUpstreamAndWhatItSpawned(t *testing.T) {
	f := newFixture(t, "", []upstream.Spec{spec(t, "test", "")}, func(o *upstream.Options) { o.StopGrace = 200 * time.Millisecond })
	f.readyFrom(0, "test")
	grandchild := spawn(t, f)
	up := f.m.Status()[0].PID
	if up == 0 || !alive(up) {
		t.Fatalf("upstream pid %d", up)
	}
	// The grandchild ignores SIGTERM: only the SIGKILL after the grace
	// period ends it.
	if err := f.m.Close(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, up, "the upstream")
	waitGone(t, grandchild, "the upstream's grandchild")
	if st := f.m.Status()[0]; st.State != upstream.StateStopped {
		t.Errorf("state after Close = %s", st.State)
	}
}

func TestCloseKillsAnUpstreamThatWillNotStop(t *testing.T) {
	f := newFixture(t, "", []upstream.Spec{spec(t, "test", "", "-stubborn")}, func(o *upstream.Options) { o.StopGrace = 100 * time.Millisecond })
	f.readyFrom(0, "test")
	grandchild := spawn(t, f)
	up := f.m.Status()[0].PID
	// It ignores the end of stdin and SIGTERM; SIGKILL ends it.
	if err := f.m.Close(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, up, "the upstream")
	waitGone(t, grandchild, "the upstream's grandchild")
}

func TestAKilledKernelLeavesNothingBehind(t *testing.T) {
	killedKernelLeavesNothing(t, "")
}

// killedKernelLeavesNothing runs the mini kernel, has its upstream spawn
// a grandchild as how says, SIGKILLs the kernel, and waits for both to be
// gone.
func killedKernelLeavesNothing(t *testing.T, how string) {
	if testing.Short() {
		t.Skip("starts a kernel process")
	}
	cmd := exec.Command(exe, miniKernelArg, filepath.Join(t.TempDir(), "state"), how)
	cmd.Env = append(os.Environ(), "GORACE="+quickExit)
	var log bytes.Buffer
	cmd.Stderr = &log
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the mini kernel's log:\n%s", log.String())
		}
	})
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := false
	defer func() {
		if !waited {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the mini kernel said nothing: %v", err)
	}
	var up, grandchild int
	if _, err := fmt.Sscanf(line, "pids %d %d", &up, &grandchild); err != nil {
		t.Fatalf("mini kernel said %q: %v", line, err)
	}
	if !alive(up) || !alive(grandchild) {
		t.Fatalf("upstream %d or grandchild %d is not running", up, grandchild)
	}
	// SIGKILL: the kernel runs no code of its own after this.
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	waited = true
	waitGone(t, up, "the upstream")
	waitGone(t, grandchild, "the upstream's grandchild")
}

func TestOnlyTheConfiguredEnvironmentReachesTheUpstream(t *testing.T) {
	t.Setenv("SHAREDOS_TEST_KERNEL_SECRET", "must not leak")
	t.Setenv("HOME", "/home/for-the-test")
	f := newFixture(t, "", []upstream.Spec{spec(t, "test", `env = { API_TOKEN = "t0k", EMPTY = "" }`)}, nil)
	f.readyFrom(0, "test")
	r, err := f.call("test.env", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, kv := range strings.Split(text(t, r), "\n") {
		k, v, _ := strings.Cut(kv, "=")
		names = append(names, k)
		switch k {
		case "API_TOKEN":
			if v != "t0k" {
				t.Errorf("API_TOKEN=%q", v)
			}
		case "HOME":
			if v != "/home/for-the-test" {
				t.Errorf("HOME=%q", v)
			}
		case "PATH":
			if v != os.Getenv("PATH") {
				t.Errorf("PATH=%q", v)
			}
		}
	}
	if want := []string{"API_TOKEN", "EMPTY", "GORACE", "HOME", "PATH"}; !slices.Equal(names, want) {
		t.Errorf("the upstream's environment has %q, want exactly %q", names, want)
	}
}

func TestAnUpstreamThatCannotStartLeavesTheOthersServing(t *testing.T) {
	broken := spec(t, "broken", `command = ["/nonexistent/server"]`)
	f := newFixture(t, "", []upstream.Spec{broken, spec(t, "test", "")}, nil)
	f.readyFrom(0, "test")
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := f.m.WaitSettled(ctx); err != nil {
		t.Fatal(err)
	}
	// It is tried again, and fails again, with the reason each time.
	var failures []string
	from := 0
	for len(failures) < 2 {
		e, i := f.events.waitFrom(t, from, "broken failing", func(e upstream.Event) bool {
			return e.Kind == upstream.EventState && e.Upstream == "broken" && e.Status.State == upstream.StateFailed
		})
		failures, from = append(failures, e.Status.Reason), i+1
	}
	for _, r := range failures {
		if !strings.Contains(r, "/nonexistent/server") || !strings.Contains(r, "no such file") {
			t.Errorf("failure reason %q does not say what is missing", r)
		}
	}
	snap := f.m.Snapshot()
	if st := snap.Upstreams[0]; st.Name != "broken" || (st.State != upstream.StateFailed && st.State != upstream.StateStarting) {
		t.Errorf("broken is %+v", st)
	}
	for _, tl := range snap.Tools {
		if tl.Upstream == "broken" {
			t.Errorf("a tool of the broken upstream is published: %s", tl.Name)
		}
	}
	if r, err := f.call("test.echo", `{"text":"still here"}`); err != nil || text(t, r) != "still here" {
		t.Errorf("the working upstream: %v, %v", r, err)
	}
}

func TestAProgramThatDoesNotSuperviseIsReported(t *testing.T) {
	notASupervisor, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true(1)")
	}
	f := newFixture(t, "", []upstream.Spec{spec(t, "test", "")}, func(o *upstream.Options) { o.Supervisor = notASupervisor })
	e, _ := f.events.waitFrom(t, 0, "a failure", func(e upstream.Event) bool {
		return e.Kind == upstream.EventState && e.Status.State == upstream.StateFailed
	})
	if !strings.Contains(e.Status.Reason, "never reported starting the upstream") || !strings.Contains(e.Status.Reason, notASupervisor) {
		t.Errorf("reason %q", e.Status.Reason)
	}
}

func TestCrashMidCallIsUnavailableThenTheUpstreamIsRestarted(t *testing.T) {
	f := newFixture(t, "", []upstream.Spec{spec(t, "test", "")}, nil)
	after := f.readyFrom(0, "test")
	before := f.m.Snapshot()
	firstPID := f.m.Status()[0].PID
	_, err := f.call("test.crash", `{}`)
	ce := callError(t, err, upstream.CodeUpstreamUnavailable)
	if !ce.Retryable {
		t.Error("unavailable is not retryable")
	}
	e, _ := f.events.waitFrom(t, after, "a restart", func(e upstream.Event) bool {
		return e.Kind == upstream.EventState && e.Upstream == "test" && e.Status.State == upstream.StateRestarting
	})
	if !strings.Contains(e.Status.Reason, "exit status 3") {
		t.Errorf("restart reason %q does not say how it exited", e.Status.Reason)
	}
	f.readyFrom(after, "test")
	st := f.m.Status()[0]
	if st.Restarts != 1 || st.PID == firstPID || alive(firstPID) {
		t.Errorf("after the restart: %+v (first pid %d)", st, firstPID)
	}
	if !slices.Contains(st.Stderr, "crashing") {
		t.Errorf("the crashed upstream's last stderr lines are not kept: %q", st.Stderr)
	}
	// A tool from a snapshot taken before the crash, with the same
	// definition, is served by the new process.
	echo := f.tool(before, "test.echo")
	if r, err := f.m.Call(context.Background(), echo, forward(t, echo, `{"text":"again"}`), nil); err != nil || text(t, r) != "again" {
		t.Errorf("after the restart: %v, %v", r, err)
	}
}

func TestAFrameTheClientCannotReadRestartsTheUpstream(t *testing.T) {
	f := newFixture(t, "", []upstream.Spec{spec(t, "test", "")}, nil)
	after := f.readyFrom(0, "test")
	_, err := f.call("test.garbage", `{}`)
	callError(t, err, upstream.CodeUpstreamUnavailable)
	f.readyFrom(after, "test")
	if st := f.m.Status()[0]; st.Restarts != 1 {
		t.Errorf("restarts = %d", st.Restarts)
	}
	if _, err := f.call("test.echo", `{"text":"x"}`); err != nil {
		t.Errorf("after the restart: %v", err)
	}
}

func TestCallsWhileNotReadyAreUnavailable(t *testing.T) {
	f := newFixture(t, "", []upstream.Spec{spec(t, "test", "")}, func(o *upstream.Options) {
		// Long enough that the call below meets the upstream restarting.
		o.Backoff = upstream.Backoff{Initial: time.Hour}
	})
	after := f.readyFrom(0, "test")
	snap := f.m.Snapshot()
	if _, err := f.call("test.crash", `{}`); err == nil {
		t.Fatal("crash answered")
	}
	f.events.waitFrom(t, after, "a restart", func(e upstream.Event) bool {
		return e.Kind == upstream.EventState && e.Status.State == upstream.StateRestarting
	})
	echo := f.tool(snap, "test.echo")
	_, err := f.m.Call(context.Background(), echo, forward(t, echo, `{"text":"x"}`), nil)
	ce := callError(t, err, upstream.CodeUpstreamUnavailable)
	if !ce.Retryable || !strings.Contains(ce.Message, "restarting") {
		t.Errorf("%+v", ce)
	}
	if n := len(f.m.Snapshot().Tools); n != 0 {
		t.Errorf("an upstream that is not ready contributes %d tools", n)
	}
}
