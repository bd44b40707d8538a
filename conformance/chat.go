package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// chat speaks the OpenAI Chat Completions API (POST …/chat/completions),
// streamed, as DeepSeek Harness's DeepSeek provider uses it: tools as
// functions, calls as assistant tool_calls, results as role "tool"
// messages, and an SSE stream that ends with [DONE].
type chat struct{}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []struct {
		ID string `json:"id"`
	} `json:"tool_calls"`
}

func (chat) parse(r *http.Request, body []byte) (parsedRequest, bool, error) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		return parsedRequest{}, false, nil
	}
	var req struct {
		Stream bool `json:"stream"`
		Tools  []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
		Messages []chatMessage `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return parsedRequest{}, true, fmt.Errorf("decode chat completions request: %w", err)
	}
	p := parsedRequest{stream: req.Stream}
	for _, t := range req.Tools {
		p.tools = append(p.tools, t.Function.Name)
	}
	for _, m := range req.Messages {
		switch m.Role {
		case "assistant":
			for _, c := range m.ToolCalls {
				p.noteCall(c.ID)
			}
		case "tool":
			// The API has no error flag for a tool result: a refusal is
			// told by its text.
			p.noteResult(m.ToolCallID, false, textOf(m.Content))
		}
	}
	return p, true, nil
}

func (chat) write(w http.ResponseWriter, req parsedRequest, calls []exposedCall, text string) {
	delta := map[string]any{"role": "assistant", "content": text}
	finish := "stop"
	if len(calls) > 0 {
		var tc []map[string]any
		for i, c := range calls {
			tc = append(tc, map[string]any{"index": i, "id": c.id, "type": "function",
				"function": map[string]any{"name": c.name, "arguments": string(mustMarshal(c.args))}})
		}
		delta = map[string]any{"role": "assistant", "content": "", "tool_calls": tc}
		finish = "tool_calls"
	}
	usage := map[string]any{"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}
	if !req.stream {
		msg := map[string]any{"role": "assistant", "content": delta["content"]}
		if tc, ok := delta["tool_calls"]; ok {
			msg["tool_calls"] = tc
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(mustMarshal(map[string]any{"id": "chatcmpl-conformance", "object": "chat.completion", "model": declaredModel,
			"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage}))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(choice map[string]any, usage any) map[string]any {
		return map[string]any{"id": "chatcmpl-conformance", "object": "chat.completion.chunk", "model": declaredModel,
			"choices": []map[string]any{choice}, "usage": usage}
	}
	sse(w, "", chunk(map[string]any{"index": 0, "delta": delta, "finish_reason": nil}, nil))
	sse(w, "", chunk(map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finish}, usage))
	fmt.Fprint(w, "data: [DONE]\n\n")
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}
