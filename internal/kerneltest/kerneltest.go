// Package kerneltest is the one fake kernel of the tests: the server side
// of docs/kernel-protocol.md over a real Unix socket, with tools whose
// names say how they behave (Catalogue) and a record of what it saw
// (Events). A test that needs a kernel to misbehave in a way of its own
// gives it a Handler rather than writing a listener: the handler sees each
// message first and may answer with any bytes (malformed lines, answers
// out of order, a catalogue no real kernel would send) or hang up.
//
// Start serves a kernel for the length of a test; New and Close serve one
// where there is no test, as in a helper process a test starts. Only
// tests, and test helpers that run as programs, import it.
package kerneltest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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
	`{"name":"hold","description":"Answers after ms milliseconds, or when the test releases it.","namespace":"test","source":"kerneltest","readWrite":"read","inputSchema":{"type":"object","properties":{"ms":{"type":"integer"}}}}`,
	`{"name":"progress","description":"Reports steps progress, answers, then reports after more.","namespace":"test","source":"kerneltest","readWrite":"read","inputSchema":{"type":"object","properties":{"steps":{"type":"integer"},"after":{"type":"integer"}}}}`,
	`{"name":"echo","description":"Answers with its arguments, twice.","namespace":"test","source":"kerneltest","readWrite":"read","inputSchema":{"type":"object"}}`,
	`{"name":"die","description":"Closes the kernel connection.","namespace":"test","source":"kerneltest","readWrite":"read","inputSchema":{"type":"object"}}`,
	`{"name":"sharedos.escalate","description":"Stop and ask a person.","namespace":"sharedos","source":"kerneltest","readWrite":"read","inputSchema":{"type":"object","properties":{"reason":{"type":"string"}}}}`,
}

// AskTools are the tools Options.Approvals adds: calls a person must
// approve (docs/approvals.md), as the reference kernel holds them.
var AskTools = []string{
	`{"name":"ask.write","description":"Writes once a person approves: asks the shim (approval.ask) when it announced it can, and answers as it was answered; a retry after approval.answer approved runs.","namespace":"test","source":"kerneltest","readWrite":"write","inputSchema":{"type":"object","properties":{"path":{"type":"string"}}}}`,
	`{"name":"ask.operator","description":"Asks the shim, then has the operator approve it first: approval.withdrawn, then the call runs.","namespace":"test","source":"kerneltest","readWrite":"write","inputSchema":{"type":"object"}}`,
}

// Options changes the fake's behaviour.
type Options struct {
	// Approvals adds AskTools to the catalogue.
	Approvals bool
	// Tools replaces Catalogue when non-nil. A catalogue the shim's
	// projection refuses is served as it is, with an empty Hash.
	Tools []string
	// WrongHash makes tools.list advertise a hash the shim cannot match.
	WrongHash bool
	// Instructions is returned by integration.hello.
	Instructions string
	// MaxLine is the longest line the kernel reads, advertised in hello;
	// a longer line is answered -32600 with a null id, as the reference
	// kernel does. 0 means jsonrpc.DefaultMaxLine, not advertised.
	MaxLine int
	// Stall makes the kernel stop reading and answering at the first
	// tools.list, as a kernel process that was stopped would, until
	// Close.
	Stall bool
	// Handler, when set, sees every message before the fake does and
	// reports whether it dealt with it; if not, the fake answers as
	// usual. It runs on the connection's reading goroutine, so the next
	// message is read only once it returns. What it writes with c.Write
	// goes out as it is; a line the fake cannot decode as JSON-RPC ends
	// the connection before any handler sees it.
	Handler func(c *Conn, m *jsonrpc.Message) bool
}

// Kernel is a running fake kernel.
type Kernel struct {
	// Path is the kernel's socket. Its directory is the kernel's own
	// (private, removed by Close or at the end of the test), so a test
	// may change the mode or owner of either to set a trap.
	Path string
	// Hash is the catalogHash of the catalogue served, empty when the
	// catalogue does not project.
	Hash string

	opts     Options
	dir      string
	tools    []json.RawMessage
	ln       *net.UnixListener
	wg       sync.WaitGroup
	quit     chan struct{}
	once     sync.Once
	released sync.Once

	mu      sync.Mutex
	events  []string
	conns   map[*Conn]bool
	release chan struct{} // closed by Release: calls to hold answer
}

