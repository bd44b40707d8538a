package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// anthropic speaks the Messages API (POST /v1/messages), streamed as
// server-sent events when the request asks for it.
type anthropic struct{}

type anthropicRequest struct {
	Stream bool            `json:"stream"`
	System json.RawMessage `json:"system"`
	Tools  []struct {
		Name         string `json:"name"`
		DeferLoading bool   `json:"defer_loading"`
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
	Text      string          `json:"text"`
}

// deferredMarker opens the list of tools Claude Code defers behind its
// ToolSearch tool (in the system prompt or a system message), one name a
// line up to a blank line. Such a tool is not declared to the model
// until ToolSearch returns a tool_reference to it; until then the model
// knows only its name.
const deferredMarker = "deferred tools are now available via ToolSearch"

// deferredNames reads the names listed after deferredMarker in text.
func deferredNames(text string) []string {
	i := strings.Index(text, deferredMarker)
	if i < 0 {
		return nil
	}
	var names []string
	_, list, _ := strings.Cut(text[i:], "\n")
	for line := range strings.SplitSeq(list, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.ContainsAny(line, " \t") {
			break
		}
		names = append(names, line)
	}
	return names
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
	// A deferred tool (defer_loading) is declared to the model only once a
	// tool_reference in the conversation has loaded it.
	var deferred []string
	for _, t := range req.Tools {
		if t.DeferLoading {
			deferred = append(deferred, t.Name)
			continue
		}
		p.tools = append(p.tools, t.Name)
	}
	p.deferred = append(p.deferred, deferredNames(textOf(req.System))...)
	for i, msg := range req.Messages {
		var blocks []anthropicBlock
		if len(msg.Content) == 0 || msg.Content[0] != '[' {
			if msg.Role == "system" {
				p.deferred = append(p.deferred, deferredNames(textOf(msg.Content))...)
			}
			continue
		}
		if err := json.Unmarshal(msg.Content, &blocks); err != nil {
			return parsedRequest{}, true, fmt.Errorf("decode message %d: %w", i, err)
		}
		for _, b := range blocks {
			switch {
			case b.Type == "text" && msg.Role != "assistant":
				p.deferred = append(p.deferred, deferredNames(b.Text)...)
			case msg.Role == "assistant" && b.Type == "tool_use":
				p.noteCall(b.ID)
			case msg.Role == "user" && b.Type == "tool_result":
				p.noteResult(b.ToolUseID, b.IsError, textOf(b.Content))
				var refs []struct {
					Type     string `json:"type"`
					ToolName string `json:"tool_name"`
				}
				if json.Unmarshal(b.Content, &refs) == nil {
					for _, r := range refs {
						if r.Type == "tool_reference" && slices.Contains(deferred, r.ToolName) && !slices.Contains(p.tools, r.ToolName) {
							p.tools = append(p.tools, r.ToolName)
						}
					}
				}
			}
		}
	}
	p.deferred = slices.DeleteFunc(p.deferred, func(n string) bool { return slices.Contains(p.tools, n) })
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
