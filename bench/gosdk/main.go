// Command gosdk is the relay written with the official Go MCP SDK, for
// the relay benchmarks only: an mcp.Server on mcp.StdioTransport whose
// tools are the kernel's, each tools/call relayed with kernelclient. It
// does what the benchmarks compare and no more: it connects, checks the
// kernel's peer credentials and says hello before serving (as serve
// does), fetches and checks the catalogue on the first tools/list or
// tools/call (as serve does), but does not keep answers in arrival order.
// It is not a second implementation of serve.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/kernelclient"
)

func main() {
	socket := flag.String("socket", "", "kernel socket `path`")
	name := flag.String("integration", "bench", "integration `name` said in hello")
	flag.Parse()
	if err := run(*socket, *name); err != nil {
		fmt.Fprintln(os.Stderr, "gosdk:", err)
		os.Exit(1)
	}
}

func run(socket, name string) error {
	ctx := context.Background()
	k, err := kernelclient.Dial(kernelclient.Options{Socket: socket, KernelUID: -1})
	if err != nil {
		return err
	}
	defer k.Close()
	if _, err := k.Hello(ctx, kproto.HelloParams{Name: name, Shim: kproto.Peer{Name: "gosdk-bench", Version: "0"}}); err != nil {
		return err
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "gosdk-bench", Version: "0"}, &mcp.ServerOptions{
		// Tools are added once, before the first answer that lists them;
		// announcing that as a change would only add a notification.
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
		PageSize:     1000,
	})
	r := &relay{k: k, server: server}
	server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" || method == "tools/call" {
				if err := r.load(ctx); err != nil {
					return nil, err
				}
			}
			return next(ctx, method, req)
		}
	})
	return server.Run(ctx, &mcp.StdioTransport{})
}

type relay struct {
	k      *kernelclient.Client
	server *mcp.Server

	once sync.Once
	err  error
	hash string
	seq  int64
	mu   sync.Mutex
}

// load fetches the catalogue once and registers every tool.
func (r *relay) load(ctx context.Context) error {
	r.once.Do(func() {
		tools, hash, err := r.k.Catalogue(ctx)
		if err != nil {
			r.err = err
			return
		}
		r.hash = hash
		for _, def := range tools {
			t := &mcp.Tool{Name: def.Name, Description: def.Description, InputSchema: json.RawMessage(def.InputSchema)}
			if len(def.OutputSchema) > 0 {
				t.OutputSchema = json.RawMessage(def.OutputSchema)
			}
			r.server.AddTool(t, r.call)
		}
	})
	return r.err
}

func (r *relay) call(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	r.mu.Lock()
	r.seq++
	id := fmt.Sprintf("c%d", r.seq)
	r.mu.Unlock()
	args := req.Params.Arguments
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	call, err := r.k.StartInvoke(kproto.InvokeParams{CallID: id, Tool: req.Params.Name, Arguments: args, CatalogHash: r.hash})
	if err != nil {
		return nil, err
	}
	var res kproto.InvokeResult
	select {
	case a := <-call.Answer():
		if res, err = a.Invoke(); err != nil {
			return nil, err
		}
	case <-ctx.Done():
		call.Abandon()
		return nil, ctx.Err()
	}
	out := &mcp.CallToolResult{IsError: res.Status != kproto.StatusSucceeded}
	switch {
	case out.IsError:
		out.Content = []mcp.Content{&mcp.TextContent{Text: res.Status + ": " + res.Code + ": " + res.Message}}
	case len(res.Content) > 0:
		if err := json.Unmarshal([]byte(`{"content":`+string(res.Content)+`}`), out); err != nil {
			return nil, fmt.Errorf("decode content: %w", err)
		}
	default:
		out.Content = []mcp.Content{&mcp.TextContent{Text: string(res.Output)}}
	}
	return out, nil
}
