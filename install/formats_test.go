package install

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// edit installs e into src for harness, checks the result against want,
// then checks uninstall gives back wantBack.
func editCase(t *testing.T, harness, src, want, wantBack string) {
	t.Helper()
	h := mustHarness(t, harness)
	got, err := h.Render([]byte(src), Entry{Command: "/s", Args: []string{"serve"}})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("install:\n%s\nwant:\n%s", got, want)
	}
	back, err := h.Remove(got)
	if err != nil {
		t.Fatal(err)
	}
	if string(back) != wantBack {
		t.Errorf("uninstall:\n%s\nwant:\n%s", back, wantBack)
	}
}

func TestJSONEdits(t *testing.T) {
	entry := `{"type":"stdio","command":"/s","args":["serve"]}`
	at := func(indent, unit string) string { return jsonText([]byte(entry), true, indent, unit) }
	tests := []struct {
		name, src, want, back string
	}{
		{"a one-line file stays on one line",
			`{"mcpServers": {"a": {"url": "u"}}}`,
			`{"mcpServers": {"a": {"url": "u"}, "sharedos": ` + entry + `}}`,
			`{"mcpServers": {"a": {"url": "u"}}}`},
		{"an empty container is filled and emptied",
			"{\n  \"mcpServers\": {}\n}\n",
			"{\n  \"mcpServers\": {\n    \"sharedos\": " + at("    ", "  ") + "\n  }\n}\n",
			"{\n  \"mcpServers\": {}\n}\n"},
		{"a missing container is added after the last key, in the file's indentation",
			"{\n\t\"theme\": \"x\"\n}",
			"{\n\t\"theme\": \"x\",\n\t\"mcpServers\": {\n\t\t\"sharedos\": " + at("\t\t", "\t") + "\n\t}\n}",
			"{\n\t\"theme\": \"x\",\n\t\"mcpServers\": {}\n}"},
		{"our entry first of several is cut with its comma",
			"{\"mcpServers\": {\n  \"sharedos\": 1,\n  \"b\": 2\n}}",
			"{\"mcpServers\": {\n  \"sharedos\": " + at("  ", "  ") + ",\n  \"b\": 2\n}}",
			"{\"mcpServers\": {\n  \"b\": 2\n}}"},
		{"comments before our entry survive",
			"{\"mcpServers\": {\n  \"a\": 1, // keep\n  \"sharedos\": 1\n}}",
			"{\"mcpServers\": {\n  \"a\": 1, // keep\n  \"sharedos\": " + at("  ", "  ") + "\n}}",
			"{\"mcpServers\": {\n  \"a\": 1, // keep\n}}"},
		{"a comment-only object keeps its comment",
			"{\"mcpServers\": { /* none yet */ }}",
			"{\"mcpServers\": {\n  \"sharedos\": " + at("  ", "  ") + " /* none yet */ }}",
			"{\"mcpServers\": { /* none yet */ }}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			editCase(t, "cursor", tt.src, tt.want, tt.back)
		})
	}
}

func TestJSONRefusesWhatItCannotEdit(t *testing.T) {
	h := mustHarness(t, "cursor")
	for _, src := range []string{`[1, 2]`, `{"mcpServers": []}`, `{"mcpServers": null}`} {
		if _, err := h.Render([]byte(src), NewEntry("/s", "c", "")); !errors.Is(err, errNotObject) {
			t.Errorf("%s: error %v, want errNotObject", src, err)
		}
	}
}

