package shim

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// setParentDeathSignal asks Linux to send us SIGTERM when the harness that
// spawned us dies. (A harness that died before this call closed our stdin,
// which ends the turn anyway.)
func setParentDeathSignal() error {
	return unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0, 0, 0)
}
