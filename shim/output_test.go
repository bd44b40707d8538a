package shim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kerneltest"
)

// TestALargeOutputIsWrittenWhole: an output's text block goes to a
// client that reads a few bytes at a time, through a non-blocking pipe,
// so that writes are cut short at every point. The line the client reads
// must still be the whole answer: one JSON line whose text block is the
// output's JSON text, byte for byte.
func TestALargeOutputIsWrittenWhole(t *testing.T) {
	var text strings.Builder
	for i := 0; text.Len() < 600<<10; i++ {
		fmt.Fprintf(&text, "line %d:\t\"quoted\" \\ back\\slash é \u2028 sep\n", i)
	}
	output, err := json.Marshal(map[string]any{"text": text.String(), "n": 7})
	if err != nil {
		t.Fatal(err)
	}
	k := kerneltest.Start(t, kerneltest.Options{Handler: func(c *kerneltest.Conn, m *jsonrpc.Message) bool {
		if m.Method != "tools.invoke" {
			return false
		}
		c.Reply(m.ID, map[string]any{"status": "succeeded", "output": json.RawMessage(output)})
		return true
	}})
	cfg := Config{Version: "test", Log: zerolog.Nop()}
	cfg.Kernel, cfg.Hello = dialKernel(t, k.Path)
	inR, inW := io.Pipe()
	// A non-blocking pipe, polled by the runtime: every write the
	// client is slow to take returns short.
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	outR, out := os.NewFile(uintptr(fds[0]), "stdout-r"), os.NewFile(uintptr(fds[1]), "stdout-w")
	defer outR.Close()
	defer out.Close()
	done := make(chan error, 1)
	go func() { done <- Serve(context.Background(), cfg, inR, out) }()
	inW.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"/a"}}}` + "\n"))
	line, err := bufio.NewReader(&slowReader{r: outR}).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	inW.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var resp struct {
		Result struct {
			Content []struct {
				Type, Text string
			}
			StructuredContent json.RawMessage
		}
	}
	if err := json.Unmarshal([]byte(line), &resp); err != nil {
		t.Fatalf("the answer is not JSON: %v (%d bytes)", err, len(line))
	}
	if c := resp.Result.Content; len(c) != 1 || c[0].Type != "text" || c[0].Text != string(output) {
		t.Errorf("the text block is not the output's JSON text (%d blocks)", len(c))
	}
	if sc := resp.Result.StructuredContent; sc != nil && string(sc) != string(output) {
		t.Errorf("structuredContent is not the output")
	}
}

// slowReader reads at most a few hundred bytes at a time.
type slowReader struct{ r io.Reader }

func (s *slowReader) Read(p []byte) (int, error) { return s.r.Read(p[:min(len(p), 333)]) }

// TestAnOutputIsEscapedAsAWhole: an output's text is escaped a piece at a
// time, and the text block is still the one escaping it whole gives,
// whatever falls on the edge of a piece: characters of two, three and
// four bytes, U+2028 (escaped by name), bytes that are not UTF-8 (each
// U+FFFD) and a character cut short, at every offset around the edge.
func TestAnOutputIsEscapedAsAWhole(t *testing.T) {
	var outputs [][]byte
	for _, odd := range []string{"é", "€", "𝄞", "\u2028", "\xff", "\xe2\x80", "\xf0\x90\x80\x80\x80", `\"`} {
		for shift := range 6 {
			// The output is a JSON object whose string holds odd
			// starting shift bytes before the edge of the first piece,
			// and runs on past the second.
			head := `{"t":"` + strings.Repeat("a", textPiece-shift-len(`{"t":"`))
			outputs = append(outputs, []byte(head+odd+strings.Repeat("b\\n", textPiece/2)+`"}`))
		}
	}
	next := make(chan []byte, 1)
	k := kerneltest.Start(t, kerneltest.Options{Handler: func(c *kerneltest.Conn, m *jsonrpc.Message) bool {
		if m.Method != "tools.invoke" {
			return false
		}
		c.Write(slices.Concat([]byte(`{"jsonrpc":"2.0","id":`), m.ID, []byte(`,"result":{"status":"succeeded","output":`), <-next, []byte("}}\n")))
		return true
	}})
	cfg := Config{Version: "test", Log: zerolog.Nop()}
	cfg.Kernel, cfg.Hello = dialKernel(t, k.Path)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- Serve(context.Background(), cfg, inR, outW) }()
	out := bufio.NewReader(outR)
	for i, output := range outputs {
		next <- output
		fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"/a"}}}`+"\n", i)
		line, err := out.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		want := slices.Concat([]byte(`"content":[{"type":"text","text":`), jsonrpc.AppendString(nil, output), []byte(`}]`))
		if !bytes.Contains(line, want) {
			t.Errorf("output %d (%q at the edge): the text block is not the output escaped whole", i, output[textPiece-8:textPiece+8])
		}
	}
	inW.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
