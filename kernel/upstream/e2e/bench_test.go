package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/sharedos/sharedos-mcp/internal/testupstream"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
)

// BenchmarkCall compares one tools/call to the Go test upstream made
// through a Manager with the same call made by a Go SDK client of its
// own, over the same kind of stdio pipe: the broker's cost per call.
//
// direct-timeout is the direct call bounded by a context deadline, as
// the broker bounds every call by call_timeout: a pending timer changes
// how the Go scheduler idles, which a bare direct call does not pay.
func BenchmarkCall(b *testing.B) {
	args := json.RawMessage(`{"text":"a short line of text, as most tool arguments are"}`)
	direct := func(b *testing.B, timeout time.Duration) {
		cmd := exec.Command(exe, testupstream.Arg)
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
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			if timeout > 0 {
				ctx, cancel = context.WithTimeout(ctx, timeout)
			}
			_, err := cs.CallTool(ctx, params)
			cancel()
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("direct", func(b *testing.B) { direct(b, 0) })
	b.Run("direct-timeout", func(b *testing.B) { direct(b, upstream.DefaultCallTimeout) })
	b.Run("broker", func(b *testing.B) {
		specs, err := upstream.Parse([]upstream.Config{{Name: "test", Command: testupstream.Command(exe), Env: map[string]string{"GORACE": quickExit}}}, "")
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
		// The kernel resolves each call's arguments; that is part of the
		// cost measured.
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			_, fw, err := echo.Resolve(args)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := m.Call(context.Background(), echo, fw, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
