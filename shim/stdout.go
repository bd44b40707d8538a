package shim

import (
	"bytes"
	"context"
	"io"
	"os"
	"unicode/utf8"

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
// writes them in one write, or, from an answer that holds an output's
// text, in a few: the text is escaped a piece at a time (writeText).
func (o *writer) write() error {
	bufs := append(o.bufs[:0], o.notes...)
	var err error
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
			bufs, err = o.writeText(append(bufs, r.pieces[:r.at]...), r.text)
			if err == nil {
				err = o.writeBufs(append(bufs, r.pieces[r.at:]...))
			}
			clear(bufs)
			bufs = bufs[:0]
		default:
			bufs = append(bufs, p.lines...)
		}
		if err != nil {
			break
		}
	}
	if err == nil && len(bufs) > 0 {
		err = o.writeBufs(bufs)
	}
	clear(bufs)
	o.reply = reply{}
	o.bufs = bufs[:0]
	if cap(o.text) > maxKeptText {
		o.text = nil // a dense output's grown buffer is not kept for the turn
	}
	return err
}

// writeText escapes an output's text into the writer's text buffer a
// piece at a time, writing bufs (what goes before it) with the first
// piece and each piece but the last as it is escaped, and returns bufs
// holding the last piece, for the caller to write with what follows it.
// The buffer is reused for each piece, so a large output costs the
// writer at most maxKeptText of memory, not a copy of its size: the line
// goes to stdout in a few blocking writes from this one goroutine, and
// nothing else is written between them.
func (o *writer) writeText(bufs [][]byte, text []byte) ([][]byte, error) {
	for {
		n := pieceEnd(text, textPiece)
		o.text = escapeText(o.text, text[:n])
		text = text[n:]
		bufs = append(bufs, o.text)
		if len(text) == 0 {
			return bufs, nil
		}
		err := o.writeBufs(bufs)
		clear(bufs)
		bufs = bufs[:0]
		if err != nil {
			return bufs, err
		}
	}
}

// maxKeptText is the largest escaped text buffer the writer keeps for the
// next output, and textPiece how much of an output's text it escapes at a
// time: a piece of text like source code (about one byte in ten escaped)
// fits the buffer escapeText sizes for it, and only text where more than
// every other byte takes an escape grows it past maxKeptText.
const (
	maxKeptText = 1 << 20
	textPiece   = maxKeptText / 2
)

// pieceEnd is where the next piece of text ends: at most max bytes in,
// before a byte that no character can continue (utf8.RuneStart), so that
// escaping a piece never meets part of a character it would otherwise
// see whole (and write U+FFFD for it). A character is at most UTFMax
// bytes, so within that many there is such a byte unless none of them
// can begin one, and then no character spans max either.
func pieceEnd(text []byte, max int) int {
	if len(text) <= max {
		return len(text)
	}
	for k := range utf8.UTFMax {
		if utf8.RuneStart(text[max-k]) {
			return max - k
		}
	}
	return max
}

// escapeText escapes text into buf, sized once for text like source code
// (about one byte in ten escaped) so a piece is not regrown.
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
