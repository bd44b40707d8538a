package jsonlex

import (
	"bytes"
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
func AppendEscapedASCII[T ~string | ~[]byte](dst []byte, s T, i int) ([]byte, int) {
	start := i
	for {
		i = SkipPlain(s, i, StopNonASCII)
		if i == len(s) || s[i] >= utf8.RuneSelf {
			return append(dst, s[start:i]...), i
		}
		dst = append(dst, s[start:i]...)
		switch b := s[i]; b {
		case '"', '\\':
			dst = append(dst, '\\', b)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
		}
		i++
		start = i
	}
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
			j := len(body)
			if k := bytes.IndexByte(body[i+1:], '\\'); k >= 0 {
				j = i + 1 + k
			}
			dst = appendRaw(dst, body[i:j], sur)
			i = j
			continue
		}
		switch e := body[i+1]; e {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := hex4(body[i+2:])
			i += 6
			if 0xD800 <= r && r < 0xDC00 && i+6 <= len(body) && body[i] == '\\' && body[i+1] == 'u' {
				if lo := hex4(body[i+2:]); 0xDC00 <= lo && lo <= 0xDFFF {
					r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
					i += 6
				}
			}
			if sur == KeepSurrogates {
				dst = appendWTF8(dst, r)
			} else {
				dst = utf8.AppendRune(dst, r) // U+FFFD for a surrogate
			}
			continue
		default: // '"', '\\', '/'
			dst = append(dst, e)
		}
		i += 2
	}
	return dst
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
