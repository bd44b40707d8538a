package jsonlex

import (
	"bytes"
	"math/bits"
	"strings"
	"unicode/utf8"
)

// The module writes JSON strings under two contracts: the bytes
// encoding/json writes (jsonrpc.AppendString, pinned by the wire scripts)
// and the text ECMAScript's JSON.stringify writes (hashing, part of the
// catalogHash algorithm). They agree on ASCII, which AppendEscapedASCII
// writes for both, and differ only past it: on U+2028 and U+2029, lone
// surrogates and bytes that are not UTF-8. Each writer keeps that part.

const hexDigits = "0123456789abcdef"

// AppendEscapedASCII appends s[i:j] to dst as the inside of a JSON
// string, where j is the offset of the first byte at or above 0x80 from i
// on (or len(s)), and returns dst and j. '"' and '\\' take a backslash,
// \b \f \n \r \t are written by name, the other control characters as
// \u00xx in lowercase hex; every other ASCII byte, DEL included, is
// written as it is.
//
// A large output's text block is this over megabytes of text like source
// code, with a stop every dozen bytes, so it goes a word at a time into
// dst's spare capacity: each word is stored whole, and where it holds a
// stop, only its bytes before the first one are kept; that byte's escape
// is stored (a word from a table) after them, and the next word is read
// from the byte after it. Every store is eight bytes wide and
// bounds-checked. dst is grown (make and copy) only when a write would
// not fit; a caller that escapes large text sizes dst for it.
func AppendEscapedASCII[T ~string | ~[]byte](dst []byte, s T, i int) ([]byte, int) {
	k, d := len(dst), dst[:cap(dst)]
	for i < len(s) {
		if k, i = escapeWords(d, k, s, i); i == len(s) {
			break
		}
		// The last bytes of s or of d's capacity, or a byte at or above
		// 0x80: a run of plain bytes copied, or one escape, growing d
		// when it is full.
		if j := SkipPlain(s, i, StopNonASCII); j > i {
			if len(d)-k < j-i {
				d = grow(d[:k], len(s)-i)
			}
			k += copy(d[k:], s[i:j])
			i = j
			continue
		}
		b := s[i]
		if b >= utf8.RuneSelf {
			break
		}
		e := escapes[b]
		n := int(e >> 56)
		if len(d)-k < n {
			d = grow(d[:k], len(s)-i)
		}
		for j := range n {
			d[k+j] = byte(e >> (8 * j))
		}
		i, k = i+1, k+n
	}
	return d[:k], i
}

// escapeWords is AppendEscapedASCII's loop over whole words: it escapes
// s from i into d from k while s has a word left and d room for a word
// and an escape stored as a word, and returns where it stopped in each,
// or at a byte at or above 0x80. It is a function of its own so that the
// loop keeps its few values in registers.
//
// Its stores are written out, eight byte stores the compiler makes one,
// rather than calls to a helper or to binary.LittleEndian.PutUint64: the
// compiler (go1.26) inlines neither into this function when it is
// instantiated through another generic function of another package
// (jsonrpc.AppendStringBody), and a call there cost a third of the
// loop's time. Each slice expression checks that the word lies in d.
func escapeWords[T ~string | ~[]byte](d []byte, k int, s T, i int) (int, int) {
	for i+8 <= len(s) && len(d)-k >= 16 {
		w := s[i : i+8]
		x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
			uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
		o := d[k : k+8 : k+8]
		o[0], o[1], o[2], o[3] = byte(x), byte(x>>8), byte(x>>16), byte(x>>24)
		o[4], o[5], o[6], o[7] = byte(x>>32), byte(x>>40), byte(x>>48), byte(x>>56)
		flags := StopNonASCII.flags(x)
		if flags == 0 {
			i, k = i+8, k+8
			continue
		}
		n := bits.TrailingZeros64(flags) / 8
		i, k = i+n, k+n
		b := s[i]
		if b >= utf8.RuneSelf {
			break
		}
		e := escapes[b]
		o = d[k : k+8 : k+8]
		o[0], o[1], o[2], o[3] = byte(e), byte(e>>8), byte(e>>16), byte(e>>24)
		o[4], o[5], o[6], o[7] = byte(e>>32), byte(e>>40), byte(e>>48), byte(e>>56)
		i, k = i+1, k+int(e>>56)
	}
	return k, i
}

// escapes is what AppendEscapedASCII writes for each ASCII byte: its
// bytes in the low six bytes of the word, first byte lowest, and how many
// there are in the top byte.
var escapes = func() (t [utf8.RuneSelf]uint64) {
	for b := range utf8.RuneSelf {
		switch b {
		case '"', '\\':
			t[b] = '\\' | uint64(b)<<8 | 2<<56
		case '\b', '\f', '\n', '\r', '\t':
			t[b] = '\\' | uint64("btn fr"[b-'\b'])<<8 | 2<<56
		default:
			if b < 0x20 {
				t[b] = '\\' | 'u'<<8 | '0'<<16 | '0'<<24 | uint64(hexDigits[b>>4])<<32 | uint64(hexDigits[b&0xF])<<40 | 6<<56
			} else {
				t[b] = uint64(b) | 1<<56
			}
		}
	}
	return t
}()

