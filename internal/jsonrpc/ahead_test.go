package jsonrpc

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/jsonlex"
)

// TestReaderAheadParsesAsParseEnvelope reads lines with long strings in
// pieces of many sizes, with the reader checking them as they arrive:
// Reader.ParseEnvelope and Reader.EachValidMember give what
// ParseEnvelope and EachValidMember give on the line alone, for the
// line, a part of it, a line Take kept and a line in the mapping, and
// the long strings of the valid lines were found by the reader.
func TestReaderAheadParsesAsParseEnvelope(t *testing.T) {
	long := strings.Repeat(`x := \"a\\b\"\n\t`, jsonlex.LongString/10)
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"result":{"status":"succeeded","output":{"text":"` + long + `"}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"` + long + `","arguments":{"a":"` + long + `"}}}`,
		`  {"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"` + long + `"}]}}  `,
		`{"jsonrpc":"2.0","id":4,"result":{"text":"` + long + `\q"}}`,
		`{"jsonrpc":"2.0","id":5,"result":{"text":"` + long + "\x1f" + `"}}`,
		`{"id":6}`,
	}
	input := strings.Join(lines, "\n") + "\n"
	for _, piece := range []int{1, 3, 100, 4096, 1 << 20} {
		for mode := range 3 {
			take, mapped := mode == 1, mode == 2
			r := NewReaderSize(&pieces{data: []byte(input), n: piece}, 0, 1024)
			r.Ahead, r.MapLong = true, mapped
			for i, want := range lines {
				line, err := r.ReadLine()
				if err != nil {
					t.Fatal(err)
				}
				if take {
					line = r.Take(line)
				}
				name := fmt.Sprintf("line %d, pieces of %d, take %v, mapped %v", i, piece, take, mapped)
				if string(line) != want {
					t.Fatalf("%s: read %.60q", name, line)
				}
				msg := bytes.TrimSpace(line)
				for _, m := range [][]byte{line, msg} {
					e, err := r.ParseEnvelope(m)
					we, werr := ParseEnvelope(m)
					if fmt.Sprint(e, err) != fmt.Sprint(we, werr) {
						t.Fatalf("%s: Reader.ParseEnvelope %v; ParseEnvelope %v", name, err, werr)
					}
					if err != nil {
						continue
					}
					for _, v := range [][]byte{e.Result, e.Params} {
						if v == nil {
							continue
						}
						var got, want []string
						gerr := r.EachValidMember(v, func(k, v []byte) error { got = append(got, string(k), string(v)); return nil })
						werr := EachValidMember(v, func(k, v []byte) error { want = append(want, string(k), string(v)); return nil })
						if fmt.Sprint(got, gerr) != fmt.Sprint(want, werr) {
							t.Fatalf("%s: Reader.EachValidMember differs", name)
						}
					}
				}
				if at := strings.Index(want, `"`+long); at >= 0 && !strings.Contains(want, `\q`) && !strings.Contains(want, "\x1f") {
					if _, ok := r.pre.StringEnd(at); !ok && piece < len(want) {
						t.Errorf("%s: the string at %d was not found ahead", name, at)
					}
				}
			}
			if _, err := r.ReadLine(); err != io.EOF {
				t.Fatalf("after the lines: %v", err)
			}
		}
	}
}
