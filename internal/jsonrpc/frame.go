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
// hidden 64 KiB limit and survives an over-long line. A line is read into
// the reader's own buffer, which grows for a long one and keeps its size;
// a caller reads it there until the next read, or has it copied once into
// a slice of its own (ReadOwnedLine). No slice of the buffer outlives the
// next read.
type Reader struct {
	rd   io.Reader
	buf  []byte // buf[r:w] is read and not yet returned
	r, w int
	size int   // the initial buffer size, and that of a replacement
	max  int   // the longest line, without its ending
	err  error // from rd; returned once buf[r:w] holds no more lines

	skipped []byte // the start of the last line refused as too long

	// OnGrow, when set, is called before the buffer first grows past its
	// initial size while reading a line: at most once a line, and only
	// for a line longer than what the buffer holds. A non-nil error stops
	// the read, and ReadLine returns it. The kernel uses it to read long
	// lines only within a memory budget.
	OnGrow func() error
	grown  bool // OnGrow was called for the line being read
}

// NewReader returns a Reader that refuses lines longer than limit bytes
// (excluding the line ending). limit <= 0 means DefaultMaxLine.
func NewReader(r io.Reader, limit int) *Reader {
	return NewReaderSize(r, limit, 64<<10)
}

// NewReaderSize is NewReader with a read buffer of size bytes. A line
// longer than the buffer grows it (by doubling, up to the limit), which
// copies what was read so far within the reader. Only the pages that
// messages reach are ever touched.
func NewReaderSize(r io.Reader, limit, size int) *Reader {
	if limit <= 0 {
		limit = DefaultMaxLine
	}
	size = max(size, 16)
	return &Reader{rd: r, buf: make([]byte, size), size: size, max: limit}
}

// Buffered reports whether a whole line has already been read from the
// underlying reader, so the next ReadLine returns without waiting.
func (r *Reader) Buffered() bool {
	return bytes.IndexByte(r.buf[r.r:r.w], '\n') >= 0
}

// ReadLine returns the next line without its "\n" or "\r\n". The slice is
// valid until the next call. A final line without a newline is returned as
// a line; io.EOF comes only after it. An over-long line yields
// ErrLineTooLong and is skipped.
func (r *Reader) ReadLine() ([]byte, error) {
	scanned := r.r
	for empty := 0; ; {
		if i := bytes.IndexByte(r.buf[scanned:r.w], '\n'); i >= 0 {
			line := r.buf[r.r : scanned+i]
			r.r = scanned + i + 1
			r.grown = false
			return r.trim(line)
		}
		scanned = r.w
		if r.w-r.r > r.max+1 { // more than max bytes besides a "\r"
			r.keepSkipped(r.buf[r.r:r.w])
			r.grown = false
			return nil, r.skipLine()
		}
		if r.err != nil {
			if r.r < r.w { // a last line without a newline
				line := r.buf[r.r:r.w]
				r.r = r.w
				r.grown = false
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
			if r.r > 0 {
				n := copy(r.buf, r.buf[r.r:r.w])
				scanned -= r.r
				r.r, r.w = 0, n
			} else {
				if r.OnGrow != nil && !r.grown {
					r.grown = true
					if err := r.OnGrow(); err != nil {
						return nil, err
					}
				}
				// make, not append: append zeroes all of the new
				// capacity, touching every page of it.
				nb := make([]byte, min(2*len(r.buf), r.max+2))
				copy(nb, r.buf[:r.w])
				r.buf = nb
			}
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
// copied once out of the reader's buffer into a slice of the caller's.
func (r *Reader) ReadOwnedLine() ([]byte, error) {
	line, err := r.ReadLine()
	if err != nil {
		return nil, err
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
