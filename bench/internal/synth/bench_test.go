package synth

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/rs/zerolog"

	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/kernel"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
	"github.com/sharedos/sharedos-mcp/kernelclient"
	"github.com/sharedos/sharedos-mcp/policy"
	"github.com/sharedos/sharedos-mcp/shim"
)

// session starts serve in process against a synthetic kernel serving
// Tools(tools), with pipes for stdin and stdout.
func session(b *testing.B, tools int) (in *io.PipeWriter, out *LineReader, stop func()) {
	return sessionOf(b, Tools(tools))
}

// sessionOf is session for any catalogue.
func sessionOf(b testing.TB, tools []json.RawMessage) (in *io.PipeWriter, out *LineReader, stop func()) {
	dir, err := os.MkdirTemp("", "syn")
	if err != nil {
		b.Fatal(err)
	}
	sock := filepath.Join(dir, "k.sock")
	k, err := Listen(sock, tools)
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
func turn(b testing.TB, sock string) (in *io.PipeWriter, out *LineReader, end func()) {
	c, err := kernelclient.Dial(kernelclient.Options{Socket: sock, KernelUID: -1})
	if err != nil {
		b.Fatal(err)
	}
	hello, err := c.Hello(context.Background(), kproto.HelloParams{Name: "bench", Shim: kproto.Peer{Version: "0"}})
	if err != nil {
		b.Fatal(err)
	}
	inR, inW := io.Pipe()
	// stdout is a real pipe, as a harness gives serve, so serve writes it
	// as it writes its stdout (with writev).
	outR, outW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- shim.Serve(context.Background(), shim.Config{Kernel: c, Hello: hello, Version: "bench", Log: zerolog.Nop()}, inR, outW)
		outW.Close()
	}()
	return inW, NewLineReader(outR, 64<<10), func() {
		inW.Close()
		if err := <-done; err != nil {
			b.Error(err)
		}
		outR.Close()
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

// payloadSize is the payload the targets name (issue 17).
const payloadSize = 4 << 20

// BenchmarkPayloadArgument4MiB is one tools/call whose arguments carry a
// 4 MiB string, through serve in process to a kernel that answers it at
// once: what serve does per byte on the way to the kernel.
func BenchmarkPayloadArgument4MiB(b *testing.B) {
	in, out, stop := sessionOf(b, PayloadTools())
	defer stop()
	payload := PayloadString(payloadSize)
	b.SetBytes(payloadSize)
	b.ReportAllocs()
	id := 0
	for b.Loop() {
		id++
		in.Write(slices.Concat([]byte(`{"jsonrpc":"2.0","id":`+strconv.Itoa(id)+`,"method":"tools/call","params":{"name":"`+PayloadTool+`","arguments":{"text":`), payload, []byte("}}}\n")))
		line, err := out.ReadLine()
		if err != nil || !bytes.Contains(line, []byte(Answer)) {
			b.Fatalf("answer %.200q, %v", line, err)
		}
	}
}

// BenchmarkPayloadContent4MiB is one tools/call answered with a 4 MiB
// text block in content: what serve does per byte on the way back.
func BenchmarkPayloadContent4MiB(b *testing.B) { benchmarkPayloadResult(b, ShapeContent) }

// BenchmarkPayloadOutput4MiB is the same with the 4 MiB in output, which
// serve turns into one text block.
func BenchmarkPayloadOutput4MiB(b *testing.B) { benchmarkPayloadResult(b, ShapeOutput) }

func benchmarkPayloadResult(b *testing.B, shape string) {
	in, out, stop := sessionOf(b, PayloadTools())
	defer stop()
	id := 0
	call := func() {
		id++
		in.Write([]byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"` + PayloadTool + `","arguments":{"result":"` + shape + `","bytes":` + strconv.Itoa(payloadSize) + `}}}` + "\n"))
		line, err := out.ReadLine()
		if err != nil || len(line) < payloadSize || bytes.Contains(line, []byte(`"isError":true`)) {
			b.Fatalf("answer %.200q, %v", line, err)
		}
	}
	call() // the kernel encodes the payload once, outside the timing
	b.SetBytes(payloadSize)
	b.ReportAllocs()
	for b.Loop() {
		call()
	}
}

// BenchmarkReferenceKernelArgument4MiB is the reference kernel, in
// process, decoding a files.write whose arguments are 4 MiB of JSON, the
// most it decodes (larger ones are refused unread), from the socket line
// to the tool's arguments: the content is over the file size limit, so
// the call is refused too_large once it is decoded, before anything is
// written. Compare it with BenchmarkJSONValid4MiB (issue 17: at most 3×).
func BenchmarkReferenceKernelArgument4MiB(b *testing.B) {
	dir, err := os.MkdirTemp("", "rk")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	audit, err := audit.Open(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	defer audit.Close()
	ln, err := kernel.Listen(filepath.Join(dir, "k.sock"))
	if err != nil {
		b.Fatal(err)
	}
	srv := &kernel.Server{Root: dir, Audit: audit, Log: zerolog.Nop(), Grants: []policy.Grant{{
		Subject: policy.SubjectWildcard, Resource: policy.Resource{Namespace: "files", Path: "/"}, Descendants: true,
		Actions: []string{policy.ActionWrite},
	}}}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	defer func() {
		cancel()
		<-served
	}()
	c, err := kernelclient.Dial(kernelclient.Options{Socket: filepath.Join(dir, "k.sock"), KernelUID: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Hello(ctx, kproto.HelloParams{Name: "bench", Shim: kproto.Peer{Version: "0"}}); err != nil {
		b.Fatal(err)
	}
	_, hash, err := c.Catalogue(ctx)
	if err != nil {
		b.Fatal(err)
	}
	p := kproto.InvokeParams{Tool: "files.write", Arguments: payloadArguments(), CatalogHash: hash}
	b.SetBytes(payloadSize)
	b.ReportAllocs()
	for b.Loop() {
		call, err := c.StartInvoke(p)
		if err != nil {
			b.Fatal(err)
		}
		res, err := (<-call.Answer()).Invoke()
		if err != nil || res.Code != "too_large" {
			b.Fatalf("files.write answered %+v, %v", res, err)
		}
	}
}

// BenchmarkJSONValid4MiB is json.Valid over the arguments of
// BenchmarkReferenceKernelArgument4MiB: the floor of decoding them.
func BenchmarkJSONValid4MiB(b *testing.B) {
	args := payloadArguments()
	b.SetBytes(payloadSize)
	for b.Loop() {
		if !json.Valid(args) {
			b.Fatal("not JSON")
		}
	}
}

// payloadArguments are files.write arguments of exactly payloadSize
// bytes, the reference kernel's bound on the arguments it decodes.
func payloadArguments() json.RawMessage {
	head, tail := []byte(`{"path":"/no such dir/x","content":`), []byte(`}`)
	return slices.Concat(head, PayloadString(payloadSize-len(head)-len(tail)), tail)
}
