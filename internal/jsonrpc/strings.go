package jsonrpc

import (
	"errors"
	"unicode/utf8"

	"github.com/sharedos/sharedos-mcp/internal/jsonlex"
)

// Strings are the one JSON value the relay encodes and decodes on every
// call (call ids, tool names, status and code, the text of a refusal).
// These do it without encoding/json's reflection and allocations, and
// give the same bytes and values; FuzzStrings holds them to that.

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string, as encoding/json writes it
// with HTML escaping off: invalid UTF-8 becomes U+FFFD, U+2028 and U+2029
// are escaped so the text is also valid JavaScript. ASCII is escaped as
// hashing escapes it (jsonlex.AppendEscapedASCII); only what follows
// differs.
func AppendString[S ~string | ~[]byte](dst []byte, s S) []byte {
	return append(AppendStringBody(append(dst, '"'), s), '"')
}

// AppendStringBody is AppendString without the quotes: an output's text
// block is escaped into a buffer sized for it.
func AppendStringBody[S ~string | ~[]byte](dst []byte, s S) []byte {
	for i := 0; ; {
		if dst, i = jsonlex.AppendEscapedASCII(dst, s, i); i == len(s) {
			return dst
		}
		start := i
		for i < len(s) && s[i] >= utf8.RuneSelf {
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
		dst = append(dst, s[start:i]...)
	}
}

var errNotString = errors.New("not a JSON string")

// DecodeString decodes a raw JSON value that a scanner has already
// validated into a string, as json.Unmarshal into a string would: null
// gives "", escapes are decoded, and a lone surrogate and each byte that
// is not UTF-8 become U+FFFD. Plain ASCII is copied as it is; anything
// else is checked again and decoded by the lexer.
func DecodeString(raw []byte) (string, error) {
	if string(raw) == "null" {
		return "", nil
	}
	if len(raw) < 2 || raw[0] != '"' {
		return "", errNotString
	}
	body := raw[1 : len(raw)-1]
	if jsonlex.SkipPlain(body, 0, jsonlex.StopNonASCII) == len(body) {
		return string(body), nil
	}
	// Checked again: a value cut short in an escape must fail, not be
	// read past its end.
	var l jsonlex.Lexer
	l.Reset(raw, wire)
	if _, _, err := l.String(); err != nil {
		return "", err
	}
	if l.Pos() != len(raw) {
		return "", errNotString
	}
	if len(body) <= 64 {
		var buf [64]byte
		return string(jsonlex.AppendUnescaped(buf[:0], body, jsonlex.ReplaceSurrogates)), nil
	}
	return jsonlex.UnescapeString(body), nil
}
