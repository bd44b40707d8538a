package shim

import (
	"bytes"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestPipelinedCallsOverflowInFlight writes three times maxInFlight calls
// in one go. The reader waits for room once maxInFlight answers are owed,
// and the calls it sent must reach the kernel meanwhile, as the writer
// waits on their answers: every call is answered, in order.
func TestPipelinedCallsOverflowInFlight(t *testing.T) {
	in, out, stop := benchSession(t)
	defer stop()
	const n = 3 * maxInFlight
	var all []byte
	for i := 1; i <= n; i++ {
		all = append(all, callLine(i)...)
	}
	go in.Write(all)
	for i := 1; i <= n; i++ {
		line, err := out.ReadSlice('\n')
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		if !bytes.HasPrefix(line, []byte(`{"jsonrpc":"2.0","id":`+strconv.Itoa(i)+`,`)) || !bytes.Contains(line, []byte(`contents of notes/today.md`)) {
			t.Fatalf("answer %d: %s", i, line)
		}
	}
}

// TestServeLeavesNoWorkers: the goroutines that relayed calls are gone
// when Serve returns.
func TestServeLeavesNoWorkers(t *testing.T) {
	in, out, stop := benchSession(t)
	const n = 20
	var all []byte
	for i := 1; i <= n; i++ {
		all = append(all, callLine(i)...)
	}
	go in.Write(all)
	for i := 1; i <= n; i++ {
		if _, err := out.ReadSlice('\n'); err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
	}
	stop() // closes stdin and waits for Serve to return
	buf := make([]byte, 1<<20)
	if stacks := string(buf[:runtime.Stack(buf, true)]); strings.Contains(stacks, "(*server).worker") {
		t.Errorf("a relay worker outlived Serve:\n%s", stacks)
	}
}
