package upstream

import "syscall"

// supervisorAttr starts the supervisor in a process group of its own and
// asks Linux to send it SIGTERM when the kernel dies, even by SIGKILL.
// The signal is tied to the thread that started the child: Go never ends
// a thread that a goroutine has not locked, and the goroutine starting an
// upstream never locks one, so it fires only when the kernel is gone. The
// lifeline pipe (see supervise) covers the same case everywhere.
func supervisorAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

// upstreamAttr starts the upstream in a new process group, the one the
// supervisor ends, and has it killed if the supervisor itself dies.
func upstreamAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// selfExecutable is what the supervisor is started from by default: the
// running binary, even if it has been replaced on disk since it started.
func selfExecutable() (string, error) { return "/proc/self/exe", nil }
