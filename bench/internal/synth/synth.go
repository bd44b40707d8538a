// Package synth is a kernel for the relay benchmarks that serves any
// number of synthetic tools shaped like real ones, so catalogue sizes the
// reference kernel does not have (it registers five tools) can be
// measured. It speaks just enough of the kernel protocol for a relay:
// hello, tools.list with a correct catalogHash, tools.invoke, call.cancel
// and ping, and answers payload calls (PayloadTool) with results of any
// size in either shape a kernel may use. It answers every request inline,
// in order, without checking peers or grants: it is a load generator, not
// a kernel to trust.
package synth

import (
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/sharedos/sharedos-mcp/hashing"
	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
)

// Tools returns n kernel tool definitions, compact as they cross the
// socket. They vary the way a real catalogue does: one, three or six
// properties with descriptions, enums, bounds, nested objects and arrays,
// an output schema on every third tool, annotations, and the
// kernel-internal fields a relay must not publish. Sizes run from about
// 900 bytes to 1.4 KB.
func Tools(n int) []json.RawMessage {
	props := []string{
		`"query":{"type":"string","minLength":1,"maxLength":2048,"description":"Free-text query; quoted phrases match exactly."}`,
		`"limit":{"type":"integer","minimum":1,"maximum":100,"default":20,"description":"Most results to return."}`,
		`"cursor":{"type":"string","description":"Opaque cursor from a previous call."}`,
		`"sortBy":{"enum":["relevance","updatedAt","createdAt","title"],"default":"relevance"}`,
		`"filters":{"type":"object","properties":{"owner":{"type":"string","pattern":"^[a-z0-9_-]{1,64}$"},"labels":{"type":"array","items":{"type":"string","maxLength":64},"maxItems":20,"uniqueItems":true},"updatedAfter":{"type":"string","format":"date-time"}},"additionalProperties":false}`,
		`"includeArchived":{"type":"boolean","default":false,"description":"Also return archived records."}`,
	}
	verbs := []string{"search", "get", "create", "update", "list", "delete"}
	out := make([]json.RawMessage, n)
	for i := range out {
		ns := fmt.Sprintf("svc%d", i%40)
		verb := verbs[i%len(verbs)]
		nprops := []int{1, 3, 6}[i%3]
		readWrite, ann := "read", `{"readOnly":true,"idempotent":true}`
		if verb == "create" || verb == "update" || verb == "delete" {
			readWrite, ann = "write", `{"readOnly":false,"destructive":true}`
		}
		var b strings.Builder
		fmt.Fprintf(&b, `{"name":"%s.%s_records_%d","description":"%s records of service %d. Results are ordered by relevance; use the cursor to page through them. Fields not listed in the schema are rejected.",`, ns, verb, i, strings.ToUpper(verb[:1])+verb[1:], i)
		fmt.Fprintf(&b, `"namespace":"%s","source":"mcp","readWrite":"%s","inputSchema":{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{%s},"required":["%s"],"additionalProperties":false}`,
			ns, readWrite, strings.Join(props[:nprops], ","), strings.SplitN(props[0], `"`, 3)[1])
		if i%3 == 0 {
			b.WriteString(`,"outputSchema":{"type":"object","properties":{"items":{"type":"array","items":{"type":"object","properties":{"id":{"type":"string"},"title":{"type":"string"},"updatedAt":{"type":"string","format":"date-time"}},"required":["id","title"]}},"nextCursor":{"type":["string","null"]}},"required":["items"]}`)
		}
		fmt.Fprintf(&b, `,"annotations":%s,"requiredCapability":{"resource":{"namespace":"%s","path":"/records"},"action":"%s"},"metadata":{"vendor":"example","version":"1.4.2"}}`, ann, ns, verb)
		out[i] = json.RawMessage(b.String())
	}
	return out
}

