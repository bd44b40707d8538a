// Package e2e holds the black-box tests: each runs the built binary as a
// real subprocess (a harness's view of serve, the kernel as a user starts
// it, the README followed literally), so the unit tests of every other
// package run on their own in seconds.
package e2e

import (
	"strings"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/testbin"
	"github.com/sharedos/sharedos-mcp/internal/testupstream"
)

// repoRoot is the module root, relative to this package's directory,
// where go test runs it.
const repoRoot = "../.."

// TestMain also lets this test binary be the test upstream a kernel under
// test brokers (internal/testupstream).
func TestMain(m *testing.M) {
	testupstream.MaybeRun()
	testbin.Main(m, testupstream.RemoveNPM)
}

// lines splits output into its lines, without the last newline.
func lines(s string) []string { return strings.Split(strings.TrimSuffix(s, "\n"), "\n") }
