package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sharedos/sharedos-mcp/hashing"
	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/internal/peercred"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
	"github.com/sharedos/sharedos-mcp/kernel/files"
	"github.com/sharedos/sharedos-mcp/policy"
)

const emptyCatalogHash = "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"

func publicReader(t *testing.T) []policy.Grant {
	return []policy.Grant{grant(t, "integration:cc", "files:/public", true, "read", "list", "search")}
}

func TestHelloMustComeFirst(t *testing.T) {
	h := startKernel(t, publicReader(t))
	c := h.dial()
	for _, method := range []string{kproto.MethodPing, kproto.MethodList, kproto.MethodInvoke, kproto.MethodEscalate} {
		if code := errorCode(t, c.call(method, struct{}{})); code != kproto.ErrHelloRequired {
			t.Errorf("%s before hello: data.code %q, want %q", method, code, kproto.ErrHelloRequired)
		}
	}
	r := c.hello("cc")
	if r.Protocol != 1 || r.Principal != (kproto.Principal{Kind: "integration", Name: "cc"}) {
		t.Errorf("hello result %+v", r)
	}
	if !regexp.MustCompile(`^exe_[0-9a-f]{16}$`).MatchString(r.ExecutionID) {
		t.Errorf("executionId %q, want exe_ and 16 hex digits", r.ExecutionID)
	}
	if r.Kernel.Name != kernelName || r.Kernel.Version != "test" || r.Instructions == "" {
		t.Errorf("hello result kernel %+v, instructions %q", r.Kernel, r.Instructions)
	}
	if m := c.call(kproto.MethodPing, struct{}{}); m.Error != nil || string(m.Result) != "{}" {
		t.Errorf("ping after hello = %s %v, want {}", m.Result, m.Error)
	}
}

func TestHelloOnlyOnce(t *testing.T) {
	h := startKernel(t, publicReader(t))
	c := h.dial()
	first := c.hello("cc")
	m := c.call(kproto.MethodHello, kproto.HelloParams{Name: "other"})
	if code := errorCode(t, m); code != kproto.ErrAlreadyIntroduced {
		t.Fatalf("second hello: data.code %q, want %q", code, kproto.ErrAlreadyIntroduced)
	}
	// The turn goes on as the first hello made it.
	c.list()
	if r := c.invoke("files.read", map[string]string{"path": "/public/a.txt"}); r.Status != kproto.StatusSucceeded {
		t.Errorf("read after a refused second hello: %+v", r)
	}
	for _, e := range h.events() {
		if e.Integration == "other" || (e.ExecutionID != first.ExecutionID) {
			t.Errorf("event %+v: the second hello must change nothing", e)
		}
	}
}

func TestHelloWithBadNameIsRefusedAndClosed(t *testing.T) {
	h := startKernel(t, publicReader(t))
	c := h.dial()
	m := c.call(kproto.MethodHello, kproto.HelloParams{Name: "cc/../root"})
	if code := errorCode(t, m); code != kproto.ErrInvalidIntegrationName {
		t.Fatalf("data.code %q, want %q", code, kproto.ErrInvalidIntegrationName)
	}
	c.expectEOF()
	refused := eventsNamed(h.events(), audit.EventTurnRefused)
	if len(refused) != 1 || !strings.Contains(refused[0].Reason, "invalid integration name") || refused[0].Integration != "" {
		t.Errorf("turn.refused events %+v", refused)
	}
	if refused[0].Peer.UID != uint32(os.Getuid()) || refused[0].Peer.PID != os.Getpid() {
		t.Errorf("peer %+v, want this process", refused[0].Peer)
	}
}

func TestPeerUIDs(t *testing.T) {
	playing := func(uid uint32) func(*Server) {
		return func(s *Server) {
			s.PeerCred = func(*net.UnixConn) (peercred.Cred, error) { return peercred.Cred{UID: uid, GID: uid, PID: 4321}, nil }
		}
	}
	tests := []struct {
		name   string
		peer   uint32
		allow  []uint32
		served bool
	}{
		{"another uid is refused by default", 4242, nil, false},
		{"root is refused when it is not the kernel's uid", 0, []uint32{1000}, false},
		{"a uid in allow_uids is served", 4242, []uint32{1000, 4242}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := startKernel(t, publicReader(t), playing(tt.peer), func(s *Server) { s.AllowUIDs = tt.allow })
			c := h.dial()
			if tt.served {
				c.hello("cc")
				return
			}
			c.expectEOF()
			refused := eventsNamed(h.events(), audit.EventTurnRefused)
			if len(refused) != 1 || refused[0].Peer != (audit.Peer{UID: tt.peer, PID: 4321}) || !strings.Contains(refused[0].Reason, "not served") {
				t.Errorf("turn.refused events %+v, want one for uid %d pid 4321", refused, tt.peer)
			}
			if refused[0].ExecutionID == "" {
				t.Error("a refused connection still gets an executionId to tell refusals apart")
			}
		})
	}
}

