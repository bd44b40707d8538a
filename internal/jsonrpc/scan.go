package jsonrpc

import (
	"encoding/binary"
	"math/bits"
	"strconv"
)

// A kernel's tools.list answer is one line of half a megabyte. Decoding it
// into a Message with encoding/json scans it twice (validation, then the
// skip over Result) and copies Result, and decoding Result into its struct
// does the same again, at about a tenth of the speed of a plain byte loop.
// The scanner here validates a line once and hands out its values as
// sub-slices, so a reader routes a message without decoding what it only
// passes on.

// maxScanDepth bounds nesting, as encoding/json does (10000), so hostile
// input cannot exhaust the stack.
const maxScanDepth = 10000

// Envelope is the top level of one JSON-RPC message with every value left
// raw (sub-slices of the line: valid until the line's buffer is reused).
// A member that is absent is nil; Method, when present, is a JSON string
// with its quotes.
type Envelope struct {
	ID, Method, Params, Result, Error []byte
}

// ParseEnvelope checks that line is one valid JSON object and returns its
// members. Names match exactly (encoding/json would also take "Result");
// if a name repeats, the last one wins, as in encoding/json.
func ParseEnvelope(line []byte) (Envelope, error) {
	var e Envelope
	err := EachMember(line, func(key, value []byte) error {
		switch string(key) {
		case `"id"`:
			e.ID = value
		case `"method"`:
			e.Method = value
		case `"params"`:
			e.Params = value
		case `"result"`:
			e.Result = value
		case `"error"`:
			e.Error = value
		}
		return nil
	})
	return e, err
}

// EachMember checks that src is one valid JSON object (whitespace around
// it allowed) and calls f with each member's key, as raw JSON with its
// quotes and escapes, and value, as raw JSON. An error from f stops the
// walk and is returned.
func EachMember(src []byte, f func(key, value []byte) error) error {
	return scanTop(src, '{', "want an object", f)
}

// EachElement checks that src is one valid JSON array and calls f with
// each element as raw JSON.
func EachElement(src []byte, f func(elem []byte) error) error {
	return scanTop(src, '[', "want an array", func(_, elem []byte) error { return f(elem) })
}

func scanTop(src []byte, open byte, want string, f func(key, value []byte) error) error {
	s := scanner{src: src}
	s.space()
	if s.pos >= len(s.src) || s.src[s.pos] != open {
		return s.fail(want)
	}
	if err := s.container(open, f); err != nil {
		return err
	}
	return s.end()
}

// ScanError is invalid JSON, with the byte offset where it was found.
type ScanError struct {
	Offset int
	Msg    string
}

func (e *ScanError) Error() string {
	return "invalid JSON at byte " + strconv.Itoa(e.Offset) + ": " + e.Msg
}

type scanner struct {
	src   []byte
	pos   int
	depth int
}

func (s *scanner) fail(msg string) error { return &ScanError{Offset: s.pos, Msg: msg} }

func (s *scanner) consume(b byte) bool {
	if s.pos < len(s.src) && s.src[s.pos] == b {
		s.pos++
		return true
	}
	return false
}

// end checks that only whitespace follows the top-level value.
func (s *scanner) end() error {
	s.space()
	if s.pos != len(s.src) {
		return s.fail("want the end of input")
	}
	return nil
}

