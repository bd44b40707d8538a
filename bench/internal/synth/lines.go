package synth

import (
	"bytes"
	"io"
)

// LineReader reads newline-terminated lines into one buffer that grows to
// the longest line read and keeps that size: the benchmarks' kernel and
// client read a payload line without allocating or copying it once the
// first one has grown the buffer, so what a benchmark measures is the
// relay. (jsonrpc.Reader, which serve reads with, gives a line longer
// than its buffer to its caller instead, and keeps only its small buffer:
// the memory a relay holds is measured, the harness's is not.)
type LineReader struct {
	rd   io.Reader
	buf  []byte // buf[r:w] is read and not yet returned
	r, w int
	err  error
}

// NewLineReader returns a LineReader whose buffer starts at size bytes.
func NewLineReader(rd io.Reader, size int) *LineReader {
	return &LineReader{rd: rd, buf: make([]byte, max(size, 16))}
}

// ReadLine returns the next line without its "\n" or "\r\n", valid until
// the next call. A last line without a newline is dropped: every message
// the benchmarks read ends with one.
func (l *LineReader) ReadLine() ([]byte, error) {
	scanned := l.r
	for {
		if i := bytes.IndexByte(l.buf[scanned:l.w], '\n'); i >= 0 {
			line := l.buf[l.r : scanned+i]
			l.r = scanned + i + 1
			return bytes.TrimSuffix(line, []byte("\r")), nil
		}
		if l.err != nil {
			return nil, l.err
		}
		scanned = l.w
		if l.r == l.w {
			l.r, l.w, scanned = 0, 0, 0
		}
		if l.w == len(l.buf) {
			if l.r > 0 {
				n := copy(l.buf, l.buf[l.r:l.w])
				scanned -= l.r
				l.r, l.w = 0, n
			} else {
				grown := make([]byte, 2*len(l.buf))
				copy(grown, l.buf[:l.w])
				l.buf = grown
			}
		}
		n, err := l.rd.Read(l.buf[l.w:])
		l.w += n
		l.err = err
	}
}
