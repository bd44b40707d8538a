// Command stdiofloor answers every JSON-RPC request on stdin at once, with
// a result holding one text block, and talks to nothing else. benchrelay
// times calls through it to measure what one stdio hop to a Go process
// costs on the machine: the floor under any relay's added latency.
//
// Usage: stdiofloor TEXT
package main

import (
	"bufio"
	"encoding/json"
	"os"

	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
)

func main() {
	text, _ := json.Marshal(os.Args[len(os.Args)-1])
	result := []byte(`{"content":[{"type":"text","text":` + string(text) + `}]}`)
	r := bufio.NewReaderSize(os.Stdin, 64<<10)
	w := bufio.NewWriterSize(os.Stdout, 64<<10)
	var out []byte
	for {
		line, err := r.ReadSlice('\n') // the harness's lines are short
		if err != nil {
			w.Flush()
			return
		}
		var m struct{ ID json.RawMessage }
		if json.Unmarshal(line, &m) != nil || m.ID == nil {
			continue
		}
		out = jsonrpc.AppendResponse(out[:0], m.ID, result)
		w.Write(out)
		// Flush only when nothing more is waiting, as a relay batching
		// its answers would.
		if r.Buffered() == 0 {
			if w.Flush() != nil {
				return
			}
		}
	}
}
