// Package peercred reads the credentials of the process on the other end
// of a Unix domain socket, as the operating system recorded them. They are
// the one claim a peer cannot forge.
package peercred

import (
	"errors"
	"fmt"
	"net"
	"runtime"
)

// Cred is what the kernel knows about a socket peer.
type Cred struct {
	UID uint32
	GID uint32
	PID int // 0 where the OS does not say
}

// ErrNotImplemented is returned on operating systems without support.
var ErrNotImplemented = errors.New("peer credentials are not supported on " + runtime.GOOS)

// get is filled in per OS.
var get func(*net.UnixConn) (Cred, error)

// Get returns the credentials of c's peer.
func Get(c *net.UnixConn) (Cred, error) {
	if get == nil {
		return Cred{}, ErrNotImplemented
	}
	cred, err := get(c)
	if err != nil {
		return Cred{}, fmt.Errorf("read peer credentials: %w", err)
	}
	return cred, nil
}
