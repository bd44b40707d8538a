package kernel

import (
	"os"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/testupstream"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
)

// TestMain lets this test binary be each brokered upstream's supervisor
// and the test upstream itself (internal/testupstream), as the broker's
// tests run it.
func TestMain(m *testing.M) {
	upstream.MaybeSupervise()
	testupstream.MaybeRun()
	os.Exit(m.Run())
}
