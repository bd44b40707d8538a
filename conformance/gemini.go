package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// gemini speaks the Gemini API's generateContent and
// streamGenerateContent (POST /v1beta/models/M:method).
type gemini struct{}

type geminiPart struct {
	FunctionCall *struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"functionCall"`
	FunctionResponse *struct {
		ID       string          `json:"id"`
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse"`
}

func (gemini) parse(r *http.Request, body []byte) (parsedRequest, bool, error) {
	if r.Method != http.MethodPost || !strings.Contains(r.URL.Path, ":") {
		return parsedRequest{}, false, nil
	}
	method := r.URL.Path[strings.LastIndex(r.URL.Path, ":")+1:]
	if method != "generateContent" && method != "streamGenerateContent" {
		return parsedRequest{}, false, nil
	}
	var req struct {
		Contents []struct {
			Role  string       `json:"role"`
			Parts []geminiPart `json:"parts"`
		} `json:"contents"`
		Tools []struct {
			FunctionDeclarations []struct {
				Name string `json:"name"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return parsedRequest{}, true, fmt.Errorf("decode generateContent request: %w", err)
	}
	p := parsedRequest{stream: method == "streamGenerateContent"}
	for _, t := range req.Tools {
		for _, d := range t.FunctionDeclarations {
			p.tools = append(p.tools, d.Name)
		}
	}
	// A harness that drops the call ids still keeps the contents in
	// order: the n-th model content with calls is round n-1.
	n := 0
	for _, c := range req.Contents {
		counted := false
		for _, part := range c.Parts {
			if fc := part.FunctionCall; fc != nil {
				if !counted {
					n, counted = n+1, true
				}
				id := fc.ID
				if _, ok := roundOf(id); !ok {
					id = callID(n-1, 0)
				}
				p.noteCall(id)
			}
			if fr := part.FunctionResponse; fr != nil {
				text := string(fr.Response)
				var resp struct {
					Output string `json:"output"`
					Error  string `json:"error"`
				}
				isError := false
				if json.Unmarshal(fr.Response, &resp) == nil {
					switch {
					case resp.Error != "":
						text, isError = resp.Error, true
					case resp.Output != "":
						text = resp.Output
					}
				}
				id := fr.ID
				if _, ok := roundOf(id); !ok {
					id = callID(n-1, 0)
				}
				p.noteResult(id, isError, text)
			}
		}
	}
	return p, true, nil
}

func (gemini) write(w http.ResponseWriter, req parsedRequest, calls []exposedCall, text string) {
	var parts []map[string]any
	for _, c := range calls {
		parts = append(parts, map[string]any{"functionCall": map[string]any{"id": c.id, "name": c.name, "args": c.args}})
	}
	if len(calls) == 0 {
		parts = []map[string]any{{"text": text}}
	}
	resp := map[string]any{
		"candidates":    []map[string]any{{"content": map[string]any{"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}},
		"usageMetadata": map[string]any{"promptTokenCount": 10, "candidatesTokenCount": 10, "totalTokenCount": 20},
		"modelVersion":  declaredModel,
	}
	if req.stream {
		w.Header().Set("Content-Type", "text/event-stream")
		sse(w, "", resp)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(mustMarshal(resp))
}
