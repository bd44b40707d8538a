package jsonrpc

import (
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// Strings are the one JSON value the relay encodes and decodes on every
// call (call ids, tool names, status and code, the text of a refusal).
// These do it without encoding/json's reflection and allocations, and
// give the same bytes and values; FuzzStrings holds them to that.

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string, as encoding/json writes it
// with HTML escaping off: invalid UTF-8 becomes U+FFFD, U+2028 and U+2029
// are escaped so the text is also valid JavaScript.
func AppendString[S ~string | ~[]byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
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
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

var errNotString = errors.New("not a JSON string")

// DecodeString decodes a raw JSON value that a scanner has already
// validated into a string, as json.Unmarshal into a string would: null
// gives "", escapes are decoded and invalid UTF-8 becomes U+FFFD. Only
// strings with escapes or non-ASCII bytes take encoding/json's path.
func DecodeString(raw []byte) (string, error) {
	if string(raw) == "null" {
		return "", nil
	}
	if len(raw) < 2 || raw[0] != '"' {
		return "", errNotString
	}
	body := raw[1 : len(raw)-1]
	for _, b := range body {
		if b == '\\' || b >= utf8.RuneSelf {
			var s string
			err := json.Unmarshal(raw, &s)
			return s, err
		}
	}
	return string(body), nil
}
