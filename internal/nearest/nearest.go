// Package nearest picks, for a name a user mistyped, the known name they
// most likely meant: the one behind "did you mean …?" in messages.
package nearest

import "strings"

// Candidate is a name that can be suggested, with other spellings that
// mean it (a product's title, an old name).
type Candidate struct {
	Name  string
	Other []string
}

// Names makes candidates of plain names.
func Names(names ...string) []Candidate {
	cs := make([]Candidate, len(names))
	for i, n := range names {
		cs[i] = Candidate{Name: n}
	}
	return cs
}

// Find returns the candidate's Name that s most likely means, or "" when
// none is close. Case, spaces, '_' and '-' do not count; a spelling that
// is a prefix of s or has s as its prefix (claude for claude-code,
// gemini-cli for gemini) matches; otherwise the closest spelling within
// an edit distance of a third of its length (at least 1) wins. Ties go
// to the earlier candidate.
func Find(s string, candidates []Candidate) string {
	in := fold(s)
	if in == "" {
		return ""
	}
	best, bestDist := "", -1
	consider := func(name string, dist int) {
		if bestDist < 0 || dist < bestDist {
			best, bestDist = name, dist
		}
	}
	for _, c := range candidates {
		for _, spelling := range append([]string{c.Name}, c.Other...) {
			sp := fold(spelling)
			switch {
			case sp == "":
			case sp == in:
				return c.Name
			case len(in) >= 3 && len(sp) >= 3 && (strings.HasPrefix(sp, in) || strings.HasPrefix(in, sp)):
				// A prefix is a strong hint, but an exact or near spelling
				// of another candidate is stronger.
				consider(c.Name, 1+abs(len(sp)-len(in)))
			default:
				if d := distance(in, sp); d <= max(1, len(sp)/3) {
					consider(c.Name, d)
				}
			}
		}
	}
	return best
}

// fold lowercases s and drops the separators people vary on.
func fold(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case ' ', '-', '_', '.':
			return -1
		}
		if 'A' <= r && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}, s)
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// distance is the edit distance between a and b, by bytes (the names
// compared here are ASCII), with a swap of two neighbouring letters one
// edit, as a typist makes it ("raed" for "read"): the optimal string
// alignment distance.
func distance(a, b string) int {
	before := make([]int, len(b)+1) // the row of a[:i-2]
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], before[j-2]+1)
			}
		}
		before, prev, cur = prev, cur, before
	}
	return prev[len(b)]
}
