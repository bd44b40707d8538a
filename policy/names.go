// Package policy holds the names the system reasons about and the rules
// that match grants to requests. It is pure: no I/O, no logging.
package policy

// MaxIntegrationName is the longest integration name, in bytes (all
// allowed characters are ASCII).
const MaxIntegrationName = 64

// ValidIntegrationName reports whether s is 1–64 characters of ASCII
// letters, digits, space, '-', '_' and '.'. A bad name is refused, never
// rewritten: a rewritten name could collide with another integration's.
func ValidIntegrationName(s string) bool {
	if len(s) == 0 || len(s) > MaxIntegrationName {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == ' ', c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return true
}
