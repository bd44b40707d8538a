package hashing

import (
	"strconv"
	"unicode/utf8"

	"github.com/sharedos/sharedos-mcp/internal/jsonlex"
)

// Strings inside this package are WTF-8: valid UTF-8, except that a lone
// UTF-16 surrogate (which JSON can spell as "\ud800" and a JavaScript
// string can hold) is kept as its own three-byte sequence instead of being
// replaced. The reference hashes such a string with the surrogate escaped,
// so replacing it with U+FFFD, as encoding/json does, would change the hash.

// decodeWTF8 decodes the sequence starting at s[i]. A lone surrogate comes
// back as itself; any other invalid byte comes back as (utf8.RuneError, 1).
func decodeWTF8[T ~string | ~[]byte](s T, i int) (r rune, size int) {
	b0 := s[i]
	if b0 < utf8.RuneSelf {
		return rune(b0), 1
	}
	cont := func(j int, lo, hi byte) bool {
		return j < len(s) && s[j] >= lo && s[j] <= hi
	}
	switch {
	case b0 >= 0xC2 && b0 <= 0xDF:
		if cont(i+1, 0x80, 0xBF) {
			return rune(b0&0x1F)<<6 | rune(s[i+1]&0x3F), 2
		}
	case b0 >= 0xE0 && b0 <= 0xEF:
		lo := byte(0x80)
		if b0 == 0xE0 {
			lo = 0xA0 // no overlong forms
		}
		// 0xED 0xA0–0xBF is a surrogate: invalid UTF-8, valid WTF-8.
		if cont(i+1, lo, 0xBF) && cont(i+2, 0x80, 0xBF) {
			return rune(b0&0x0F)<<12 | rune(s[i+1]&0x3F)<<6 | rune(s[i+2]&0x3F), 3
		}
	case b0 >= 0xF0 && b0 <= 0xF4:
		lo, hi := byte(0x80), byte(0xBF)
		switch b0 {
		case 0xF0:
			lo = 0x90
		case 0xF4:
			hi = 0x8F
		}
		if cont(i+1, lo, hi) && cont(i+2, 0x80, 0xBF) && cont(i+3, 0x80, 0xBF) {
			return rune(b0&0x07)<<18 | rune(s[i+1]&0x3F)<<12 | rune(s[i+2]&0x3F)<<6 | rune(s[i+3]&0x3F), 4
		}
	}
	return utf8.RuneError, 1
}

func isSurrogate(r rune) bool { return r >= 0xD800 && r <= 0xDFFF }

// validWTF8 reports whether s holds nothing but valid UTF-8 and lone
// surrogates, and returns its length in UTF-16 code units, the unit the
// reference's length limits count.
func validWTF8(s string) (units int, ok bool) {
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf { // most of a description, and cheaper than a call
			units++
			i++
			continue
		}
		r, size := decodeWTF8(s, i)
		if r == utf8.RuneError && size == 1 {
			return 0, false
		}
		units++
		if r > 0xFFFF {
			units++
		}
		i += size
	}
	return units, true
}

const hexDigits = "0123456789abcdef"

// appendQuoted appends s as ECMAScript JSON.stringify writes a string:
// only '"', '\\' and U+0000–U+001F are escaped (with the short forms where
// there is one, else \u00xx in lowercase hex: jsonlex.AppendEscapedASCII,
// which encoding/json agrees with), lone surrogates as \udxxx, everything
// else raw, including U+2028, U+2029 and '<', '>', '&'. A byte that is not
// even WTF-8 cannot come from JSON text; it is written as U+FFFD, what a
// JavaScript decoder would have turned it into.
func appendQuoted[T ~string | ~[]byte](dst []byte, s T) []byte {
	dst = append(dst, '"')
	for i := 0; ; {
		if dst, i = jsonlex.AppendEscapedASCII(dst, s, i); i == len(s) {
			return append(dst, '"')
		}
		start := i
		for i < len(s) && s[i] >= utf8.RuneSelf {
			r, size := decodeWTF8(s, i)
			switch {
			case r == utf8.RuneError && size == 1:
				dst = append(dst, s[start:i]...)
				dst = append(dst, "\uFFFD"...)
			case isSurrogate(r):
				dst = append(dst, s[start:i]...)
				dst = append(dst, '\\', 'u', hexDigits[r>>12], hexDigits[r>>8&0xF], hexDigits[r>>4&0xF], hexDigits[r&0xF])
			default:
				i += size
				continue
			}
			i += size
			start = i
		}
		dst = append(dst, s[start:i]...)
	}
}

// appendNumber appends f (finite) as ECMAScript Number::toString(f) does
// (ECMA-262 §6.1.6.1.20): the shortest digits that round-trip, written
// positionally when the decimal exponent is in [-6, 21) and in e-notation
// (with an explicit sign) otherwise. strconv's shortest digits are the
// same digits; only the layout rules differ.
func appendNumber(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0') // covers -0 too
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, 64) // d[.ddd]e±XX
	var digits [17]byte
	k := 0
	i := 0
	for ; e[i] != 'e'; i++ {
		if e[i] != '.' {
			digits[k] = e[i]
			k++
		}
	}
	exp := 0
	for _, c := range e[i+2:] { // skip the 'e' and the sign strconv always writes
		exp = exp*10 + int(c-'0')
	}
	if e[i+1] == '-' {
		exp = -exp
	}
	n := exp + 1 // the decimal point sits after n digits
	d := digits[:k]
	switch {
	case k <= n && n <= 21:
		dst = append(dst, d...)
		for range n - k {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, d[:n]...)
		dst = append(dst, '.')
		dst = append(dst, d[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for range -n {
			dst = append(dst, '0')
		}
		dst = append(dst, d...)
	default:
		dst = append(dst, d[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, d[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, int64(n-1), 10)
	}
	return dst
}