func TestJSONParserAcceptsCommentsAndTrailingCommas(t *testing.T) {
	src := "// head\n{ /* a */ \"a\": [1, -2.5e3, true, null, \"\\u00e9\\\"\",], \"b\": {},\n}\n"
	n, err := parseJSON([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(n.members) != 2 || n.members[0].key != "a" || n.members[1].key != "b" {
		t.Errorf("members %+v", n.members)
	}
	for _, bad := range []string{"", "{", `{"a" 1}`, `{"a": 01x}`, "{\"a\": \"x\ny\"}", `{"a": 1} 2`, `{"a": "\q"}`, `{"a": nul}`} {
		if _, err := parseJSON([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	deep := strings.Repeat("[", 300) + strings.Repeat("]", 300)
	if _, err := parseJSON([]byte(deep)); err == nil {
		t.Error("300 nested arrays parsed")
	}
}

func TestCodexKeepsItsSubtablesOnInstallAndDropsThemOnUninstall(t *testing.T) {
	src := "a = 1\n\n[mcp_servers.sharedos]\ncommand = \"/old\" # old one\n\n# env for it\n[mcp_servers.sharedos.env]\nK = \"v\"\n\n[other]\nb = 2\n"
	h := mustHarness(t, "codex")
	got, err := h.Render([]byte(src), NewEntry("/s", "codex", ""))
	if err != nil {
		t.Fatal(err)
	}
	want := "a = 1\n\n" + codexBlock(ServerName, NewEntry("/s", "codex", "")) + "\n# env for it\n[mcp_servers.sharedos.env]\nK = \"v\"\n\n[other]\nb = 2\n"
	if string(got) != want {
		t.Errorf("install:\n%s\nwant:\n%s", got, want)
	}
	back, err := h.Remove(got)
	if err != nil {
		t.Fatal(err)
	}
	if want := "a = 1\n\n# env for it\n\n[other]\nb = 2\n"; string(back) != want {
		t.Errorf("uninstall:\n%q\nwant:\n%q", back, want)
	}
}

func TestCodexRefusesAnEntryDefinedInline(t *testing.T) {
	h := mustHarness(t, "codex")
	for _, src := range []string{
		"[mcp_servers]\nsharedos = { command = \"x\" }\n",
		"mcp_servers.sharedos.command = \"x\"\n",
	} {
		if _, err := h.Render([]byte(src), NewEntry("/s", "codex", "")); !errors.Is(err, ErrUnsupportedLayout) {
			t.Errorf("install into %q: %v, want ErrUnsupportedLayout", src, err)
		}
		if _, err := h.Remove([]byte(src)); !errors.Is(err, ErrUnsupportedLayout) {
			t.Errorf("uninstall from %q: %v, want ErrUnsupportedLayout", src, err)
		}
	}
}

func TestCodexFileWithoutFinalNewline(t *testing.T) {
	h := mustHarness(t, "codex")
	e := NewEntry("/s", "codex", "")
	got, err := h.Render([]byte("a = 1"), e)
	if err != nil {
		t.Fatal(err)
	}
	if want := "a = 1\n\n" + codexBlock(ServerName, e); string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
	trimmed := bytes.TrimSuffix(got, []byte("\n"))
	again, err := h.Render(trimmed, e)
	if err != nil || !bytes.Equal(again, trimmed) {
		t.Errorf("reinstall into a file ending without newline: %q, %v", again, err)
	}
}

func TestDeepSeekRows(t *testing.T) {
	e := Entry{Command: "/s", Args: []string{"serve"}}
	row := func(indent string) string { return deepseekRow(ServerName, e, indent) }
	t.Run("an indented sequence gets an indented row", func(t *testing.T) {
		editCase(t, "deepseek", "  - id: a\n", "  - id: a\n"+row("  "), "  - id: a\n")
	})
	t.Run("our row in the middle is replaced in place", func(t *testing.T) {
		old := strings.Replace(row(""), "/s", "/old", 1)
		src := "- id: a\n" + old + "\n# about b\n- id: b\n"
		editCase(t, "deepseek", src, "- id: a\n"+row("")+"\n# about b\n- id: b\n", "- id: a\n\n# about b\n- id: b\n")
	})
	t.Run("our row as earlier releases wrote it, a mapping the harness cannot load, is replaced", func(t *testing.T) {
		old := "- insert:\n    id: mcp-sharedos\n    name: '@deepseek-ai/dsh-mcp-client'\n    config:\n      command: \"/old\"\n"
		editCase(t, "deepseek", "- id: a\n"+old, "- id: a\n"+row(""), "- id: a\n")
	})
	t.Run("an insert list that holds the user's entries too is not ours", func(t *testing.T) {
		src := "- insert:\n    - id: mcp-sharedos\n    - id: mine\n"
		editCase(t, "deepseek", src, src+row(""), src)
	})
	t.Run("a bare id row with our id is not ours", func(t *testing.T) {
		editCase(t, "deepseek", "- id: mcp-sharedos\n", "- id: mcp-sharedos\n"+row(""), "- id: mcp-sharedos\n")
	})
	t.Run("a file of comments only", func(t *testing.T) {
		editCase(t, "deepseek", "# nothing yet", "# nothing yet\n"+row(""), "# nothing yet\n")
	})
	h := mustHarness(t, "deepseek")
	for _, src := range []string{"plugins: []\n", "[{id: a}]\n"} {
		if _, err := h.Render([]byte(src), e); !errors.Is(err, ErrUnsupportedLayout) {
			t.Errorf("%q: %v, want ErrUnsupportedLayout", src, err)
		}
	}
}
