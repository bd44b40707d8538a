package nearest

import "testing"

func TestFind(t *testing.T) {
	harnesses := []Candidate{
		{Name: "claude-code", Other: []string{"Claude Code"}},
		{Name: "codex", Other: []string{"Codex"}},
		{Name: "gemini", Other: []string{"Gemini CLI"}},
		{Name: "pi", Other: []string{"Pi (pi-mcp-adapter)", "pi-mcp-adapter"}},
		{Name: "deepseek", Other: []string{"DeepSeek Harness", "dsh"}},
		{Name: "cursor", Other: []string{"Cursor"}},
		{Name: "vscode", Other: []string{"VS Code", "code"}},
		{Name: "opencode", Other: []string{"opencode"}},
	}
	tests := []struct{ in, want string }{
		{"claude", "claude-code"},
		{"claude_code", "claude-code"},
		{"Claude Code", "claude-code"},
		{"gemini-cli", "gemini"},
		{"gemeni", "gemini"},
		{"vs-code", "vscode"},
		{"code", "vscode"},
		{"dsh", "deepseek"},
		{"cursor-agent", "cursor"},
		{"opencod", "opencode"},
		{"open-code", "opencode"},
		{"codx", "codex"},
		{"emacs", ""},
		{"", ""},
		{"x", ""},
	}
	for _, tt := range tests {
		if got := Find(tt.in, harnesses); got != tt.want {
			t.Errorf("Find(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestFindCommands(t *testing.T) {
	cmds := Names("serve", "kernel", "install", "uninstall", "doctor", "catalog", "audit", "hash", "version")
	for in, want := range map[string]string{
		"instal": "install", "docter": "doctor", "catalogue": "catalog", "kernal": "kernel",
		"versoin": "version", "frobnicate": "", "uninstal": "uninstall", "sreve": "serve",
	} {
		if got := Find(in, cmds); got != want {
			t.Errorf("Find(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDistance(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"a", "", 1}, {"kitten", "sitting", 3}, {"abc", "abc", 0}, {"ab", "ba", 1}, {"raed", "read", 1}, {"ca", "abc", 3}, {"abcdef", "badcfe", 3}} {
		if got := distance(tt.a, tt.b); got != tt.d {
			t.Errorf("distance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.d)
		}
	}
}

// TestFindASwap: two neighbouring letters swapped are one edit, as a
// typist makes them.
func TestFindASwap(t *testing.T) {
	actions := Names("read", "list", "search", "write", "escalate", "call")
	for in, want := range map[string]string{"raed": "read", "lsit": "list", "wirte": "write", "clal": "call", "delete": ""} {
		if got := Find(in, actions); got != want {
			t.Errorf("Find(%q) = %q, want %q", in, got, want)
		}
	}
}
