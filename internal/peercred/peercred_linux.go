package peercred

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

func init() { get = getLinux }

func getLinux(c *net.UnixConn) (Cred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return Cred{}, err
	}
	var ucred *unix.Ucred
	var serr error
	err = raw.Control(func(fd uintptr) {
		ucred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if err != nil {
		return Cred{}, err
	}
	if serr != nil {
		return Cred{}, fmt.Errorf("unix.GetsockoptUcred: %w", serr)
	}
	return Cred{UID: ucred.Uid, GID: ucred.Gid, PID: int(ucred.Pid)}, nil
}
