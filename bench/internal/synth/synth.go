// Package synth is a kernel for the relay benchmarks that serves any
// number of synthetic tools shaped like real ones, so catalogue sizes the
// reference kernel does not have (it registers five tools) can be
// measured. It speaks just enough of the kernel protocol for a relay:
// hello, tools.list with a correct catalogHash, tools.invoke, call.cancel
// and ping. It answers every request inline, in order, without checking
// peers or grants: it is a load generator, not a kernel to trust.
package synth

import (
	"encoding/json"
	"fmt"
	"net"
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
// succeeds with one text block, Answer.
const (
	FirstTool = "svc0.search_records_0"
	Answer    = "synthetic answer"
)

var (
	helloResult  = []byte(`{"protocol":1,"principal":{"kind":"integration","name":"bench"},"executionId":"exe_bench","kernel":{"name":"synth","version":"0"}}`)
	invokeResult = []byte(`{"status":"succeeded","content":[{"type":"text","text":"` + Answer + `"}]}`)
)

func (k *Kernel) serve(c *net.UnixConn) {
	r := jsonrpc.NewReader(c, 0)
	for {
		line, err := r.ReadLine()
		if err != nil {
			return
		}
		var m jsonrpc.Message
		if json.Unmarshal(line, &m) != nil || m.ID == nil {
			continue // notifications (call.cancel) need no answer here
		}
		var result []byte
		switch m.Method {
		case kproto.MethodHello:
			result = helloResult
		case kproto.MethodList:
			result = k.list
		case kproto.MethodInvoke:
			result = invokeResult
		default:
			result = []byte("{}")
		}
		// Written in three pieces so the catalogue is never copied: the
		// harness shares the machine with what it measures.
		bufs := net.Buffers{[]byte(`{"jsonrpc":"2.0","id":`), m.ID, []byte(`,"result":`), result, []byte("}\n")}
		if _, err := bufs.WriteTo(c); err != nil {
			return
		}
	}
}