func (s *scanner) space() {
	for s.pos < len(s.src) {
		switch s.src[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// value skips one valid JSON value starting at s.pos.
func (s *scanner) value() error {
	if s.pos >= len(s.src) {
		return s.fail("want a value, have the end of input")
	}
	switch b := s.src[s.pos]; {
	case b == '"':
		return s.str()
	case b == '{' || b == '[':
		return s.container(b, nil)
	case b == '-' || '0' <= b && b <= '9':
		return s.number()
	case b == 't':
		return s.literal("true")
	case b == 'f':
		return s.literal("false")
	case b == 'n':
		return s.literal("null")
	}
	return s.fail("want a value")
}

// container skips an object or array starting at s.pos, calling f (when
// not nil) with each of its members or elements (key nil).
func (s *scanner) container(open byte, f func(key, value []byte) error) error {
	if s.depth++; s.depth > maxScanDepth {
		return s.fail("nested too deeply")
	}
	closing := byte('}')
	if open == '[' {
		closing = ']'
	}
	s.pos++
	s.space()
	if !s.consume(closing) {
		for {
			s.space()
			var key []byte
			if open == '{' {
				k := s.pos
				if s.pos >= len(s.src) || s.src[s.pos] != '"' {
					return s.fail("want a string key")
				}
				if err := s.str(); err != nil {
					return err
				}
				key = s.src[k:s.pos]
				s.space()
				if !s.consume(':') {
					return s.fail("want ':'")
				}
				s.space()
			}
			v := s.pos
			if err := s.value(); err != nil {
				return err
			}
			if f != nil {
				if err := f(key, s.src[v:s.pos]); err != nil {
					return err
				}
			}
			s.space()
			if s.consume(closing) {
				break
			}
			if !s.consume(',') {
				return s.fail("want ',' or a closing bracket")
			}
		}
	}
	s.depth--
	return nil
}

// plain marks the bytes a string holds as they are: not '"', not '\\',
// not a control character.
var plain = func() (t [256]bool) {
	for b := 0x20; b < 256; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

// str skips a string: a byte table decides the common case, escapes are
// checked one by one. Bytes at or above 0x80 are passed as they are, as
// encoding/json's validator does.
func (s *scanner) str() error {
	s.pos++ // the opening quote
	for {
		s.pos = skipPlain(s.src, s.pos)
		for s.pos < len(s.src) && plain[s.src[s.pos]] {
			s.pos++
		}
		if s.pos >= len(s.src) {
			return s.fail("unterminated string")
		}
		switch s.src[s.pos] {
		case '"':
			s.pos++
			return nil
		case '\\':
			if s.pos+1 >= len(s.src) {
				return s.fail("unterminated string")
			}
			switch s.src[s.pos+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.pos += 2
			case 'u':
				if s.pos+6 > len(s.src) || !hex4(s.src[s.pos+2:s.pos+6]) {
					return s.fail(`bad \u escape`)
				}
				s.pos += 6
			default:
				return s.fail("bad escape")
			}
		default:
			return s.fail("control character in string")
		}
	}
}

// skipPlain skips plain string bytes eight at a time and stops at or
// before the first byte that is '"', '\\' or a control character. Most of
// a catalogue's bytes are descriptions, so this is where a scan spends
// its time. The tests flag bytes with the usual zero-byte trick: a borrow
// can flag a false byte only above a true one, so the lowest flagged byte
// is always a true stop.
func skipPlain(src []byte, i int) int {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	for ; i+8 <= len(src); i += 8 {
		x := binary.LittleEndian.Uint64(src[i:])
		q := x ^ ('"' * ones)
		b := x ^ ('\\' * ones)
		stop := ((x - 0x20*ones) | (q - ones) | (b - ones)) &^ x & highs
		if stop != 0 {
			return i + bits.TrailingZeros64(stop)/8
		}
	}
	return i
}

func hex4(b []byte) bool {
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// number skips a number in JSON's grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() error {
	s.consume('-')
	switch {
	case s.consume('0'):
	case s.pos < len(s.src) && '1' <= s.src[s.pos] && s.src[s.pos] <= '9':
		s.digits()
	default:
		return s.fail("bad number")
	}
	if s.consume('.') {
		if s.digits() == 0 {
			return s.fail("bad number")
		}
	}
	if s.consume('e') || s.consume('E') {
		if !s.consume('+') {
			s.consume('-')
		}
		if s.digits() == 0 {
			return s.fail("bad number")
		}
	}
	return nil
}

func (s *scanner) digits() int {
	start := s.pos
	for s.pos < len(s.src) && '0' <= s.src[s.pos] && s.src[s.pos] <= '9' {
		s.pos++
	}
	return s.pos - start
}

func (s *scanner) literal(lit string) error {
	if len(s.src)-s.pos < len(lit) || string(s.src[s.pos:s.pos+len(lit)]) != lit {
		return s.fail("want a value")
	}
	s.pos += len(lit)
	return nil
}
