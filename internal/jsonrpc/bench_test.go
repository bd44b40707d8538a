package jsonrpc

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// loopReader replays one buffer forever, so the benchmark measures the
// framing and not the source.
type loopReader struct {
	data []byte
	off  int
}

func (l *loopReader) Read(p []byte) (int, error) {
	n := copy(p, l.data[l.off:])
	l.off = (l.off + n) % len(l.data)
	return n, nil
}

// BenchmarkReadLine frames tools/call lines of the size a harness sends:
// a short tool name and a small arguments object.
func BenchmarkReadLine(b *testing.B) {
	line := []byte(`{"jsonrpc":"2.0","id":12345,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"docs/notes/2024/meeting-minutes.md"},"_meta":{"progressToken":12345}}}` + "\n")
	r := NewReader(&loopReader{data: bytes.Repeat(line, 64)}, 0)
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		got, err := r.ReadLine()
		if err != nil {
			b.Fatal(err)
		}
		if len(got) != len(line)-1 {
			b.Fatalf("framed %d bytes, want %d", len(got), len(line)-1)
		}
	}
}

// BenchmarkReadLineLarge frames a 700 KB line, the size of a 512-tool
// catalogue arriving from the kernel, which spans many reads, in a buffer
// of the kernel client's size (1 MiB), which holds it.
func BenchmarkReadLineLarge(b *testing.B) {
	line := append(bytes.Repeat([]byte("x"), 700<<10), '\n')
	r := NewReaderSize(&loopReader{data: line}, 0, 1<<20)
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		got, err := r.ReadLine()
		if err != nil {
			b.Fatal(err)
		}
		if len(got) != len(line)-1 {
			b.Fatalf("framed %d bytes, want %d", len(got), len(line)-1)
		}
	}
}

// callLine is a tools/call request of the size a harness sends.
var callLine = []byte(`{"jsonrpc":"2.0","id":12345,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"docs/notes/2024/meeting-minutes.md"},"_meta":{"progressToken":12345}}}`)

// BenchmarkParseEnvelopeCall reads a tools/call line as the relay does:
// the envelope, then the members of its params.
func BenchmarkParseEnvelopeCall(b *testing.B) {
	// A line read from a pipe starts on a fresh buffer; a copy of the same
	// size class keeps the result from depending on where the linker and
	// init happened to put callLine.
	line := append(make([]byte, 0, 256), callLine...)
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		e, err := ParseEnvelope(line)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		if err := EachMember(e.Params, func(_, _ []byte) error { n++; return nil }); err != nil || n != 3 {
			b.Fatalf("params: %d members, %v", n, err)
		}
	}
}

// BenchmarkAppendString encodes the strings a relayed call carries: an
// id, a tool name, a catalogHash and a paragraph of result text.
func BenchmarkAppendString(b *testing.B) {
	strs := []string{
		"call-7f3a2b", "files.read", "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945",
		strings.Repeat("Reads a file inside the shared root and returns its text.\n\t\"quoted\" and é ", 8),
	}
	n := 0
	for _, s := range strs {
		n += len(s)
	}
	b.SetBytes(int64(n))
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		buf = buf[:0]
		for _, s := range strs {
			buf = AppendString(buf, s)
		}
	}
}

// sourceLikeOutput is a JSON text of about n bytes as a tool with
// structured results returns a file: {"text":"..."} around lines that
// read like source code, so about one byte in twelve of the string is an
// escape and, written again as a JSON string, about one in six is.
func sourceLikeOutput(n int) []byte {
	lines := []string{
		"func step%d(ctx context.Context, n int) error {\n",
		"\tif n > %d {\n",
		"\t\treturn fmt.Errorf(\"step %d: too many: %%d\", n)\n",
		"\t}\n\t// Keep the first %d entries; the rest wait for the next pass.\n",
		"\treturn nil // %d\n}\n\n",
	}
	b := append(make([]byte, 0, n+128), `{"text":"`...)
	for i := 0; len(b) < n-2; i++ {
		esc := AppendString(nil, fmt.Sprintf(lines[i%len(lines)], i))
		b = append(b, esc[1:len(esc)-1]...)
	}
	return append(b, `"}`...)
}

// BenchmarkAppendStringBodyEscapeDense escapes one piece of a large
// output's text as the shim writes its text block: escape-dense ASCII,
// into a buffer with room for it.
func BenchmarkAppendStringBodyEscapeDense(b *testing.B) {
	text := sourceLikeOutput(512 << 10)
	buf := make([]byte, 0, 2*len(text))
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendStringBody(buf[:0], text)
	}
}

// BenchmarkAppendStringBodyTerminal escapes a tool's coloured terminal
// output, an \x1b (written \u001b) every few bytes: what the blocks leave
// to the word loop, which they must not slow by trying them too often.
func BenchmarkAppendStringBodyTerminal(b *testing.B) {
	text := strings.Repeat("\x1b[32mok\x1b[0m  step 12 passed in 3ms\n", 1<<13)
	buf := make([]byte, 0, 4*len(text))
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendStringBody(buf[:0], text)
	}
}
