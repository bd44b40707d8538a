package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/internal/testoauth"
	"github.com/sharedos/sharedos-mcp/internal/testupstream"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
	"github.com/sharedos/sharedos-mcp/policy"
)

// BenchmarkBrokeredCall compares one call of the Go test upstream's echo
// made through a turn of the kernel (tools.invoke on the socket, the
// grant, the audit line, the upstream's tools/call through the manager,
// the answer) with the same tools/call made by a Go SDK client of its
// own over the same kind of stdio pipe: what brokering costs a call.
// Issue 15's goal is kernel ≤ 1.2 × direct. echo is configured read: a
// call with an effect also syncs its tool.authorized to disk first, the
// cost files.write pays (BenchmarkFilesWriteThroughATurn).
func BenchmarkBrokeredCall(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	benchBrokered(b, []string{exe, testupstream.Arg}, "echo", `{"text":"a short line of text, as most tool arguments are"}`)
}

// BenchmarkBrokeredCallNPM is BenchmarkBrokeredCall with the reference
// server-everything from npm (on node) as the upstream, and its echo.
func BenchmarkBrokeredCallNPM(b *testing.B) {
	benchBrokered(b, []string{"node", testupstream.NPMServer(b, "server-everything")}, "echo", `{"message":"a short line of text, as most tool arguments are"}`)
}

// BenchmarkBrokeredRemoteCall is BenchmarkBrokeredCall with a remote
// upstream: the Go SDK's Streamable HTTP server on loopback (in this
// process), reached directly by an SDK client and through the kernel's
// remote transport.
func BenchmarkBrokeredRemoteCall(b *testing.B) {
	srv := testoauth.NewMCPServer(b, testoauth.MCPOptions{})
	benchBrokeredVia(b, func() mcp.Transport { return &mcp.StreamableClientTransport{Endpoint: srv.URL} },
		fmt.Sprintf("url = %q\n", srv.URL), "echo", `{"text":"a short line of text, as most tool arguments are"}`)
}

func benchBrokered(b *testing.B, command []string, tool, args string) {
	benchBrokeredVia(b, func() mcp.Transport {
		cmd := exec.Command(command[0], command[1:]...)
		cmd.Env = []string{"GORACE=atexit_sleep_ms=0", "PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
		return &mcp.CommandTransport{Command: cmd}
	}, fmt.Sprintf("command = %s\nenv = { GORACE = \"atexit_sleep_ms=0\" }\n", tomlArray(command)), tool, args)
}

// benchBrokeredVia times a call of tool made directly over the transport
// direct makes, and through a turn of the kernel brokering the upstream
// whose [[upstream]] keys (besides name and tools) are how.
func benchBrokeredVia(b *testing.B, direct func() mcp.Transport, how, tool, args string) {
	b.Run("direct", func(b *testing.B) {
		client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
		cs, err := client.Connect(context.Background(), direct(), &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		params := &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(args)}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := cs.CallTool(context.Background(), params); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("kernel", func(b *testing.B) {
		base := b.TempDir()
		dir, err := os.MkdirTemp("", "sk")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
		sock := filepath.Join(dir, "k.sock")
		ln, err := Listen(sock)
		if err != nil {
			b.Fatal(err)
		}
		audit, err := audit.Open(filepath.Join(base, "audit.jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		r, _ := policy.ParseResource("test:/echo")
		events := newEventLog()
		srv := &Server{
			Audit: audit, Log: zerolog.Nop(), StateDir: filepath.Join(base, "state"), upstreamEvents: events.add,
			Upstreams: upstreamSpecs(b, fmt.Sprintf("[[upstream]]\nname = \"test\"\n%s"+
				"[[upstream.tool]]\nname = %q\naction = \"read\"\nresource = \"/echo\"\n", how, tool)),
			Grants: []policy.Grant{{Subject: policy.SubjectWildcard, Resource: r, Actions: []string{"read"}}},
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ctx, ln) }()
		b.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				b.Error(err)
			}
			audit.Close()
		})
		events.ready(b, 0, "test")
		conn, err := net.Dial("unix", sock)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		t := &benchTurn{conn: conn, r: jsonrpc.NewReader(conn, 0)}
		t.roundTrip(b, `{"jsonrpc":"2.0","id":1,"method":"integration.hello","params":{"name":"bench","shim":{"version":"b"}}}`)
		var lr kproto.ListResult
		if err := json.Unmarshal(t.roundTrip(b, `{"jsonrpc":"2.0","id":2,"method":"tools.list","params":{}}`).Result, &lr); err != nil || len(lr.Tools) != 1 {
			b.Fatalf("catalogue %v: %v", lr.Tools, err)
		}
		t.hash = lr.CatalogHash
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			t.invoke(b, i, "test."+tool, args)
		}
	})
}

func tomlArray(words []string) string {
	b, _ := json.Marshal(words) // a JSON array of strings is a TOML one
	return string(b)
}
