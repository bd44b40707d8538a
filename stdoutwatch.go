package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// watchClosed returns a channel closed when nobody can read f any more: f
// is a pipe or socket whose reading end has gone. Writing would find that
// out too, but serve may have nothing to write for a long time (answers
// leave in arrival order, behind a call still at the kernel), and a
// harness that closed our stdout wants us gone now. For anything else
// (a terminal, a file) the channel never closes.
func watchClosed(f *os.File) <-chan struct{} {
	gone := make(chan struct{})
	fi, err := f.Stat()
	if err != nil || fi.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return gone
	}
	fd := int(f.Fd())
	go func() {
		// With no events asked for, poll wakes only for POLLERR or
		// POLLHUP: the reader closed its end.
		fds := []unix.PollFd{{Fd: int32(fd)}}
		for {
			n, err := unix.Poll(fds, -1)
			if err == unix.EINTR {
				continue
			}
			if err != nil || n > 0 {
				close(gone)
				return
			}
		}
	}()
	return gone
}
