package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// responses speaks the OpenAI Responses API (POST /v1/responses) as Codex
// uses it: streamed events, MCP tools grouped in a namespace.
type responses struct{}

type responsesTool struct {
	Type  string          `json:"type"`
	Name  string          `json:"name"`
	Tools []responsesTool `json:"tools"`
}

type responsesItem struct {
	Type   string          `json:"type"`
	Name   string          `json:"name"`
	CallID string          `json:"call_id"`
	Output json.RawMessage `json:"output"`
}

func (responses) parse(r *http.Request, body []byte) (parsedRequest, bool, error) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/responses") {
		return parsedRequest{}, false, nil
	}
	var req struct {
		Stream bool            `json:"stream"`
		Tools  []responsesTool `json:"tools"`
		Input  json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return parsedRequest{}, true, fmt.Errorf("decode responses request: %w", err)
	}
	p := parsedRequest{stream: req.Stream}
	for _, t := range req.Tools {
		if t.Type == "namespace" {
			for _, inner := range t.Tools {
				p.tools = append(p.tools, t.Name+"__"+inner.Name)
			}
			continue
		}
		name := t.Name
		if name == "" {
			name = t.Type // built-ins such as web_search have only a type
		}
		p.tools = append(p.tools, name)
	}
	var items []responsesItem
	if len(req.Input) > 0 && req.Input[0] == '[' {
		if err := json.Unmarshal(req.Input, &items); err != nil {
			return parsedRequest{}, true, fmt.Errorf("decode input: %w", err)
		}
	}
	for _, it := range items {
		switch it.Type {
		case "function_call":
			p.noteCall(it.CallID)
		case "function_call_output":
			p.noteResult(it.CallID, false, textOf(it.Output))
		}
	}
	return p, true, nil
}

func (responses) write(w http.ResponseWriter, req parsedRequest, calls []exposedCall, text string) {
	var output []map[string]any
	for _, c := range calls {
		name := c.name
		if c.namespace != "" {
			name = strings.TrimPrefix(name, c.namespace+"__")
		}
		item := map[string]any{"type": "function_call", "id": "fc_" + c.id, "call_id": c.id, "name": name,
			"arguments": string(mustMarshal(c.args)), "status": "completed"}
		if c.namespace != "" {
			item["namespace"] = c.namespace
		}
		output = append(output, item)
	}
	if len(calls) == 0 {
		output = append(output, map[string]any{"type": "message", "id": "msg_final", "role": "assistant", "status": "completed",
			"content": []map[string]any{{"type": "output_text", "text": text, "annotations": []any{}}}})
	}
	resp := map[string]any{"id": "resp_conformance", "object": "response", "model": declaredModel, "status": "completed",
		"output": output, "usage": map[string]any{"input_tokens": 10, "output_tokens": 10, "total_tokens": 20,
			"input_tokens_details": map[string]any{"cached_tokens": 0}, "output_tokens_details": map[string]any{"reasoning_tokens": 0}}}
	if !req.stream {
		w.Header().Set("Content-Type", "application/json")
		w.Write(mustMarshal(resp))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	created := map[string]any{"id": resp["id"], "object": "response", "model": declaredModel, "status": "in_progress", "output": []any{}}
	sse(w, "response.created", map[string]any{"type": "response.created", "response": created})
	for i, item := range output {
		sse(w, "response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": i, "item": item})
		sse(w, "response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": i, "item": item})
	}
	sse(w, "response.completed", map[string]any{"type": "response.completed", "response": resp})
}