func TestCataloguePerPrincipal(t *testing.T) {
	grants := []policy.Grant{
		grant(t, "integration:cc", "files:/public", true, "read", "list", "search"),
		grant(t, "integration:writer", "files:/public", true, "write"),
		grant(t, "integration:writer", "sharedos:/escalate", false, "escalate"),
	}
	h := startKernel(t, grants)
	tests := []struct {
		who  string
		want []string
	}{
		{"cc", []string{"files.list", "files.read", "files.search"}},
		{"writer", []string{"files.write", "sharedos.escalate"}},
		{"nobody", nil},
	}
	for _, tt := range tests {
		t.Run(tt.who, func(t *testing.T) {
			c := h.dial()
			c.hello(tt.who)
			m := c.call(kproto.MethodList, struct{}{})
			var raw kproto.ListResult
			if err := json.Unmarshal(m.Result, &raw); err != nil {
				t.Fatal(err)
			}
			if raw.Tools == nil {
				t.Error("tools must be an array, never null")
			}
			tools, hash := c.list()
			var names []string
			for _, d := range tools {
				names = append(names, d.Name)
				if d.RequiredCapability.Action == "" || d.Source != "sharedos-mcp" {
					t.Errorf("%s: requiredCapability %+v, source %q", d.Name, d.RequiredCapability, d.Source)
				}
			}
			if !slices.Equal(names, tt.want) {
				t.Errorf("catalogue %v, want %v", names, tt.want)
			}
			// The shim projects the raw definitions itself; the hashes
			// must agree.
			projected, err := hashing.ProjectRaw(raw.Tools)
			if err != nil {
				t.Fatal(err)
			}
			if got := hashing.Hash(projected); got != hash {
				t.Errorf("catalogHash %s, shim would compute %s", hash, got)
			}
			if tt.want == nil {
				if hash != emptyCatalogHash {
					t.Errorf("empty catalogue hash %s", hash)
				}
				r := c.invoke("files.read", map[string]string{"path": "/public/a.txt"})
				if r.Status != kproto.StatusDenied || r.Code != kproto.CodeToolUnavailable {
					t.Errorf("call with an empty catalogue: %+v", r)
				}
			}
		})
	}
}

func TestGrantedFileTools(t *testing.T) {
	h := startKernel(t, publicReader(t))
	c := h.dial()
	c.hello("cc")
	c.list()

	r := c.invoke("files.read", map[string]string{"path": "/public/a.txt"})
	if r.Status != kproto.StatusSucceeded || text(t, r) != "hello world\nsecond line\n" {
		t.Errorf("files.read: %+v", r)
	}
	// /public/inside leads to /private/secret.txt, which the grant does
	// not cover: it is refused, and a listing does not show it.
	r = c.invoke("files.read", map[string]string{"path": "/public/inside"})
	if r.Status != kproto.StatusDenied || r.Code != kproto.CodeNoMatchingGrant || strings.Contains(r.Message, "private") {
		t.Errorf("files.read through a symlink to an ungranted file: %+v", r)
	}

	r = c.invoke("files.list", map[string]string{"path": "/public/"})
	want := `{"entries":[{"name":"a.txt","type":"file","size":24},{"name":"bin.dat","type":"file","size":7},` +
		`{"name":"sub","type":"dir","size":0}],"truncated":false}`
	if r.Status != kproto.StatusSucceeded || string(r.Output) != want {
		t.Errorf("files.list: %+v\n output %s\n want   %s", r, r.Output, want)
	}

	r = c.invoke("files.search", map[string]string{"path": "/public", "query": "needle"})
	want = `{"matches":[{"path":"/public/sub/b.txt","line":1,"text":"a needle here"},{"path":"/public/sub/b.txt","line":3,"text":"needle again"}],"truncated":false}`
	if r.Status != kproto.StatusSucceeded || string(r.Output) != want {
		t.Errorf("files.search: %+v\n output %s\n want   %s", r, r.Output, want)
	}

	r = c.invoke("files.read", map[string]string{"path": "/public/bin.dat"})
	if r.Status != kproto.StatusFailed || r.Code != files.CodeNotText {
		t.Errorf("files.read of a binary file: %+v", r)
	}
	r = c.invoke("files.read", map[string]string{"path": "/public/sub"})
	if r.Status != kproto.StatusFailed || r.Code != files.CodeNotFile {
		t.Errorf("files.read of a directory: %+v", r)
	}
	r = c.invoke("files.read", map[string]string{"path": "/public/missing.txt"})
	if r.Status != kproto.StatusFailed || r.Code != kproto.CodeNotFound {
		t.Errorf("files.read of a missing file: %+v", r)
	}
}

