package jsonlex

import (
	"bytes"
	"encoding/json"
	"fmt"
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
