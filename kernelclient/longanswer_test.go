package kernelclient

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kerneltest"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
)

// TestALongAnswerIsCheckedWhole: the client checks a megabyte answer
// whole, once, before it hands any of it over. A valid output comes
// through byte for byte, to a channel waiter and to a function waiter,
// each with a copy of its own. An output with a bad escape, early or late
// in its text, is refused: the call takes the kernel's next answer
// instead.
func TestALongAnswerIsCheckedWhole(t *testing.T) {
	text := strings.Repeat(`\tif err != nil {\n\t\treturn fmt.Errorf(\"read %s: %w\", name, err)\n\t}\n`, 16<<10)
	// The output text each call is answered with, by callId; each
	// answer is followed by a denial of the same call.
	outputs := map[string]string{
		"valid":     text,
		"bad early": `\q` + text,
		"bad late":  text + `\q`,
		"bad \\u":   text[:len(text)/2] + `\u12x4` + text[len(text)/2:],
	}
	k, c := introducedWith(t, kerneltest.Options{Handler: func(kc *kerneltest.Conn, m *jsonrpc.Message) bool {
		var p kproto.InvokeParams
		if m.Method != kproto.MethodInvoke || json.Unmarshal(m.Params, &p) != nil {
			return false
		}
		head := `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":`
		kc.Write([]byte(head + `{"status":"succeeded","output":{"text":"` + outputs[p.CallID] + `"}}}` + "\n"))
		kc.Write([]byte(head + `{"status":"denied","code":"no_matching_grant"}}` + "\n"))
		return true
	}}, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	want := `{"text":"` + text + `"}`

	res, err := invoke(ctx, c, kproto.InvokeParams{CallID: "valid", Tool: "echo", Arguments: []byte(`{}`), CatalogHash: k.Hash})
	if err != nil || res.Status != kproto.StatusSucceeded || string(res.Output) != want {
		t.Fatalf("a valid long output to a channel waiter: %s, %d bytes of output, %v", res.Status, len(res.Output), err)
	}
	got := make(chan kproto.InvokeResult, 1)
	if err := c.StartInvokeFunc(kproto.InvokeParams{CallID: "valid", Tool: "echo", Arguments: []byte(`{}`), CatalogHash: k.Hash}, false, func(a Answer) {
		res, err := a.Invoke()
		if err != nil {
			t.Errorf("a valid long output to a function waiter: %v", err)
		}
		got <- res // the answer is the function's to keep
	}); err != nil {
		t.Fatal(err)
	}
	if res := <-got; res.Status != kproto.StatusSucceeded || string(res.Output) != want {
		t.Fatalf("a valid long output to a function waiter: %s, %d bytes of output", res.Status, len(res.Output))
	}

	for _, name := range []string{"bad early", "bad late", "bad \\u"} {
		res, err := invoke(ctx, c, kproto.InvokeParams{CallID: name, Tool: "echo", Arguments: []byte(`{}`), CatalogHash: k.Hash})
		if err != nil || res.Status != kproto.StatusDenied {
			t.Errorf("%s: the call took %s (%d bytes of output), %v; the line with the bad output must be refused", name, res.Status, len(res.Output), err)
		}
	}
}
