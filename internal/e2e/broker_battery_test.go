package e2e

import (
	"fmt"
	"os"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/internal/testupstream"
)

// The memory battery of issue 24 item 7, against the built kernel:
//
//	SHAREDOS_BATTERY=1 go test -run TestBrokeredResultMemoryBattery -v ./internal/e2e
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
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	k := startBrokerKernel(t, fmt.Sprintf(`
[[upstream]]
name = "test"
command = [%q, %q]
env = { GORACE = "atexit_sleep_ms=0" }

[[upstream.tool]]
name = "huge"
action = "read"

[[grant]]
subject = "integration:*"
resource = "test:/huge"
actions = ["read"]
`, exe, testupstream.Arg), "test")
	answers := pipeline(t, k.sock, calls, "test.huge", map[string]int{"bytes": result})
	peak := statusKB(t, k.cmd.Process.Pid, "VmHWM") << 10
	t.Logf("%d pipelined %d MiB results: kernel peak RSS %.1f MiB, answers %v", calls, result>>20, float64(peak)/(1<<20), answers)
	if want := kproto.StatusFailed + "/" + kproto.CodeTooLarge; answers[want] != calls {
		t.Errorf("answers %v, want %d %s", answers, calls, want)
	}
	if peak > peakLimit {
		t.Errorf("peak RSS %d MiB, over %d MiB", peak>>20, peakLimit>>20)
	}
}
