// Package jsonrpc is the JSON-RPC 2.0 framing and message shapes shared by
// the shim's stdio side and both ends of the kernel socket: one message per
// line, UTF-8, with a maximum line size.
package jsonrpc

import (
	"bytes"
	"errors"
	"io"
	"unsafe"

	"github.com/sharedos/sharedos-mcp/internal/jsonlex"
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
// hidden 64 KiB limit and survives an over-long line. It keeps its own
// buffer rather than wrapping a bufio.Reader so that a long line is read
// into place, never assembled from copies, and can be handed to a caller
// who keeps it (ReadOwnedLine) without another copy.
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

	// MapLong, when set, reads a line longer than the initial buffer
	// into one mapping of the limit's size, outside the Go heap, made
	// once and kept (see mapBuffer): a long line is then copied at most
	// once, when it outgrows the first buffer, and only the pages it
	// reaches are ever touched, where growing by doubling touched a
	// series of buffers, each copied whole into the next (a 4 MiB line
	// cost 12 MiB of memory, in a process that lives one turn). Lines
	// are then taken (Take) as copies, never as the mapping.
	MapLong bool
	mapped  bool // buf is the mapping

	// Ahead, when set, checks the long strings of a line that takes more
	// than one read while the rest of it arrives (jsonlex.Prescan), so
	// that the reader's ParseEnvelope and EachValidMember do not read
	// them again once it is whole (docs/adr/0026).
	Ahead bool
	pre   jsonlex.Prescan
	last  []byte // the line pre is of: the last one returned, or Take's copy of it
}

// NewReader returns a Reader that refuses lines longer than limit bytes
// (excluding the line ending). limit <= 0 means DefaultMaxLine.
func NewReader(r io.Reader, limit int) *Reader {
	return NewReaderSize(r, limit, 64<<10)
}

// NewReaderSize is NewReader with a read buffer of size bytes. A line
// longer than the buffer grows it (by doubling, up to the limit), which
// copies what was read so far; in a fresh process each copy costs page
// faults. Only the pages that messages reach are ever touched.
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
	line, err := r.readLine()
	r.last = line
	return line, err
}

func (r *Reader) readLine() ([]byte, error) {
	scanned := r.r
	r.pre.Reset(wire)
	ahead := false // the prescan has begun on this line
	for empty := 0; ; {
		if i := bytes.IndexByte(r.buf[scanned:r.w], '\n'); i >= 0 {
			line := r.buf[r.r : scanned+i]
			if ahead {
				// The last read's part: the lexer would read it anyway,
				// and the string it ends is then known whole.
				r.pre.Scan(line)
			}
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
				var nb []byte
				if r.MapLong && !r.mapped {
					nb = mapBuffer(r, r.max+2)
					r.mapped = nb != nil
				}
				if nb == nil {
					// make, not append: append zeroes all of the new
					// capacity, touching every page of it.
					nb = make([]byte, min(2*len(r.buf), r.max+2))
				}
				copy(nb, r.buf[:r.w])
				r.buf = nb
			}
		}
		if r.Ahead && r.w > r.r {
			// What has arrived of the line is checked while the rest
			// is on its way.
			r.pre.Scan(r.buf[r.r:r.w])
			ahead = true
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

// ReadOwnedLine is ReadLine for a caller that keeps the line: the slice is
// the caller's. A long line is not copied: the reader hands over the
// buffer holding it and goes on in a new one, into which it copies only
// what it had read past the line. The new buffer is small (it grows again
// for the next long line): every byte allocated counts toward the heap's
// first collection goal (4 MiB), and a second megabyte-sized buffer made
// serve collect garbage in the middle of its first tools/list.
func (r *Reader) ReadOwnedLine() ([]byte, error) {
	line, err := r.ReadLine()
	if err != nil {
		return nil, err
	}
	return r.Take(line), nil
}

// Take makes line, the one the last ReadLine returned, the caller's, as
// ReadOwnedLine would have returned it: a short line is copied, a long
// one keeps its buffer, and the reader goes on in a new one. A caller
// that reads most lines in place takes only the few it keeps.
func (r *Reader) Take(line []byte) []byte {
	if len(line) < r.size/4 || r.mapped {
		r.last = bytes.Clone(line)
		return r.last
	}
	rest := r.buf[r.r:r.w]
	nb := make([]byte, max(64<<10, 2*len(rest)))
	r.w = copy(nb, rest)
	r.r, r.buf = 0, nb
	return line[:len(line):len(line)]
}

// ParseEnvelope is jsonrpc.ParseEnvelope for msg, the line the last
// ReadLine returned (or Take made of it) or a part of that line: the
// long strings the reader checked as the line arrived (Ahead) are
// stepped over, not read again. For any other msg it is
// jsonrpc.ParseEnvelope.
func (r *Reader) ParseEnvelope(msg []byte) (Envelope, error) {
	off, ok := offsetIn(r.last, msg)
	if !ok {
		return ParseEnvelope(msg)
	}
	return parseEnvelope(msg, &r.pre, off)
}

// EachValidMember is jsonrpc.EachValidMember for src, a value of the line
// ReadLine last returned (or Take made of it) that ParseEnvelope has
// checked: a long string the reader checked as the line arrived is
// stepped over, not searched for its end again. A nil r is a reader of
// nothing: src is then walked as jsonrpc.EachValidMember walks it.
func (r *Reader) EachValidMember(src []byte, f func(key, value []byte) error) error {
	if r == nil {
		return EachValidMember(src, f)
	}
	off, ok := offsetIn(r.last, src)
	if !ok {
		return EachValidMember(src, f)
	}
	return eachValidMember(src, known{&r.pre, off}, f)
}

// offsetIn returns where part begins in whole, if it is a part of it.
func offsetIn(whole, part []byte) (int, bool) {
	if len(part) == 0 || len(whole) == 0 {
		return 0, false
	}
	off := int(uintptr(unsafe.Pointer(unsafe.SliceData(part))) - uintptr(unsafe.Pointer(unsafe.SliceData(whole))))
	return off, off >= 0 && off <= len(whole)-len(part)
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
