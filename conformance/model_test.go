package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// messagesRequest is a Messages API request as Claude Code sends it
// without --bare: MCP tools only named in a system message, ToolSearch
// and a placeholder declared, and the conversation so far.
func messagesRequest(t *testing.T, tools []map[string]any, messages ...map[string]any) []byte {
	t.Helper()
	system := map[string]any{"role": "system", "content": []map[string]any{{"type": "text", "text": "# Environment\n\n" +
		"The following " + deferredMarker + ". Their schemas are NOT loaded:\nmcp__sharedos__files_list\nmcp__sharedos__files_read\n\n# MCP Server Instructions\n"}}}
	user := map[string]any{"role": "user", "content": []map[string]any{{"type": "text", "text": prompt}}}
	b, err := json.Marshal(map[string]any{"stream": true, "tools": tools, "messages": append([]map[string]any{user, system}, messages...)})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// toolUses posts body to the scripted model and returns the tool_use
// blocks it streamed back, as name and input.
func toolUses(t *testing.T, url string, body []byte) map[string]map[string]any {
	t.Helper()
	resp, err := http.Post(url+"/v1/messages?beta=true", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	uses := map[string]map[string]any{}
	var name string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			ContentBlock struct{ Type, Name string } `json:"content_block"`
			Delta        struct {
				PartialJSON string `json:"partial_json"`
			} `json:"delta"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.ContentBlock.Type == "tool_use" {
			name = ev.ContentBlock.Name
		}
		if ev.Delta.PartialJSON != "" {
			var input map[string]any
			if err := json.Unmarshal([]byte(ev.Delta.PartialJSON), &input); err != nil {
				t.Fatal(err)
			}
			uses[name] = input
		}
	}
	return uses
}

// TestDeferredToolsAreLoadedBeforeTheyAreCalled plays Claude Code without
// --bare against the scripted model: its first request declares only
// ToolSearch and names the kernel's tools, which is no start-up race; the
// model loads the step's tool with ToolSearch, calls it once a
// tool_reference declared it, and the round is read as before.
func TestDeferredToolsAreLoadedBeforeTheyAreCalled(t *testing.T) {
	m, err := startModel([][]Call{{read("/granted/readme.txt")}}, claudeCodeToolSearch, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.close()
	declared := []map[string]any{
		{"name": "ToolSearch", "input_schema": map[string]any{}},
		{"name": "DeferredToolPlaceholder", "defer_loading": true, "input_schema": map[string]any{}},
	}
	uses := toolUses(t, m.url(), messagesRequest(t, declared))
	if q := uses["ToolSearch"]["query"]; q != "select:mcp__sharedos__files_read" || len(uses) != 1 {
		t.Fatalf("first answer = %v; want only ToolSearch select:mcp__sharedos__files_read", uses)
	}

	loaded := append(declared, map[string]any{"name": "mcp__sharedos__files_read", "defer_loading": true, "input_schema": map[string]any{}})
	uses = toolUses(t, m.url(), messagesRequest(t, loaded,
		map[string]any{"role": "assistant", "content": []map[string]any{{"type": "tool_use", "id": "toolu_" + loadID(0), "name": "ToolSearch", "input": map[string]any{}}}},
		map[string]any{"role": "user", "content": []map[string]any{{"type": "tool_result", "tool_use_id": "toolu_" + loadID(0),
			"content": []map[string]any{{"type": "tool_reference", "tool_name": "mcp__sharedos__files_read"}}}}},
	))
	if p := uses["mcp__sharedos__files_read"]["path"]; p != "/granted/readme.txt" || len(uses) != 1 {
		t.Fatalf("second answer = %v; want mcp__sharedos__files_read on /granted/readme.txt", uses)
	}

	exchanges, errs := m.exchanges()
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if len(exchanges) != 2 || exchanges[0].Answer != "load" || exchanges[1].Answer != "tool_calls" || exchanges[1].Round != 0 {
		t.Fatalf("exchanges = %+v; want a load, then round 0's call", exchanges)
	}
	got := offered(exchanges)
	for _, want := range []string{"ToolSearch", "mcp__sharedos__files_list", "mcp__sharedos__files_read"} {
		if !strings.Contains(strings.Join(got, " "), want) {
			t.Errorf("offered = %v; want %s among them", got, want)
		}
	}
	if strings.Contains(strings.Join(got, " "), "DeferredToolPlaceholder") {
		t.Errorf("offered = %v: a deferred tool nothing names or loads is not offered", got)
	}
	if !claudeCodeToolSearch.offersKernel(got) {
		t.Error("the start-up check takes tools named for ToolSearch as the MCP server not connected yet")
	}
}

// TestDeepSeekHarnessNames checks dshName against the names DeepSeek
// Harness 0.1.0-rc.8 offered for the conformance catalogue.
func TestDeepSeekHarnessNames(t *testing.T) {
	for tool, want := range map[string]string{
		"files.read":        "mcp__sharedos__files_read_369b5d85e292",
		"files.list":        "mcp__sharedos__files_list_93294d555ca5",
		"sharedos.escalate": "mcp__sharedos__sharedos_escalate_72e183f8c537",
		"test.get_repo":     "mcp__sharedos__test_get_repo_8ff6d7f75997",
		"plain_name":        "mcp__sharedos__plain_name",
	} {
		if got := dshName(tool); got != want {
			t.Errorf("dshName(%q) = %q, want %q", tool, got, want)
		}
	}
}
