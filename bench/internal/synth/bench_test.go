package synth

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/kernelclient"
	"github.com/sharedos/sharedos-mcp/shim"
)

// BenchmarkFirstList512 is what the first tools/list of a turn costs
// serve with the largest catalogue: the fetch from the kernel, the
// projection, the catalogHash check, and writing the answer. Each
// iteration is a new turn, as each harness session is.
func BenchmarkFirstList512(b *testing.B) {
	dir, err := os.MkdirTemp("", "syn")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	k, err := Listen(filepath.Join(dir, "k.sock"), Tools(512))
	if err != nil {
		b.Fatal(err)
	}
	defer k.Close()
	list := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}` + "\n")
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		c, err := kernelclient.Dial(kernelclient.Options{Socket: filepath.Join(dir, "k.sock"), KernelUID: -1})
		if err != nil {
			b.Fatal(err)
		}
		hello, err := c.Hello(context.Background(), kproto.HelloParams{Name: "bench", Shim: kproto.Peer{Version: "0"}})
		if err != nil {
			b.Fatal(err)
		}
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		done := make(chan error, 1)
		go func() {
			done <- shim.Serve(context.Background(), shim.Config{Kernel: c, Hello: hello, Version: "bench", Log: zerolog.Nop()}, inR, outW)
			outW.Close()
		}()
		out := jsonrpc.NewReader(outR, 0)
		b.StartTimer()

		inW.Write(list)
		line, err := out.ReadLine()

		b.StopTimer()
		if err != nil || !bytes.Contains(line, []byte(`"sharedos/catalogHash"`)) {
			b.Fatalf("tools/list answered %.200q, %v", line, err)
		}
		inW.Close()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
