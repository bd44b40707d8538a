// Package jsonrpc is the JSON-RPC 2.0 framing and message shapes shared by
// the shim's stdio side and both ends of the kernel socket: one message per
// line, UTF-8, with a maximum line size.
package jsonrpc

import (
	"bytes"
	"errors"
	"io"
)

// DefaultMaxLine is the default maximum size of one message line (16 MiB).
const DefaultMaxLine = 16 << 20

// ErrLineTooLong reports a line over the reader's limit. The reader has
// already skipped the rest of that line, so the next ReadLine starts fresh;
// Reader.Skipped returns the line's beginning.
var ErrLineTooLong = errors.New("message line exceeds the size limit")

// SkippedPrefix is how much of an over-long line Reader.Skipped keeps:
// enough for the members a message starts with (its id), little enough
// that keeping it costs nothing.
const SkippedPrefix = 1 << 10

// Reader reads newline-delimited messages. Unlike bufio.Scanner it has no
// hidden 64 KiB limit and survives an over-long line.
//
// A line that fits the reader's buffer is returned there, valid until the
// next read. A longer one is read on into pieces of its own and then
// assembled, once, into a slice of exactly its length, which is the
// caller's (Long): the buffer keeps its size, so a turn that relays one
// 4 MiB payload does not hold 8 MiB of buffer until it ends, and nothing
// is copied twice to grow it. No slice of the buffer outlives the next
// read.
type Reader struct {
	rd   io.Reader
	buf  []byte // of the initial size, always; buf[r:w] is read and not yet returned
	r, w int
	max  int   // the longest line, without its ending
	err  error // from rd; returned once buf[r:w] holds no more lines
	long bool  // the last line returned was assembled (Long)

	pieces [][]byte // a long line's pieces while it is read; empty between lines

	skipped []byte // the start of the last line refused as too long

	// OnGrow, when set, is called before a line longer than the buffer
	// is read on past it: at most once a line, and only for such a
	// line. A non-nil error stops the read, and ReadLine returns it. The
	// kernel uses it to read long lines only within a memory budget.
	OnGrow func() error
}

// maxPiece is the largest piece a long line is read into: pieces double
// what was read so far up to it, so a 16 MiB line takes about twenty
// allocations and its last piece wastes at most this much until the line
// is assembled.
const maxPiece = 1 << 20

// NewReader returns a Reader that refuses lines longer than limit bytes
// (excluding the line ending). limit <= 0 means DefaultMaxLine.
func NewReader(r io.Reader, limit int) *Reader {
	return NewReaderSize(r, limit, 64<<10)
}

// NewReaderSize is NewReader with a read buffer of size bytes: lines up to
// that size are read without an allocation. Only the pages that messages
// reach are ever touched.
func NewReaderSize(r io.Reader, limit, size int) *Reader {
	if limit <= 0 {
		limit = DefaultMaxLine
	}
	size = max(size, 16)
	return &Reader{rd: r, buf: make([]byte, size), max: limit}
}

// Buffered reports whether a whole line has already been read from the
// underlying reader, so the next ReadLine returns without waiting.
func (r *Reader) Buffered() bool {
	return bytes.IndexByte(r.buf[r.r:r.w], '\n') >= 0
}

// Long reports whether the line the last ReadLine returned was longer
// than the buffer: it was then assembled into a slice of its own, which
// the reader never touches again, so the caller may keep it, or hand it
// on, without a copy.
func (r *Reader) Long() bool { return r.long }

// ReadLine returns the next line without its "\n" or "\r\n". The slice is
// valid until the next call, or for good when Long says so. A final line
// without a newline is returned as a line; io.EOF comes only after it. An
// over-long line yields ErrLineTooLong and is skipped.
func (r *Reader) ReadLine() ([]byte, error) {
	r.long = false
	scanned := r.r
	for empty := 0; ; {
		if i := bytes.IndexByte(r.buf[scanned:r.w], '\n'); i >= 0 {
			line := r.buf[r.r : scanned+i]
			r.r = scanned + i + 1
			return r.trim(line)
		}
		scanned = r.w
		if r.w-r.r > r.max+1 { // more than max bytes besides a "\r"
			r.keepSkipped(r.buf[r.r:r.w])
			return nil, r.skipLine()
		}
		if r.err != nil {
			if r.r < r.w { // a last line without a newline
				line := r.buf[r.r:r.w]
				r.r = r.w
				return r.trim(line)
			}
			return nil, r.err
		}
		if r.r == r.w {
			// Nothing is left to return: read into the start again, so
			// that the same pages take every line instead of lines
			// marching through a large buffer, each touching new ones.
			r.r, r.w, scanned = 0, 0, 0
		}
		if r.w == len(r.buf) {
			if r.r == 0 {
				return r.readLong()
			}
			n := copy(r.buf, r.buf[r.r:r.w])
			scanned -= r.r
			r.r, r.w = 0, n
		}
		n, err := r.rd.Read(r.buf[r.w:])
		r.w += n
		r.err = err
		if n > 0 || err != nil {
			empty = 0
		} else if empty++; empty == 100 {
			r.err = io.ErrNoProgress
		}
	}
}

