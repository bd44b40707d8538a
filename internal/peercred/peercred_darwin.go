package peercred

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

func init() { get = getDarwin }

func getDarwin(c *net.UnixConn) (Cred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return Cred{}, err
	}
	var xucred *unix.Xucred
	var pid int
	var serr error
	err = raw.Control(func(fd uintptr) {
		xucred, serr = unix.GetsockoptXucred(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
		if serr != nil {
			serr = fmt.Errorf("unix.GetsockoptXucred: %w", serr)
			return
		}
		pid, serr = unix.GetsockoptInt(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERPID)
		if serr != nil {
			serr = fmt.Errorf("unix.GetsockoptInt LOCAL_PEERPID: %w", serr)
		}
	})
	if err != nil {
		return Cred{}, err
	}
	if serr != nil {
		return Cred{}, serr
	}
	var gid uint32
	if xucred.Ngroups > 0 {
		gid = xucred.Groups[0]
	}
	return Cred{UID: xucred.Uid, GID: gid, PID: pid}, nil
}