// New serves a fake kernel on a fresh socket until Close.
func New(opts Options) (*Kernel, error) {
	dir, err := os.MkdirTemp("", "kt")
	if err != nil {
		return nil, fmt.Errorf("kerneltest: %w", err)
	}
	k := &Kernel{Path: filepath.Join(dir, "k.sock"), opts: opts, dir: dir, quit: make(chan struct{}),
		conns: map[*Conn]bool{}, release: make(chan struct{})}
	src := opts.Tools
	if src == nil {
		src = Catalogue
		if opts.Approvals {
			src = append(append([]string(nil), Catalogue...), AskTools...)
		}
	}
	for _, s := range src {
		k.tools = append(k.tools, json.RawMessage(s))
	}
	if pub, err := hashing.ProjectRaw(k.tools); err == nil {
		k.Hash = hashing.Hash(pub)
	} else if opts.Tools == nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("kerneltest catalogue: %w", err)
	}
	k.ln, err = net.ListenUnix("unix", &net.UnixAddr{Name: k.Path, Net: "unix"})
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("kerneltest: %w", err)
	}
	k.wg.Add(1)
	go k.accept()
	return k, nil
}

// Start is New for a test: the kernel stops when the test ends, after
// every connection has closed.
func Start(t testing.TB, opts Options) *Kernel {
	t.Helper()
	k, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if opts.Stall {
			k.Close()
		}
		k.WaitIdle()
		os.RemoveAll(k.dir)
	})
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
// accepted so far has closed. It may run more than once.
func (k *Kernel) WaitIdle() {
	k.ln.Close()
	k.wg.Wait()
}

// Close stops the kernel: it closes every connection (a stalled one too)
// and waits for them, and removes the socket's directory.
func (k *Kernel) Close() error {
	k.once.Do(func() { close(k.quit) })
	k.ln.Close()
	k.mu.Lock()
	for c := range k.conns {
		c.conn.Close()
	}
	k.mu.Unlock()
	k.wg.Wait()
	return os.RemoveAll(k.dir)
}

// Release answers every call to hold that has no ms, those made before
// and those made after, so a test need not know whether a call has reached
// the kernel yet.
func (k *Kernel) Release() {
	k.released.Do(func() { close(k.release) })
}

// Record adds an event, as the fake's own are added.
func (k *Kernel) Record(format string, args ...any) {
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
		conn := &Conn{k: k, conn: c, calls: map[string]chan struct{}{}, asks: map[string]chan string{}}
		k.mu.Lock()
		k.conns[conn] = true
		k.mu.Unlock()
		k.wg.Add(1)
		go func() {
			defer k.wg.Done()
			conn.serve()
			k.mu.Lock()
			delete(k.conns, conn)
			k.mu.Unlock()
		}()
	}
}

// Conn is one connection, that is, one turn, as a Handler sees it.
type Conn struct {
	k    *Kernel
	conn *net.UnixConn
	wmu  sync.Mutex
	wg   sync.WaitGroup

	mu        sync.Mutex
	hello     bool
	escalated bool
	canAsk    bool                     // the shim's hello announced approvals
	calls     map[string]chan struct{} // cancellable calls by callId
	slow      []chan struct{}          // slow.read calls waiting for another answer
	asks      map[string]chan string   // approval.ask requests awaiting the shim's answer, by id
	nextAsk   int
	approved  []string // approvals the shim's approval.answer approved, not yet used
}

func (c *Conn) serve() {
	defer func() {
		c.conn.Close()
		c.mu.Lock()
		for _, ch := range c.calls {
			close(ch)
		}
		for _, ch := range c.slow {
			close(ch)
		}
		for _, ch := range c.asks {
			close(ch)
		}
		c.calls, c.slow, c.asks = map[string]chan struct{}{}, nil, map[string]chan string{}
		c.mu.Unlock()
		c.wg.Wait()
		c.k.Record("closed")
	}()
	r := jsonrpc.NewReader(c.conn, c.k.opts.MaxLine)
	for {
		line, err := r.ReadLine()
		if errors.Is(err, jsonrpc.ErrLineTooLong) {
			c.k.Record("line too long")
			c.Write(jsonrpc.AppendError(nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "message line exceeds the size limit"}))
			continue
		}
		if err != nil {
			return
		}
		var m jsonrpc.Message
		if err := json.Unmarshal(line, &m); err != nil {
			c.k.Record("bad line %q", line)
			return
		}
		if h := c.k.opts.Handler; h != nil && h(c, &m) {
			continue
		}
		if !c.handle(&m) {
			return
		}
	}
}

