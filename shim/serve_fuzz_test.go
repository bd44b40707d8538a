package shim

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rogpeppe/go-internal/txtar"
	"github.com/rs/zerolog"

	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kerneltest"
)

// fuzzMaxLine is small so that over-long lines are in reach of the fuzzer.
const fuzzMaxLine = 4096

// serveForFuzz runs one turn over in and returns stdout. A Serve that does
// not return fails the input: every request read must be answered (the
// fake's hang and slow.read tools are bounded by the call timeout).
func serveForFuzz(t *testing.T, k *kerneltest.Kernel, in []byte) []byte {
	t.Helper()
	cfg := Config{Version: "fuzz", Log: zerolog.Nop(), CallTimeout: 50 * time.Millisecond, MaxLine: fuzzMaxLine}
	cfg.Kernel, cfg.Hello = dialKernel(t, k.Path)
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- Serve(context.Background(), cfg, bytes.NewReader(in), &out) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve returned %v, want nil at stdin EOF", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("Serve did not return within 20s of stdin EOF for input %q", in)
	}
	return out.Bytes()
}

// wireSeeds returns the "in" section of every wire script.
func wireSeeds(f *testing.F) [][]byte {
	files, err := filepath.Glob("testdata/wire/*.txtar")
	if err != nil || len(files) == 0 {
		f.Fatalf("no wire scripts: %v", err)
	}
	var seeds [][]byte
	for _, file := range files {
		ar, err := txtar.ParseFile(file)
		if err != nil {
			f.Fatal(err)
		}
		for _, s := range ar.Files {
			if s.Name == "in" {
				seeds = append(seeds, s.Data)
			}
		}
	}
	return seeds
}

// FuzzServe feeds arbitrary stdin to a turn in front of the fake kernel.
// Whatever comes in: Serve returns, every stdout line is a JSON-RPC 2.0
// response (or a batch of them), a progress notification for a token a
// call gave whose answer is not yet written, an elicitation/create of
// the shim's own (an id it never used before), or a notifications/cancelled
// of one of those, and no id is answered more often than it was asked.
func FuzzServe(f *testing.F) {
	for _, s := range wireSeeds(f) {
		f.Add(s)
	}
	f.Add([]byte("\r\n\n[]\n[1,{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]\n{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}\n\xff\n"))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}` + "\n" +
		`[{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hang"}},{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}},{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"die"}}]` + "\n"))
	// One fake kernel per target and process; each input is its own
	// connection, that is, its own turn.
	k := kerneltest.Start(f, kerneltest.Options{})
	f.Fuzz(func(t *testing.T, in []byte) {
		out := serveForFuzz(t, k, in)
		asked, lines := requestIDs(in)
		answered := map[string]int{}
		elicited := map[string]bool{}
		n := 0
		for _, line := range bytes.SplitAfter(out, []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			if line[len(line)-1] != '\n' {
				t.Fatalf("stdout ends without a newline: %q", line)
			}
			if token, ok := progressToken(line); ok {
				if !progressOwed(in, token, answered) {
					t.Fatalf("progress for token %s, which no call still unanswered gave\ninput %q\noutput %q", token, in, out)
				}
				continue
			}
			if method, id, ok := shimRequest(line); ok {
				switch {
				case method == "elicitation/create" && !elicited[id]:
					elicited[id] = true
				case method == "notifications/cancelled" && elicited[id]:
				default:
					t.Fatalf("%s for %s, not a new question or one the shim asked\ninput %q\noutput %q", method, id, in, out)
				}
				continue
			}
			n++
			ids, err := responseIDs(line[:len(line)-1])
			if err != nil {
				t.Fatalf("stdout line is not JSON-RPC: %v\n%q", err, line)
			}
			for _, id := range ids {
				if id == "null" {
					continue
				}
				answered[id]++
				if answered[id] > asked[id] {
					t.Fatalf("id %s answered %d times, asked %d times\ninput %q\noutput %q", id, answered[id], asked[id], in, out)
				}
			}
		}
		if n > lines {
			t.Fatalf("%d answers to %d lines", n, lines)
		}
	})
}

// shimRequest reports whether line is one of the shim's own messages to
// the client about a question: an elicitation/create (id, its request id)
// or a notifications/cancelled (id, the request it cancels), each with an
// id of the shim's form.
func shimRequest(line []byte) (method, id string, ok bool) {
	var m struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  struct {
			RequestID json.RawMessage `json:"requestId"`
			Message   *string         `json:"message"`
			Schema    json.RawMessage `json:"requestedSchema"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &m) != nil || m.JSONRPC != "2.0" {
		return "", "", false
	}
	raw := m.ID
	switch m.Method {
	case "elicitation/create":
		if m.Params.Message == nil || m.Params.Schema == nil {
			return "", "", false
		}
	case "notifications/cancelled":
		if m.ID != nil {
			return "", "", false
		}
		raw = m.Params.RequestID
	default:
		return "", "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil || !strings.HasPrefix(s, "sharedos-approval-") {
		return "", "", false
	}
	return m.Method, s, true
}

// progressToken reports whether line is a notifications/progress, and
// its token, compact.
func progressToken(line []byte) (string, bool) {
	var m struct {
		JSONRPC string `json:"jsonrpc"`
		Method  string `json:"method"`
		Params  struct {
			Token    json.RawMessage `json:"progressToken"`
			Progress *float64        `json:"progress"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &m) != nil || m.Method != "notifications/progress" || m.JSONRPC != "2.0" || m.Params.Progress == nil || m.Params.Token == nil {
		return "", false
	}
	return compact(m.Params.Token), true
}

// progressOwed reports whether some tools/call in the input gave token
// and has not been answered yet.
func progressOwed(in []byte, token string, answered map[string]int) bool {
	for _, line := range bytes.Split(in, []byte("\n")) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Meta struct {
					Token json.RawMessage `json:"progressToken"`
				} `json:"_meta"`
			} `json:"params"`
		}
		if json.Unmarshal(line, &m) == nil && m.Method == "tools/call" && m.ID != nil && m.Params.Meta.Token != nil &&
			compact(m.Params.Meta.Token) == token && answered[compact(m.ID)] == 0 {
			return true
		}
	}
	return false
}

