package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/internal/testfs"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
	"github.com/sharedos/sharedos-mcp/policy"
)

// testClock is a settable clock for grant expiry.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// kernelHarness runs a Server on a real socket in a short temp dir.
type kernelHarness struct {
	t         *testing.T
	srv       *Server
	sock      string
	auditPath string
	root      string // files root
	outside   string // a directory next to the root, never shared
	stopOnce  sync.Once
	stopErr   error
	cancel    context.CancelFunc
	done      chan error
}

// grant builds a grant or fails the test.
func grant(t *testing.T, subject, resource string, descendants bool, actions ...string) policy.Grant {
	t.Helper()
	r, err := policy.ParseResource(resource)
	if err != nil {
		t.Fatal(err)
	}
	return policy.Grant{Subject: subject, Resource: r, Descendants: descendants, Actions: actions}
}

func startKernel(t *testing.T, grants []policy.Grant, opts ...func(*Server)) *kernelHarness {
	t.Helper()
	root, outside := testfs.WriteTree(t)
	dir, err := os.MkdirTemp("", "sk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	h := &kernelHarness{t: t, sock: filepath.Join(dir, "k.sock"), auditPath: filepath.Join(t.TempDir(), "state", "audit.jsonl"), root: root, outside: outside, done: make(chan error, 1)}
	ln, err := Listen(h.sock)
	if err != nil {
		t.Fatal(err)
	}
	audit, err := audit.Open(h.auditPath)
	if err != nil {
		t.Fatal(err)
	}
	h.srv = &Server{Root: root, Grants: grants, Audit: audit, Log: zerolog.Nop(), Version: "test"}
	for _, o := range opts {
		o(h.srv)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- h.srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		if err := h.stop(); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return h
}

// stop shuts the kernel down as SIGTERM would and waits for it: every
// turn is closed and recorded when it returns.
func (h *kernelHarness) stop() error {
	h.stopOnce.Do(func() {
		h.cancel()
		h.stopErr = errors.Join(<-h.done, h.srv.Audit.Close())
	})
	return h.stopErr
}

// events reads the audit log as it stands, without the config.loaded
// the kernel records at start (TestTheConfigIsOnTheRecord's).
func (h *kernelHarness) events() []audit.Event {
	h.t.Helper()
	return slices.DeleteFunc(h.allEvents(), func(e audit.Event) bool { return e.Event == audit.EventConfigLoaded })
}

// allEvents reads the audit log as it stands.
func (h *kernelHarness) allEvents() []audit.Event {
	h.t.Helper()
	data, err := os.ReadFile(h.auditPath)
	if err != nil {
		h.t.Fatal(err)
	}
	return parseEvents(h.t, data)
}

// parseEvents parses every line of an audit log, failing on any that is
// not a whole event.
func parseEvents(t *testing.T, data []byte) []audit.Event {
	t.Helper()
	if len(data) > 0 && data[len(data)-1] != '\n' {
		t.Fatalf("audit log does not end in a newline: %q", data[max(0, len(data)-80):])
	}
	var evs []audit.Event
	for _, line := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var e audit.Event
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil || e.Event == "" || e.Time == "" {
			t.Fatalf("audit line %q: not a whole event (%v)", line, err)
		}
		evs = append(evs, e)
	}
	return evs
}

func eventsNamed(evs []audit.Event, name string) []audit.Event {
	var out []audit.Event
	for _, e := range evs {
		if e.Event == name {
			out = append(out, e)
		}
	}
	return out
}

// testClient speaks the kernel protocol line by line.
type testClient struct {
	t    *testing.T
	conn net.Conn
	r    *jsonrpc.Reader
	id   int
	hash string
}

func (h *kernelHarness) dial() *testClient {
	h.t.Helper()
	c, err := net.Dial("unix", h.sock)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { c.Close() })
	return &testClient{t: h.t, conn: c, r: jsonrpc.NewReader(c, 0)}
}

// send writes one request (or, with id < 0, a notification) and returns
// its id.
func (c *testClient) send(method string, params any) int {
	c.t.Helper()
	c.id++
	m := map[string]any{"jsonrpc": "2.0", "method": method, "params": params, "id": c.id}
	b, err := json.Marshal(m)
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(string(b))
	return c.id
}

func (c *testClient) notify(method string, params any) {
	c.t.Helper()
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(string(b))
}

func (c *testClient) sendRaw(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.conn, line+"\n"); err != nil {
		c.t.Fatal(err)
	}
}