// handle answers one message; false ends the connection.
func (c *Conn) handle(m *jsonrpc.Message) bool {
	switch m.Method {
	case kproto.MethodHello:
		var p kproto.HelloParams
		json.Unmarshal(m.Params, &p)
		c.k.Record("hello %s", p.Name)
		c.mu.Lock()
		again := c.hello
		c.hello = true
		c.canAsk = p.Capabilities != nil && p.Capabilities.Approvals != nil
		c.mu.Unlock()
		if again {
			c.Fail(m.ID, jsonrpc.CodeInvalidRequest, kproto.ErrAlreadyIntroduced)
			return true
		}
		c.Reply(m.ID, kproto.HelloResult{
			Protocol:     kproto.Version,
			Principal:    kproto.Principal{Kind: "integration", Name: p.Name},
			ExecutionID:  "exe_test",
			Instructions: c.k.opts.Instructions,
			Kernel:       kproto.Peer{Name: "kerneltest", Version: "0"},
			MaxLine:      c.k.opts.MaxLine,
		})
	case kproto.MethodList:
		c.k.Record("list")
		if c.k.opts.Stall {
			c.k.Record("stalled")
			<-c.k.quit
			return false
		}
		hash := c.k.Hash
		if c.k.opts.WrongHash {
			hash = strings.Repeat("0", 64)
		}
		c.Reply(m.ID, kproto.ListResult{Tools: c.k.tools, CatalogHash: hash})
	case kproto.MethodInvoke:
		var p kproto.InvokeParams
		json.Unmarshal(m.Params, &p)
		if p.MCP.TraceParent != "" {
			// Only a call with trace context shows the mcp member, so the
			// scripts that do not test it do not spell it out.
			m := p.MCP // a copy: marshalling p itself would move it to the heap on every call
			mcp, _ := json.Marshal(&m)
			c.k.Record("invoke %s args=%s mcp=%s", p.Tool, p.Arguments, mcp)
		} else {
			c.k.Record("invoke %s args=%s", p.Tool, p.Arguments)
		}
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
			c.mu.Lock()
			c.slow = append(c.slow, release)
			c.mu.Unlock()
		case "hang", "hold":
			release = make(chan struct{})
			c.mu.Lock()
			c.calls[p.CallID] = release
			c.mu.Unlock()
		}
		c.mu.Lock()
		escalated := c.escalated
		c.mu.Unlock()
		c.wg.Add(1)
		go c.invoke(m.ID, &p, release, c.k.release, escalated)
	case kproto.MethodCancel:
		var p kproto.CancelParams
		json.Unmarshal(m.Params, &p)
		c.k.Record("cancel %s", p.CallID)
		c.mu.Lock()
		if ch, ok := c.calls[p.CallID]; ok {
			close(ch)
			delete(c.calls, p.CallID)
		}
		c.mu.Unlock()
	case kproto.MethodEscalate:
		var p kproto.EscalateParams
		json.Unmarshal(m.Params, &p)
		c.k.Record("escalate %q", p.Reason)
		c.mu.Lock()
		c.escalated = true
		c.mu.Unlock()
		c.Reply(m.ID, struct{}{})
	case kproto.MethodPing:
		c.Reply(m.ID, struct{}{})
	case kproto.MethodApprovalAnswer:
		var p kproto.ApprovalAnswerParams
		json.Unmarshal(m.Params, &p)
		c.k.Record("answer %s %s", p.ApprovalID, p.Decision)
		if p.Decision == kproto.ApprovalApproved {
			c.mu.Lock()
			c.approved = append(c.approved, p.ApprovalID)
			c.mu.Unlock()
		}
	case "":
		// The shim's answer to an approval.ask.
		var id string
		json.Unmarshal(m.ID, &id)
		var r kproto.ApprovalAskResult
		if m.Error != nil || json.Unmarshal(m.Result, &r) != nil {
			r.Decision = "error"
		}
		c.mu.Lock()
		ch := c.asks[id]
		delete(c.asks, id)
		c.mu.Unlock()
		if ch != nil {
			ch <- r.Decision
		}
	default:
		c.k.Record("unknown %s", m.Method)
	}
	return true
}

