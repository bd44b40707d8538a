package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// anthropic speaks the Messages API (POST /v1/messages), streamed as
// server-sent events when the request asks for it.
type anthropic struct{}

type anthropicRequest struct {
	Stream bool `json:"stream"`
	Tools  []struct {
		Name string `json:"name"`
	} `json:"tools"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

type anthropicBlock struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

func (anthropic) parse(r *http.Request, body []byte) (parsedRequest, bool, error) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/v1/messages") {
		return parsedRequest{}, false, nil
	}
	var req anthropicRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return parsedRequest{}, true, fmt.Errorf("decode messages request: %w", err)
	}
	p := parsedRequest{stream: req.Stream}
	for _, t := range req.Tools {
		p.tools = append(p.tools, t.Name)
	}
	for i, msg := range req.Messages {
		var blocks []anthropicBlock
		if len(msg.Content) == 0 || msg.Content[0] != '[' {
			continue
		}
		if err := json.Unmarshal(msg.Content, &blocks); err != nil {
			return parsedRequest{}, true, fmt.Errorf("decode message %d: %w", i, err)
		}
		for _, b := range blocks {
			switch {
			case msg.Role == "assistant" && b.Type == "tool_use":
				p.noteCall(b.ID)
			case msg.Role == "user" && b.Type == "tool_result":
				p.noteResult(b.ToolUseID, b.IsError, textOf(b.Content))
			}
		}
	}
	return p, true, nil
}

func (anthropic) write(w http.ResponseWriter, req parsedRequest, calls []exposedCall, text string) {
	stop := "end_turn"
	var content []map[string]any
	if len(calls) > 0 {
		stop = "tool_use"
		for _, c := range calls {
			content = append(content, map[string]any{"type": "tool_use", "id": "toolu_" + c.id, "name": c.name, "input": c.args})
		}
	} else {
		content = []map[string]any{{"type": "text", "text": text}}
	}
	usage := map[string]any{"input_tokens": 10, "output_tokens": 10}
	msg := map[string]any{
		"id": "msg_conformance", "type": "message", "role": "assistant", "model": declaredModel,
		"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": usage,
	}
	if !req.stream {
		w.Header().Set("Content-Type", "application/json")
		w.Write(mustMarshal(msg))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	start := map[string]any{}
	for k, v := range msg {
		start[k] = v
	}
	start["content"], start["stop_reason"] = []any{}, nil
	sse(w, "message_start", map[string]any{"type": "message_start", "message": start})
	for i, b := range content {
		if b["type"] == "tool_use" {
			sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}})
			sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": string(mustMarshal(b["input"]))}})
		} else {
			sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "text", "text": ""}})
			sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]any{"type": "text_delta", "text": b["text"]}})
		}
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	sse(w, "message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 10}})
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
}
