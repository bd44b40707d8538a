package cmd

import (
	"net"
	"time"

	"github.com/sharedos/sharedos-mcp/internal/peercred"
)

// holderPID is the process that keeps a second kernel from starting: the
// one holding lockFile's lock (its audit log's, or its socket's) as the
// system's lock table says, else the kernel answering on socket, by its
// peer credentials. ok is false when neither says.
func holderPID(lockFile, socket string) (pid int, ok bool) {
	if pid, ok := lockHolder(lockFile); ok {
		return pid, true
	}
	c, err := net.DialTimeout("unix", socket, time.Second)
	if err != nil {
		return 0, false
	}
	defer c.Close()
	uc, isUnix := c.(*net.UnixConn)
	if !isUnix {
		return 0, false
	}
	cred, err := peercred.Get(uc)
	if err != nil || cred.PID <= 0 {
		return 0, false
	}
	return cred.PID, true
}