// requestIDs counts, by compact id, the requests in the input, and
// counts its lines.
func requestIDs(in []byte) (map[string]int, int) {
	ids := map[string]int{}
	lines := 0
	for _, line := range bytes.Split(in, []byte("\n")) {
		lines++
		var elems []json.RawMessage
		if json.Unmarshal(line, &elems) != nil {
			elems = []json.RawMessage{line}
		}
		for _, e := range elems {
			var m map[string]json.RawMessage
			if json.Unmarshal(e, &m) != nil {
				continue
			}
			if id, ok := m["id"]; ok {
				ids[compact(id)]++
			}
		}
	}
	return ids, lines
}

// responseIDs checks a stdout line and returns the ids it answers.
func responseIDs(line []byte) ([]string, error) {
	var elems []json.RawMessage
	if len(line) > 0 && line[0] == '[' {
		if err := json.Unmarshal(line, &elems); err != nil {
			return nil, err
		}
		if len(elems) == 0 {
			return nil, errorString("an empty batch answer")
		}
	} else {
		elems = []json.RawMessage{line}
	}
	var ids []string
	for _, e := range elems {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(e, &m); err != nil || m == nil {
			return nil, errorString("not a JSON object")
		}
		if string(m["jsonrpc"]) != `"2.0"` {
			return nil, errorString("jsonrpc is not \"2.0\"")
		}
		id, hasID := m["id"]
		_, hasResult := m["result"]
		rawErr, hasError := m["error"]
		if !hasID || hasResult == hasError || len(m) != 3 {
			return nil, errorString("want exactly jsonrpc, id and one of result or error")
		}
		if c := id[0]; c != '"' && c != '-' && (c < '0' || c > '9') && string(id) != "null" {
			return nil, errorString("id is not a string, number or null")
		}
		if hasError {
			var e struct {
				Code    *json.Number `json:"code"`
				Message *string      `json:"message"`
			}
			if json.Unmarshal(rawErr, &e) != nil || e.Code == nil || e.Message == nil {
				return nil, errorString("error without an integer code and a message")
			}
			if _, err := strconv.Atoi(e.Code.String()); err != nil {
				return nil, errorString("error code is not an integer")
			}
		}
		ids = append(ids, compact(id))
	}
	return ids, nil
}

type errorString string

