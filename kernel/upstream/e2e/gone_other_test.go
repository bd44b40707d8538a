//go:build !linux

package e2e

import (
	"syscall"
	"testing"
	"time"
)

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// waitGone waits for pid to exit. Without pidfds there is nothing to wait
// on for a process that is not our child, so it polls, bounded.
func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	end := time.Now().Add(deadline)
	for alive(pid) {
		if time.Now().After(end) {
			t.Fatalf("%s (pid %d) is still running after %v", what, pid, deadline)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
