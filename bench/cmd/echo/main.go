// Command echo copies stdin to stdout line by line and does nothing else.
// benchrelay spawns it the way a harness spawns serve, to measure the
// floor under any stdio relay: starting a small static Go binary, and one
// more pipe hop each way for a message of any size. A relay must at least
// read what the harness writes and write what the harness reads; echo
// does only that.
package main

import (
	"bufio"
	"os"
)

func main() {
	r := bufio.NewReaderSize(os.Stdin, 64<<10)
	w := bufio.NewWriterSize(os.Stdout, 64<<10)
	for {
		// A line longer than the buffer goes out in pieces as it comes
		// in: echo never holds a whole payload, as no relay must.
		piece, err := r.ReadSlice('\n')
		if _, werr := w.Write(piece); werr != nil {
			return
		}
		if err != nil && err != bufio.ErrBufferFull {
			w.Flush()
			return
		}
		// Flush only when nothing more is waiting, as a relay batching
		// its answers would.
		if r.Buffered() == 0 && w.Flush() != nil {
			return
		}
	}
}
