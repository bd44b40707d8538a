package kernel

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
)

// The memory battery of issue 24 item 7, against the real kernel binary:
//
//	SHAREDOS_BATTERY=1 go test -run TestBrokeredResultMemoryBattery -v ./kernel
//
// One upstream answers 8 pipelined calls with 15 MiB results each; every
// call must be answered too_large, and the kernel's peak RSS (VmHWM) stay
// within 96 MiB. It prints the peak, for the record.
func TestBrokeredResultMemoryBattery(t *testing.T) {
	if os.Getenv("SHAREDOS_BATTERY") == "" {
		t.Skip("set SHAREDOS_BATTERY=1 to run the brokered result memory battery")
	}
	const (
		calls     = 8
		result    = 15 << 20
		peakLimit = 96 << 20
	)
	bin := binary(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "k.sock")
	config := fmt.Sprintf("state_dir = %q\n", filepath.Join(dir, "state")) +
		testUpstreamTable(t, "test", filepath.Join(dir, "calls.jsonl"), "[[upstream.tool]]\nname = \"huge\"\naction = \"read\"\n") + `
[[grant]]
subject = "integration:*"
resource = "test:/huge"
actions = ["read"]
`
	cfgFile := filepath.Join(dir, "kernel.toml")
	if err := os.WriteFile(cfgFile, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "kernel", "--config", cfgFile, "--socket", sock, "--audit", filepath.Join(dir, "audit.jsonl"))
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+dir, "XDG_STATE_HOME="+dir, "XDG_RUNTIME_DIR="+dir)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	// The upstream is ready once the kernel logs so; nothing is listed
	// before that.
	sc := bufio.NewScanner(stderr)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() && !strings.Contains(sc.Text(), `"message":"upstream ready"`) {
	}
	if sc.Err() != nil {
		t.Fatal(sc.Err())
	}
	go func() {
		for sc.Scan() {
		}
	}()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := &testClient{t: t, conn: conn, r: jsonrpc.NewReader(conn, 64<<20)}
	c.hello("battery")
	if defs, _ := c.list(); !hasName(defs, "test.huge") {
		t.Fatalf("test.huge is not listed: %v", names(defs))
	}
	for i := range calls {
		c.send(kproto.MethodInvoke, c.invokeParams(fmt.Sprint("h", i), "test.huge", json.RawMessage(fmt.Sprintf(`{"bytes":%d}`, result))))
	}
	codes := map[string]int{}
	for range calls {
		m := c.recv()
		for m.Method == kproto.MethodProgress {
			m = c.recv()
		}
		codes[invokeResult(t, m).Code]++
	}
	peak := statusKB(t, cmd.Process.Pid, "VmHWM") << 10
	t.Logf("%d pipelined %d MiB results: kernel peak RSS %.1f MiB, answers %v", calls, result>>20, float64(peak)/(1<<20), codes)
	if codes[kproto.CodeTooLarge] != calls {
		t.Errorf("answers %v, want %d too_large", codes, calls)
	}
	if peak > peakLimit {
		t.Errorf("peak RSS %d MiB, over %d MiB", peak>>20, peakLimit>>20)
	}
}
