//go:build !linux

package upstream

import (
	"os"
	"syscall"
)

// supervisorAttr starts the supervisor in a process group of its own.
// Outside Linux there is no parent-death signal: the lifeline pipe (see
// supervise) tells the supervisor that the kernel is gone.
func supervisorAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// upstreamAttr starts the upstream in a new process group, the one the
// supervisor ends.
func upstreamAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// selfExecutable is what the supervisor is started from by default.
func selfExecutable() (string, error) { return os.Executable() }
