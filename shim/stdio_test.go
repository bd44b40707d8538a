package shim

import (
	"context"
	"errors"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kerneltest"
)

// TestServeStdioPacesTheCollectorForPayloads: once a turn meets a payload
// (a stdin line longer than the reader's buffer, or a result longer than
// payloadSize), serve runs the collector at GOGC 25, which keeps its heap
// near what a payload holds; a turn of small messages keeps the default
// pace, and a GOGC the user set is left as the runtime read it.
func TestServeStdioPacesTheCollectorForPayloads(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	big := strings.Repeat("x", 2*payloadSize)
	// files.read answers with "contents of" its path; of "/big", with a
	// payload.
	k := kerneltest.Start(t, kerneltest.Options{Handler: func(c *kerneltest.Conn, m *jsonrpc.Message) bool {
		if m.Method != "tools.invoke" || !strings.Contains(string(m.Params), `"path":"/big"`) {
			return false
		}
		c.Reply(m.ID, map[string]any{"status": "succeeded", "content": []map[string]string{{"type": "text", "text": "contents of " + big}}})
		return true
	}})
	call := func(path string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"` + path + `"}}}` + "\n"
	}
	for _, tt := range []struct {
		name, gogc string // "" for GOGC unset
		stdin      string
		want       int
	}{
		{"small messages", "", call("/a"), 100},
		{"a long stdin line", "", call("/" + big), gcPercent},
		{"a long result", "", call("/big"), gcPercent},
		{"a long stdin line, GOGC set", "100", call("/" + big), 100},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("GOGC", tt.gogc)
			if tt.gogc == "" {
				os.Unsetenv("GOGC")
			}
			debug.SetGCPercent(100) // what the runtime read from GOGC=100, or its default
			connect := func(context.Context) (Config, error) {
				cfg := Config{Version: "test", Log: zerolog.Nop()}
				cfg.Kernel, cfg.Hello = dialKernel(t, k.Path)
				return cfg, nil
			}
			var out strings.Builder
			if err := ServeStdio(context.Background(), connect, strings.NewReader(tt.stdin), &out); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), `"text":"contents of `) {
				t.Fatalf("the call was not answered: %.200s", out.String())
			}
			if got := debug.SetGCPercent(100); got != tt.want {
				t.Errorf("GOGC %d after the turn, want %d", got, tt.want)
			}
		})
	}
	noKernel := func(context.Context) (Config, error) { return Config{}, errors.New("no kernel") }
	if err := ServeStdio(context.Background(), noKernel, strings.NewReader(""), io.Discard); err == nil {
		t.Fatal("ServeStdio without a kernel returned nil")
	}
}
