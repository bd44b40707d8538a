package jsonrpc

import (
	"bytes"
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
// catalogue arriving from the kernel, which spans many buffer fills.
func BenchmarkReadLineLarge(b *testing.B) {
	line := append(bytes.Repeat([]byte("x"), 700<<10), '\n')
	r := NewReader(&loopReader{data: line}, 0)
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
