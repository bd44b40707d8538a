package shim

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// setParentDeathSignal asks Linux to send us SIGTERM when the harness that
// spawned us dies. (A harness that died before this call closed our stdin,
// which ends the turn anyway.)
func setParentDeathSignal() error {
	return unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0, 0, 0)
}

// pipeBuffer is the buffer serve asks for on its stdin and stdout pipes
// (the most an unprivileged process may, by default): a megabyte
// argument or result crosses them in a few writes, each a context switch
// between serve and the harness, instead of one every 64 KiB.
const pipeBuffer = 1 << 20

// growPipe enlarges f's buffer when f is a pipe; it is advice, and a
// pipe that stays as it was is still served.
func growPipe(f *os.File) {
	if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeNamedPipe != 0 {
		unix.FcntlInt(f.Fd(), unix.F_SETPIPE_SZ, pipeBuffer)
	}
}
