package e2e

import (
	"testing"

	"github.com/sharedos/sharedos-mcp/kernel/upstream"
)

// escapes are the ways a descendant leaves the upstream's process group:
// a session of its own, a group of its own, a daemon's double fork. Each
// holds the upstream's stdout.
var escapes = []string{"setsid", "setpgid", "double"}

// TestADescendantThatLeftTheGroupIsGoneAfterACrash (issue 24, finding 5):
// the upstream starts a child out of its process group that holds its
// stdout, then crashes mid-call. The call is answered
// upstream_unavailable at once, not upstream_timeout after call_timeout
// (the kernel watches the upstream's exit, not its stdout), and the
// child is ended by the supervisor, which adopted it.
func TestADescendantThatLeftTheGroupIsGoneAfterACrash(t *testing.T) {
	for _, how := range escapes {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, "", []upstream.Spec{spec(t, "test", `call_timeout = "45s"`)}, nil)
			f.readyFrom(0, "test")
			child := spawnHow(t, f, how)
			_, err := f.call("test.crash", `{}`)
			callError(t, err, upstream.CodeUpstreamUnavailable)
			waitGone(t, child, "the "+how+" grandchild")
		})
	}
}

// TestAKilledKernelLeavesNoDescendantBehind: the same children, the
// kernel SIGKILLed; the supervisor ends them.
func TestAKilledKernelLeavesNoDescendantBehind(t *testing.T) {
	for _, how := range escapes {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			killedKernelLeavesNothing(t, how)
		})
	}
}

// TestCloseEndsADescendantThatLeftTheGroup: the same children, the
// Manager closed.
func TestCloseEndsADescendantThatLeftTheGroup(t *testing.T) {
	for _, how := range escapes {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, "", []upstream.Spec{spec(t, "test", "")}, nil)
			f.readyFrom(0, "test")
			child := spawnHow(t, f, how)
			if err := f.m.Close(); err != nil {
				t.Fatal(err)
			}
			waitGone(t, child, "the "+how+" grandchild")
		})
	}
}
