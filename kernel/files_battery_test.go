package kernel

import (
	"runtime"
	"strings"
	"testing"
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
