package install

import (
	"slices"
	"testing"
)

// TestTOMLExprsSpans pins what tomlExprs takes from go-toml's unstable
// parser: each top-level expression's kind, its dotted key, and the span
// of whole lines it occupies, including quoted and dotted keys, inline
// tables, a multi-line array and a value with a trailing comment. Codex's
// install edits by these spans; an upgrade of go-toml that moves them
// fails here, not in a user's config.
func TestTOMLExprsSpans(t *testing.T) {
	src := "# leading comment\n" + // 0..18
		"model = \"o3\" # trailing\n" + // 18..42
		"\n" + // 42..43
		"[mcp_servers.\"share dos\"]\n" + // 43..69
		"command = \"/bin/x\"\n" + // 69..88
		"args = [\n  \"a\",\n  \"b\",\n]\n" + // 88..113
		"env = { A = \"1\" }\n" + // 113..131
		"[[profiles]]\n" + // 131..144
		"a.b.c = 1" // 144..153, no final newline
	want := []tomlExpr{
		{exprKeyValue, []string{"model"}, 18, 42},
		{exprTable, []string{"mcp_servers", "share dos"}, 43, 69},
		{exprKeyValue, []string{"command"}, 69, 88},
		{exprKeyValue, []string{"args"}, 88, 113},
		{exprKeyValue, []string{"env"}, 113, 131},
		{exprArrayTable, []string{"profiles"}, 131, 144},
		{exprKeyValue, []string{"a", "b", "c"}, 144, 153},
	}
	if _, err := tomlDecode([]byte(src)); err != nil {
		t.Fatal(err)
	}
	got, err := tomlExprs([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("got %d expressions, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.kind != w.kind || !slices.Equal(g.key, w.key) || g.start != w.start || g.end != w.end {
			t.Errorf("expression %d = %+v, want %+v (%q)", i, g, w, src[w.start:w.end])
		}
	}
}
