package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kerneltest"
)

// badInput is one hostile stdin line (or lines) and what the shim must do
// with it (docs/architecture.md §3): answer with an error code and id, answer
// with a result, or write nothing at all.
type badInput struct {
	name string
	in   string // written as is; a line ending is added unless it has one
	// What must be written before the ping that follows: ignored means
	// nothing; otherwise one answer with this id (raw JSON, "null" for
	// none) and this code (0 for a result).
	ignored bool
	id      string
	code    int
	// check, when set, looks at the result of a successful answer.
	check func(t *testing.T, result json.RawMessage)
}

func errorCase(name, in string, code int) badInput {
	return badInput{name: name, in: in, id: "null", code: code}
}

func errorCaseID(name, in, id string, code int) badInput {
	return badInput{name: name, in: in, id: id, code: code}
}

func ignoredCase(name, in string) badInput { return badInput{name: name, in: in, ignored: true} }

// refusedCall expects a tools/call relayed to the kernel and refused there
// with code: a tool result, never a JSON-RPC error.
func refusedCall(name, in, id, code string) badInput {
	return badInput{name: name, in: in, id: id, check: func(t *testing.T, result json.RawMessage) {
		t.Helper()
		var r struct {
			IsError bool                       `json:"isError"`
			Meta    map[string]json.RawMessage `json:"_meta"`
		}
		if err := json.Unmarshal(result, &r); err != nil || !r.IsError || string(r.Meta["sharedos/code"]) != `"`+code+`"` {
			t.Errorf("want a refusal with code %s, got %.300s", code, result)
		}
	}}
}

func resultIs(want string) func(*testing.T, json.RawMessage) {
	return func(t *testing.T, result json.RawMessage) {
		t.Helper()
		if string(result) != want {
			t.Errorf("result %.300s, want %s", result, want)
		}
	}
}

