package shim

import (
	"context"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// ServeStdio runs one turn on the process's own stdin and stdout, set up
// for what a turn costs: it is the process plumbing Serve leaves to its
// caller, in one place with the reasons.
//
//   - One P, first: the turn is I/O on three descriptors, and one P keeps
//     every hand-off between its goroutines on one thread instead of
//     waking another. It is set before anything else runs: shrinking later
//     flushes the other P's cached spans, which costs page faults for the
//     runtime's span lists (ADR 0005).
//   - Once the turn meets a payload (Config.OnPayload), the collector
//     runs when the heap has grown a quarter past what it found live
//     (GOGC 25), not double, unless the user set GOGC: a payload's bytes
//     hold no pointers, so a collection costs about the same whatever
//     the payloads, while the default let the heap reach twice what a
//     large call holds at its peak (its line's pieces and the line).
//     Before that, the default pace spares a small heap the collections
//     that would slow a first tools/list and grow the runtime's own
//     memory. docs/adr/0029 has what it saves and what it costs.
//   - A parent-death signal (Linux) and SIGPIPE ignored, so a harness that
//     dies leaves no shim behind and a closed stdout surfaces as EPIPE.
//   - connect then dials the kernel and says hello (before stdin is read,
//     as the protocol requires); its error is returned as it is.
//   - A stdout whose reader has gone ends the turn at once, even when
//     nothing is being written (answers may wait behind a call).
//   - stdin is read through the runtime's poller when it is a pipe or a
//     socket: a blocking read would park a thread and cost a thread
//     hand-off per request, and a polled one can be given a deadline, so
//     Serve stops its reader when the turn ends. The poller needs the
//     descriptor non-blocking; it is read through a duplicate of its own,
//     closed when the turn ends, and made blocking again then.
//   - stdout is written as the harness gave it, blocking: the pipe may be
//     shared, and one goroutine writes it (Serve).
//
// stdin and stdout are the process's *os.File in production; anything else
// (a test's buffers) is served as it is, without the watch and the poller.
//
// It returns nil when the turn ends cleanly (stdin EOF), is stopped by
// ctx, or stdout is closed; what was in flight is then cancelled.
func ServeStdio(ctx context.Context, connect func(context.Context) (Config, error), stdin io.Reader, stdout io.Writer) error {
	runtime.GOMAXPROCS(1)
	deathErr := setParentDeathSignal()
	signal.Ignore(syscall.SIGPIPE)

	cfg, err := connect(ctx)
	if err != nil {
		return err
	}
	if deathErr != nil {
		cfg.Log.Warn().Err(deathErr).Msg("parent-death signal not set")
	}
	if _, set := os.LookupEnv("GOGC"); !set {
		cfg.OnPayload = sync.OnceFunc(func() { debug.SetGCPercent(gcPercent) })
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	if f, ok := stdout.(*os.File); ok {
		gone := watchClosed(f)
		go func() {
			select {
			case <-gone:
				stop()
			case <-ctx.Done():
			}
		}()
	}
	if f, ok := stdin.(*os.File); ok {
		polled, release := pollable(f)
		defer release()
		stdin = polled
	}
	err = Serve(ctx, cfg, stdin, stdout)
	if err != nil && ctx.Err() != nil {
		cfg.Log.Info().Msg("stopped by a signal or a closed stdout; calls in flight were cancelled")
		return nil
	}
	return err
}

// gcPercent is serve's GOGC once a turn meets a payload, unless the user
// set GOGC (see ServeStdio).
const gcPercent = 25

// watchClosed returns a channel closed when nobody can read f any more: f
// is a pipe or socket whose reading end has gone. Writing would find that
// out too, but the shim may have nothing to write for a long time, and a
// harness that closed our stdout wants us gone now. For anything else (a
// terminal, a file) the channel never closes.
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

// pollable returns a file the Go runtime's poller reads f through, when
// f is a pipe or socket, and the function that ends that once Serve has
// returned. Anything else (a terminal, whose mode the user shares, or a
// file) is returned as it is: Serve cannot interrupt a Read on it.
//
// The file is a duplicate of f's descriptor, with a number and an
// *os.File of its own, so closing it never closes f. The two share the
// harness's file description, so f is non-blocking too while the turn
// runs, and made blocking again at its end.
func pollable(f *os.File) (*os.File, func()) {
	fi, err := f.Stat()
	if err != nil || fi.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return f, func() {}
	}
	fd := int(f.Fd())
	dup, err := unix.Dup(fd)
	if err != nil {
		return f, func() {}
	}
	unix.CloseOnExec(dup)
	if unix.SetNonblock(dup, true) != nil {
		unix.Close(dup)
		return f, func() {}
	}
	// NewFile sees the non-blocking flag and registers dup with the poller.
	polled := os.NewFile(uintptr(dup), f.Name())
	return polled, func() {
		polled.Close()
		unix.SetNonblock(fd, false)
	}
}
