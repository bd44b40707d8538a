package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
	"github.com/sharedos/sharedos-mcp/policy"
)

// benchTurn is one turn with a kernel on a real socket, as the shim
// would hold it: hello and the catalogue done, calls sent one by one.
type benchTurn struct {
	conn net.Conn
	r    *jsonrpc.Reader
	hash string
	root string
}

// startBenchTurn starts a kernel and opens a turn with it; opts change the
// Server before it serves (its Config names the audit log and StateDir is
// a directory of its own).
func startBenchTurn(b *testing.B, opts ...func(*Server)) *benchTurn {
	r, _ := policy.ParseResource("files:/docs")
	return startBenchTurnWith(b, "bench", []policy.Grant{{
		Subject: policy.SubjectWildcard, Resource: r, Descendants: true, Actions: []string{"read", "write"},
	}}, opts...)
}

// startBenchTurnWith is startBenchTurn as integration, under grants, with
// opts applied to the server.
func startBenchTurnWith(b *testing.B, integration string, grants []policy.Grant, opts ...func(*Server)) *benchTurn {
	b.Helper()
	base := b.TempDir()
	root := filepath.Join(base, "root")
	if err := os.MkdirAll(filepath.Join(root, "docs"), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "docs", "a.txt"), []byte("a line of text a model asked for\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "sk")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	ln, err := Listen(filepath.Join(dir, "k.sock"))
	if err != nil {
		b.Fatal(err)
	}
	auditPath, state := filepath.Join(base, "audit.jsonl"), filepath.Join(base, "state")
	audit, err := audit.Open(auditPath)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.Mkdir(state, 0o700); err != nil {
		b.Fatal(err)
	}
	srv := &Server{Root: root, Audit: audit, Log: zerolog.Nop(), StateDir: state, Grants: grants}
	srv.Config.AuditLog = auditPath
	for _, o := range opts {
		o(srv)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	conn, err := net.Dial("unix", filepath.Join(dir, "k.sock"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		conn.Close()
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
		audit.Close()
	})
	t := &benchTurn{conn: conn, r: jsonrpc.NewReader(conn, 0), root: root}
	t.roundTrip(b, `{"jsonrpc":"2.0","id":1,"method":"integration.hello","params":{"name":"`+integration+`","shim":{"version":"b"},"capabilities":{"approvals":{}}}}`)
	var lr kproto.ListResult
	if err := json.Unmarshal(t.roundTrip(b, `{"jsonrpc":"2.0","id":2,"method":"tools.list","params":{}}`).Result, &lr); err != nil {
		b.Fatal(err)
	}
	t.hash = lr.CatalogHash
	return t
}

func (t *benchTurn) roundTrip(b *testing.B, line string) jsonrpc.Message {
	if _, err := t.conn.Write([]byte(line + "\n")); err != nil {
		b.Fatal(err)
	}
	raw, err := t.r.ReadLine()
	if err != nil {
		b.Fatal(err)
	}
	var m jsonrpc.Message
	if err := json.Unmarshal(raw, &m); err != nil || m.Error != nil {
		b.Fatalf("%s: %v %v", raw, err, m.Error)
	}
	return m
}

func (t *benchTurn) invoke(b *testing.B, i int, tool, args string) {
	line := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools.invoke","params":{"callId":"c%d","tool":%q,"arguments":%s,"catalogHash":%q}}`, i+3, i, tool, args, t.hash)
	var r kproto.InvokeResult
	if err := json.Unmarshal(t.roundTrip(b, line).Result, &r); err != nil || r.Status != kproto.StatusSucceeded {
		b.Fatalf("%s: %+v %v", tool, r, err)
	}
}

// BenchmarkFilesReadThroughATurn is one files.read as the shim relays it:
// a request on the socket, authorization, the read, the audit line, the
// answer.
func BenchmarkFilesReadThroughATurn(b *testing.B) {
	t := startBenchTurn(b)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		t.invoke(b, i, "files.read", `{"path":"/docs/a.txt"}`)
	}
}

// BenchmarkFilesWriteThroughATurn is one files.write: as the read, plus
// the file's fsync and the audit log's, before the write.
func BenchmarkFilesWriteThroughATurn(b *testing.B) {
	t := startBenchTurn(b)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		t.invoke(b, i, "files.write", `{"path":"/docs/w.txt","content":"a line a model wrote\n"}`)
	}
}

// BenchmarkGrantsOnARead is one files.read through a turn, as
// BenchmarkFilesReadThroughATurn, under the grant language's features,
// in one run so they compare: flat is one wildcard grant; child is a
// child of a parent, decided at both levels; limited is a grant with a
// limit, whose count is written to the state directory at each call.
func BenchmarkGrantsOnARead(b *testing.B) {
	docs, _ := policy.ParseResource("files:/docs")
	read := func(subject string) policy.Grant {
		return policy.Grant{Subject: subject, Resource: docs, Descendants: true, Actions: []string{"read"}}
	}
	limited := read("integration:bench")
	limited.Limit = policy.Limit{N: policy.MaxLimitCount, Window: policy.MaxLimitWindow}
	hierarchy, err := policy.NewHierarchy([]policy.Integration{{Name: "bench.child", Parent: "bench"}}, []string{"bench"})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name        string
		integration string
		grants      []policy.Grant
		opts        []func(*Server)
	}{
		{"flat", "bench", []policy.Grant{read(policy.SubjectWildcard)}, nil},
		{"child", "bench.child", []policy.Grant{read("integration:bench"), read("integration:bench.child")},
			[]func(*Server){func(s *Server) { s.Integrations = hierarchy }}},
		{"limited", "bench", []policy.Grant{limited}, []func(*Server){func(s *Server) { s.StateDir = b.TempDir() }}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			t := startBenchTurnWith(b, bc.integration, bc.grants, bc.opts...)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				t.invoke(b, i, "files.read", `{"path":"/docs/a.txt"}`)
			}
		})
	}
}