// readLong reads on a line that fills the buffer, which holds its
// beginning and no newline: into pieces of its own, each read taking at
// most a buffer's worth so that what follows the line fits the buffer
// again. Then the line is assembled into one slice of its length, the
// caller's, and the pieces are dropped.
func (r *Reader) readLong() ([]byte, error) {
	if r.OnGrow != nil {
		if err := r.OnGrow(); err != nil {
			return nil, err
		}
	}
	pieces := append(r.pieces, r.buf[:r.w])
	defer func() { // the pieces are dropped; the slice that held them is kept
		clear(pieces)
		r.pieces = pieces[:0]
	}()
	n := r.w // the line's bytes so far
	var last []byte
	for empty := 0; ; {
		if len(last) == cap(last) {
			last = make([]byte, 0, min(max(n, len(r.buf)), maxPiece, r.max+2-n))
			pieces = append(pieces, last)
		}
		room := last[len(last):min(cap(last), len(last)+len(r.buf))]
		k, err := r.rd.Read(room)
		if i := bytes.IndexByte(room[:k], '\n'); i >= 0 {
			pieces[len(pieces)-1] = last[:len(last)+i]
			line, lerr := r.assemble(pieces) // before the buffer, its first piece, takes what follows
			r.r, r.w, r.err = 0, copy(r.buf, room[i+1:k]), err
			return line, lerr
		}
		last = last[:len(last)+k]
		pieces[len(pieces)-1] = last
		n += k
		if n > r.max+1 { // more than max bytes besides a "\r"
			r.keepSkippedPieces(pieces)
			r.r, r.w, r.err = 0, 0, err
			return nil, r.skipLine()
		}
		if k > 0 || err != nil {
			empty = 0
		} else if empty++; empty == 100 {
			err = io.ErrNoProgress
		}
		if err != nil { // a last line without a newline
			r.r, r.w, r.err = 0, 0, err
			return r.assemble(pieces)
		}
	}
}

// assemble copies a long line's pieces into one slice of its length,
// without zeroing it first (bytes.Join), and returns it as the caller's.
func (r *Reader) assemble(pieces [][]byte) ([]byte, error) {
	line, err := r.trim(bytes.Join(pieces, nil))
	r.long = err == nil
	return line, err
}

// Skipped returns the beginning of the line the last ErrLineTooLong
// refused: its first SkippedPrefix bytes, or all of them read before the
// line was known to be too long (at least the limit plus one), so a caller
// can still tell whose message it was: a client reads the id of an
// answer too long to take, and fails only that request. The slice is
// valid until the next ErrLineTooLong.
func (r *Reader) Skipped() []byte { return r.skipped }

func (r *Reader) keepSkipped(b []byte) {
	r.skipped = append(r.skipped[:0], b[:min(len(b), SkippedPrefix)]...)
}

// keepSkippedPieces is keepSkipped for a line read into pieces.
func (r *Reader) keepSkippedPieces(pieces [][]byte) {
	r.skipped = r.skipped[:0]
	for _, p := range pieces {
		r.skipped = append(r.skipped, p[:min(len(p), SkippedPrefix-len(r.skipped))]...)
	}
}

// skipLine drops the rest of an over-long line.
func (r *Reader) skipLine() error {
	for {
		if i := bytes.IndexByte(r.buf[r.r:r.w], '\n'); i >= 0 {
			r.r += i + 1
			return ErrLineTooLong
		}
		r.r, r.w = 0, 0
		if r.err != nil {
			return ErrLineTooLong // the next call returns r.err
		}
		n, err := r.rd.Read(r.buf)
		r.w, r.err = n, err
	}
}

// ReadOwnedLine is ReadLine for a caller that keeps the line: the line is
// copied once out of the reader's buffer into a slice of the caller's, or
// is already one (Long).
func (r *Reader) ReadOwnedLine() ([]byte, error) {
	line, err := r.ReadLine()
	if err != nil || r.long {
		return line, err
	}
	return bytes.Clone(line), nil
}

// trim drops the line ending and enforces the limit.
func (r *Reader) trim(b []byte) ([]byte, error) {
	line := bytes.TrimSuffix(b, []byte("\r"))
	if len(line) > r.max {
		r.keepSkipped(line)
		return nil, ErrLineTooLong
	}
	return line, nil
}
