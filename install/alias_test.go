package install

import (
	"strings"
	"testing"
)

func TestAliasesPerHarness(t *testing.T) {
	long := strings.Repeat("a", 60)
	tests := []struct {
		harness, tool, want                   string
		rewritten, truncated, hashed, tooLong bool
	}{
		{"claude-code", "files.read", "mcp__sharedos__files_read", true, false, false, false},
		{"claude-code", "files_read", "mcp__sharedos__files_read", false, false, false, false},
		{"claude-code", long, "mcp__sharedos__" + long, false, false, false, true},
		{"codex", "files.read", "mcp__sharedos__files_read", true, false, false, false},
		{"codex", "git-log", "mcp__sharedos__git-log", false, false, false, false},
		{"codex", long, "mcp__sharedos__aaaaaaaaa67ba94f67c8d97988a8ce558ec5c183ae5be56fe", false, true, true, false},
		{"gemini", "files.read", "mcp_sharedos_files.read", false, false, false, false},
		{"gemini", "db/query", "mcp_sharedos_db_query", true, false, false, false},
		{"gemini", "emoji😀", "mcp_sharedos_emoji__", true, false, false, false},
		{"gemini", strings.Repeat("x", 70), "mcp_sharedos_xxxxxxxxxxxxxxxxx..." + strings.Repeat("x", 30), false, true, false, false},
		{"pi", "files.read", "sharedos_files_read", true, false, false, false},
		{"pi", "files_read", "sharedos_files_read", false, false, false, false},
		{"deepseek", "files_read", "mcp__sharedos__files_read", false, false, false, false},
		{"deepseek", "files.read", "mcp__sharedos__files_read_369b5d85e292", true, false, true, false},
		{"deepseek", "test.get_repo", "mcp__sharedos__test_get_repo_8ff6d7f75997", true, false, true, false},
		{"emacs", "files.read", "files.read", false, false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.harness+" "+tt.tool, func(t *testing.T) {
			r := Aliases(tt.harness, []string{tt.tool})[0]
			if r.Alias != tt.want {
				t.Errorf("alias %q, want %q", r.Alias, tt.want)
			}
			if r.Rewritten != tt.rewritten || r.Truncated != tt.truncated || r.Hashed != tt.hashed || r.TooLong != tt.tooLong || r.Collides {
				t.Errorf("flags rewritten=%v truncated=%v hashed=%v tooLong=%v collides=%v, want %v %v %v %v false",
					r.Rewritten, r.Truncated, r.Hashed, r.TooLong, r.Collides, tt.rewritten, tt.truncated, tt.hashed, tt.tooLong)
			}
			alias, notes := Alias(tt.harness, ServerName, tt.tool)
			if alias != r.Alias || len(notes) != len(r.Notes) {
				t.Errorf("Alias = %q %q, disagrees with Aliases %q %q", alias, notes, r.Alias, r.Notes)
			}
			if (tt.rewritten || tt.truncated || tt.tooLong) && len(notes) == 0 {
				t.Error("a changed name has no note")
			}
		})
	}
}

func TestLongAliasesFitTheHarnessLimit(t *testing.T) {
	tool := strings.Repeat("files.read.", 20)
	limits := map[string]int{"codex": 64, "gemini": 63, "deepseek": 64}
	for h, limit := range limits {
		if a, _ := Alias(h, ServerName, tool); len(a) > limit {
			t.Errorf("%s: %d characters, over %d: %s", h, len(a), limit, a)
		}
	}
}

func TestAliasCollisionsAreFlagged(t *testing.T) {
	tools := []string{"files.read", "files_read", "files.write"}
	want := map[string][]bool{
		"claude-code": {true, true, false},
		"codex":       {true, true, false},
		"gemini":      {false, false, false},
		"pi":          {true, true, false},
		"deepseek":    {false, false, false},
	}
	for h, collides := range want {
		rows := Aliases(h, tools)
		for i, r := range rows {
			if r.Collides != collides[i] {
				t.Errorf("%s %s: collides=%v, want %v", h, r.Tool, r.Collides, collides[i])
			}
			if r.Collides && !strings.Contains(strings.Join(r.Notes, "; "), "same alias as") {
				t.Errorf("%s %s: no note names the other tool: %q", h, r.Tool, r.Notes)
			}
		}
	}
	rows := Aliases("codex", []string{"a", "a"})
	if !rows[0].Collides || !strings.Contains(strings.Join(rows[0].Notes, ";"), "listed more than once") {
		t.Errorf("a tool listed twice: %+v", rows[0])
	}
}
