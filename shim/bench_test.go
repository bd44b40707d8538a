package shim

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"strconv"
	"testing"

	"github.com/rs/zerolog"

	"github.com/sharedos/sharedos-mcp/internal/kerneltest"
)

// benchSession runs Serve against the fake kernel over a real socket, fed
// through pipes, and returns the client's ends. The catalogue is fetched
// before it returns, so the benchmarks measure calls only.
func benchSession(b testing.TB) (in *io.PipeWriter, out *bufio.Reader, stop func()) {
	k := kerneltest.Start(b, kerneltest.Options{})
	cfg := Config{Version: "bench", Log: zerolog.Nop()}
	cfg.Kernel, cfg.Hello = dialKernel(b, k.Path)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Serve(context.Background(), cfg, inR, outW)
		outW.Close()
	}()
	out = bufio.NewReaderSize(outR, 64<<10)
	inW.Write([]byte(`{"jsonrpc":"2.0","id":0,"method":"tools/list"}` + "\n"))
	if _, err := out.ReadSlice('\n'); err != nil {
		b.Fatal(err)
	}
	return inW, out, func() {
		inW.Close()
		if err := <-done; err != nil {
			b.Errorf("Serve: %v", err)
		}
	}
}

func callLine(id int) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"notes/today.md"}}}` + "\n")
}

// BenchmarkRelayedCall is one tools/call at a time: read from the client,
// relayed to the kernel, answered, rendered and written back. It includes
// the fake kernel's own work on the same cores.
func BenchmarkRelayedCall(b *testing.B) {
	in, out, stop := benchSession(b)
	defer stop()
	want := []byte(`"text":"contents of notes/today.md"`)
	b.ReportAllocs()
	id := 1
	for b.Loop() {
		in.Write(callLine(id))
		line, err := out.ReadSlice('\n')
		if err != nil {
			b.Fatal(err)
		}
		if !bytes.Contains(line, want) {
			b.Fatalf("unexpected answer %s", line)
		}
		id++
	}
}

// BenchmarkRelayedCallPipelined writes every call without waiting and
// checks that the answers come back in the order the calls were written.
func BenchmarkRelayedCallPipelined(b *testing.B) {
	in, out, stop := benchSession(b)
	defer stop()
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		w := bufio.NewWriterSize(in, 64<<10)
		for i := 1; i <= b.N; i++ {
			w.Write(callLine(i))
		}
		w.Flush()
	}()
	for i := 1; i <= b.N; i++ {
		line, err := out.ReadSlice('\n')
		if err != nil {
			b.Fatal(err)
		}
		if !bytes.HasPrefix(line, []byte(`{"jsonrpc":"2.0","id":`+strconv.Itoa(i)+`,`)) {
			b.Fatalf("answer %d out of order: %s", i, line)
		}
	}
}
