package shim

import (
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sharedos/sharedos-mcp/internal/kerneltest"
)

// TestALongLineIsCheckedWhole: a megabyte stdin line is checked whole
// before any of it is used. A call whose argument holds a bad escape, at
// the start of its text or at the end, is not JSON and is answered
// -32700 without reaching the kernel; the same call with a good argument
// is relayed, and its 2 MB answer comes back whole.
func TestALongLineIsCheckedWhole(t *testing.T) {
	k := kerneltest.Start(t, kerneltest.Options{})
	cfg := Config{Version: "test", Log: zerolog.Nop()}
	cfg.Kernel, cfg.Hello = dialKernel(t, k.Path)
	text := strings.Repeat(`\tif err != nil {\n\t\treturn fmt.Errorf(\"read: %w\", err)\n\t}\n`, 16<<10)
	call := func(id, text string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + text + `"}}}` + "\n"
	}
	in := call("1", `\q`+text) + call("2", text+`marker-ok`) + call("3", text+`\q`)
	lines := serveLines(t, cfg, in, 20*time.Second)
	if len(lines) != 3 {
		t.Fatalf("%d answers, want 3", len(lines))
	}
	refused := 0
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700`):
			refused++
		case strings.HasPrefix(l, `{"jsonrpc":"2.0","id":2,"result":`):
			if strings.Contains(l, `"isError":true`) || strings.Count(l, `marker-ok`) != 2 || len(l) < 2*len(text) {
				t.Errorf("the good call's answer (%d bytes) is not its argument twice: %.300s", len(l), l)
			}
		default:
			t.Errorf("unexpected answer %.300s", l)
		}
	}
	if refused != 2 {
		t.Errorf("%d lines refused as not JSON, want 2", refused)
	}
	invoked := 0
	for _, e := range k.Events() {
		if strings.HasPrefix(e, "invoke echo") {
			invoked++
		}
	}
	if invoked != 1 {
		t.Errorf("the kernel was asked %d times, want once: only the good call is relayed", invoked)
	}
}
