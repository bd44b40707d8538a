package kernelclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sharedos/sharedos-mcp/hashing"
	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kerneltest"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
)

// fuzzMaxLine keeps over-long kernel lines within the fuzzer's reach.
const fuzzMaxLine = 4096

// FuzzKernelReply plays a kernel that answers each request with arbitrary
// bytes and then hangs up. For every request the client makes (hello,
// tools.list, tools.invoke, turn.escalate, ping), the answer is a result
// or an error, never a panic or a hang, and a catalogue that decodes goes
// through the shim's projection and hash without a panic.
func FuzzKernelReply(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"protocol":1,"principal":{"kind":"integration","name":"x"},"executionId":"e","kernel":{"name":"k","version":"1"}}}` + "\n"))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"protocol":2}}` + "\n"))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"no","data":{"code":"already_introduced"}}}` + "\n"))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":7,"data":[1]}}` + "\n"))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"status":"succeeded","output":{"a":1},"content":[{"type":"text","text":"hi"}]}}` + "\n"))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"status":"denied","code":"no_matching_grant","retryable":"yes"}}` + "\n"))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"1","result":{}}` + "\n" + `{"jsonrpc":"2.0","id":1.0,"result":{}}` + "\n" + `{"jsonrpc":"2.0","id":1,"result":null}` + "\n"))
	f.Add([]byte(`{"jsonrpc":"2.0","id":99,"result":{}}` + "\n" + `{"jsonrpc":"2.0","method":"tools.invoke","id":1}` + "\n" + `not json` + "\n"))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":` + string(make([]byte, fuzzMaxLine)) + "}\n"))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"protocol":1}`))
	for _, tool := range kerneltest.Catalogue {
		f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":[` + tool + `],"catalogHash":"x"}}` + "\n"))
	}
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a.b","description":"d","namespace":"n","source":"s","readWrite":"read","inputSchema":{"type":"object"},"annotations":{"readOnly":"no"}},{"name":"a.b"}],"catalogHash":""}}` + "\n"))

	// errBroken marks what the client must never do whatever the kernel
	// sends; any other error is a refusal, which is fine.
	errBroken := errors.New("client invariant broken")
	ops := []struct {
		name string
		run  func(ctx context.Context, c *Client) error
	}{
		{"hello", func(ctx context.Context, c *Client) error {
			r, err := c.Hello(ctx, kproto.HelloParams{Name: "fuzz"})
			if err == nil && r.Protocol != kproto.Version {
				return fmt.Errorf("%w: Hello accepted protocol %d", errBroken, r.Protocol)
			}
			return err
		}},
		{"list", func(ctx context.Context, c *Client) error {
			r, err := c.list(ctx)
			if err == nil {
				if tools, perr := hashing.ProjectRaw(r.Tools); perr == nil {
					hashing.Hash(tools)
					for _, t := range tools {
						if !json.Valid(hashing.AppendMCP(nil, t)) {
							return fmt.Errorf("%w: projected tool %q does not render as JSON", errBroken, t.Name)
						}
					}
				}
			}
			return err
		}},
		{"invoke", func(ctx context.Context, c *Client) error {
			_, err := invoke(ctx, c, kproto.InvokeParams{CallID: "c1", Tool: "files.read", Arguments: json.RawMessage(`{}`)})
			return err
		}},
		{"escalate", func(ctx context.Context, c *Client) error {
			call, err := c.StartEscalate(kproto.EscalateParams{CallID: "c1", Reason: "r"})
			if err != nil {
				return err
			}
			return call.wait(ctx, nil)
		}},
		{"ping", func(ctx context.Context, c *Client) error { return c.call(ctx, kproto.MethodPing, struct{}{}, nil) }},
	}

	f.Fuzz(func(t *testing.T, reply []byte) {
		// Each connection gets reply to its first request, whatever the
		// request was, and then the kernel hangs up.
		k := kerneltest.Start(t, kerneltest.Options{Handler: func(c *kerneltest.Conn, _ *jsonrpc.Message) bool {
			c.Write(reply)
			c.Close()
			return true
		}})
		for _, op := range ops {
			c, err := Dial(Options{Socket: k.Path, KernelUID: -1, MaxLine: fuzzMaxLine})
			if err != nil {
				t.Fatal(err)
			}
			// The kernel hangs up after its reply, so every request ends
			// promptly; the deadline only turns a hang into a failure.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err = op.run(ctx, c)
			cancel()
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%s: no answer within 10s of a kernel that hung up", op.name)
			}
			if errors.Is(err, errBroken) {
				t.Fatalf("%s: %v", op.name, err)
			}
			if err != nil && err.Error() == "" {
				t.Fatalf("%s: an error without a message", op.name)
			}
			c.Close()
		}
	})
}