func (e errorString) Error() string { return string(e) }

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// FuzzToolsCallParams sends one tools/call with arbitrary params and
// checks the answer against the rule of docs/architecture.md §3: a non-empty
// string name and, if present, object arguments reach the kernel and come
// back as a tool result; anything else is -32602.
func FuzzToolsCallParams(f *testing.F) {
	for _, s := range wireSeeds(f) {
		for _, line := range strings.Split(string(s), "\n") {
			var m struct {
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
			}
			if json.Unmarshal([]byte(line), &m) == nil && m.Method == "tools/call" && m.Params != nil {
				f.Add([]byte(m.Params))
			}
		}
	}
	f.Add([]byte(`{"name":"files_read","arguments":{"path":"/a\u0000\n"}}`))
	f.Add([]byte(`{"name":"sharedos.escalate","arguments":{"reason":"` + strings.Repeat("\U0001F600", 600) + `"}}`))
	f.Add([]byte(`{"name":"x","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`))
	// One fake kernel per target and process; each input is its own
	// connection, that is, its own turn.
	k := kerneltest.Start(f, kerneltest.Options{})
	f.Fuzz(func(t *testing.T, params []byte) {
		var b bytes.Buffer
		if json.Compact(&b, params) != nil {
			return // not JSON: FuzzServe covers lines that do not parse
		}
		line := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + b.String() + "}\n"
		var answer []byte
		for _, l := range bytes.SplitAfter(serveForFuzz(t, k, []byte(line)), []byte("\n")) {
			if _, progress := progressToken(l); !progress {
				answer = append(answer, l...)
			}
		}
		out := answer
		ids, err := responseIDs(bytes.TrimSuffix(out, []byte("\n")))
		if err != nil || len(ids) != 1 || bytes.Count(out, []byte("\n")) != 1 {
			t.Fatalf("want one JSON-RPC answer, got %q (%v)", out, err)
		}
		var a struct {
			ID     json.RawMessage `json:"id"`
			Result *struct {
				Content []json.RawMessage `json:"content"`
				IsError bool              `json:"isError"`
				Meta    struct {
					Status string `json:"sharedos/status"`
				} `json:"_meta"`
			} `json:"result"`
			Error *jsonrpc.Error `json:"error"`
		}
		if err := json.Unmarshal(out, &a); err != nil {
			t.Fatalf("answer %q: %v", out, err)
		}
		wantCode, modern := expectedCallCode(b.Bytes())
		switch {
		case modern:
			// The era's own checks come first; any answer above is fine.
		case wantCode != 0:
			if a.Error == nil || a.Error.Code != wantCode {
				t.Fatalf("params %s: want error %d, got %s", b.Bytes(), wantCode, out)
			}
		case a.Result == nil:
			t.Fatalf("params %s: want a tool result, got %s", b.Bytes(), out)
		case a.Result.Content == nil:
			t.Fatalf("tool result without content: %s", out)
		case a.Result.IsError && a.Result.Meta.Status != "denied" && a.Result.Meta.Status != "failed":
			t.Fatalf("refusal without a denied or failed status: %s", out)
		}
	})
}

// expectedCallCode is the independent statement of the tools/call params
// rule: 0 when the call must reach the kernel, else the JSON-RPC code.
// modern reports params whose _meta names a protocol version, which the
// modern era checks before the call's own params.
func expectedCallCode(params []byte) (code int, modern bool) {
	if !utf8.Valid(params) {
		return jsonrpc.CodeParseError, false
	}
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil || p == nil {
		return jsonrpc.CodeInvalidParams, false
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(p["_meta"], &meta) == nil {
		if _, ok := meta["io.modelcontextprotocol/protocolVersion"]; ok {
			return 0, true
		}
		if epoch, ok := meta["sharedos/protocolVersion"]; ok && string(epoch) != `"2"` {
			return jsonrpc.CodeInvalidParams, false // a SharedOS epoch this shim is not
		}
	}
	var name string
	if json.Unmarshal(p["name"], &name) != nil || name == "" {
		return jsonrpc.CodeInvalidParams, false
	}
	if args, ok := p["arguments"]; ok && (len(args) == 0 || args[0] != '{') {
		return jsonrpc.CodeInvalidParams, false
	}
	return 0, false
}
