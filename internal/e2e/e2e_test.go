// Package e2e holds the black-box tests: each runs the built binary as a
// real subprocess (a harness's view of serve, the kernel as a user starts
// it, the README followed literally), so the unit tests of every other
// package run on their own in seconds.
package e2e

import (
	"strings"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/testbin"
)

// repoRoot is the module root, relative to this package's directory,
// where go test runs it.
const repoRoot = "../.."

func TestMain(m *testing.M) { testbin.Main(m) }

// lines splits output into its lines, without the last newline.
func lines(s string) []string { return strings.Split(strings.TrimSuffix(s, "\n"), "\n") }
