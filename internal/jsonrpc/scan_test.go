package jsonrpc

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/jsonlex"
)

func TestParseEnvelope(t *testing.T) {
	line := []byte(` {"jsonrpc":"2.0", "id" : 7,"result":{"tools":[1,"a\"b",{}],"x":null},"Result":1,"error":{"code":-1},"method":"m\u00e9","params":[]} `)
	e, err := ParseEnvelope(line)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ got, want string }{
		"id":     {string(e.ID), `7`},
		"result": {string(e.Result), `{"tools":[1,"a\"b",{}],"x":null}`},
		"error":  {string(e.Error), `{"code":-1}`},
		"method": {string(e.Method), `"m\u00e9"`},
		"params": {string(e.Params), `[]`},
	} {
		if c.got != c.want {
			t.Errorf("%s = %s, want %s", name, c.got, c.want)
		}
	}
	e, err = ParseEnvelope([]byte(`{"id":1,"id":2}`))
	if err != nil || string(e.ID) != "2" || e.Result != nil || e.Method != nil {
		t.Errorf("repeated id: %+v, %v; want the last id and no other member", e, err)
	}
}

func TestScanRefuses(t *testing.T) {
	for _, src := range []string{
		``, ` `, `[]`, `"x"`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":1}x`, `{"a":1}{}`,
		`{a:1}`, `{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":1e}`, `{"a":-}`, `{"a":+1}`,
		`{"a":tru}`, `{"a":nul}`, `{"a":"\x"}`, `{"a":"\u12g4"}`, `{"a":"` + "\x01" + `"}`,
		`{"a":"abc}`, `{"a":[1,2}`, `{"a":{"b":1]}`, `{"a":[1 2]}`,
		`{"a":` + strings.Repeat("[", jsonlex.DefaultMaxDepth+1) + strings.Repeat("]", jsonlex.DefaultMaxDepth+1) + `}`,
	} {
		err := EachMember([]byte(src), func(_, _ []byte) error { return nil })
		var se *ScanError
		if !errors.As(err, &se) {
			t.Errorf("EachMember(%.40q) = %v, want a ScanError", src, err)
		}
	}
}

func TestEachElement(t *testing.T) {
	var got []string
	err := EachElement([]byte(` [ {"a":[1]} , "x" ,-1.5e+3,true,null ] `), func(e []byte) error {
		got = append(got, string(e))
		return nil
	})
	want := []string{`{"a":[1]}`, `"x"`, `-1.5e+3`, `true`, `null`}
	if err != nil || strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("elements %q, %v; want %q", got, err, want)
	}
	stop := errors.New("stop")
	if err := EachElement([]byte(`[1,2]`), func([]byte) error { return stop }); err != stop {
		t.Errorf("an error from f came back as %v", err)
	}
}

// FuzzScan checks the scanner against encoding/json: it accepts exactly
// the objects json.Valid accepts, the members it hands out are the ones
// json.Unmarshal finds, and ParseEnvelope's are the ones json.Unmarshal
// finds under those exact names.
func FuzzScan(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"a":[1,2.5e-3,"x\n\u00e9"]}}`,
		`{"a":{"b":{"c":[true,false,null,{}]}}}`,
		`{"a":"` + "\xff\xfe" + `"}`, `{}`, ` { } `, `{"a":-0}`, `{"a":"\/"}`,
		`{"\u0069d":1,"ID":2,"Method":"x","method":"y","method":"z","\u0072esult":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		members := map[string]json.RawMessage{}
		err := EachMember(src, func(key, value []byte) error {
			var k string
			if err := json.Unmarshal(key, &k); err != nil {
				t.Fatalf("key %q does not decode: %v", key, err)
			}
			members[k] = value
			return nil
		})
		var obj map[string]json.RawMessage
		valid := json.Valid(src) && json.Unmarshal(src, &obj) == nil && obj != nil
		if (err == nil) != valid {
			t.Fatalf("EachMember(%q) = %v, json says valid object = %v", src, err, valid)
		}
		if err != nil {
			return
		}
		for k, v := range obj {
			if string(members[k]) != string(v) {
				t.Fatalf("member %q = %s, json.Unmarshal found %s", k, members[k], v)
			}
		}
		e, err := ParseEnvelope(src)
		if err != nil {
			t.Fatalf("ParseEnvelope(%q): %v, EachMember took it", src, err)
		}
		for name, got := range map[string][]byte{"jsonrpc": e.JSONRPC, "id": e.ID, "method": e.Method, "params": e.Params, "result": e.Result, "error": e.Error} {
			if want, ok := obj[name]; string(got) != string(want) || (got != nil) != ok {
				t.Fatalf("ParseEnvelope(%q): %s is %q, json.Unmarshal found %q", src, name, got, want)
			}
		}
	})
}

// BenchmarkParseEnvelopeCatalogue scans a tools.list answer of the size a
// 512-tool catalogue has (about half a megabyte, mostly description text).
func BenchmarkParseEnvelopeCatalogue(b *testing.B) {
	tool := `{"name":"files.read","description":"` + strings.Repeat("Reads a file inside the shared root and returns its text. ", 10) +
		`","inputSchema":{"type":"object","properties":{"path":{"type":"string","description":"Absolute path inside the root, e.g. \"/src/main.go\"."}},"required":["path"]}}`
	line := []byte(`{"jsonrpc":"2.0","id":2,"result":{"tools":[` + strings.TrimSuffix(strings.Repeat(tool+",", 512), ",") + `],"catalogHash":"x"}}`)
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		if _, err := ParseEnvelope(line); err != nil {
			b.Fatal(err)
		}
	}
}

// TestParseEnvelopeAllocs guards ADR 0004's relay path: reading a
// tools/call line's envelope and the members of its params hands out
// sub-slices of the line and allocates nothing.
func TestParseEnvelopeAllocs(t *testing.T) {
	var n int
	allocs := testing.AllocsPerRun(100, func() {
		e, err := ParseEnvelope(callLine)
		if err != nil {
			t.Fatal(err)
		}
		n = 0
		if err := EachMember(e.Params, func(_, _ []byte) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
	})
	if n != 3 {
		t.Fatalf("params of the tools/call line: %d members, want 3", n)
	}
	if allocs != 0 {
		t.Errorf("ParseEnvelope and EachMember on a tools/call line: %v allocations, want 0", allocs)
	}
}
