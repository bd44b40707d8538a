package kernel

import (
	"strings"
	"testing"

	"github.com/sharedos/sharedos-mcp/kernel/config"
)

// BenchmarkRecordArgumentsFull is what [audit] arguments = "full" costs
// a call whose arguments are a file of 12 KiB, under what the record keeps whole: their canonical form and
// its digest.
func BenchmarkRecordArgumentsFull(b *testing.B) {
	raw := []byte(`{"path":"/docs/w.txt","content":"` + strings.Repeat("a line a model wrote\\n", 12<<10/22) + `"}`)
	a := boundedJSON{raw: raw, size: len(raw)}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if r := recordArguments(config.ArgumentsFull, a); r.full == nil {
			b.Fatal("nothing recorded")
		}
	}
}
