// Package jsonrpc is the JSON-RPC 2.0 framing and message shapes shared by
// the shim's stdio side and both ends of the kernel socket: one message per
// line, UTF-8, with a maximum line size.
package jsonrpc

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// DefaultMaxLine is the default maximum size of one message line (16 MiB).
const DefaultMaxLine = 16 << 20

// ErrLineTooLong reports a line over the reader's limit. The reader has
// already skipped the rest of that line, so the next ReadLine starts fresh.
var ErrLineTooLong = errors.New("message line exceeds the size limit")

// Reader reads newline-delimited messages. Unlike bufio.Scanner it has no
// hidden 64 KiB limit and survives an over-long line.
type Reader struct {
	br  *bufio.Reader
	max int
	buf []byte
}

// NewReader returns a Reader that refuses lines longer than max bytes
// (excluding the line ending). max <= 0 means DefaultMaxLine.
func NewReader(r io.Reader, max int) *Reader {
	return NewReaderSize(r, max, 64<<10)
}

// NewReaderSize is NewReader with a read buffer of size bytes. A line that
// fits the buffer is read in place; a longer one is assembled by copying,
// which in a fresh process costs page faults for every copy.
func NewReaderSize(r io.Reader, max, size int) *Reader {
	if max <= 0 {
		max = DefaultMaxLine
	}
	return &Reader{br: bufio.NewReaderSize(r, size), max: max}
}

// ReadLine returns the next line without its "\n" or "\r\n". The slice is
// valid until the next call. A final line without a newline is returned as
// a line; io.EOF comes only after it. An over-long line yields
// ErrLineTooLong and is skipped.
func (r *Reader) ReadLine() ([]byte, error) {
	line, _, err := r.readLine()
	return line, err
}

// Buffered reports whether a whole line has already been read from the
// underlying reader, so the next ReadLine returns without waiting.
func (r *Reader) Buffered() bool {
	b, _ := r.br.Peek(r.br.Buffered())
	return bytes.IndexByte(b, '\n') >= 0
}

// ReadOwnedLine is ReadLine for a caller that keeps the line: the slice is
// the caller's. A line too long for the read buffer was assembled in a
// slice of its own, which is handed over rather than copied again; the
// next long line gets a new one.
func (r *Reader) ReadOwnedLine() ([]byte, error) {
	line, assembled, err := r.readLine()
	if err != nil {
		return nil, err
	}
	if assembled {
		r.buf = nil
		return line, nil
	}
	return bytes.Clone(line), nil
}

// readLine reads one line, reporting whether it was assembled in r.buf
// (true) or is a slice of the bufio buffer.
func (r *Reader) readLine() (line []byte, assembled bool, err error) {
	chunk, err := r.br.ReadSlice('\n')
	if err == nil || (err == io.EOF && len(chunk) > 0) {
		// The whole line is in the buffer, as nearly every message is: it
		// is returned in place, without a copy.
		line, err = r.trim(chunk)
		return line, false, err
	}
	if err != bufio.ErrBufferFull {
		return nil, false, err
	}
	r.buf = r.buf[:0]
	tooLong := false
	for {
		if !tooLong {
			if len(r.buf)+len(chunk) > r.max+2 { // room for "\r\n"
				tooLong = true
				r.buf = r.buf[:0]
			} else {
				if cap(r.buf)-len(r.buf) < len(chunk) {
					r.buf = grow(r.buf, max(len(chunk), cap(r.buf)))
				}
				r.buf = append(r.buf, chunk...)
			}
		}
		switch {
		case err == bufio.ErrBufferFull:
			chunk, err = r.br.ReadSlice('\n')
			continue
		case err == io.EOF:
			// A last line without a newline still counts.
		case err != nil:
			return nil, false, err
		}
		if tooLong {
			return nil, false, ErrLineTooLong
		}
		line, err = r.trim(r.buf)
		return line, true, err
	}
}

// grow returns b with room for n more bytes. append and slices.Grow zero
// all of the new capacity, touching every page of it; make leaves memory
// that is fresh from the operating system untouched until it is written.
// In a new process, which is where a catalogue line is read, each page
// touched is a page fault, and growing by doubling this way touches
// about the line's length rather than twice its capacity.
func grow(b []byte, n int) []byte {
	nb := make([]byte, len(b), len(b)+n)
	copy(nb, b)
	return nb
}

// trim drops the line ending and enforces the limit.
func (r *Reader) trim(b []byte) ([]byte, error) {
	line := bytes.TrimSuffix(b, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	if len(line) > r.max {
		return nil, ErrLineTooLong
	}
	return line, nil
}
