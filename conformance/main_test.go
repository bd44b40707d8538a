package main

import (
	"os"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/testupstream"
)

// TestMain lets the test binary be the brokered test upstream the
// kernel of each case runs (upstreamConfig names this program).
func TestMain(m *testing.M) {
	testupstream.MaybeRun()
	os.Exit(m.Run())
}
