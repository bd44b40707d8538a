package upstream

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharedos/sharedos-mcp/internal/testoauth"
)

// BenchmarkRemoteCall is one tools/call over Streamable HTTP to a loopback
// server, through the kernel's remote transport (webclient rules, answers
// bounded as read, the call's delivery recorded) and, as the floor,
// through the SDK's transport on http.DefaultClient, in the same run.
func BenchmarkRemoteCall(b *testing.B) {
	for _, jsonResponse := range []bool{false, true} {
		srv := testoauth.NewMCPServer(b, testoauth.MCPOptions{JSONResponse: jsonResponse})
		mode := "stream"
		if jsonResponse {
			mode = "json"
		}
		kernel, err := remoteTransport(RemoteOptions{URL: srv.URL})
		if err != nil {
			b.Fatal(err)
		}
		for _, tc := range []struct {
			name string
			tr   mcp.Transport
		}{
			{"direct-sdk", &mcp.StreamableClientTransport{Endpoint: srv.URL}},
			{"kernel-transport", kernel},
		} {
			b.Run(mode+"/"+tc.name, func(b *testing.B) {
				cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).
					Connect(context.Background(), tc.tr, &mcp.ClientSessionOptions{ProtocolVersion: protocolVersion})
				if err != nil {
					b.Fatal(err)
				}
				r := newRemoteSession(cs, nil, nil, 0)
				defer r.Close()
				params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hello"}}
				b.ReportAllocs()
				for b.Loop() {
					if _, _, err := r.callTool(context.Background(), params, nil); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