func TestFileToolLimits(t *testing.T) {
	h := startKernel(t, publicReader(t))
	if err := os.WriteFile(filepath.Join(h.root, "public", "big.txt"), []byte(strings.Repeat("x", files.MaxReadBytes+1)), 0o644); err != nil {
		t.Fatal(err)
	}
	many := strings.Repeat("match\n", files.MaxSearchMatches+50)
	if err := os.WriteFile(filepath.Join(h.root, "public", "sub", "many.txt"), []byte(many), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(h.root, "public", "sub", "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := h.dial()
	c.hello("cc")
	c.list()
	// A FIFO would block a plain open until a writer came along.
	r := c.invoke("files.read", map[string]string{"path": "/public/sub/pipe"})
	if r.Status != kproto.StatusFailed || r.Code != files.CodeNotFile {
		t.Errorf("files.read of a FIFO: %+v", r)
	}
	r = c.invoke("files.read", map[string]string{"path": "/public/big.txt"})
	if r.Status != kproto.StatusFailed || r.Code != kproto.CodeTooLarge {
		t.Errorf("files.read over the limit: %+v", r)
	}
	r = c.invoke("files.search", map[string]string{"path": "/public", "query": "match"})
	var out files.SearchOutput
	if err := json.Unmarshal(r.Output, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Matches) != files.MaxSearchMatches || !out.Truncated {
		t.Errorf("files.search with too many matches: %d matches, truncated %v", len(out.Matches), out.Truncated)
	}
	r = c.invoke("files.search", map[string]string{"path": "/public", "query": ""})
	if r.Status != kproto.StatusFailed || r.Code != kproto.CodeInvalidArguments {
		t.Errorf("files.search with an empty query: %+v", r)
	}
}

func TestOutsideTheGrantIsDenied(t *testing.T) {
	h := startKernel(t, publicReader(t))
	c := h.dial()
	c.hello("cc")
	c.list()
	for _, tc := range []struct{ tool, path string }{
		{"files.read", "/private/secret.txt"},
		{"files.list", "/"},
		{"files.search", "/private"},
	} {
		args := map[string]string{"path": tc.path}
		if tc.tool == "files.search" {
			args["query"] = "needle"
		}
		r := c.invoke(tc.tool, args)
		if r.Status != kproto.StatusDenied || r.Code != kproto.CodeNoMatchingGrant || r.Retryable == nil || *r.Retryable {
			t.Errorf("%s %s: %+v, want denied no_matching_grant, retryable false", tc.tool, tc.path, r)
		}
		if strings.Contains(string(r.Output)+string(r.Content)+r.Message, "private needle") {
			t.Errorf("%s %s leaked content: %+v", tc.tool, tc.path, r)
		}
	}
	invoked := eventsNamed(h.events(), audit.EventToolInvoked)
	if len(invoked) != 3 || invoked[0].Resource != "files:/private/secret.txt" || invoked[0].Action != "read" ||
		invoked[0].Status != "denied" || invoked[0].Code != "no_matching_grant" {
		t.Errorf("tool.invoked %+v", invoked)
	}
}

func TestEscapingTheRootIsRefusedWithoutLeaking(t *testing.T) {
	h := startKernel(t, []policy.Grant{grant(t, "integration:cc", "files:/", true, "read", "list", "search")})
	c := h.dial()
	c.hello("cc")
	c.list()
	tests := []struct {
		name   string
		tool   string
		path   string
		status string
		code   string
	}{
		{"a dot-dot segment", "files.read", "/public/../../outside/secret.txt", "failed", "invalid_arguments"},
		{"a dot-dot that would stay inside", "files.read", "/public/../private/secret.txt", "failed", "invalid_arguments"},
		{"a relative path", "files.read", "public/a.txt", "failed", "invalid_arguments"},
		{"a NUL byte", "files.read", "/public/a.txt\x00", "failed", "invalid_arguments"},
		{"a symlink to a file outside", "files.read", "/public/escape", "denied", files.CodeOutsideRoot},
		{"a symlink to a directory outside", "files.list", "/public/escdir", "denied", files.CodeOutsideRoot},
		{"a path through a symlinked directory outside", "files.read", "/public/escdir/secret.txt", "denied", files.CodeOutsideRoot},
		{"searching a symlinked directory outside", "files.search", "/public/escdir", "denied", files.CodeOutsideRoot},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := map[string]string{"path": tt.path}
			if tt.tool == "files.search" {
				args["query"] = "needle"
			}
			r := c.invoke(tt.tool, args)
			if r.Status != tt.status || r.Code != tt.code {
				t.Errorf("%+v, want %s %s", r, tt.status, tt.code)
			}
			all := string(r.Output) + string(r.Content) + r.Message
			if strings.Contains(all, "OUTSIDE SECRET") || strings.Contains(all, h.outside) || strings.Contains(all, h.root) {
				t.Errorf("result leaks what is outside or where the root is: %+v", r)
			}
		})
	}
	// Searching the whole root does not follow the links out.
	r := c.invoke("files.search", map[string]string{"path": "/", "query": "needle"})
	if strings.Contains(string(r.Output), "OUTSIDE") || !strings.Contains(string(r.Output), "/private/secret.txt") {
		t.Errorf("search of the root: %s", r.Output)
	}
}