// Kernel serves one catalogue on a Unix socket until Close.
type Kernel struct {
	ln   *net.UnixListener
	list []byte // the tools.list result, encoded once
	wg   sync.WaitGroup

	mu       sync.Mutex
	payloads map[string][]byte // payload results by shape and size
}

// Listen starts serving tools on a socket at path.
func Listen(path string, tools []json.RawMessage) (*Kernel, error) {
	pub, err := hashing.ProjectRaw(tools)
	if err != nil {
		return nil, fmt.Errorf("synthetic catalogue: %w", err)
	}
	list, err := json.Marshal(kproto.ListResult{Tools: tools, CatalogHash: hashing.Hash(pub)})
	if err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	k := &Kernel{ln: ln, list: list}
	k.wg.Add(1)
	go k.accept()
	return k, nil
}

// Close stops accepting, ends every connection's loop once its peer
// closes, and waits for them.
func (k *Kernel) Close() {
	k.ln.Close()
	k.wg.Wait()
}

func (k *Kernel) accept() {
	defer k.wg.Done()
	for {
		c, err := k.ln.AcceptUnix()
		if err != nil {
			return
		}
		k.wg.Add(1)
		go func() {
			defer k.wg.Done()
			defer c.Close()
			k.serve(c)
		}()
	}
}

// FirstTool is the name of Tools' first tool. Every call to any tool
// succeeds with one text block, Answer, except the payload calls below.
const (
	FirstTool = "svc0.search_records_0"
	Answer    = "synthetic answer"
)

// PayloadTool is the one tool of PayloadTools. A call to it with
// arguments {"text": ...} carries a payload to the kernel and is answered
// with Answer; one with {"result": "content" or "output", "bytes": N} is
// answered with a payload of N bytes (PayloadString) in that shape: one
// text block in content, or the output {"text": ...} (PayloadOutput).
const PayloadTool = "bench.payload"

// Result shapes a payload call can ask for.
const (
	ShapeContent = "content"
	ShapeOutput  = "output"
)

// PayloadTools is a catalogue of PayloadTool alone. Its input schema
// admits both kinds of payload call, so an SDK relay that validates
// arguments lets them through; it has no output schema, so a relay
// renders an output as one text block and nothing more.
func PayloadTools() []json.RawMessage {
	return []json.RawMessage{json.RawMessage(`{"name":"` + PayloadTool + `","description":"Carries or returns a payload of a given size, for the relay benchmarks.",` +
		`"namespace":"bench","source":"mcp","readWrite":"read","inputSchema":{"type":"object","properties":{` +
		`"text":{"type":"string","description":"A payload to carry to the kernel."},` +
		`"result":{"enum":["` + ShapeContent + `","` + ShapeOutput + `"],"description":"The shape of the payload to return."},` +
		`"bytes":{"type":"integer","minimum":0,"description":"The size of the payload to return, as a JSON string."}},` +
		`"additionalProperties":false}}`)}
}

// PayloadString is a JSON string, quotes included, of exactly n bytes
// (n >= 2) whose text reads like source code: lines of 20 to 60 bytes, so
// about one byte in twelve is an escape (newlines, tabs, quotes), as in
// the files agents read and write. The same n gives the same bytes.
func PayloadString(n int) []byte {
	b := make([]byte, 0, n)
	b = append(b, '"')
	var line []byte
	for i := 0; ; i++ {
		line = fmt.Appendf(line[:0], payloadLines[i%len(payloadLines)], i)
		esc := jsonrpc.AppendString(nil, line)
		esc = esc[1 : len(esc)-1]
		if len(b)+len(esc)+1 > n {
			break
		}
		b = append(b, esc...)
	}
	for len(b) < n-1 {
		b = append(b, 'x')
	}
	return append(b, '"')
}