// ask sends the shim approval.ask for the call p and returns the
// approval's id and where the shim's decision arrives; nil when the shim
// cannot be asked.
func (c *Conn) ask(p kproto.InvokeParams) (string, chan string) {
	c.mu.Lock()
	if !c.canAsk {
		c.mu.Unlock()
		return "", nil
	}
	c.nextAsk++
	n := c.nextAsk
	id, ch := fmt.Sprintf("a%d", n), make(chan string, 1)
	c.asks[id] = ch
	c.mu.Unlock()
	approval := fmt.Sprintf("apr_test%d", n)
	c.k.Record("ask %s %s", approval, p.CallID)
	params := kproto.ApprovalAskParams{ApprovalID: approval, CallID: p.CallID, Integration: "wire-test", Tool: p.Tool, Action: "write",
		Resource: "test:/x", Arguments: string(p.Arguments), ArgumentsSHA256: "0000", ExpiresAt: "2026-12-01T12:10:00Z",
		Message: "wire-test asks to run " + p.Tool + ": write on test:/x.\nArguments: " + string(p.Arguments)}
	c.Write([]byte(`{"jsonrpc":"2.0","id":"` + id + `","method":"` + kproto.MethodApprovalAsk + `","params":` + string(mustJSON(params)) + "}\n"))
	return approval, ch
}

// asked answers an ask tool's call as the reference kernel would: run on
// an approval the shim's approval.answer gave, else ask and answer as
// the shim answered.
func (c *Conn) asked(p kproto.InvokeParams) kproto.InvokeResult {
	c.mu.Lock()
	if len(c.approved) > 0 {
		used := c.approved[0]
		c.approved = c.approved[1:]
		c.mu.Unlock()
		c.k.Record("ran %s on %s", p.Tool, used)
		return kproto.InvokeResult{Status: kproto.StatusSucceeded, Output: json.RawMessage(`"approved and run"`)}
	}
	c.mu.Unlock()
	approval, ch := c.ask(p)
	if ch == nil {
		return pending("apr_oob")
	}
	if p.Tool == "ask.operator" {
		c.Notify(kproto.MethodApprovalWithdrawn, kproto.ApprovalWithdrawnParams{ApprovalID: approval, Reason: kproto.WithdrawnDecided, Decision: kproto.ApprovalApproved, By: "operator"})
		c.k.Record("withdrawn %s", approval)
		return kproto.InvokeResult{Status: kproto.StatusSucceeded, Output: json.RawMessage(`"approved by the operator and run"`)}
	}
	d, ok := <-ch
	if !ok {
		return kproto.InvokeResult{Status: kproto.StatusFailed, Code: kproto.CodeCancelled}
	}
	c.k.Record("asked %s %s", approval, d)
	switch d {
	case kproto.ApprovalApproved:
		return kproto.InvokeResult{Status: kproto.StatusSucceeded, Output: json.RawMessage(`"approved and run"`)}
	case kproto.ApprovalDeclined:
		no := false
		return kproto.InvokeResult{Status: kproto.StatusDenied, Code: kproto.CodeApprovalDeclined, Retryable: &no, ApprovalID: approval,
			Message: "The person at the harness declined this call (approval " + approval + ")"}
	}
	return pending(approval)
}

func pending(approval string) kproto.InvokeResult {
	yes := true
	return kproto.InvokeResult{Status: kproto.StatusDenied, Code: kproto.CodeApprovalPending, Retryable: &yes, ApprovalID: approval,
		Message: "a person has been asked to approve this call (approval " + approval + ") and has not answered yet"}
}

