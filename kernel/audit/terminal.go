package audit

import (
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// needsTerminalEscape reports whether AppendTerminalSafe would change a
// JSON text: whether it holds any byte outside printable ASCII besides
// the escapes JSON already makes.
func needsTerminalEscape(b []byte) bool {
	for _, c := range b {
		if c >= 0x7f {
			return true
		}
	}
	return false
}

// AppendTerminalSafe appends the JSON text src to dst with every rune
// that is not graphic written as a \u escape (a pair of them beyond the
// BMP), and every byte that is not UTF-8 as \ufffd. Outside strings JSON
// is printable ASCII, so this only rewrites string contents, and the
// result means what src meant.
func AppendTerminalSafe(dst, src []byte) []byte {
	for i := 0; i < len(src); {
		c := src[i]
		if c < utf8.RuneSelf && c != 0x7f {
			dst = append(dst, c)
			i++
			continue
		}
		r, size := utf8.DecodeRune(src[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, `\ufffd`...)
		case unicode.IsGraphic(r):
			dst = append(dst, src[i:i+size]...)
		case r > 0xffff:
			hi, lo := utf16.EncodeRune(r)
			dst = appendUEscape(appendUEscape(dst, hi), lo)
		default:
			dst = appendUEscape(dst, r)
		}
		i += size
	}
	return dst
}

func appendUEscape(dst []byte, r rune) []byte {
	const hexDigits = "0123456789abcdef"
	return append(dst, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
}
