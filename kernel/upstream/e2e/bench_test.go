package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/sharedos/sharedos-mcp/kernel/upstream"
	"github.com/sharedos/sharedos-mcp/kernel/upstream/internal/testserver"
)

// BenchmarkCall compares one tools/call to the Go test upstream made
// through a Manager with the same call made by a Go SDK client of its
// own, over the same kind of stdio pipe: the broker's cost per call.
func BenchmarkCall(b *testing.B) {
	args := json.RawMessage(`{"text":"a short line of text, as most tool arguments are"}`)
	b.Run("direct", func(b *testing.B) {
		cmd := exec.Command(exe, testserver.Arg)
		cmd.Env = []string{"GORACE=" + quickExit}
		client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
		cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		params := &mcp.CallToolParams{Name: "echo", Arguments: args}
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			if _, err := cs.CallTool(context.Background(), params); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("broker", func(b *testing.B) {
		specs, err := upstream.Parse([]upstream.Config{{Name: "test", Command: testserver.Command(exe), Env: map[string]string{"GORACE": quickExit}}}, "")
		if err != nil {
			b.Fatal(err)
		}
		m, err := upstream.Start(specs, upstream.Options{StateDir: filepath.Join(b.TempDir(), "state"), Log: zerolog.Nop()})
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close()
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		if err := m.WaitSettled(ctx); err != nil {
			b.Fatal(err)
		}
		var echo *upstream.Tool
		for _, t := range m.Snapshot().Tools {
			if t.Name == "test.echo" {
				echo = t
			}
		}
		if echo == nil {
			b.Fatal("test.echo is not published")
		}
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			if _, err := m.Call(context.Background(), echo, args, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
