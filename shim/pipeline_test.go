package shim

import (
	"bytes"
	"strconv"
	"testing"
)

// TestPipelinedCallsOverflowInFlight writes three times maxInFlight calls
// in one go. The reader holds calls back to send them to the kernel in one
// write, and must send them before it waits on the writer (which waits on
// their answers) or on stdin: every call is answered, in order.
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
