package shim

import (
	"bytes"
	"context"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
)

// writer is the one goroutine that writes stdout (Serve runs it on its
// own). Nobody else writes there: the stdin reader, the kernel client's
// reader, timers and the catalogue's fetch decide answers in the turn's
// state and wake it. It renders what it claims (a call's answer from the
// kernel is decoded and rendered here, not where it was read) and writes
// each round in one write.
type writer struct {
	s  *server
	w  io.Writer
	fd *os.File // w, when it is a file: written with writev

	// Kept for the turn, the writer's alone.
	taken []*pending
	notes [][]byte
	bufs  [][]byte
	text  []byte // an output's text block, escaped
	reply reply
	buf   []byte // a round copied into one buffer, for a writer without writev
}

func newWriter(s *server, w io.Writer) *writer {
	o := &writer{s: s, w: w}
	if f, ok := w.(*os.File); ok {
		o.fd = f
	}
	return o
}

// run writes answers as they can go, until everything the reader queued
// is written (nil), a write fails, or ctx ends.
func (o *writer) run(ctx context.Context) error {
	for {
		over := false
		o.s.update(func(st *turnState) {
			o.taken, o.notes = st.take(o.taken[:0], o.notes[:0])
			over = len(o.taken) == 0 && len(o.notes) == 0 && st.over()
		})
		if over {
			return nil
		}
		if len(o.taken) == 0 && len(o.notes) == 0 {
			select {
			case <-o.s.wake:
			case <-ctx.Done():
				return ctx.Err() // nothing more is written: what is in flight is cancelled
			}
			continue
		}
		err := o.write()
		clear(o.taken) // written: an answer is not kept alive by the writer
		clear(o.notes)
		if err != nil {
			return err
		}
	}
}

// write renders this round's notes and answers, in that order, and
// writes them in one write.
func (o *writer) write() error {
	bufs := append(o.bufs[:0], o.notes...)
	text := false // o.text holds an answer of this round
	for _, p := range o.taken {
		switch {
		case p.parts != nil:
			bufs = append(bufs, o.s.batchLine(p.parts))
		case p.fromKernel():
			r := &o.reply
			o.s.renderCall(r, p.call)
			if r.text == nil {
				bufs = append(bufs, r.pieces...)
				break
			}
			if text {
				bufs = append(bufs, r.bytes()) // a second output this round: a buffer of its own
				break
			}
			o.text = escapeText(o.text, r.text)
			text = true
			bufs = append(append(append(bufs, r.pieces[:r.at]...), o.text), r.pieces[r.at:]...)
		default:
			bufs = append(bufs, p.lines...)
		}
	}
	err := o.writeBufs(bufs)
	clear(bufs)
	o.reply = reply{}
	o.bufs = bufs[:0]
	if cap(o.text) > maxKeptText {
		o.text = nil // a large output's text is not kept for the turn
	}
	return err
}

// maxKeptText is the largest escaped text the writer keeps for the next
// output: a turn that relays one large output does not hold its size
// until it ends.
const maxKeptText = 1 << 20

// escapeText escapes text into buf, sized once for text like source code
// (about one byte in ten escaped) so a large output is not regrown.
func escapeText(buf, text []byte) []byte {
	if need := len(text) + len(text)/4 + 64; cap(buf) < need {
		buf = make([]byte, 0, need)
	}
	return jsonrpc.AppendStringBody(buf[:0], text)
}

// writeBufs writes bufs as one write: with writev to a file (stdout), or
// copied into one buffer for any other writer.
func (o *writer) writeBufs(bufs [][]byte) error {
	if o.fd != nil {
		if err := writev(o.fd, bufs); err != errNoWritev {
			return err
		}
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

// errNoWritev is a file writev cannot be used on.
var errNoWritev = &os.PathError{Op: "writev", Err: unix.ENOTSUP}

// writev writes bufs to f whole, in as few writev calls as f takes them.
func writev(f *os.File, bufs [][]byte) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return errNoWritev
	}
	var werr error
	err = rc.Write(func(fd uintptr) bool {
		for len(bufs) > 0 {
			n, err := unix.Writev(int(fd), bufs[:min(len(bufs), maxIovecs)])
			switch err {
			case nil:
			case unix.EINTR:
				continue
			case unix.EAGAIN:
				return false // a non-blocking f: wait in the poller
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
			for len(bufs) > 0 && len(bufs[0]) == 0 {
				bufs = bufs[1:]
			}
		}
		return true
	})
	if werr != nil {
		return werr
	}
	return err
}

// maxIovecs is the most pieces one writev takes (IOV_MAX).
const maxIovecs = 1024

// batchLine is the answer to a batch: the answers of its parts still owed,
// as one array line, in the order of the batch.
func (s *server) batchLine(parts []*pending) []byte {
	out := []byte{'['}
	for i, p := range parts {
		if i > 0 {
			out = append(out, ',')
		}
		var line []byte
		if p.fromKernel() {
			var r reply
			s.renderCall(&r, p.call)
			line = r.bytes()
		} else {
			line = bytes.Join(p.lines, nil)
		}
		out = append(out, bytes.TrimSuffix(line, []byte{'\n'})...)
	}
	return append(out, "]\n"...)
}
