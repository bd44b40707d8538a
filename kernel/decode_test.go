package kernel

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
)

// parseArgsByUnmarshal is parseArgs as it was written with encoding/json
// (a map of raw values, then each value into a string): the reference the
// lexer's version must agree with.
func parseArgsByUnmarshal(t *tool, raw []byte) (map[string]string, string) {
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return nil, "arguments must be a JSON object"
	}
	args := make(map[string]string, len(t.params))
	for _, p := range t.params {
		v, ok := fields[p.name]
		if !ok {
			return nil, fmt.Sprintf("missing required argument %q", p.name)
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil || string(v) == "null" {
			return nil, fmt.Sprintf("argument %q must be a string", p.name)
		}
		args[p.name] = s
	}
	for k := range fields {
		if _, ok := args[k]; !ok {
			return nil, "unknown argument"
		}
	}
	return args, ""
}

// FuzzParseArgsMatchesEncodingJSON: the lexer's parseArgs takes exactly
// the arguments encoding/json took, decodes them to the same strings, and
// refuses the rest with the same message (which unknown key it names may
// differ: encoding/json's map had no order). It is given what the kernel
// gives it, arguments of a line already checked: JSON, or nothing.
func FuzzParseArgsMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{}`, `null`, ``, `[]`, `"x"`, `{"path":"/a"}`, `{"path":"/a","content":"x"}`, `{"path":"/a","content":null}`,
		`{"path":1}`, `{"path":"/a","path":"/b"}`, `{"p\u0061th":"/a"}`, `{"path":"\ud800"}`, "{\"path\":\"\xff\"}",
		`{"path":"/a","extra":1,"other":2}`, `{"path":"/a"`, `{"Path":"/a"}`, `{"reason":"why \"so\"\n"}`, ` {"path" : "/a" } `,
	} {
		f.Add([]byte(s))
	}
	tools := registry()
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) > 0 && !json.Valid(raw) {
			return
		}
		for _, tl := range tools {
			got, gotMsg := tl.parseArgs(raw)
			want, wantMsg := parseArgsByUnmarshal(tl, raw)
			if wantMsg == "unknown argument" && strings.HasPrefix(gotMsg, "unknown argument ") {
				continue
			}
			if gotMsg != wantMsg || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%s(%q) = %q, %q; encoding/json: %q, %q", tl.def.Name, raw, got, gotMsg, want, wantMsg)
			}
		}
	})
}

// FuzzInvokeParamsMatchEncodingJSON: decodeInvokeParams reads what
// json.Unmarshal read into the struct it replaced, except that member
// names match exactly (docs/adr/0007), so params whose names differ from
// the protocol's only in case are left out of the comparison.
func FuzzInvokeParamsMatchEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{"callId":"c1","tool":"files.read","arguments":{"path":"/a"},"catalogHash":"h"}`,
		`{"callId":null,"tool":"t","arguments":null}`, `{"callId":1}`, `{"tool":"a","tool":"b"}`, `{}`, `[]`, `null`,
		`{"arguments":[1,2]}`, `{"c\u0061llId":"x"}`, `{"callId":"\ud800\udc00"}`, `{"extra":{"callId":"no"}}`,
	} {
		f.Add([]byte(s))
	}
	type reference struct {
		CallID      string          `json:"callId"`
		Tool        string          `json:"tool"`
		Arguments   json.RawMessage `json:"arguments"`
		CatalogHash string          `json:"catalogHash"`
	}
	names := []string{"callId", "tool", "arguments", "catalogHash"}
	f.Fuzz(func(t *testing.T, raw []byte) {
		caseOnly := false
		jsonrpc.EachMember(raw, func(key, _ []byte) error {
			name := string(jsonrpc.KeyName(key))
			for _, n := range names {
				if strings.EqualFold(name, n) && name != n {
					caseOnly = true
				}
			}
			return nil
		})
		if caseOnly {
			return
		}
		got, err := decodeInvokeParams(raw)
		var want reference
		wantErr := json.Unmarshal(raw, &want)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("decodeInvokeParams(%q): %v; encoding/json: %v", raw, err, wantErr)
		}
		if err != nil {
			return
		}
		if got.CallID != want.CallID || got.Tool != want.Tool || got.CatalogHash != want.CatalogHash ||
			string(got.Arguments.raw) != string(want.Arguments) || got.Arguments.size != len(want.Arguments) {
			t.Fatalf("decodeInvokeParams(%q) = %+v; encoding/json: %+v", raw, got, want)
		}
		// As the turn decodes them: params of a line already checked,
		// found without being read again.
		in, err := decodeInvokeParamsIn(raw, true)
		if err != nil || fmt.Sprint(in) != fmt.Sprint(got) {
			t.Fatalf("decodeInvokeParamsIn(%q) = %+v, %v; decodeInvokeParams: %+v", raw, in, err, got)
		}
	})
}

// TestLargeArgumentsAreDecodedOnce: a files.write of 4 MiB of arguments,
// the most the kernel decodes, costs the content's decoded string and
// little else: the arguments stay a slice of the line and are not copied
// on the way (issue 17).
func TestLargeArgumentsAreDecodedOnce(t *testing.T) {
	content := strings.Repeat("func f() {\\n\\treturn \\\"x\\\"\\n}\\n", (maxArgumentBytes-64)/32)
	params := []byte(`{"callId":"c1","tool":"files.write","catalogHash":"h","arguments":{"path":"/x","content":"` + content + `"}}`)
	var write *tool
	for _, tl := range registry() {
		if tl.def.Name == "files.write" {
			write = tl
		}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	p, err := decodeInvokeParams(params)
	if err != nil {
		t.Fatal(err)
	}
	args, msg := write.parseArgs(p.Arguments.raw)
	runtime.ReadMemStats(&after)
	if msg != "" || args["path"] != "/x" {
		t.Fatalf("parseArgs: %q, %q", args, msg)
	}
	if budget := uint64(len(content)) + 64<<10; after.TotalAlloc-before.TotalAlloc > budget {
		t.Errorf("decoding %d bytes of arguments allocated %d bytes, over %d: the content once and nothing more", len(params), after.TotalAlloc-before.TotalAlloc, budget)
	}
}
