package cmd

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

// pollable returns f as a file the Go runtime's poller reads, when f is a
// pipe or socket: a blocking read of stdin would park a whole thread and
// cost a thread hand-off per request. Anything else (a terminal, whose
// mode the user shares, or a file) is returned as it is.
func pollable(f *os.File) *os.File {
	fi, err := f.Stat()
	if err != nil || fi.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return f
	}
	fd := int(f.Fd())
	if unix.SetNonblock(fd, true) != nil {
		return f
	}
	// NewFile sees the non-blocking flag and registers fd with the poller.
	return os.NewFile(uintptr(fd), f.Name())
}