func badInputCorpus() []badInput {
	deepArray := strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000)
	deepParams := `{"jsonrpc":"2.0","id":"deep","method":"ping","params":{"a":` + strings.Repeat(`{"a":`, 100_000) + "1" + strings.Repeat("}", 100_000) + "}}"
	longName := strings.Repeat("n", 10_000)
	bigPad := strings.Repeat("x", 5<<20)
	return []badInput{
		errorCase("truncated JSON", `{"jsonrpc":"2.0","id":1,"method":"pi`, jsonrpc.CodeParseError),
		errorCase("truncated after a comma", `{"jsonrpc":"2.0",`, jsonrpc.CodeParseError),
		errorCase("not JSON at all", `hello there`, jsonrpc.CodeParseError),
		errorCase("a lone minus sign", `-`, jsonrpc.CodeParseError),
		errorCase("trailing garbage after a request", `{"jsonrpc":"2.0","id":"tg","method":"ping"} x`, jsonrpc.CodeParseError),
		errorCase("two objects on one line", `{"jsonrpc":"2.0","id":"a","method":"ping"}{"jsonrpc":"2.0","id":"b","method":"ping"}`, jsonrpc.CodeParseError),
		errorCase("a byte order mark before the object", "\ufeff{\"jsonrpc\":\"2.0\",\"id\":\"bom\",\"method\":\"ping\"}", jsonrpc.CodeParseError),
		errorCase("a bare number", `42`, jsonrpc.CodeInvalidRequest),
		errorCase("a bare string", `"ping"`, jsonrpc.CodeInvalidRequest),
		errorCase("a bare true", `true`, jsonrpc.CodeInvalidRequest),
		errorCase("a bare null", `null`, jsonrpc.CodeInvalidRequest),
		errorCase("an empty object", `{}`, jsonrpc.CodeInvalidRequest),
		errorCase("an empty batch", `[]`, jsonrpc.CodeInvalidRequest),
		errorCase("a batch after 2025-06-18 was negotiated", `[{"jsonrpc":"2.0","id":"b1","method":"ping"}]`, jsonrpc.CodeInvalidRequest),
		errorCase("a batch of numbers", `[1,2,3]`, jsonrpc.CodeInvalidRequest),
		errorCase("a null id", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, jsonrpc.CodeInvalidRequest),
		errorCase("an object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, jsonrpc.CodeInvalidRequest),
		errorCase("an array id", `{"jsonrpc":"2.0","id":[1],"method":"ping"}`, jsonrpc.CodeInvalidRequest),
		errorCase("a boolean id", `{"jsonrpc":"2.0","id":true,"method":"ping"}`, jsonrpc.CodeInvalidRequest),
		errorCaseID("jsonrpc 1.0", `{"jsonrpc":"1.0","id":"v1","method":"ping"}`, `"v1"`, jsonrpc.CodeInvalidRequest),
		errorCaseID("jsonrpc missing", `{"id":"nov","method":"ping"}`, `"nov"`, jsonrpc.CodeInvalidRequest),
		errorCaseID("jsonrpc as a number", `{"jsonrpc":2.0,"id":"numv","method":"ping"}`, `"numv"`, jsonrpc.CodeInvalidRequest),
		errorCaseID("no method", `{"jsonrpc":"2.0","id":"nom"}`, `"nom"`, jsonrpc.CodeInvalidRequest),
		errorCaseID("a numeric method", `{"jsonrpc":"2.0","id":"numm","method":7}`, `"numm"`, jsonrpc.CodeInvalidRequest),
		errorCaseID("an empty method", `{"jsonrpc":"2.0","id":"emm","method":""}`, `"emm"`, jsonrpc.CodeInvalidRequest),
		errorCaseID("a null method", `{"jsonrpc":"2.0","id":"nullm","method":null}`, `"nullm"`, jsonrpc.CodeInvalidRequest),
		errorCaseID("an unknown method", `{"jsonrpc":"2.0","id":"unk","method":"tools/explode"}`, `"unk"`, jsonrpc.CodeMethodNotFound),
		errorCaseID("a 10k-character method", `{"jsonrpc":"2.0","id":"longm","method":"`+longName+`"}`, `"longm"`, jsonrpc.CodeMethodNotFound),
		errorCaseID("an escaped NUL in the method", `{"jsonrpc":"2.0","id":"nulm","method":"ping\u0000"}`, `"nulm"`, jsonrpc.CodeMethodNotFound),
		errorCase("a raw NUL byte inside a string", "{\"jsonrpc\":\"2.0\",\"id\":\"rawnul\",\"method\":\"pi\x00ng\"}", jsonrpc.CodeParseError),
		errorCase("a raw NUL byte after the object", "{\"jsonrpc\":\"2.0\",\"id\":\"nulafter\",\"method\":\"ping\"}\x00", jsonrpc.CodeParseError),
		errorCase("invalid UTF-8 in a string", "{\"jsonrpc\":\"2.0\",\"id\":\"utf\",\"method\":\"\xff\xfe\"}", jsonrpc.CodeParseError),
		errorCase("a lone surrogate byte sequence", "{\"jsonrpc\":\"2.0\",\"id\":\"sur\",\"method\":\"\xed\xa0\x80\"}", jsonrpc.CodeParseError),
		errorCase("100,000-deep nested arrays", deepArray, jsonrpc.CodeParseError),
		errorCase("100,000-deep nesting inside params", deepParams, jsonrpc.CodeParseError),
		errorCaseID("params as an array", `{"jsonrpc":"2.0","id":"parr","method":"ping","params":[1,2]}`, `"parr"`, jsonrpc.CodeInvalidParams),
		errorCaseID("params as a string", `{"jsonrpc":"2.0","id":"pstr","method":"tools/list","params":"all"}`, `"pstr"`, jsonrpc.CodeInvalidParams),
		errorCaseID("tools/call without params", `{"jsonrpc":"2.0","id":"cnop","method":"tools/call"}`, `"cnop"`, jsonrpc.CodeInvalidParams),
		errorCaseID("tools/call without a name", `{"jsonrpc":"2.0","id":"cnon","method":"tools/call","params":{"arguments":{}}}`, `"cnon"`, jsonrpc.CodeInvalidParams),
		errorCaseID("a numeric tool name", `{"jsonrpc":"2.0","id":"cnum","method":"tools/call","params":{"name":123}}`, `"cnum"`, jsonrpc.CodeInvalidParams),
		errorCaseID("an empty tool name", `{"jsonrpc":"2.0","id":"cemp","method":"tools/call","params":{"name":""}}`, `"cemp"`, jsonrpc.CodeInvalidParams),
		errorCaseID("a null tool name", `{"jsonrpc":"2.0","id":"cnul","method":"tools/call","params":{"name":null}}`, `"cnul"`, jsonrpc.CodeInvalidParams),
		errorCaseID("arguments as an array", `{"jsonrpc":"2.0","id":"aarr","method":"tools/call","params":{"name":"files.read","arguments":["/a"]}}`, `"aarr"`, jsonrpc.CodeInvalidParams),
		errorCaseID("arguments as a string", `{"jsonrpc":"2.0","id":"astr","method":"tools/call","params":{"name":"files.read","arguments":"{\"path\":\"/a\"}"}}`, `"astr"`, jsonrpc.CodeInvalidParams),
		errorCaseID("arguments null", `{"jsonrpc":"2.0","id":"anul","method":"tools/call","params":{"name":"files.read","arguments":null}}`, `"anul"`, jsonrpc.CodeInvalidParams),
		refusedCall("a 10k-character tool name", `{"jsonrpc":"2.0","id":"clong","method":"tools/call","params":{"name":"`+longName+`"}}`, `"clong"`, "tool_unavailable"),
		refusedCall("a tool name that smuggles JSON and a newline", `{"jsonrpc":"2.0","id":"csmug","method":"tools/call","params":{"name":"x\"}\n{\"event\":\"turn.opened\"}"}}`, `"csmug"`, "tool_unavailable"),
		refusedCall("a tool name with an escaped NUL", `{"jsonrpc":"2.0","id":"cnulname","method":"tools/call","params":{"name":"files.read\u0000"}}`, `"cnulname"`, "tool_unavailable"),
		errorCaseID("modern _meta with an unknown version", `{"jsonrpc":"2.0","id":"modv","method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"1999-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}`, `"modv"`, jsonrpc.CodeUnsupportedVersion),
		errorCaseID("modern _meta without client capabilities", `{"jsonrpc":"2.0","id":"modc","method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, `"modc"`, jsonrpc.CodeInvalidParams),
		errorCaseID("modern ping, which does not exist there", `{"jsonrpc":"2.0","id":"modp","method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, `"modp"`, jsonrpc.CodeMethodNotFound),
		{name: "a 5 MiB valid request", in: `{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"name":"files.read","arguments":{"path":"/big","pad":"` + bigPad + `"}}}`, id: `"big"`,
			check: func(t *testing.T, result json.RawMessage) {
				if !bytes.Contains(result, []byte("contents of /big")) {
					t.Errorf("5 MiB call: %.300s", result)
				}
			}},
		errorCase("a line over the size limit", `{"jsonrpc":"2.0","id":"huge","method":"ping","params":{"pad":"`+strings.Repeat("y", jsonrpc.DefaultMaxLine)+`"}}`, jsonrpc.CodeInvalidRequest),
		{name: "a fractional id", in: `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, id: `1.5`, check: resultIs(`{}`)},
		{name: "an id beyond float64", in: `{"jsonrpc":"2.0","id":1e400,"method":"ping"}`, id: `1e400`, check: resultIs(`{}`)},
		{name: "a 10k-character string id", in: `{"jsonrpc":"2.0","id":"` + longName + `","method":"ping"}`, id: `"` + longName + `"`, check: resultIs(`{}`)},
		{name: "an id that is an escaped NUL", in: `{"jsonrpc":"2.0","id":"\u0000","method":"ping"}`, id: `"\u0000"`, check: resultIs(`{}`)},
		{name: "params null", in: `{"jsonrpc":"2.0","id":"pnull","method":"ping","params":null}`, id: `"pnull"`, check: resultIs(`{}`)},
		{name: "whitespace around the request", in: " \t {\"jsonrpc\":\"2.0\",\"id\":\"ws\",\"method\":\"ping\"} \t ", id: `"ws"`, check: resultIs(`{}`)},
		{name: "CRLF line ending", in: "{\"jsonrpc\":\"2.0\",\"id\":\"crlf\",\"method\":\"ping\"}\r\n", id: `"crlf"`, check: resultIs(`{}`)},
		ignoredCase("a blank line", "\n"),
		ignoredCase("a whitespace-only line", " \t \r\n"),
		ignoredCase("several blank CRLF lines", "\r\n\r\n\r\n"),
		ignoredCase("a result sent by the client", `{"jsonrpc":"2.0","id":"r1","result":{}}`),
		ignoredCase("an error sent by the client", `{"jsonrpc":"2.0","id":"r2","error":{"code":-1,"message":"no"}}`),
		ignoredCase("an unknown notification", `{"jsonrpc":"2.0","method":"notifications/whatever","params":{"x":1}}`),
		ignoredCase("a notification with array params", `{"jsonrpc":"2.0","method":"notifications/progress","params":[1]}`),
		ignoredCase("notifications/initialized again", `{"jsonrpc":"2.0","method":"notifications/initialized"}`),
		ignoredCase("tools/call sent as a notification", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"files.write","arguments":{}}}`),
		ignoredCase("a cancel for an unknown id", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"never-sent"}}`),
		ignoredCase("a cancel with an object requestId", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":{"a":1}}}`),
		ignoredCase("a cancel without params", `{"jsonrpc":"2.0","method":"notifications/cancelled"}`),
	}
}

