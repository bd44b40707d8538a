package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharedos/sharedos-mcp/internal/kerneltest"
	"github.com/sharedos/sharedos-mcp/internal/testbin"
)

// TestGoSDKClientInterop has the official Go SDK client spawn the built
// binary in front of the fake kernel, as a harness would.
func TestGoSDKClientInterop(t *testing.T) {
	bin := testbin.Path(t)
	k := kerneltest.Start(t, kerneltest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	client := mcp.NewClient(&mcp.Implementation{Name: "interop-test", Version: "1"}, nil)
	cmd := exec.Command(bin, "serve", "--integration", "go-sdk", "--socket", k.Path)
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer session.Close()

	init := session.InitializeResult()
	if init.ServerInfo.Name != "sharedos-mcp" || init.Capabilities.Tools == nil || init.Capabilities.Tools.ListChanged {
		t.Errorf("initialize result = %+v, want serverInfo sharedos-mcp and tools without listChanged", init)
	}

	list, err := session.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	if got := list.Meta["sharedos/catalogHash"]; got != k.Hash {
		t.Errorf("catalogHash in _meta = %v, want the kernel's %s", got, k.Hash)
	}
	if len(list.Tools) != len(kerneltest.Catalogue) {
		t.Errorf("listed %d tools, want %d", len(list.Tools), len(kerneltest.Catalogue))
	}
	for _, tool := range list.Tools {
		raw, _ := json.Marshal(tool)
		if strings.Contains(string(raw), "requiredCapability") || strings.Contains(string(raw), "never published") {
			t.Errorf("tool %s publishes kernel-internal fields: %s", tool.Name, raw)
		}
		if tool.Meta["sharedos/namespace"] == nil || tool.Meta["sharedos/source"] == nil {
			t.Errorf("tool %s lacks _meta namespace/source: %v", tool.Name, tool.Meta)
		}
	}

	allowed, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "files.read", Arguments: map[string]any{"path": "/notes.txt"}})
	if err != nil {
		t.Fatalf("allowed call: %v", err)
	}
	if allowed.IsError || len(allowed.Content) != 1 || allowed.Content[0].(*mcp.TextContent).Text != "contents of /notes.txt" {
		t.Errorf("allowed call result = %+v", allowed)
	}

	structured, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "files.list", Arguments: map[string]any{"path": "/"}})
	if err != nil {
		t.Fatalf("structured call: %v", err)
	}
	if structured.IsError || structured.StructuredContent == nil {
		t.Errorf("files.list result = %+v, want structuredContent", structured)
	}

	for _, tc := range []struct{ tool, status, code string }{
		{"files.write", "denied", "no_matching_grant"},
		{"files.delete", "denied", "tool_unavailable"},
	} {
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool, Arguments: map[string]any{"path": "/x"}})
		if err != nil {
			t.Fatalf("%s: a refusal must be a tool result, got error %v", tc.tool, err)
		}
		if !res.IsError || res.Meta["sharedos/status"] != tc.status || res.Meta["sharedos/code"] != tc.code {
			t.Errorf("%s: result isError=%v _meta=%v, want status %s code %s", tc.tool, res.IsError, res.Meta, tc.status, tc.code)
		}
	}

	if err := session.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	k.WaitIdle()
	events := strings.Join(k.Events(), "\n")
	for _, want := range []string{"hello go-sdk", "invoke files.read", "invoke files.write", "invoke files.delete", "closed"} {
		if !strings.Contains(events, want) {
			t.Errorf("kernel events lack %q:\n%s", want, events)
		}
	}
}
