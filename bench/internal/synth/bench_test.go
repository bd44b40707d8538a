package synth

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/rs/zerolog"

	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/kernelclient"
	"github.com/sharedos/sharedos-mcp/shim"
)

// session starts serve in process against a synthetic kernel serving
// tools, with pipes for stdin and stdout.
func session(b *testing.B, tools int) (in *io.PipeWriter, out *jsonrpc.Reader, stop func()) {
	dir, err := os.MkdirTemp("", "syn")
	if err != nil {
		b.Fatal(err)
	}
	sock := filepath.Join(dir, "k.sock")
	k, err := Listen(sock, Tools(tools))
	if err != nil {
		b.Fatal(err)
	}
	in, out, end := turn(b, sock)
	return in, out, func() {
		end()
		k.Close()
		os.RemoveAll(dir)
	}
}

// turn connects to the kernel on sock, says hello and runs serve in
// process on pipes; end closes stdin and waits for serve to return.
func turn(b *testing.B, sock string) (in *io.PipeWriter, out *jsonrpc.Reader, end func()) {
	c, err := kernelclient.Dial(kernelclient.Options{Socket: sock, KernelUID: -1})
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
	return inW, jsonrpc.NewReader(outR, 0), func() {
		inW.Close()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}
}

// BenchmarkRelayedCallSynth is one tools/call at a time through serve to
// a kernel that answers at once, so nearly all of it is the relay: read,
// relayed, answered, rendered, written.
func BenchmarkRelayedCallSynth(b *testing.B) {
	in, out, stop := session(b, 1)
	defer stop()
	b.ReportAllocs()
	id := 0
	for b.Loop() {
		id++
		in.Write([]byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"` + FirstTool + `","arguments":{"query":"relay"}}}` + "\n"))
		line, err := out.ReadLine()
		if err != nil || !bytes.Contains(line, []byte(Answer)) {
			b.Fatalf("answer %.200q, %v", line, err)
		}
	}
}

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
	sock := filepath.Join(dir, "k.sock")
	k, err := Listen(sock, Tools(512))
	if err != nil {
		b.Fatal(err)
	}
	defer k.Close()
	list := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}` + "\n")
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		inW, out, end := turn(b, sock)
		b.StartTimer()

		inW.Write(list)
		line, err := out.ReadLine()

		b.StopTimer()
		if err != nil || !bytes.Contains(line, []byte(`"sharedos/catalogHash"`)) {
			b.Fatalf("tools/list answered %.200q, %v", line, err)
		}
		end()
		b.StartTimer()
	}
}
