// Package kerneltest is a scriptable kernel for tests: the server side of
// docs/kernel-protocol.md over a real Unix socket, with tools whose names
// say how they behave. Only tests import it.
package kerneltest

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sharedos/sharedos-mcp/hashing"
	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
)

// Catalogue is the fake kernel's tool set. Each tool behaves as its
// description says; the names are what wire tests call.
var Catalogue = []string{
	`{"name":"files.read","description":"Read a file; answers with its path.","namespace":"files","source":"kerneltest","readWrite":"read","inputSchema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]},"requiredCapability":{"action":"read"},"metadata":{"secret":"never published"}}`,
	`{"name":"files.list","description":"List a directory; answers with a JSON object.","namespace":"files","source":"kerneltest","readWrite":"read","inputSchema":{"type":"object","properties":{"path":{"type":"string"}}},"outputSchema":{"type":"object","properties":{"entries":{"type":"array"}}}}`,
	`{"name":"files.write","description":"Write a file; always denied.","namespace":"files","source":"kerneltest","readWrite":"write","inputSchema":{"type":"object"},"annotations":{"destructive":true}}`,
	`{"name":"broken.tool","description":"Always fails.","namespace":"test","source":"kerneltest","readWrite":"read","inputSchema":{"type":"object"}}`,
	`{"name":"slow.read","description":"Answers only after a later call has been answered.","namespace":"test","source":"kerneltest","readWrite":"read","inputSchema":{"type":"object"}}`,
	`{"name":"hang","description":"Never answers until cancelled.","namespace":"test","source":"kerneltest","readWrite":"read","inputSchema":{"type":"object"}}`,
	`{"name":"die","description":"Closes the kernel connection.","namespace":"test","source":"kerneltest","readWrite":"read","inputSchema":{"type":"object"}}`,
	`{"name":"sharedos.escalate","description":"Stop and ask a person.","namespace":"sharedos","source":"kerneltest","readWrite":"read","inputSchema":{"type":"object","properties":{"reason":{"type":"string"}}}}`,
}

// Options changes the fake's behaviour.
type Options struct {
	// Tools replaces Catalogue when non-nil.
	Tools []string
	// WrongHash makes tools.list advertise a hash the shim cannot match.
	WrongHash bool
	// Instructions is returned by integration.hello.
	Instructions string
}

// Kernel is a running fake kernel.
type Kernel struct {
	Path string
	Hash string

	opts  Options
	tools []json.RawMessage
	ln    *net.UnixListener
	wg    sync.WaitGroup

	mu     sync.Mutex
	events []string
}

// Start serves a fake kernel on a fresh socket until the test ends.
func Start(t testing.TB, opts Options) *Kernel {
	t.Helper()
	dir, err := os.MkdirTemp("", "kt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	k := &Kernel{Path: filepath.Join(dir, "k.sock"), opts: opts}
	src := opts.Tools
	if src == nil {
		src = Catalogue
	}
	for _, s := range src {
		k.tools = append(k.tools, json.RawMessage(s))
	}
	pub, err := hashing.ProjectRaw(k.tools)
	if err != nil {
		t.Fatalf("kerneltest catalogue: %v", err)
	}
	k.Hash = hashing.Hash(pub)
	k.ln, err = net.ListenUnix("unix", &net.UnixAddr{Name: k.Path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	k.wg.Add(1)
	go k.accept()
	t.Cleanup(k.WaitIdle)
	return k
}

// Events returns what the kernel has seen so far, one line each, e.g.
// "hello claude-code", "invoke files.read", "cancel c3", "closed".
func (k *Kernel) Events() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.events...)
}

// WaitIdle stops accepting connections and waits until every connection
// accepted so far has closed. It runs again, harmlessly, when the test
// ends.
func (k *Kernel) WaitIdle() {
	k.ln.Close()
	k.wg.Wait()
}

func (k *Kernel) record(format string, args ...any) {
	k.mu.Lock()
	k.events = append(k.events, fmt.Sprintf(format, args...))
	k.mu.Unlock()
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
			(&turn{k: k, conn: c, calls: map[string]chan struct{}{}}).serve()
		}()
	}
}

type turn struct {
	k    *Kernel
	conn *net.UnixConn
	wmu  sync.Mutex
	wg   sync.WaitGroup

	mu        sync.Mutex
	hello     bool
	escalated bool
	calls     map[string]chan struct{} // cancellable calls by callId
	slow      []chan struct{}          // slow.read calls waiting for another answer
}

func (t *turn) serve() {
	defer func() {
		t.conn.Close()
		t.mu.Lock()
		for _, ch := range t.calls {
			close(ch)
		}
		for _, ch := range t.slow {
			close(ch)
		}
		t.calls, t.slow = map[string]chan struct{}{}, nil
		t.mu.Unlock()
		t.wg.Wait()
		t.k.record("closed")
	}()
	r := jsonrpc.NewReader(t.conn, 0)
	for {
		line, err := r.ReadLine()
		if err != nil {
			return
		}
		var m jsonrpc.Message
		if err := json.Unmarshal(line, &m); err != nil {
			t.k.record("bad line %q", line)
			return
		}
		if !t.handle(&m) {
			return
		}
	}
}