// invoke answers one call. escalated and release were decided when the
// call was read, so the answer does not depend on goroutine timing.
func (c *Conn) invoke(id json.RawMessage, p *kproto.InvokeParams, release, released chan struct{}, escalated bool) {
	defer c.wg.Done()
	var res kproto.InvokeResult
	var a struct {
		Path  string `json:"path"`
		MS    int    `json:"ms"`
		Steps int    `json:"steps"`
		After int    `json:"after"`
	}
	json.Unmarshal(p.Arguments, &a)
	after := 0
	switch {
	case escalated:
		res = deny(kproto.CodeEscalationPending)
	case p.CatalogHash != c.k.Hash:
		res = deny(kproto.CodeCatalogMismatch)
	case p.Tool == "files.read":
		res = kproto.InvokeResult{Status: kproto.StatusSucceeded, Content: mustJSON([]map[string]string{{"type": "text", "text": "contents of " + a.Path}})}
	case p.Tool == "files.list":
		res = kproto.InvokeResult{Status: kproto.StatusSucceeded, Output: json.RawMessage(`{"entries":["a.txt","b.txt"]}`)}
	case p.Tool == "files.write" && a.Path == "/limited": // a budget used up, as the reference kernel answers it
		res = deny(kproto.CodeRateLimited)
		retry, wait := true, int64(30000)
		res.Message, res.Retryable, res.RetryAfterMs = "a grant's limit of calls is used up for write on files:/limited; retry in 30s (retryAfterMs 30000)", &retry, &wait
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
	case p.Tool == "hold":
		res = kproto.InvokeResult{Status: kproto.StatusSucceeded, Output: json.RawMessage(`"held"`)}
		var timeout <-chan time.Time
		if a.MS > 0 {
			t := time.NewTimer(time.Duration(a.MS) * time.Millisecond)
			defer t.Stop()
			timeout = t.C
		} else {
			timeout = make(chan time.Time) // never: only Release answers
		}
		select {
		case <-timeout:
		case <-released:
		case <-release: // cancelled, or the connection ended
			res = kproto.InvokeResult{Status: kproto.StatusFailed, Code: kproto.CodeCancelled}
		}
		c.mu.Lock()
		delete(c.calls, p.CallID)
		c.mu.Unlock()
	case p.Tool == "progress":
		total := float64(a.Steps)
		for i := 1; i <= a.Steps; i++ {
			c.Notify(kproto.MethodProgress, kproto.ProgressParams{CallID: p.CallID, Progress: float64(i), Total: &total, Message: fmt.Sprintf("step %d of %d", i, a.Steps)})
		}
		res = kproto.InvokeResult{Status: kproto.StatusSucceeded, Output: json.RawMessage(`"done"`)}
		after = a.After
	case strings.HasPrefix(p.Tool, "ask."):
		res = c.asked(*p)
	case p.Tool == "echo":
		res = kproto.InvokeResult{Status: kproto.StatusSucceeded, Output: mustJSON(map[string]json.RawMessage{"echo": p.Arguments, "again": p.Arguments})}
	default:
		res = deny(kproto.CodeToolUnavailable)
		res.Message = "no tool named " + p.Tool + " in this turn"
	}
	c.Reply(id, res)
	for i := 1; i <= after; i++ {
		// A kernel that reports after its answer: the shim must drop these.
		c.Notify(kproto.MethodProgress, kproto.ProgressParams{CallID: p.CallID, Progress: float64(a.Steps + i)})
	}
	if p.Tool != "slow.read" {
		c.mu.Lock()
		for _, ch := range c.slow {
			close(ch)
		}
		c.slow = nil
		c.mu.Unlock()
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

// Reply writes a result for request id.
func (c *Conn) Reply(id json.RawMessage, result any) {
	c.Write(jsonrpc.AppendResponse(nil, id, mustJSON(result)))
}

// Fail writes a JSON-RPC error for request id, with code as data.code.
func (c *Conn) Fail(id json.RawMessage, rpcCode int, code string) {
	c.Write(jsonrpc.AppendError(nil, id, &jsonrpc.Error{Code: rpcCode, Message: code, Data: mustJSON(kproto.ErrorData{Code: code})}))
}

// Notify writes a notification.
func (c *Conn) Notify(method string, params any) {
	c.Write([]byte(`{"jsonrpc":"2.0","method":` + string(mustJSON(method)) + `,"params":` + string(mustJSON(params)) + "}\n"))
}

// Write writes raw bytes, whole, to the shim.
func (c *Conn) Write(b []byte) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.conn.Write(b)
}

// Close closes the connection from the kernel's side.
func (c *Conn) Close() { c.conn.Close() }
