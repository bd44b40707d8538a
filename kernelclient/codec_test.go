package kernelclient

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/kproto"
)

func TestEncodeInvokeRoundTrips(t *testing.T) {
	for _, p := range []kproto.InvokeParams{
		{CallID: "c1", Tool: "files.read", Arguments: json.RawMessage(`{"path":"/a b","n":[1, 2]}`), CatalogHash: "ab12"},
		{CallID: "c\"2\\", Tool: "bad\xffname\u2028<>&", Arguments: json.RawMessage(`{}`)},
		{CallID: "c3", Tool: "t", Arguments: json.RawMessage(`{}`), MCP: kproto.InvokeMCP{RequestID: json.RawMessage(`"r\"1"`), ProtocolVersion: "2025-11-25",
			TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", TraceState: "a=\"b\""}},
		{CallID: "c4", Tool: "t", Arguments: json.RawMessage(`{}`), MCP: kproto.InvokeMCP{ProtocolVersion: "2026-07-28"}},
		{CallID: "c5", Tool: "t", Arguments: json.RawMessage(`{}`), MCP: kproto.InvokeMCP{RequestID: json.RawMessage(`12`)}},
	} {
		raw := encodeInvoke(p)
		var got kproto.InvokeParams
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatalf("encodeInvoke(%+v) = %s, not JSON: %v", p, raw, err)
		}
		want := p
		want.Tool = string([]rune(p.Tool)) // invalid UTF-8 reaches the kernel as U+FFFD
		if !reflect.DeepEqual(got, want) {
			t.Errorf("encodeInvoke(%+v) decodes to %+v", p, got)
		}
	}
}

func TestDecodeInvokeMatchesEncodingJSON(t *testing.T) {
	for _, raw := range []string{
		`{"status":"succeeded","output":{"a":[1]},"content":[{"type":"text","text":"hi"}]}`,
		`{"status":"denied","code":"no_matching_grant","message":"no grant \u00e9","retryable":false,"extra":{"x":1}}`,
		`{"status":"failed","retryable":true,"output":null,"message":null}`,
		`{"status":"x","status":"y","retryable":null}`,
		`{"status":"denied","code":"rate_limited","retryable":true,"retryAfterMs":2700000}`,
		`{"status":"denied","retryAfterMs":null}`,
	} {
		got, err := decodeInvoke([]byte(raw))
		var want kproto.InvokeResult
		if jerr := json.Unmarshal([]byte(raw), &want); jerr != nil || err != nil {
			t.Fatalf("%s: decodeInvoke error %v, json.Unmarshal error %v", raw, err, jerr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\ndecodeInvoke   %+v\njson.Unmarshal %+v", raw, got, want)
		}
	}
	for _, raw := range []string{`{"status":1}`, `{"retryable":"yes"}`, `[1]`, `{"status":"x"`, `{"retryAfterMs":1.5}`, `{"retryAfterMs":"5"}`, `{"retryAfterMs":1e3}`} {
		if _, err := decodeInvoke([]byte(raw)); err == nil {
			t.Errorf("decodeInvoke(%s) accepted it", raw)
		}
	}
}
