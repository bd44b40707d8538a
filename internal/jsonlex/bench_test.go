package jsonlex

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// sourceLikeString is a JSON string of about n bytes whose text reads
// like source code, so about one byte in twelve is an escape: the file a
// kernel returns.
func sourceLikeString(n int) []byte {
	lines := []string{
		"func step%d(ctx context.Context, n int) error {\n",
		"\tif n > %d {\n",
		"\t\treturn fmt.Errorf(\"step %d: too many: %%d\", n)\n",
		"\t}\n\t// Keep the first %d entries; the rest wait for the next pass.\n",
		"\treturn nil // %d\n}\n\n",
	}
	var text bytes.Buffer
	for i := 0; text.Len() < n*9/10; i++ {
		fmt.Fprintf(&text, lines[i%len(lines)], i)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(text.String())
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'})
}

// BenchmarkLexStringEscapeDense reads a 4 MiB string that reads like
// source code, as the relay checks a kernel's answer that carries a file.
func BenchmarkLexStringEscapeDense(b *testing.B) {
	src := sourceLikeString(4 << 20)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	var l Lexer
	for b.Loop() {
		l.Reset(src, wire)
		if _, _, err := l.String(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPrescanEscapeDense checks the same string as it arrives, in
// pieces of 64 KiB, as a reader does between its reads.
func BenchmarkPrescanEscapeDense(b *testing.B) {
	benchmarkPrescan(b, sourceLikeString(4<<20), 1)
}

// BenchmarkPrescanCatalogue checks a tools.list answer of 512 tools
// (about half a megabyte of short strings, none long enough to record)
// as it arrives, as the kernel client does a first list: what the
// prescan costs a line it cannot help.
func BenchmarkPrescanCatalogue(b *testing.B) {
	tool := `{"name":"files.read","description":"` + strings.Repeat("Reads a file inside the shared root and returns its text. ", 10) +
		`","inputSchema":{"type":"object","properties":{"path":{"type":"string","description":"Absolute path inside the root, e.g. \"/src/main.go\"."}},"required":["path"]}}`
	benchmarkPrescan(b, []byte(`{"jsonrpc":"2.0","id":2,"result":{"tools":[`+strings.TrimSuffix(strings.Repeat(tool+",", 512), ",")+`],"catalogHash":"x"}}`), 0)
}

// benchmarkPrescan scans src as it arrives, in pieces of 64 KiB, and
// checks that it recorded strs long strings.
func benchmarkPrescan(b *testing.B, src []byte, strs int) {
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	var p Prescan
	for b.Loop() {
		p.Reset(wire)
		for n := 64 << 10; ; n += 64 << 10 {
			p.Scan(src[:min(n, len(src))])
			if n >= len(src) {
				break
			}
		}
	}
	if len(p.spans) != strs {
		b.Fatalf("%d strings recorded, want %d", len(p.spans), strs)
	}
}
