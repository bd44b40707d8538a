package install

import (
	"strings"
	"testing"
)

func TestDiff(t *testing.T) {
	lines := func(n int, f func(int) string) string {
		var b strings.Builder
		for i := 1; i <= n; i++ {
			b.WriteString(f(i) + "\n")
		}
		return b.String()
	}
	num := func(i int) string { return string(rune('a' - 1 + i)) }
	tests := []struct {
		name, a, b, want string
	}{
		{"equal inputs give nothing", "x\n", "x\n", ""},
		{"a new file", "", "a\nb\n", "--- a\n+++ b\n@@ -0,0 +1,2 @@\n+a\n+b\n"},
		{"a removed file", "a\n", "", "--- a\n+++ b\n@@ -1,1 +0,0 @@\n-a\n"},
		{"one changed line with context",
			lines(9, num), lines(9, func(i int) string {
				if i == 5 {
					return "E"
				}
				return num(i)
			}),
			"--- a\n+++ b\n@@ -2,7 +2,7 @@\n b\n c\n d\n-e\n+E\n f\n g\n h\n"},
		{"far apart changes are two hunks",
			lines(20, num), strings.Replace(strings.Replace(lines(20, num), "b\n", "B\n", 1), "s\n", "S\n", 1),
			"--- a\n+++ b\n@@ -1,5 +1,5 @@\n a\n-b\n+B\n c\n d\n e\n@@ -16,5 +16,5 @@\n p\n q\n r\n-s\n+S\n t\n"},
		{"a missing final newline is marked", "a\nb", "a\nb\nc\n",
			"--- a\n+++ b\n@@ -1,2 +1,3 @@\n a\n-b\n\\ No newline at end of file\n+b\n+c\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Diff("a", "b", []byte(tt.a), []byte(tt.b)); got != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

func TestDiffOfHugeRewritesStaysCorrect(t *testing.T) {
	var a, b strings.Builder
	for i := range 3000 {
		a.WriteString("old " + string(rune('A'+i%26)) + "\n")
		b.WriteString("new " + string(rune('A'+i%26)) + "\n")
	}
	d := Diff("a", "b", []byte(a.String()), []byte(b.String()))
	if !strings.HasPrefix(d, "--- a\n+++ b\n@@ -1,3000 +1,3000 @@\n-old A\n") || strings.Count(d, "\n+new ") != 3000 {
		t.Errorf("diff of a full rewrite is wrong: %.200s", d)
	}
}
