package shim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/sharedos/sharedos-mcp/internal/kerneltest"
)

// authorityFields are what a kernel may keep on a tool definition to
// decide and run calls. None of them, nor any value under them, may reach
// the harness: the shim's projection copies named fields only.
var authorityFields = []string{
	"requiredCapability", "metadata", "grants", "issuer", "credentials", "handler",
	"token", "secret", "apiKey", "policy", "owner", "principal", "env", "headers",
}

// TestProjectionPublishesNoAuthority gives the shim a catalogue whose
// tools carry every kernel-internal field at the top level and inside
// annotations, each with a secret value, and checks that tools/list (both
// eras) shows none of the keys or values, and only the keys MCP defines.
func TestProjectionPublishesNoAuthority(t *testing.T) {
	var tools []string
	for i, def := range kerneltest.Catalogue {
		var m map[string]any
		if err := json.Unmarshal([]byte(def), &m); err != nil {
			t.Fatal(err)
		}
		ann, _ := m["annotations"].(map[string]any)
		if ann == nil {
			ann = map[string]any{}
		}
		for _, f := range authorityFields {
			secret := fmt.Sprintf("SECRET-%s-%d", f, i)
			m[f] = map[string]any{"value": secret, "nested": []any{secret}}
			ann[f] = secret + "-ann"
		}
		m["annotations"] = ann
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		tools = append(tools, string(b))
	}
	k := kerneltest.Start(t, kerneltest.Options{Tools: tools})
	cfg := Config{Version: "test", Log: zerolog.Nop()}
	cfg.Kernel, cfg.Hello = dialKernel(t, k.Path)
	in := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}` + "\n"
	var out bytes.Buffer
	if err := Serve(context.Background(), cfg, strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "SECRET") {
		t.Errorf("a secret value crossed to the harness:\n%s", out.String())
	}
	published := map[string]bool{"name": true, "description": true, "inputSchema": true, "outputSchema": true, "annotations": true, "_meta": true}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want two answers, got %q", out.String())
	}
	for _, line := range lines {
		var r struct {
			Result struct {
				Tools []map[string]json.RawMessage `json:"tools"`
			} `json:"result"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil || len(r.Result.Tools) != len(tools) {
			t.Fatalf("tools/list: %v\n%s", err, line)
		}
		for _, tool := range r.Result.Tools {
			for key := range tool {
				if !published[key] {
					t.Errorf("tool %s publishes %q", tool["name"], key)
				}
			}
			for _, f := range authorityFields {
				if bytes.Contains(tool["annotations"], []byte(`"`+f+`"`)) || bytes.Contains(tool["_meta"], []byte(`"`+f+`"`)) {
					t.Errorf("tool %s carries %q in annotations or _meta", tool["name"], f)
				}
			}
		}
	}
}

// TestCatalogueWithBadNamesIsNotServed: tool names are validated on the
// shim's side too. A catalogue with an invalid or duplicate name is a
// kernel bug; the shim serves none of it, and calls do not go out under a
// catalogue it refused.
func TestCatalogueWithBadNamesIsNotServed(t *testing.T) {
	tool := func(name string) string {
		return fmt.Sprintf(`{"name":%q,"description":"d","namespace":"n","source":"s","readWrite":"read","inputSchema":{"type":"object"}}`, name)
	}
	for _, tc := range []struct {
		name  string
		tools []string
	}{
		{"a name with a newline", []string{tool("files.read\n{\"x\":1}")}},
		{"a name with a slash", []string{tool("../files.read")}},
		{"an empty name", []string{tool("")}},
		{"a 10k-character name", []string{tool(strings.Repeat("a", 10_000))}},
		{"a duplicate name", []string{tool("files.read"), tool("files.read")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The fake serves the catalogue as it is, as no real kernel
			// should, with a hash that is not the catalogue's.
			k := kerneltest.Start(t, kerneltest.Options{Tools: tc.tools, WrongHash: true})
			cfg := Config{Version: "test", Log: zerolog.Nop()}
			cfg.Kernel, cfg.Hello = dialKernel(t, k.Path)
			in := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}` + "\n" +
				`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"files.read","arguments":{}}}` + "\n"
			var out bytes.Buffer
			if err := Serve(context.Background(), cfg, strings.NewReader(in), &out); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if len(lines) != 2 || !strings.Contains(lines[0], `"code":-32603`) {
				t.Fatalf("want tools/list refused -32603, got:\n%s", out.String())
			}
			if !strings.Contains(lines[1], `"isError":true`) || !strings.Contains(lines[1], `"sharedos/status":"failed"`) {
				t.Errorf("a call under a refused catalogue: %s", lines[1])
			}
		})
	}
}