// handle answers one message; false ends the connection.
func (t *turn) handle(m *jsonrpc.Message) bool {
	switch m.Method {
	case kproto.MethodHello:
		var p kproto.HelloParams
		json.Unmarshal(m.Params, &p)
		t.k.record("hello %s", p.Name)
		t.mu.Lock()
		again := t.hello
		t.hello = true
		t.mu.Unlock()
		if again {
			t.fail(m.ID, kproto.ErrAlreadyIntroduced)
			return true
		}
		t.reply(m.ID, kproto.HelloResult{
			Protocol:     kproto.Version,
			Principal:    kproto.Principal{Kind: "integration", Name: p.Name},
			ExecutionID:  "exe_test",
			Instructions: t.k.opts.Instructions,
			Kernel:       kproto.Peer{Name: "kerneltest", Version: "0"},
		})
	case kproto.MethodList:
		t.k.record("list")
		hash := t.k.Hash
		if t.k.opts.WrongHash {
			hash = strings.Repeat("0", 64)
		}
		t.reply(m.ID, kproto.ListResult{Tools: t.k.tools, CatalogHash: hash})
	case kproto.MethodInvoke:
		var p kproto.InvokeParams
		json.Unmarshal(m.Params, &p)
		t.k.record("invoke %s args=%s", p.Tool, p.Arguments)
		if p.Tool == "die" {
			return false
		}
		// A waiting call registers before the next message is read, so
		// the message after it (a later call, call.cancel, or the end of
		// the connection) is sure to release it.
		var release chan struct{}
		switch p.Tool {
		case "slow.read":
			release = make(chan struct{})
			t.mu.Lock()
			t.slow = append(t.slow, release)
			t.mu.Unlock()
		case "hang":
			release = make(chan struct{})
			t.mu.Lock()
			t.calls[p.CallID] = release
			t.mu.Unlock()
		}
		t.mu.Lock()
		escalated := t.escalated
		t.mu.Unlock()
		t.wg.Add(1)
		go t.invoke(m.ID, p, release, escalated)
	case kproto.MethodCancel:
		var p kproto.CancelParams
		json.Unmarshal(m.Params, &p)
		t.k.record("cancel %s", p.CallID)
		t.mu.Lock()
		if ch, ok := t.calls[p.CallID]; ok {
			close(ch)
			delete(t.calls, p.CallID)
		}
		t.mu.Unlock()
	case kproto.MethodEscalate:
		var p kproto.EscalateParams
		json.Unmarshal(m.Params, &p)
		t.k.record("escalate %q", p.Reason)
		t.mu.Lock()
		t.escalated = true
		t.mu.Unlock()
		t.reply(m.ID, struct{}{})
	case kproto.MethodPing:
		t.reply(m.ID, struct{}{})
	default:
		t.k.record("unknown %s", m.Method)
	}
	return true
}

// invoke answers one call. escalated and release were decided when the
// call was read, so the answer does not depend on goroutine timing.
func (t *turn) invoke(id json.RawMessage, p kproto.InvokeParams, release chan struct{}, escalated bool) {
	defer t.wg.Done()
	var res kproto.InvokeResult
	switch {
	case escalated:
		res = deny(kproto.CodeEscalationPending)
	case p.CatalogHash != t.k.Hash:
		res = deny(kproto.CodeCatalogMismatch)
	case p.Tool == "files.read":
		var a struct{ Path string }
		json.Unmarshal(p.Arguments, &a)
		res = kproto.InvokeResult{Status: kproto.StatusSucceeded, Content: mustJSON([]map[string]string{{"type": "text", "text": "contents of " + a.Path}})}
	case p.Tool == "files.list":
		res = kproto.InvokeResult{Status: kproto.StatusSucceeded, Output: json.RawMessage(`{"entries":["a.txt","b.txt"]}`)}
	case p.Tool == "files.write":
		res = deny(kproto.CodeNoMatchingGrant)
		res.Message = "no grant allows write on files:/x"
	case p.Tool == "broken.tool":
		retry := true
		res = kproto.InvokeResult{Status: kproto.StatusFailed, Code: kproto.CodeInternal, Message: "disk on fire", Retryable: &retry}
	case p.Tool == "slow.read":
		<-release
		res = kproto.InvokeResult{Status: kproto.StatusSucceeded, Output: json.RawMessage(`"slow done"`)}
	case p.Tool == "hang":
		<-release
		res = kproto.InvokeResult{Status: kproto.StatusFailed, Code: kproto.CodeCancelled}
	default:
		res = deny(kproto.CodeToolUnavailable)
		res.Message = "no tool named " + p.Tool + " in this turn"
	}
	t.reply(id, res)
	if p.Tool != "slow.read" {
		t.mu.Lock()
		for _, ch := range t.slow {
			close(ch)
		}
		t.slow = nil
		t.mu.Unlock()
	}
}

func deny(code string) kproto.InvokeResult {
	return kproto.InvokeResult{Status: kproto.StatusDenied, Code: code, Message: "denied: " + code}
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func (t *turn) reply(id json.RawMessage, result any) {
	t.write(jsonrpc.AppendResponse(nil, id, mustJSON(result)))
}

func (t *turn) fail(id json.RawMessage, code string) {
	t.write(jsonrpc.AppendError(nil, id, &jsonrpc.Error{Code: -32600, Message: code, Data: mustJSON(kproto.ErrorData{Code: code})}))
}

func (t *turn) write(b []byte) {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	t.conn.Write(b)
}