// grow returns a buffer holding dst with room for about n more bytes of
// mostly plain text, and at least twice dst's capacity, made rather than
// appended to so that what is not yet written is not touched.
func grow(dst []byte, n int) []byte {
	d := make([]byte, len(dst), max(2*cap(dst), len(dst)+n+n/8+16))
	copy(d, dst)
	return d[:cap(d)]
}

// Surrogates is what AppendUnescaped makes of a \u escape that names a
// lone UTF-16 surrogate (one not in a high-low pair).
type Surrogates uint8

const (
	// ReplaceSurrogates writes U+FFFD for it, and for each byte of the
	// body that is not UTF-8: the string encoding/json decodes.
	ReplaceSurrogates Surrogates = iota
	// KeepSurrogates writes the surrogate itself in WTF-8 (its
	// three-byte form, which UTF-8 forbids), the string a JavaScript
	// string would hold, and copies other bytes as they are.
	KeepSurrogates
)

// AppendUnescaped appends the value of a string whose body (the bytes
// between its quotes) a Lexer has accepted: escapes are decoded, a
// surrogate pair becomes the one code point it spells, and a lone
// surrogate is written as sur says.
func AppendUnescaped(dst, body []byte, sur Surrogates) []byte {
	for i := 0; i < len(body); {
		if body[i] != '\\' {
			j := runEnd(body, i)
			dst = appendRaw(dst, body[i:j], sur)
			i = j
			continue
		}
		r, n := unescape(body, i)
		if sur == KeepSurrogates {
			dst = appendWTF8(dst, r)
		} else {
			dst = utf8.AppendRune(dst, r) // U+FFFD for a surrogate
		}
		i += n
	}
	return dst
}

// UnescapeString is string(AppendUnescaped(nil, body, ReplaceSurrogates)),
// written once, into the string: a long value (a file's content) costs
// one buffer of its size, not a buffer and its copy.
func UnescapeString(body []byte) string {
	var b strings.Builder
	b.Grow(len(body)) // a value is rarely longer than its escaped body
	for i := 0; i < len(body); {
		if body[i] != '\\' {
			j := runEnd(body, i)
			if run := body[i:j]; utf8.Valid(run) {
				b.Write(run)
			} else {
				b.Write(appendRaw(nil, run, ReplaceSurrogates))
			}
			i = j
			continue
		}
		r, n := unescape(body, i)
		b.WriteRune(r) // U+FFFD for a surrogate
		i += n
	}
	return b.String()
}

// runEnd is the offset of the first '\\' in body after i, or len(body).
func runEnd(body []byte, i int) int {
	if k := bytes.IndexByte(body[i+1:], '\\'); k >= 0 {
		return i + 1 + k
	}
	return len(body)
}

// unescape decodes the escape at body[i], a '\\' a Lexer has accepted,
// and returns the code point it spells and its length: a surrogate pair
// of two \u escapes is one code point, a lone surrogate is returned as
// it is.
func unescape(body []byte, i int) (rune, int) {
	switch e := body[i+1]; e {
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		r := hex4(body[i+2:])
		if 0xD800 <= r && r < 0xDC00 && i+12 <= len(body) && body[i+6] == '\\' && body[i+7] == 'u' {
			if lo := hex4(body[i+8:]); 0xDC00 <= lo && lo <= 0xDFFF {
				return 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00), 12
			}
		}
		return r, 6
	default: // '"', '\\', '/'
		return rune(e), 2
	}
}

// appendRaw appends a run of a body without escapes.
func appendRaw(dst, run []byte, sur Surrogates) []byte {
	if sur == KeepSurrogates || utf8.Valid(run) {
		return append(dst, run...)
	}
	for len(run) > 0 {
		r, size := utf8.DecodeRune(run)
		dst = utf8.AppendRune(dst, r)
		run = run[size:]
	}
	return dst
}

// appendWTF8 appends r, which may be a lone surrogate, in WTF-8.
func appendWTF8(dst []byte, r rune) []byte {
	if 0xD800 <= r && r <= 0xDFFF {
		return append(dst, 0xE0|byte(r>>12), 0x80|byte(r>>6)&0x3F, 0x80|byte(r)&0x3F)
	}
	return utf8.AppendRune(dst, r)
}

// hex4 reads four hex digits a Lexer has checked.
func hex4(b []byte) rune {
	var r rune
	for _, h := range b[:4] {
		switch {
		case h <= '9':
			r = r<<4 | rune(h-'0')
		case h >= 'a':
			r = r<<4 | rune(h-'a'+10)
		default:
			r = r<<4 | rune(h-'A'+10)
		}
	}
	return r
}