// recv reads one answer.
func (c *testClient) recv() jsonrpc.Message {
	c.t.Helper()
	line, err := c.r.ReadLine()
	if err != nil {
		c.t.Fatalf("read answer: %v", err)
	}
	var m jsonrpc.Message
	if err := json.Unmarshal(line, &m); err != nil {
		c.t.Fatalf("answer %q: %v", line, err)
	}
	return m
}

// call sends a request and reads its answer.
func (c *testClient) call(method string, params any) jsonrpc.Message {
	c.t.Helper()
	id := c.send(method, params)
	m := c.recv()
	for m.Method == kproto.MethodProgress { // a long call reports progress before its answer
		m = c.recv()
	}
	if string(m.ID) != strconv.Itoa(id) {
		c.t.Fatalf("answer id %s, want %d", m.ID, id)
	}
	return m
}

func (c *testClient) hello(name string) kproto.HelloResult {
	c.t.Helper()
	m := c.call(kproto.MethodHello, kproto.HelloParams{Name: name, Shim: kproto.Peer{Version: "test"}})
	if m.Error != nil {
		c.t.Fatalf("hello: %v", m.Error)
	}
	var r kproto.HelloResult
	if err := json.Unmarshal(m.Result, &r); err != nil {
		c.t.Fatal(err)
	}
	return r
}

// toolDef is what tests read of a listed definition.
type toolDef struct {
	Name               string          `json:"name"`
	Namespace          string          `json:"namespace"`
	Source             string          `json:"source"`
	ReadWrite          string          `json:"readWrite"`
	InputSchema        json.RawMessage `json:"inputSchema"`
	OutputSchema       json.RawMessage `json:"outputSchema"`
	RequiredCapability capability      `json:"requiredCapability"`
}

// list lists the tools and remembers the catalogHash for invoke.
func (c *testClient) list() ([]toolDef, string) {
	c.t.Helper()
	m := c.call(kproto.MethodList, struct{}{})
	if m.Error != nil {
		c.t.Fatalf("tools.list: %v", m.Error)
	}
	var r struct {
		Tools       []toolDef `json:"tools"`
		CatalogHash string    `json:"catalogHash"`
	}
	if err := json.Unmarshal(m.Result, &r); err != nil {
		c.t.Fatal(err)
	}
	c.hash = r.CatalogHash
	return r.Tools, r.CatalogHash
}

func (c *testClient) invokeParams(callID, tool string, args any) kproto.InvokeParams {
	c.t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		c.t.Fatal(err)
	}
	return kproto.InvokeParams{CallID: callID, Tool: tool, Arguments: raw, CatalogHash: c.hash}
}

func (c *testClient) invoke(tool string, args any) kproto.InvokeResult {
	c.t.Helper()
	m := c.call(kproto.MethodInvoke, c.invokeParams("call-"+strconv.Itoa(c.id+1), tool, args))
	return invokeResult(c.t, m)
}

func invokeResult(t *testing.T, m jsonrpc.Message) kproto.InvokeResult {
	t.Helper()
	if m.Error != nil {
		t.Fatalf("tools.invoke: JSON-RPC error %v", m.Error)
	}
	var r kproto.InvokeResult
	if err := json.Unmarshal(m.Result, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// errorCode returns a JSON-RPC error's data.code.
func errorCode(t *testing.T, m jsonrpc.Message) string {
	t.Helper()
	if m.Error == nil {
		t.Fatalf("got result %s, want an error", m.Result)
	}
	var d kproto.ErrorData
	_ = json.Unmarshal(m.Error.Data, &d)
	return d.Code
}

// text returns the one text content block of a result.
func text(t *testing.T, r kproto.InvokeResult) string {
	t.Helper()
	var blocks []struct{ Type, Text string }
	if err := json.Unmarshal(r.Content, &blocks); err != nil || len(blocks) != 1 || blocks[0].Type != "text" {
		t.Fatalf("content %s: want one text block", r.Content)
	}
	return blocks[0].Text
}

// expectEOF checks the kernel closed the connection.
func (c *testClient) expectEOF() {
	c.t.Helper()
	if line, err := c.r.ReadLine(); err == nil {
		c.t.Fatalf("read %q, want the connection closed", line)
	}
}

// openAudit opens an audit log in a temporary directory, closed when the
// test ends.
func openAudit(t *testing.T) *audit.Log {
	t.Helper()
	a, err := audit.Open(filepath.Join(t.TempDir(), "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}
