package hashing

import "strings"

// TrimSpace trims ECMAScript whitespace (String.prototype.trim), the set
// the projection trims namespace and source with; the shim trims an
// escalation reason the same way.
func TrimSpace(s string) string { return strings.TrimFunc(s, isECMAScriptSpace) }
