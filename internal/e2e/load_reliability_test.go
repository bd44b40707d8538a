package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/kernelclient"
	"github.com/sharedos/sharedos-mcp/shim"
)

// loadKernel runs the reference kernel binary on a small tree for load.
func loadKernel(t *testing.T) *refKernel {
	t.Helper()
	root := t.TempDir()
	for i := range 10 {
		name := filepath.Join(root, "d", fmt.Sprintf("f%d.txt", i))
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(strings.Repeat(fmt.Sprintf("line %d of file %d\n", i, i), 50)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir, err := os.MkdirTemp("", "lk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return startRefKernel(t, root, filepath.Join(dir, "k.sock"), filepath.Join(t.TempDir(), "audit.jsonl"))
}

// loadCall is the i-th call of a turn: reads, lists and searches in turn.
func loadCall(i int) string {
	switch i % 3 {
	case 0:
		return callLine(strconv.Itoa(i), "files.read", fmt.Sprintf(`{"path":"/d/f%d.txt"}`, i%10))
	case 1:
		return callLine(strconv.Itoa(i), "files.list", `{"path":"/d"}`)
	default:
		return callLine(strconv.Itoa(i), "files.search", fmt.Sprintf(`{"path":"/d","query":"of file %d"}`, i%10))
	}
}

// runLoadTurn is one harness turn in process: serve over a connection to
// the kernel, with calls tools/call lines on stdin. It checks every call
// is answered once, in order, and succeeded.
func runLoadTurn(sock string, calls int) error {
	k, err := kernelclient.Dial(kernelclient.Options{Socket: sock, KernelUID: -1})
	if err != nil {
		return err
	}
	hello, err := k.Hello(context.Background(), kproto.HelloParams{Name: "load", Shim: kproto.Peer{Version: "test"}})
	if err != nil {
		k.Close()
		return err
	}
	var in strings.Builder
	for i := range calls {
		in.WriteString(loadCall(i))
	}
	var out bytes.Buffer
	cfg := shim.Config{Kernel: k, Hello: hello, Version: "test", CallTimeout: time.Minute, Log: zerolog.Nop()}
	if err := shim.Serve(context.Background(), cfg, strings.NewReader(in.String()), &out); err != nil {
		return err
	}
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		var a struct {
			ID     string `json:"id"`
			Result struct {
				IsError bool `json:"isError"`
			} `json:"result"`
		}
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			return fmt.Errorf("answer %d: %v", n, err)
		}
		if a.ID != strconv.Itoa(n) || a.Result.IsError {
			return fmt.Errorf("answer %d: %.200s", n, sc.Text())
		}
		n++
	}
	if n != calls {
		return fmt.Errorf("%d answers to %d calls", n, calls)
	}
	return nil
}

// runLoad runs turns concurrent turns of calls calls each.
func runLoad(sock string, turns, calls int) error {
	errs := make(chan error, turns)
	var wg sync.WaitGroup
	for range turns {
		wg.Go(func() { errs <- runLoadTurn(sock, calls) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// rssKiB reads a process's resident set size.
func rssKiB(t *testing.T, pid int) int {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// auditCounts stops the kernel and checks its audit log: every call of
// every turn recorded exactly once, every turn opened and closed.
func auditCounts(t *testing.T, k *refKernel, turns, calls int) {
	t.Helper()
	if err := k.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := k.wait(); err != nil {
		t.Fatalf("kernel exit: %v\n%s", err, k.stderr)
	}
	data, err := os.ReadFile(k.audit)
	if err != nil {
		t.Fatal(err)
	}
	type key struct{ exec, call string }
	seen := map[key]int{}
	perTurn := map[string]int{}
	events := map[string]int{}
	for _, line := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
		var e struct {
			Event, ExecutionID, CallID, Status string
		}
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		events[e.Event]++
		if e.Event == "tool.invoked" {
			seen[key{e.ExecutionID, e.CallID}]++
			perTurn[e.ExecutionID]++
			if e.Status != "succeeded" {
				t.Errorf("audited call %s/%s: %s", e.ExecutionID, e.CallID, e.Status)
			}
		}
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("call %v recorded %d times", k, n)
		}
	}
	if len(seen) != turns*calls || len(perTurn) != turns || events["turn.opened"] != turns || events["turn.closed"] != turns {
		t.Errorf("audit: %d distinct calls in %d turns, events %v; want %d calls in %d turns", len(seen), len(perTurn), events, turns*calls, turns)
	}
}

// TestLoadManyConcurrentTurns: 100 turns at once, 100 calls each, through
// in-process shims to one reference kernel process. Under the race
// detector (what CI runs) it is 20 turns of 50 calls.
func TestLoadManyConcurrentTurns(t *testing.T) {
	turns, calls := 100, 100
	if raceEnabled {
		turns, calls = 20, 50
	}
	k := loadKernel(t)
	goroutines := runtime.NumGoroutine()
	start := time.Now()
	peak := 0
	done := make(chan error, 1)
	go func() { done <- runLoad(k.sock, turns, calls) }()
	ticker := time.NewTicker(50 * time.Millisecond)
	defer ticker.Stop()
	for running := true; running; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			running = false
		case <-ticker.C:
		}
		peak = max(peak, rssKiB(t, k.cmd.Process.Pid))
	}
	elapsed := time.Since(start)
	t.Logf("%d turns × %d calls in %v (%.0f calls/s); kernel peak RSS %d KiB", turns, calls, elapsed, float64(turns*calls)/elapsed.Seconds(), peak)
	if peak > 256<<10 {
		t.Errorf("kernel peak RSS %d KiB, over 256 MiB", peak)
	}
	if !pollUntil(5*time.Second, func() bool { return runtime.NumGoroutine() <= goroutines+2 }) {
		t.Errorf("goroutines: %d before the load, %d after: the shims leaked", goroutines, runtime.NumGoroutine())
	}
	auditCounts(t, k, turns, calls)
}

// TestSoak runs waves of turns for $SHAREDOS_SOAK (e.g. 3m) and checks the
// kernel's memory and this process's goroutines stay level. CI does not
// set the variable.
func TestSoak(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("SHAREDOS_SOAK"))
	if err != nil || d <= 0 {
		t.Skip("set SHAREDOS_SOAK=3m to soak")
	}
	k := loadKernel(t)
	goroutines := runtime.NumGoroutine()
	const turns, calls = 20, 50
	start := time.Now()
	warm, peak, waves := 0, 0, 0
	for time.Since(start) < d {
		if err := runLoad(k.sock, turns, calls); err != nil {
			t.Fatal(err)
		}
		waves++
		rss := rssKiB(t, k.cmd.Process.Pid)
		if warm == 0 && time.Since(start) > d/10 {
			warm = rss
		}
		peak = max(peak, rss)
		if waves%50 == 0 {
			t.Logf("%v: %d waves, %d calls, kernel RSS %d KiB, goroutines %d", time.Since(start).Round(time.Second), waves, waves*turns*calls, rss, runtime.NumGoroutine())
		}
	}
	final := rssKiB(t, k.cmd.Process.Pid)
	t.Logf("soak %v: %d turns, %d calls; kernel RSS warm %d KiB, peak %d KiB, final %d KiB", d, waves*turns, waves*turns*calls, warm, peak, final)
	if warm > 0 && final > 2*warm+20<<10 {
		t.Errorf("kernel RSS grew from %d KiB to %d KiB", warm, final)
	}
	if !pollUntil(5*time.Second, func() bool { return runtime.NumGoroutine() <= goroutines+2 }) {
		t.Errorf("goroutines: %d before, %d after", goroutines, runtime.NumGoroutine())
	}
	auditCounts(t, k, waves*turns, calls)
}