// payloadLines are the lines of PayloadString, each with one %d.
var payloadLines = []string{
	"func step%d(ctx context.Context, n int) error {\n",
	"\tif n > %d {\n",
	"\t\treturn fmt.Errorf(\"step %d: too many: %%d\", n)\n",
	"\t}\n\t// Keep the first %d entries; the rest wait for the next pass.\n",
	"\treturn nil // %d\n}\n\n",
}

// PayloadOutput is the output a payload call in the output shape gets:
// an object holding the payload, as a tool with structured results would
// return a file.
func PayloadOutput(payload []byte) []byte {
	return slices.Concat([]byte(`{"text":`), payload, []byte(`}`))
}

var (
	helloResult  = []byte(`{"protocol":1,"principal":{"kind":"integration","name":"bench"},"executionId":"exe_bench","kernel":{"name":"synth","version":"0"}}`)
	invokeResult = []byte(`{"status":"succeeded","content":[{"type":"text","text":"` + Answer + `"}]}`)
)

// serve answers one connection's requests in order. It reads each line
// once with the scanner, which only validates it, and looks into the
// params of small lines only: a line that carries a payload costs it one
// pass, so a relay in front of it is what a benchmark measures.
func (k *Kernel) serve(c *net.UnixConn) {
	r := NewLineReader(c, 64<<10)
	for {
		line, err := r.ReadLine()
		if err != nil {
			return
		}
		m, err := jsonrpc.ParseEnvelope(line)
		if err != nil || m.ID == nil {
			continue // notifications (call.cancel) need no answer here
		}
		var result []byte
		switch string(m.Method) {
		case `"` + kproto.MethodHello + `"`:
			result = helloResult
		case `"` + kproto.MethodList + `"`:
			result = k.list
		case `"` + kproto.MethodInvoke + `"`:
			result = k.invoke(m.Params)
		default:
			result = []byte("{}")
		}
		// Written in pieces so the catalogue or a payload is never
		// copied: the harness shares the machine with what it measures.
		bufs := net.Buffers{[]byte(`{"jsonrpc":"2.0","id":`), m.ID, []byte(`,"result":`), result, []byte("}\n")}
		if _, err := bufs.WriteTo(c); err != nil {
			return
		}
	}
}

// maxSmallParams bounds the params invoke looks into: larger ones carry a
// payload, which asks for nothing but Answer.
const maxSmallParams = 4 << 10

// invoke is the result of a tools.invoke with params.
func (k *Kernel) invoke(params []byte) []byte {
	if len(params) > maxSmallParams {
		return invokeResult
	}
	var tool, args []byte
	jsonrpc.EachMember(params, func(key, value []byte) error {
		switch string(key) {
		case `"tool"`:
			tool = value
		case `"arguments"`:
			args = value
		}
		return nil
	})
	if string(tool) != `"`+PayloadTool+`"` {
		return invokeResult
	}
	var ask struct {
		Result string `json:"result"`
		Bytes  int    `json:"bytes"`
	}
	if json.Unmarshal(args, &ask) != nil || ask.Bytes < 2 || (ask.Result != ShapeContent && ask.Result != ShapeOutput) {
		return invokeResult
	}
	return k.payloadResult(ask.Result, ask.Bytes)
}

// payloadResult is a payload call's result, encoded once per shape and
// size.
func (k *Kernel) payloadResult(shape string, n int) []byte {
	key := shape + strconv.Itoa(n)
	k.mu.Lock()
	defer k.mu.Unlock()
	if r, ok := k.payloads[key]; ok {
		return r
	}
	var r []byte
	if shape == ShapeContent {
		r = slices.Concat([]byte(`{"status":"succeeded","content":[{"type":"text","text":`), PayloadString(n), []byte(`}]}`))
	} else {
		r = slices.Concat([]byte(`{"status":"succeeded","output":`), PayloadOutput(PayloadString(n)), []byte(`}`))
	}
	if k.payloads == nil {
		k.payloads = map[string][]byte{}
	}
	k.payloads[key] = r
	return r
}
