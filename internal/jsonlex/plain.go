package jsonlex

import "math/bits"

// Most of the bytes of a catalogue are description text, so reading and
// writing strings is where the lexer and both string writers spend their
// time. They go through plain runs eight bytes at a time.

// Stop is a set of bytes SkipPlain stops at. Its value is the mask of the
// high bits the word test keeps (see SkipPlain).
type Stop uint64

const (
	// StopSpecial is '"', '\\' and the control characters: what a string
	// body cannot hold as it is. Bytes at or above 0x80 pass.
	StopSpecial Stop = 0
	// StopNonASCII is StopSpecial and every byte at or above 0x80: what
	// needs a look of its own where non-ASCII text is checked or
	// rewritten.
	StopNonASCII Stop = 0x8080808080808080
)

// SkipPlain returns the offset of the first byte of s at or after i that
// is in stop, or len(s) if there is none.
func SkipPlain[T ~string | ~[]byte](s T, i int, stop Stop) int {
	for ; i+8 <= len(s); i += 8 {
		w := s[i : i+8]
		x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
			uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
		if flags := stop.flags(x); flags != 0 {
			return i + bits.TrailingZeros64(flags)/8
		}
	}
	for ; i < len(s) && !stop.has(s[i]); i++ {
	}
	return i
}

// has reports whether b is in the set.
func (stop Stop) has(b byte) bool {
	return b < 0x20 || b == '"' || b == '\\' || b&byte(stop) != 0
}

// flags sets the high bit of each byte of the word x that may be in the
// set; the lowest byte flagged is the first that is.
//
// It tests eight bytes at once with the usual zero-byte tricks: x-0x20
// borrows in a byte below 0x20, (x^'"')-1 in a '"', (x^'\\')-1 in a
// '\\', each setting that byte's high bit. A borrow can carry into the
// byte above and flag it wrongly, but only above a byte flagged rightly,
// so the lowest flag is always true. Bytes with their own high bit set
// are dropped from those flags (they can be flagged only through a
// borrow) and then kept or not by the set.
func (stop Stop) flags(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	special := (x - 0x20*ones) | ((x ^ '"'*ones) - ones) | ((x ^ '\\'*ones) - ones)
	return (x&uint64(stop) | special&^x) & highs
}

// skipShortEscapes steps over a string body's plain bytes and two-byte
// escapes (\n, \", ...) from i, a word at a time, and returns the offset
// of the first byte in stop that does not begin one, or of one of the
// last eight bytes of s, which it leaves to its caller. The lexer calls
// it after a string's first escape: text like source code
// has one every dozen bytes, and each would otherwise cost a round
// through SkipPlain and the caller's cases.
func skipShortEscapes(s []byte, i int, stop Stop) int {
	for i+9 <= len(s) { // a stop in the word and the byte after it
		w := s[i : i+8]
		x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
			uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
		flags := stop.flags(x)
		if flags == 0 {
			i += 8
			continue
		}
		i += bits.TrailingZeros64(flags) / 8
		if s[i] != '\\' || !shortEscape[s[i+1]] {
			return i
		}
		i += 2
	}
	return i
}

// shortEscape holds the bytes that follow a '\\' in a two-byte escape.
var shortEscape = [256]bool{'"': true, '\\': true, '/': true, 'b': true, 'f': true, 'n': true, 'r': true, 't': true}
