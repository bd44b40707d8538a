// Package clip bounds strings a client sent before they are stored or
// quoted back: the audit log's fields, the kernel's messages, a matching
// line of a search.
package clip

import "unicode/utf8"

// String cuts s to at most n bytes without splitting a UTF-8 sequence,
// and marks the cut with "…" (which adds its own three bytes).
func String(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
