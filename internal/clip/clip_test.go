package clip

import "testing"

func TestString(t *testing.T) {
	for _, c := range []struct {
		name string
		s    string
		n    int
		want string
	}{
		{"a string within the bound is itself", "abc", 3, "abc"},
		{"a longer one is cut and marked", "abcdef", 3, "abc…"},
		{"a cut inside a rune moves back to its start", "aé", 2, "a…"},
		{"a bound of zero keeps only the mark", "abc", 0, "…"},
		{"a four-byte rune is not split", "x\U0001F600", 4, "x…"},
	} {
		if got := String(c.s, c.n); got != c.want {
			t.Errorf("%s: String(%q, %d) = %q, want %q", c.name, c.s, c.n, got, c.want)
		}
	}
}