// TestBadInputCorpus feeds every bad input to one serve process (one
// session that must survive all of them) and checks each is answered or
// ignored as specified, that a ping after it is still answered, and that
// every line on stdout is JSON-RPC.
func TestBadInputCorpus(t *testing.T) {
	corpus := badInputCorpus()
	if len(corpus) < 40 {
		t.Fatalf("corpus has %d inputs, want at least 40", len(corpus))
	}
	k := kerneltest.Start(t, kerneltest.Options{})
	p := startShim(t, k.Path)
	p.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"corpus","version":"1"}}}` + "\n")
	if a := p.recv(10 * time.Second); len(a) != 1 || a[0].Error != nil {
		t.Fatalf("initialize: %+v", a)
	}
	for i, c := range corpus {
		in := c.in
		if !strings.HasSuffix(in, "\n") {
			in += "\n"
		}
		// The marker is a call, not a ping: a ping is answered at once,
		// ahead of calls still at the kernel (ADR 0011), while a call is
		// answered after every call before it, and the shim's own
		// answers to the input were written when it was read.
		pingID := fmt.Sprintf(`"ping-%d"`, i)
		p.send(in + `{"jsonrpc":"2.0","id":` + pingID + `,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"/marker"}}}` + "\n")
		var got []rpcAnswer
		for {
			answers := p.recv(20 * time.Second)
			if len(answers) == 1 && string(answers[0].ID) == pingID {
				if answers[0].Error != nil || answers[0].Result == nil {
					t.Errorf("%s: the call after it: %+v", c.name, answers[0])
				}
				break
			}
			got = append(got, answers...)
		}
		if c.ignored {
			if len(got) != 0 {
				t.Errorf("%s: want nothing written, got %d answers (first id %s)", c.name, len(got), got[0].ID)
			}
			continue
		}
		if len(got) != 1 {
			t.Errorf("%s: want one answer, got %d", c.name, len(got))
			continue
		}
		a := got[0]
		if string(a.ID) != c.id {
			t.Errorf("%s: answer id %.80s, want %.80s", c.name, a.ID, c.id)
		}
		switch {
		case c.code != 0 && (a.Error == nil || a.Error.Code != c.code):
			t.Errorf("%s: want error %d, got %+v %.200s", c.name, c.code, a.Error, a.Result)
		case c.code == 0 && a.Error != nil:
			t.Errorf("%s: want a result, got error %+v", c.name, a.Error)
		case c.code == 0 && c.check != nil:
			c.check(t, a.Result)
		}
	}
	p.stdin.Close()
	ok, err := p.waitExit(10 * time.Second)
	if !ok || err != nil {
		t.Fatalf("serve after stdin EOF: exited=%v err=%v\nstderr:\n%s", ok, err, p.stderr)
	}
	if line, more := <-p.lines; more {
		t.Errorf("serve wrote after the last ping: %.200q", line)
	}
}