func TestGrantExpiringMidTurn(t *testing.T) {
	t0 := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	clock := &testClock{t: t0}
	g := grant(t, "integration:cc", "files:/public", true, "read")
	g.Expires = t0.Add(time.Hour)
	h := startKernel(t, []policy.Grant{g}, func(s *Server) { s.Now = clock.Now })
	c := h.dial()
	c.hello("cc")
	if tools, _ := c.list(); len(tools) != 1 {
		t.Fatalf("catalogue %v, want files.read", tools)
	}
	if r := c.invoke("files.read", map[string]string{"path": "/public/a.txt"}); r.Status != kproto.StatusSucceeded {
		t.Fatalf("read before expiry: %+v", r)
	}
	clock.Set(t0.Add(time.Hour))
	r := c.invoke("files.read", map[string]string{"path": "/public/a.txt"})
	if r.Status != kproto.StatusDenied || r.Code != kproto.CodeGrantExpired {
		t.Errorf("read after expiry, same turn: %+v, want denied grant_expired", r)
	}
	c2 := h.dial()
	c2.hello("cc")
	if tools, _ := c2.list(); len(tools) != 0 {
		t.Errorf("a turn opened after expiry lists %v, want nothing", tools)
	}
}

func TestWriteNeedsAWriteGrant(t *testing.T) {
	grants := []policy.Grant{
		grant(t, "integration:reader", "files:/", true, "read", "list", "search"),
		grant(t, "integration:writer", "files:/public", true, "write"),
	}
	h := startKernel(t, grants)

	reader := h.dial()
	reader.hello("reader")
	reader.list()
	r := reader.invoke("files.write", map[string]string{"path": "/public/new.txt", "content": "x"})
	if r.Status != kproto.StatusDenied || r.Code != kproto.CodeToolUnavailable {
		t.Errorf("write with only read grants: %+v, want denied tool_unavailable", r)
	}

	writer := h.dial()
	writer.hello("writer")
	writer.list()
	r = writer.invoke("files.write", map[string]string{"path": "/private/new.txt", "content": "x"})
	if r.Status != kproto.StatusDenied || r.Code != kproto.CodeNoMatchingGrant {
		t.Errorf("write outside the write grant: %+v, want denied no_matching_grant", r)
	}
	for _, p := range []string{"public/new.txt", "private/new.txt"} {
		if _, err := os.Lstat(filepath.Join(h.root, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists after refused writes (%v)", p, err)
		}
	}

	r = writer.invoke("files.write", map[string]string{"path": "/public/new.txt", "content": "first"})
	if r.Status != kproto.StatusSucceeded || string(r.Output) != `{"path":"/public/new.txt","bytes":5}` {
		t.Errorf("write inside the grant: %+v", r)
	}
	r = writer.invoke("files.write", map[string]string{"path": "/public/new.txt", "content": "second"})
	if got, _ := os.ReadFile(filepath.Join(h.root, "public", "new.txt")); r.Status != kproto.StatusSucceeded || string(got) != "second" {
		t.Errorf("overwrite: %+v, file %q", r, got)
	}
	r = writer.invoke("files.write", map[string]string{"path": "/public/nodir/x.txt", "content": "x"})
	if r.Status != kproto.StatusFailed || r.Code != kproto.CodeNotFound {
		t.Errorf("write into a missing directory: %+v", r)
	}
	r = writer.invoke("files.write", map[string]string{"path": "/public/escape", "content": "pwned"})
	if got, _ := os.ReadFile(filepath.Join(h.outside, "secret.txt")); r.Status == kproto.StatusSucceeded || string(got) != "OUTSIDE SECRET needle" {
		t.Errorf("write to a symlink out of the root: %+v, outside file now %q", r, got)
	}
	entries, _ := os.ReadDir(filepath.Join(h.root, "public"))
	for _, e := range entries {
		if strings.Contains(e.Name(), ".sharedos-") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

func TestMalformedArguments(t *testing.T) {
	h := startKernel(t, publicReader(t))
	c := h.dial()
	c.hello("cc")
	c.list()
	tests := []struct {
		name string
		tool string
		args string
	}{
		{"a required field missing", "files.read", `{}`},
		{"an extra field", "files.read", `{"path":"/public/a.txt","mode":"r"}`},
		{"a field of the wrong type", "files.read", `{"path":7}`},
		{"a null field", "files.read", `{"path":null}`},
		{"arguments that are not an object", "files.read", `["/public/a.txt"]`},
		{"search without its query", "files.search", `{"path":"/public"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := kproto.InvokeParams{CallID: "x", Tool: tt.tool, Arguments: json.RawMessage(tt.args), CatalogHash: c.hash}
			r := invokeResult(t, c.call(kproto.MethodInvoke, p))
			if r.Status != kproto.StatusFailed || r.Code != kproto.CodeInvalidArguments || r.Message == "" {
				t.Errorf("%+v, want failed invalid_arguments with a message", r)
			}
		})
	}
}

func TestToolAndCatalogChecks(t *testing.T) {
	h := startKernel(t, publicReader(t))
	c := h.dial()
	c.hello("cc")
	c.list()
	tests := []struct {
		name string
		p    kproto.InvokeParams
		code string
	}{
		{"an unknown tool", kproto.InvokeParams{CallID: "1", Tool: "files.delete", Arguments: json.RawMessage(`{}`), CatalogHash: c.hash}, kproto.CodeToolUnavailable},
		{"a malformed tool name", kproto.InvokeParams{CallID: "2", Tool: "files read\n", Arguments: json.RawMessage(`{}`), CatalogHash: c.hash}, kproto.CodeToolUnavailable},
		{"a stale catalogHash", kproto.InvokeParams{CallID: "3", Tool: "files.read", Arguments: json.RawMessage(`{"path":"/public/a.txt"}`), CatalogHash: emptyCatalogHash}, kproto.CodeCatalogMismatch},
		{"no catalogHash", kproto.InvokeParams{CallID: "4", Tool: "files.read", Arguments: json.RawMessage(`{"path":"/public/a.txt"}`)}, kproto.CodeCatalogMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := invokeResult(t, c.call(kproto.MethodInvoke, tt.p))
			if r.Status != kproto.StatusDenied || r.Code != tt.code {
				t.Errorf("%+v, want denied %s", r, tt.code)
			}
		})
	}
}

func TestProtocolErrors(t *testing.T) {
	h := startKernel(t, publicReader(t))
	c := h.dial()
	c.hello("cc")
	if m := c.call("tools.frobnicate", struct{}{}); m.Error == nil || m.Error.Code != jsonrpc.CodeMethodNotFound {
		t.Errorf("unknown method: %+v", m)
	}
	c.sendRaw(`{"jsonrpc":"2.0","id":1,`)
	if m := c.recv(); m.Error == nil || m.Error.Code != jsonrpc.CodeParseError || string(m.ID) != "null" {
		t.Errorf("broken JSON: %+v", m)
	}
	if m := c.call(kproto.MethodInvoke, "not an object"); m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("tools.invoke with non-object params: %+v", m)
	}
	if m := c.call(kproto.MethodPing, struct{}{}); m.Error != nil {
		t.Errorf("the connection survives protocol errors: %+v", m)
	}
}

func TestEscalation(t *testing.T) {
	grants := append(publicReader(t), grant(t, "integration:cc", "sharedos:/escalate", false, "escalate"))
	h := startKernel(t, grants)

	t.Run("turn.escalate from the shim", func(t *testing.T) {
		c := h.dial()
		c.hello("cc")
		c.list()
		m := c.call(kproto.MethodEscalate, kproto.EscalateParams{CallID: "c9", Reason: "need write access", Note: "turn over"})
		if m.Error != nil || string(m.Result) != "{}" {
			t.Fatalf("turn.escalate: %+v", m)
		}
		r := c.invoke("files.read", map[string]string{"path": "/public/a.txt"})
		if r.Status != kproto.StatusDenied || r.Code != kproto.CodeEscalationPending {
			t.Errorf("call after escalation: %+v, want denied escalation_pending", r)
		}
	})
	t.Run("the sharedos.escalate tool", func(t *testing.T) {
		c := h.dial()
		c.hello("cc")
		c.list()
		r := c.invoke("sharedos.escalate", map[string]string{"reason": "stuck"})
		if r.Status != kproto.StatusSucceeded || !strings.Contains(string(r.Output), `"escalated":true`) {
			t.Errorf("sharedos.escalate: %+v", r)
		}
		r = c.invoke("files.list", map[string]string{"path": "/public"})
		if r.Code != kproto.CodeEscalationPending {
			t.Errorf("call after the escalate tool: %+v", r)
		}
	})
	esc := eventsNamed(h.events(), audit.EventTurnEscalated)
	if len(esc) != 2 || esc[0].Reason != "need write access" || esc[0].Note != "turn over" || esc[0].CallID != "c9" || esc[1].Reason != "stuck" {
		t.Errorf("turn.escalated events %+v", esc)
	}
}

// blockingTool answers only when its call is cancelled.
func blockingTool() *tool {
	return &tool{
		def: definition{Definition: hashing.Definition{
			Name: "test.block", Description: "Blocks until cancelled.", Namespace: files.Namespace, Source: "test",
			ReadWrite: "read", InputSchema: inputSchema(nil),
		}},
		scope:  policy.Resource{Namespace: files.Namespace, Path: "/"},
		action: policy.ActionRead,
		target: func(map[string]string) (policy.Resource, error) {
			return policy.Resource{Namespace: files.Namespace, Path: "/public"}, nil
		},
		run: func(ctx context.Context, _ *callEnv, _ policy.Resource, _ map[string]string) outcome {
			<-ctx.Done()
			return failed(kproto.CodeInternal, "unblocked")
		},
	}
}

func TestCallsRunConcurrentlyAndCancel(t *testing.T) {
	h := startKernel(t, publicReader(t), func(s *Server) { s.tools = append(registry(), blockingTool()) })
	c := h.dial()
	c.hello("cc")
	c.list()
	blockID := c.send(kproto.MethodInvoke, c.invokeParams("slow", "test.block", map[string]string{}))
	readID := c.send(kproto.MethodInvoke, c.invokeParams("quick", "files.read", map[string]string{"path": "/public/a.txt"}))
	// The quick call is answered while the slow one still runs.
	m := c.recv()
	if string(m.ID) != fmt.Sprint(readID) || invokeResult(t, m).Status != kproto.StatusSucceeded {
		t.Fatalf("first answer %+v, want the read (id %d)", m, readID)
	}
	c.notify(kproto.MethodCancel, kproto.CancelParams{CallID: "slow"})
	m = c.recv()
	r := invokeResult(t, m)
	if string(m.ID) != fmt.Sprint(blockID) || r.Status != kproto.StatusFailed || r.Code != kproto.CodeCancelled {
		t.Errorf("cancelled call answered %s %+v, want failed cancelled", m.ID, r)
	}
	var found bool
	for _, e := range eventsNamed(h.events(), audit.EventToolInvoked) {
		if e.CallID == "slow" {
			found = e.Status == "failed" && e.Code == "cancelled"
		}
	}
	if !found {
		t.Error("no tool.invoked failed/cancelled recorded for the cancelled call")
	}
}

func TestAuditRecordsTheTurn(t *testing.T) {
	h := startKernel(t, publicReader(t))
	c := h.dial()
	hello := c.hello("cc")
	_, hash := c.list()
	c.invoke("files.read", map[string]string{"path": "/public/a.txt"})
	c.invoke("files.read", map[string]string{"path": "/private/secret.txt"})
	c.invoke("files.nope", map[string]string{})
	c.conn.Close()
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	evs := h.events()
	var names []string
	for _, e := range evs {
		names = append(names, e.Event)
		if e.ExecutionID != hello.ExecutionID || e.Integration != "cc" || e.Peer.UID != uint32(os.Getuid()) || e.Peer.PID != os.Getpid() {
			t.Errorf("event %+v: want this turn's executionId, integration and peer", e)
		}
		if _, err := time.Parse(time.RFC3339Nano, e.Time); err != nil || !strings.HasSuffix(e.Time, "Z") {
			t.Errorf("time %q: want RFC 3339 in UTC", e.Time)
		}
	}
	want := []string{audit.EventTurnOpened, audit.EventCatalogListed, audit.EventToolInvoked, audit.EventToolInvoked, audit.EventToolInvoked, audit.EventTurnClosed}
	if !slices.Equal(names, want) {
		t.Fatalf("events %v, want %v", names, want)
	}
	if evs[1].CatalogHash != hash || evs[1].Count == nil || *evs[1].Count != 3 {
		t.Errorf("tool.catalog.listed %+v", evs[1])
	}
	for _, e := range evs[2:5] {
		if e.CatalogHash != hash || e.CallID == "" || e.DurationUs == nil || e.Tool == "" || e.Status == "" {
			t.Errorf("tool.invoked %+v: want catalogHash, callId, durationUs, tool, status", e)
		}
	}
	if evs[2].Status != "succeeded" || evs[3].Code != "no_matching_grant" || evs[4].Code != "tool_unavailable" {
		t.Errorf("statuses %q %q %q", evs[2].Status, evs[3].Code, evs[4].Code)
	}
}

func TestShutdownClosesTurnsAndRemovesTheSocket(t *testing.T) {
	h := startKernel(t, publicReader(t), func(s *Server) { s.tools = append(registry(), blockingTool()) })
	c := h.dial()
	c.hello("cc")
	c.list()
	c.send(kproto.MethodInvoke, c.invokeParams("held", "test.block", map[string]string{}))
	c.call(kproto.MethodPing, struct{}{}) // the call is registered before ping is read
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	// The in-flight call is answered before the connection closes.
	if r := invokeResult(t, c.recv()); r.Code != kproto.CodeCancelled {
		t.Errorf("in-flight call at shutdown: %+v", r)
	}
	c.expectEOF()
	if _, err := os.Lstat(h.sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket still there after shutdown: %v", err)
	}
	evs := h.events()
	if last := evs[len(evs)-1]; last.Event != audit.EventTurnClosed {
		t.Errorf("last event %+v, want turn.closed", last)
	}
}

func TestConcurrentTurns(t *testing.T) {
	h := startKernel(t, []policy.Grant{grant(t, "integration:*", "files:/public", true, "read")})
	const clients, calls = 50, 6
	var wg sync.WaitGroup
	execIDs := make([]string, clients)
	errs := make(chan error, clients)
	for i := range clients {
		wg.Go(func() {
			conn, err := net.Dial("unix", h.sock)
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close()
			// A private testClient: t.Fatal must not run off the test
			// goroutine, so failures come back as errors.
			r := jsonrpc.NewReader(conn, 0)
			roundTrip := func(line string) (jsonrpc.Message, error) {
				var m jsonrpc.Message
				if _, err := conn.Write([]byte(line + "\n")); err != nil {
					return m, err
				}
				b, err := r.ReadLine()
				if err != nil {
					return m, err
				}
				return m, json.Unmarshal(b, &m)
			}
			name := fmt.Sprintf("client-%d", i)
			m, err := roundTrip(`{"jsonrpc":"2.0","id":0,"method":"integration.hello","params":{"name":"` + name + `","shim":{"version":"t"}}}`)
			if err != nil || m.Error != nil {
				errs <- fmt.Errorf("hello %s: %v %v", name, err, m.Error)
				return
			}
			var hr kproto.HelloResult
			_ = json.Unmarshal(m.Result, &hr)
			execIDs[i] = hr.ExecutionID
			m, err = roundTrip(`{"jsonrpc":"2.0","id":1,"method":"tools.list","params":{}}`)
			if err != nil {
				errs <- err
				return
			}
			var lr kproto.ListResult
			_ = json.Unmarshal(m.Result, &lr)
			for j := range calls {
				line := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools.invoke","params":{"callId":"c%d","tool":"files.read","arguments":{"path":"/public/a.txt"},"catalogHash":%q}}`, j+2, j, lr.CatalogHash)
				m, err := roundTrip(line)
				if err != nil {
					errs <- err
					return
				}
				if !strings.Contains(string(m.Result), `"status":"succeeded"`) {
					errs <- fmt.Errorf("%s call c%d: %s", name, j, m.Result)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	evs := h.events()
	perTurn := map[string]map[string]int{}
	for _, e := range evs {
		if perTurn[e.ExecutionID] == nil {
			perTurn[e.ExecutionID] = map[string]int{}
		}
		perTurn[e.ExecutionID][e.Event]++
		if e.Event == audit.EventToolInvoked {
			perTurn[e.ExecutionID]["call "+e.CallID]++
		}
	}
	if len(perTurn) != clients {
		t.Errorf("%d turns in the audit log, want %d", len(perTurn), clients)
	}
	for _, id := range execIDs {
		got := perTurn[id]
		if got[audit.EventTurnOpened] != 1 || got[audit.EventCatalogListed] != 1 || got[audit.EventToolInvoked] != calls || got[audit.EventTurnClosed] != 1 {
			t.Errorf("turn %s: %v", id, got)
		}
		for j := range calls {
			if n := got[fmt.Sprintf("call c%d", j)]; n != 1 {
				t.Errorf("turn %s call c%d recorded %d times", id, j, n)
			}
		}
	}
}

func TestListen(t *testing.T) {
	dir, err := os.MkdirTemp("", "sk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })

	t.Run("creates the directory 0700 and the socket 0600", func(t *testing.T) {
		sock := filepath.Join(dir, "new", "k.sock")
		ln, err := Listen(sock)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		for p, want := range map[string]os.FileMode{filepath.Dir(sock): 0o700, sock: 0o600} {
			if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != want {
				t.Errorf("%s: mode %v (%v), want %v", p, fi.Mode().Perm(), err, want)
			}
		}
		t.Run("refuses a socket a kernel answers on", func(t *testing.T) {
			if _, err := Listen(sock); !errors.Is(err, ErrAlreadyRunning) {
				t.Errorf("second Listen: %v, want ErrAlreadyRunning", err)
			}
		})
	})
	t.Run("replaces a stale socket", func(t *testing.T) {
		sock := filepath.Join(dir, "stale.sock")
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		ln.SetUnlinkOnClose(false)
		ln.Close()
		ln2, err := Listen(sock)
		if err != nil {
			t.Fatalf("Listen over a stale socket: %v", err)
		}
		ln2.Close()
	})
	t.Run("leaves a file that is not a socket alone", func(t *testing.T) {
		p := filepath.Join(dir, "plain")
		if err := os.WriteFile(p, []byte("keep"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Listen(p); err == nil {
			t.Error("Listen over a regular file succeeded")
		}
		if b, _ := os.ReadFile(p); string(b) != "keep" {
			t.Error("the file was touched")
		}
	})
	t.Run("refuses a directory others can write", func(t *testing.T) {
		open := filepath.Join(dir, "open")
		if err := os.Mkdir(open, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(open, 0o777); err != nil {
			t.Fatal(err)
		}
		if _, err := Listen(filepath.Join(open, "k.sock")); err == nil || !strings.Contains(err.Error(), "writable by other users") {
			t.Errorf("Listen in a world-writable directory: %v", err)
		}
	})
}

func TestSearchChecksTheGrantForEveryFile(t *testing.T) {
	grants := []policy.Grant{
		grant(t, "integration:cc", "files:/public", false, "search"),
		grant(t, "integration:cc", "files:/public/sub/b.txt", false, "search"),
	}
	h := startKernel(t, grants)
	if err := os.WriteFile(filepath.Join(h.root, "public", "other.txt"), []byte("needle in an ungranted file"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := h.dial()
	c.hello("cc")
	c.list()
	// The exact grant on /public lets the search start there, but only
	// files with a grant of their own are read.
	r := c.invoke("files.search", map[string]string{"path": "/public", "query": "needle"})
	if r.Status != kproto.StatusSucceeded || strings.Contains(string(r.Output), "other.txt") || !strings.Contains(string(r.Output), "/public/sub/b.txt") {
		t.Errorf("files.search: %+v %s", r, r.Output)
	}
}
