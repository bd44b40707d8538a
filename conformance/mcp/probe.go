package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"reflect"
	"strings"
	"time"
)

// The probe is the runner's own check of the bridge, made before the
// suite runs. In each era it sends tools/list and two tools/call (one the
// kernel's default grant allows, one it refuses, whose result carries
// _meta), each with a _meta holding nested and non-ASCII values: the
// params must reach the shim unchanged and the shim's result must reach
// the HTTP client unchanged. A bridge that parsed and re-built messages (a
// protocol client and server back to back) would fail here, and the
// suite's results would stop saying anything about the shim.

// probeMeta is the _meta every probe request carries besides what its
// era requires.
var probeMeta = map[string]any{
	"progressToken": "probe-progress",
	"example.test/probe": map[string]any{
		"nested":  []any{1.0, "two", nil, map[string]any{"k": true}},
		"unicode": "ünïcode \u2028 ✓",
	},
}

// probeResult is one probe's outcome for RESULTS.md.
type probeResult struct {
	Name string
	Err  error
}

// probeRequest is one request of a probe, without the era's _meta.
type probeRequest struct {
	id, method, tool string
	params           map[string]any
}

var probeRequests = []probeRequest{
	{id: "list", method: "tools/list", params: map[string]any{}},
	{id: "allowed", method: "tools/call", tool: "files.list", params: map[string]any{"name": "files.list", "arguments": map[string]any{"path": "/"}}},
	{id: "denied", method: "tools/call", tool: "files.write", params: map[string]any{"name": "files.write", "arguments": map[string]any{"path": "/docs/probe.txt", "content": "refused: the default grant is read-only"}}},
}

func probeBridge(ctx context.Context, url, wireDir string) []probeResult {
	c := &http.Client{Timeout: 30 * time.Second}
	return []probeResult{
		{Name: "2025-11-25 session: tools/list and two tools/call (allowed, denied) with _meta reach the shim unchanged, and their results reach the client unchanged", Err: probeLegacy(ctx, c, url, wireDir)},
		{Name: "2026-07-28 requests: the same, each request stateless", Err: probeModern(ctx, c, url, wireDir)},
	}
}

func probeLegacy(ctx context.Context, c *http.Client, url, wireDir string) error {
	headers := map[string]string{}
	init := map[string]any{"jsonrpc": "2.0", "id": "probe-init", "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "conformance-mcp-probe", "version": "1"},
	}}
	resp, msgs, err := post(ctx, c, url, headers, init)
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	session := resp.Header.Get("Mcp-Session-Id")
	if session == "" || len(msgs) != 1 {
		return fmt.Errorf("initialize: got session %q and %d messages", session, len(msgs))
	}
	defer endSession(c, url, session)
	headers["Mcp-Session-Id"] = session
	headers["Mcp-Protocol-Version"] = "2025-11-25"
	if _, _, err := post(ctx, c, url, headers, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}); err != nil {
		return fmt.Errorf("notifications/initialized: %w", err)
	}
	for _, r := range probeRequests {
		params := maps.Clone(r.params)
		params["_meta"] = probeMeta
		if err := probeOne(ctx, c, url, headers, wireDir, "probe-legacy-"+r.id, r.method, params); err != nil {
			return err
		}
	}
	return nil
}

func probeModern(ctx context.Context, c *http.Client, url, wireDir string) error {
	meta := map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{},
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "conformance-mcp-probe", "version": "1"},
	}
	maps.Copy(meta, probeMeta)
	for _, r := range probeRequests {
		headers := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": r.method}
		if r.tool != "" {
			headers["Mcp-Name"] = r.tool
		}
		params := maps.Clone(r.params)
		params["_meta"] = meta
		if err := probeOne(ctx, c, url, headers, wireDir, "probe-modern-"+r.id, r.method, params); err != nil {
			return err
		}
	}
	return nil
}

// probeOne sends one request and compares both directions with the wire
// logs.
func probeOne(ctx context.Context, c *http.Client, url string, headers map[string]string, wireDir, id, method string, params map[string]any) error {
	_, msgs, err := post(ctx, c, url, headers, map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, id, err)
	}
	jsonID := string(mustJSON(id))
	var answer rpc
	for _, m := range msgs {
		var r rpc
		if json.Unmarshal(m, &r) == nil && string(r.ID) == jsonID {
			answer = r
		}
	}
	if answer.Result == nil {
		return fmt.Errorf("%s %s: no result among %d messages", method, id, len(msgs))
	}
	children, err := readWire(wireDir)
	if err != nil {
		return err
	}
	sent, _, ok := findWire(children, "client", jsonID)
	if !ok {
		return fmt.Errorf("%s %s: no shim process was sent it", method, id)
	}
	if err := sameJSON(id+": params the shim read", sent.Params, mustJSON(params)); err != nil {
		return err
	}
	wrote, _, ok := findWire(children, "shim", jsonID)
	if !ok {
		return fmt.Errorf("%s %s: no shim process answered it", method, id)
	}
	return sameJSON(id+": result the client read", answer.Result, wrote.Result)
}

// sameJSON compares two JSON values as values (key order and number
// spelling aside), saying what differed.
func sameJSON(what string, got, want json.RawMessage) error {
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if !reflect.DeepEqual(g, w) {
		return fmt.Errorf("%s differs: got %s, want %s", what, got, want)
	}
	return nil
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// post sends one JSON-RPC message and returns the messages of the answer,
// read from a JSON body or an event stream (which the bridge ends once the
// request is answered).
func post(ctx context.Context, c *http.Client, url string, headers map[string]string, msg any) (*http.Response, []json.RawMessage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(mustJSON(msg)))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case resp.StatusCode == http.StatusAccepted:
		return resp, nil, nil
	case resp.StatusCode != http.StatusOK:
		return nil, nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, body)
	case strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream"):
		msgs, err := sseMessages(body)
		return resp, msgs, err
	default:
		return resp, []json.RawMessage{body}, nil
	}
}

// sseMessages returns the data of each event in an event stream body
// (events without data, such as priming events, are skipped).
func sseMessages(body []byte) ([]json.RawMessage, error) {
	var out []json.RawMessage
	var data []string
	flush := func() error {
		if len(data) == 0 {
			return nil
		}
		m := json.RawMessage(strings.Join(data, "\n"))
		data = nil
		if !json.Valid(m) {
			return fmt.Errorf("event data is not JSON: %q", m)
		}
		out = append(out, m)
		return nil
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if err := flush(); err != nil {
				return nil, err
			}
		case strings.HasPrefix(line, "data:"):
			if d := strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "); d != "" {
				data = append(data, d)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if err := flush(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("event stream without messages")
	}
	return out, nil
}

// endSession ends a probe session so its shim process exits now rather
// than at the bridge's idle timeout.
func endSession(c *http.Client, url, session string) {
	req, err := http.NewRequest(http.MethodDelete, url, nil)
	if err != nil {
		return
	}
	req.Header.Set("Mcp-Session-Id", session)
	if resp, err := c.Do(req); err == nil {
		resp.Body.Close()
	}
}
