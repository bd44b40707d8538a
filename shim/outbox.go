package shim

import (
	"context"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// outbox is what is on its way to stdout: ordered answers in arrival
// order, the shim's own answers, and progress notifications, and which
// goroutine is writing them.
//
// Nobody hands answers to a writer. Whoever completes an answer (or is
// woken to) drains the outbox: if no other goroutine is writing, it
// writes everything that may go now, in one write, and looks again before
// it stops; if one is, that one will find the answer when it looks again.
// The kernel client's reading goroutine drains as it reads a call's
// answer, writing it straight from its read buffer (relayCall), so a call
// costs no hand-off between goroutines and a large result no copy. Every
// other completion wakes the writer goroutine (run) to drain instead: the
// stdin reader, a timer, a catalogue fetch never write stdout themselves.
type outbox struct {
	s  *server
	w  io.Writer
	fd *os.File // w, when it is a file: written with writev

	mu      sync.Mutex
	ordered ring
	loose   []*slot // the shim's own answers, in the order they were read
	notes   []note  // progress notifications, in the order reported
	writing bool    // a goroutine is writing: it drains again before it stops
	ended   bool    // the reader queues nothing more
	err     error   // the write that failed: nothing more is written

	wake chan struct{} // to the writer goroutine; holds one
	room chan struct{} // to the reader waiting for room; holds one

	// Owned by the goroutine writing.
	bufs [][]byte
	buf  []byte
}

// maxWritePieces bounds the pieces of one write (writev takes at most
// 1024) and maxWriteBytes what is gathered into it beyond the first
// answer: the rest goes in the next write.
const (
	maxWritePieces = 512
	maxWriteBytes  = 1 << 20
)

func newOutbox(s *server, w io.Writer) *outbox {
	o := &outbox{s: s, w: w, wake: make(chan struct{}, 1), room: make(chan struct{}, 1)}
	if f, ok := w.(*os.File); ok {
		o.fd = f
	}
	return o
}

// kick wakes the writer goroutine to drain.
func (o *outbox) kick() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// push queues a slot the reader made. It waits while the outbox is full,
// after sending the kernel every call held back (the answers the writer
// waits for may be behind them, ADR 0006).
func (o *outbox) push(ctx context.Context, sl *slot) error {
	for {
		o.mu.Lock()
		if sl.ordered && o.ordered.n < maxInFlight {
			o.ordered.push(sl)
			o.mu.Unlock()
			sl.box.Store(o)
			if isDone(sl) {
				o.kick()
			}
			return nil
		}
		if !sl.ordered && len(o.loose) < maxInFlight {
			o.loose = append(o.loose, sl)
			o.mu.Unlock()
			sl.box.Store(o)
			o.kick()
			return nil
		}
		o.mu.Unlock()
		o.s.kernel.Flush()
		select {
		case <-o.room:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// end says the reader queues nothing more.
func (o *outbox) end() {
	o.mu.Lock()
	o.ended = true
	o.mu.Unlock()
	o.kick()
}

// note queues a progress notification, or drops it when maxNotes wait
// already: progress is advice, and a later report supersedes it.
func (o *outbox) note(n note) {
	o.mu.Lock()
	if len(o.notes) < maxNotes {
		o.notes = append(o.notes, n)
	}
	o.mu.Unlock()
	o.kick()
}

// run is the writer goroutine: it drains when woken, until everything
// the reader queued is written (nil), a write fails, or ctx ends.
func (o *outbox) run(ctx context.Context) error {
	for {
		select {
		case <-o.wake:
		case <-ctx.Done():
			// Nothing more is written: what is in flight is cancelled.
			o.mu.Lock()
			o.err = ctx.Err()
			o.mu.Unlock()
			return ctx.Err()
		}
		o.drain(nil, nil)
		o.mu.Lock()
		err, over := o.err, o.ended && !o.writing && o.ordered.n == 0 && len(o.loose) == 0
		o.mu.Unlock()
		if err != nil {
			return err
		}
		if over {
			return nil
		}
	}
}

// drain writes what may go now, and again until nothing more may, unless
// another goroutine is writing. mine, when set, is an ordered slot whose
// answer is r, valid only during the call (it is a slice of the kernel
// client's read buffer): it is written with the others when its turn has
// come, and drain reports whether it was (or was dropped, cancelled). If
// not, the caller keeps the answer in the slot and finishes it.
func (o *outbox) drain(mine *slot, r *reply) (took bool) {
	o.mu.Lock()
	if o.writing || o.err != nil {
		o.mu.Unlock()
		return false
	}
	o.writing = true
	for {
		var bufs [][]byte
		at := -1
		bufs, at, took = o.gather(mine, took)
		if len(bufs) == 0 && at < 0 {
			break
		}
		o.mu.Unlock()
		var err error
		if at < 0 {
			err = o.write(bufs)
		} else {
			// The answers before mine, mine as it is escaped, the
			// answers after it.
			if at > 0 {
				err = o.write(bufs[:at])
			}
			if err == nil {
				err = r.writeTo(o, &o.s.text)
			}
			if err == nil && at < len(bufs) {
				err = o.write(bufs[at:])
			}
		}
		clear(bufs) // written: an answer is not kept alive by its pieces
		o.mu.Lock()
		if err != nil {
			o.err = err
			break
		}
	}
	o.writing = false
	stop := o.err != nil || (o.ended && o.ordered.n == 0 && len(o.loose) == 0)
	o.mu.Unlock()
	if stop {
		o.kick() // the writer goroutine returns
	}
	return took
}

// gather collects, under mu, one write's worth: the progress reported
// so far, the shim's own answers, and the ordered answers whose turn has
// come, mine among them if took is false and its turn comes: at is where
// in bufs it goes, or -1. Each answer is claimed as it is taken, so a
// cancellation after this point no longer drops it, and no progress
// follows it.
func (o *outbox) gather(mine *slot, took bool) (bufs [][]byte, at int, _ bool) {
	at = -1
	bufs = o.bufs[:0]
	size := 0
	add := func(ps [][]byte) {
		for _, p := range ps {
			if len(p) > 0 {
				bufs = append(bufs, p)
				size += len(p)
			}
		}
	}
	full := func() bool { return len(bufs) >= maxWritePieces || size >= maxWriteBytes }
	for _, n := range o.notes {
		if !n.call.closed.Load() {
			add([][]byte{n.line})
		}
	}
	clear(o.notes)
	o.notes = o.notes[:0]
	popped := false
	for len(o.loose) > 0 && !full() {
		sl := o.loose[0]
		if !isDone(sl) {
			break
		}
		o.loose[0] = nil
		o.loose = o.loose[1:]
		popped = true
		if o.s.claim(sl) {
			add(sl.out)
		}
	}
	if len(o.loose) == 0 {
		o.loose = nil // let a burst's backing array go
	}
ordered:
	for o.ordered.n > 0 && !full() {
		sl := o.ordered.peek()
		switch {
		case sl == mine && !took:
			took = true
			if o.s.claim(sl) {
				at = len(bufs)
			}
		case isDone(sl):
			if o.s.claim(sl) {
				add(sl.out)
			}
		default:
			break ordered
		}
		o.ordered.pop()
		popped = true
	}
	if popped {
		// Room, if the reader is waiting for it.
		select {
		case o.room <- struct{}{}:
		default:
		}
	}
	o.bufs = bufs
	return bufs, at, took
}

// write writes bufs as one write: with writev to a file (stdout), or
// copied into one buffer for any other writer.
func (o *outbox) write(bufs [][]byte) error {
	if o.fd != nil {
		if err := writev(o.fd, bufs); err != errNoWritev {
			return err
		}
	}
	if len(bufs) == 1 {
		_, err := o.w.Write(bufs[0])
		return err
	}
	o.buf = o.buf[:0]
	for _, b := range bufs {
		o.buf = append(o.buf, b...)
	}
	_, err := o.w.Write(o.buf)
	if cap(o.buf) > maxWriteBytes {
		o.buf = nil // a large answer's copy is not kept for the turn
	}
	return err
}

// writeSome writes what stdout takes now of bufs and returns the rest:
// all of it on a blocking file, or a writer that is not a file.
func (o *outbox) writeSome(bufs [][]byte) ([][]byte, error) {
	if o.fd != nil {
		rest, err := writevUntil(o.fd, bufs, false)
		if err != errNoWritev {
			return rest, err
		}
	}
	return nil, o.write(bufs)
}

// errNoWritev is a file writev cannot be used on.
var errNoWritev = &os.PathError{Op: "writev", Err: unix.ENOTSUP}

// writev writes bufs to f whole, in as few writev calls as the kernel
// takes them, waiting in the runtime's poller if f is non-blocking.
func writev(f *os.File, bufs [][]byte) error {
	_, err := writevUntil(f, bufs, true)
	return err
}

// writevUntil writes bufs to f and returns what it did not take: with
// wait, nothing, as writev; without, what a non-blocking f could not take
// at once (a blocking f takes everything).
func writevUntil(f *os.File, bufs [][]byte, wait bool) ([][]byte, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return bufs, errNoWritev
	}
	var werr error
	err = rc.Write(func(fd uintptr) bool {
		for len(bufs) > 0 {
			n, err := unix.Writev(int(fd), bufs)
			switch err {
			case nil:
			case unix.EINTR:
				continue
			case unix.EAGAIN:
				return !wait
			default:
				werr = &os.PathError{Op: "write", Path: f.Name(), Err: err}
				return true
			}
			for n > 0 && len(bufs) > 0 {
				if n < len(bufs[0]) {
					bufs[0] = bufs[0][n:]
					break
				}
				n -= len(bufs[0])
				bufs = bufs[1:]
			}
		}
		return true
	})
	if werr != nil {
		return bufs, werr
	}
	return bufs, err
}

// ring is the list of ordered answers not yet written, in arrival order.
type ring struct {
	s       [maxInFlight]*slot
	head, n int
}

func (r *ring) push(sl *slot) { r.s[(r.head+r.n)%maxInFlight] = sl; r.n++ }
func (r *ring) peek() *slot   { return r.s[r.head] }
func (r *ring) pop() *slot {
	sl := r.s[r.head]
	r.s[r.head] = nil
	r.head = (r.head + 1) % maxInFlight
	r.n--
	return sl
}

func isDone(s *slot) bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}
