package kernel

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
)

// TestOversizedArgumentsAreNotCopied: decoding a tools.invoke whose
// arguments are 15 MB keeps none of them.
func TestOversizedArgumentsAreNotCopied(t *testing.T) {
	params := []byte(`{"callId":"c1","tool":"files.write","catalogHash":"h","arguments":{"path":"/x","content":"` +
		strings.Repeat("A", 15<<20) + `"}}`)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	p, err := decodeInvokeParams(params)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if p.Arguments.raw != nil || p.Arguments.size <= maxArgumentBytes || p.CallID != "c1" {
		t.Errorf("decoded %+v", p)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<10 {
		t.Errorf("decoding allocated %d bytes for 15 MB of arguments it refuses", got)
	}
}

// The memory battery of issue 12 item 4, against the real kernel binary:
//
//	SHAREDOS_BATTERY=1 go test -run TestKernelMemoryBattery -v ./kernel
//
// It builds a 300,000-entry directory and 1,000 files of 1 MiB (about
// 1 GiB of disk), so it runs only when asked.
func TestKernelMemoryBattery(t *testing.T) {
	if os.Getenv("SHAREDOS_BATTERY") == "" {
		t.Skip("set SHAREDOS_BATTERY=1 to run the memory battery (300,000 files and 1 GiB of disk)")
	}
	const peakLimit = 256 << 20
	root := t.TempDir()
	wide := filepath.Join(root, "wide")
	big := filepath.Join(root, "big")
	for _, d := range []string{wide, big} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 300_000 {
		f, err := os.Create(filepath.Join(wide, fmt.Sprintf("entry-%06d.txt", i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	content := []byte(strings.Repeat(strings.Repeat("x", 1023)+"\n", 1024))
	for i := range 1000 {
		if err := os.WriteFile(filepath.Join(big, fmt.Sprintf("f%04d.txt", i)), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	config := `
[[grant]]
subject = "integration:*"
resource = "files:/"
descendants = true
actions = ["list", "search", "write"]
`
	huge := map[string]string{"path": "/huge.txt", "content": strings.Repeat("A", 15<<20)}
	for _, tt := range []struct {
		name   string
		turns  int // connections, each pipelining calls
		calls  int // per turn
		tool   string
		args   map[string]string
		status string // what every call is answered
	}{
		{"32 pipelined files.list of 300,000 entries", 1, 32, "files.list", map[string]string{"path": "/wide"}, kproto.StatusSucceeded},
		{"10 parallel calls with a 15 MB argument", 10, 1, "files.write", huge, kproto.StatusFailed},
		{"16 pipelined files.search over 1,000 x 1 MiB", 1, 16, "files.search", map[string]string{"path": "/big", "query": "absent"}, kproto.StatusSucceeded},
	} {
		t.Run(tt.name, func(t *testing.T) {
			k := startKernelProcess(t, config, root)
			cpu0 := cpuTicks(t, k.cmd.Process.Pid)
			results := make(chan map[string]int, tt.turns)
			for range tt.turns {
				go func() { results <- pipeline(t, k.sock, tt.calls, tt.tool, tt.args) }()
			}
			statuses := map[string]int{}
			for range tt.turns {
				for s, n := range <-results {
					statuses[s] += n
				}
			}
			peak := statusKB(t, k.cmd.Process.Pid, "VmHWM") << 10
			cpu := cpuTicks(t, k.cmd.Process.Pid) - cpu0
			t.Logf("%s: peak RSS %.1f MiB, CPU %.2f s, answers %v", tt.name, float64(peak)/(1<<20), float64(cpu)/100, statuses)
			if statuses[tt.status] != tt.turns*tt.calls {
				t.Errorf("answers %v, want %d %s", statuses, tt.turns*tt.calls, tt.status)
			}
			if peak > peakLimit {
				t.Errorf("peak RSS %d MiB, over %d MiB", peak>>20, peakLimit>>20)
			}
		})
	}
}

// pipeline says hello, lists, sends n calls before reading any answer,
// and counts the answers' statuses.
func pipeline(t *testing.T, sock string, n int, tool string, args map[string]string) map[string]int {
	t.Helper()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := &testClient{t: t, conn: conn, r: jsonrpc.NewReader(conn, 64<<20)}
	c.hello("battery")
	c.list()
	for i := range n {
		c.send(kproto.MethodInvoke, c.invokeParams("b"+strconv.Itoa(i), tool, args))
	}
	statuses := map[string]int{}
	for range n {
		m := c.recv()
		for m.Method == kproto.MethodProgress {
			m = c.recv()
		}
		statuses[invokeResult(t, m).Status]++
	}
	return statuses
}

// statusKB reads a "kB" field of /proc/PID/status.
func statusKB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// cpuTicks is the user and system time of a process, in clock ticks
// (100 a second on Linux).
func cpuTicks(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return utime + stime
}
