package policy

import (
	"strings"
	"testing"
)

func TestValidIntegrationName(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want bool
	}{
		{"a harness id", "claude-code", true},
		{"letters digits and all punctuation allowed", "My Bot_2.0-x", true},
		{"exactly 64 characters", strings.Repeat("a", 64), true},
		{"empty", "", false},
		{"65 characters", strings.Repeat("a", 65), false},
		{"a slash", "a/b", false},
		{"a colon", "integration:x", false},
		{"a newline", "a\nb", false},
		{"a tab", "a\tb", false},
		{"non-ASCII letter", "café", false},
		{"NUL byte", "a\x00", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ValidIntegrationName(tt.in); got != tt.want {
				t.Errorf("ValidIntegrationName(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}
