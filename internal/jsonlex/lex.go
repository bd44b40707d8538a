// Package jsonlex is the module's one JSON lexer. The relay's wire reader
// (internal/jsonrpc) and the catalogHash canonicaliser (hashing) walk JSON
// text with it, token by token, without building values: a caller sees
// each string, number, literal and bracket as a span of the input and
// decides what to keep.
//
// The grammar is RFC 8259's, strictly, as encoding/json and ECMAScript's
// JSON.parse read it: no comments, no trailing commas, no leading zeros,
// no single quotes. Where the two readers of this module really differ,
// Options says which way to go (see docs/adr/0007):
//
//   - UTF8: the wire passes a string's bytes at or above 0x80 as they are
//     (json.Valid accepts them; decoding replaces bad sequences with
//     U+FFFD later), the hash refuses a string that is not UTF-8
//     (replacing, as the reference's decoder would, gives distinct
//     catalogues one catalogHash);
//   - MaxDepth: the wire allows what encoding/json allows (10000), the hash
//     the depth a schema could ever need (512);
//   - Surrogates, when a string is decoded (AppendUnescaped): the wire
//     writes U+FFFD for a lone \uD800 as encoding/json does, the hash
//     keeps it, as a JavaScript string does.
//
// A Lexer holds no buffers: it lives on its caller's stack or inside a
// pooled struct, and reading a message allocates nothing.
package jsonlex

import (
	"bytes"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// DefaultMaxDepth is the nesting limit when Options leave it zero: the
// one encoding/json applies, so the lexer refuses no text json.Valid
// accepts for its depth.
const DefaultMaxDepth = 10000

// UTF8 is what a lexer accepts in a string at or above 0x80.
type UTF8 uint8

const (
	// PassBytes accepts any byte at or above 0x80, as json.Valid does.
	PassBytes UTF8 = iota
	// RequireUTF8 refuses a string that is not valid UTF-8. Outside
	// strings such bytes are refused in both modes, so the whole text
	// must then be UTF-8.
	RequireUTF8
)

// Options are the lexer's policies; the zero Options read JSON as
// json.Valid does.
type Options struct {
	MaxDepth int // deepest nesting of arrays and objects; 0 means DefaultMaxDepth
	UTF8     UTF8
}

// SyntaxError is JSON text that cannot be read, with the byte offset of
// the problem.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string {
	return "invalid JSON at offset " + strconv.Itoa(e.Offset) + ": " + e.Msg
}

// Lexer reads one JSON text. Each method that reads a value starts at the
// value's first byte and stops just past its last one; Key, Open and Next
// also move past the whitespace that follows what they read, so a caller
// skips whitespace itself only before a top-level value (Space) and
// checks for the end after it (End).
type Lexer struct {
	src      []byte
	pos      int
	depth    int
	maxDepth int
	stop     Stop // where SkipPlain must stop in a string body
}

// Reset starts the lexer on src at offset 0.
func (l *Lexer) Reset(src []byte, o Options) {
	l.src, l.pos, l.depth = src, 0, 0
	l.maxDepth = o.MaxDepth
	if l.maxDepth <= 0 {
		l.maxDepth = DefaultMaxDepth
	}
	l.stop = stopFor(o.UTF8)
}

// stopFor is where a string body's fast skip stops under u: under
// RequireUTF8 a string's non-ASCII bytes need a look each, so it stops
// at them too.
func stopFor(u UTF8) Stop {
	if u == RequireUTF8 {
		return StopNonASCII
	}
	return StopSpecial
}

// Src is the text being read.
func (l *Lexer) Src() []byte { return l.src }

// Pos is the offset of the next byte to read.
func (l *Lexer) Pos() int { return l.pos }

// Peek returns the next byte, or 0 at the end of the text (0 starts no
// JSON token, so callers dispatching on it fall through to an error).
func (l *Lexer) Peek() byte {
	if l.pos < len(l.src) {
		return l.src[l.pos]
	}
	return 0
}

// Space moves past whitespace.
func (l *Lexer) Space() {
	// Whitespace is at most ' ', so compact JSON costs one comparison.
	for l.pos < len(l.src) && l.src[l.pos] <= ' ' {
		switch l.src[l.pos] {
		case ' ', '\t', '\n', '\r':
			l.pos++
		default:
			return
		}
	}
}

// End checks that nothing but whitespace is left.
func (l *Lexer) End() error {
	l.Space()
	if l.pos < len(l.src) {
		return l.Errorf("unexpected %s after the value", l.Describe())
	}
	return nil
}

// Consume moves past lit if the text continues with it, and reports
// whether it did.
func (l *Lexer) Consume(lit string) bool {
	if bytes.HasPrefix(l.src[l.pos:], []byte(lit)) {
		l.pos += len(lit)
		return true
	}
	return false
}

// Errorf returns a *SyntaxError at the lexer's position.
func (l *Lexer) Errorf(format string, args ...any) error {
	return l.ErrorAt(l.pos, format, args...)
}

// ErrorAt returns a *SyntaxError at offset off.
func (l *Lexer) ErrorAt(off int, format string, args ...any) error {
	return &SyntaxError{Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// Want returns the error for a text that does not continue with what:
// "want what, have" and the next byte.
func (l *Lexer) Want(what string) error {
	return &SyntaxError{Offset: l.pos, Msg: "want " + what + ", have " + l.Describe()}
}

// Describe names the next byte for an error message.
func (l *Lexer) Describe() string {
	if l.pos >= len(l.src) {
		return "end of input"
	}
	return strconv.QuoteRune(rune(l.src[l.pos]))
}

// Skip moves past the value at the lexer's position, checking it.
func (l *Lexer) Skip() error {
	switch b := l.Peek(); {
	case b == '"':
		_, _, err := l.String()
		return err
	case b == '{' || b == '[':
		more, err := l.Open()
		for more {
			if b == '{' {
				if _, _, err = l.Key(); err != nil {
					return err
				}
			}
			if err = l.Skip(); err != nil {
				return err
			}
			more, err = l.Next(b + 2)
		}
		return err
	case b == '-' || '0' <= b && b <= '9':
		_, err := l.Number()
		return err
	}
	return l.Literal()
}

// Open moves past the '{' or '[' at the lexer's position and the
// whitespace after it. more reports that a member or element follows;
// false means the container was empty and is closed.
func (l *Lexer) Open() (more bool, err error) {
	if l.depth++; l.depth > l.maxDepth {
		return false, l.Errorf("nested deeper than %d", l.maxDepth)
	}
	closing := l.src[l.pos] + 2 // '{'+2 is '}', '['+2 is ']'
	l.pos++
	l.Space()
	if l.pos < len(l.src) && l.src[l.pos] == closing {
		l.pos++
		l.depth--
		return false, nil
	}
	return true, nil
}

// Key moves past an object member's key, the ':' after it and the
// whitespace around that, to the member's value. key is the key as
// written, quotes included; escaped reports whether it holds escapes (if
// not, key[1:len(key)-1] is its value byte for byte, in the UTF-8 the
// options allowed).
func (l *Lexer) Key() (key []byte, escaped bool, err error) {
	return l.str(true)
}

// Next moves past the whitespace after a member or element of the
// container that closing closes, and past the ',' or closing bracket that
// follows. more reports a ','; the lexer is then at the next key or
// element.
func (l *Lexer) Next(closing byte) (more bool, err error) {
	l.Space()
	if l.pos < len(l.src) {
		switch l.src[l.pos] {
		case ',':
			l.pos++
			l.Space()
			return true, nil
		case closing:
			l.pos++
			l.depth--
			return false, nil
		}
	}
	if closing == '}' {
		return false, l.Want("',' or '}'")
	}
	return false, l.Want("',' or ']'")
}

// String moves past the string at the lexer's position and returns it
// as written, quotes included; escaped reports whether it holds escapes
// (see Key).
func (l *Lexer) String() (raw []byte, escaped bool, err error) {
	return l.str(false)
}

// str reads the string at the lexer's position and returns it, quotes
// included. For a key it also moves past the ':' after it and the
// whitespace around that: one call, not two, for each member.
func (l *Lexer) str(key bool) (raw []byte, escaped bool, err error) {
	src, start, stop := l.src, l.pos, l.stop
	if key && (start >= len(src) || src[start] != '"') {
		return nil, false, l.Want("a string key")
	}
	i := start + 1
	for {
		i = SkipPlain(src, i, stop)
		if i >= len(src) {
			break
		}
		if b := src[i]; b == '"' {
			l.pos = i + 1
			if key {
				if l.Space(); l.pos >= len(src) || src[l.pos] != ':' {
					return nil, false, l.Want("':'")
				}
				l.pos++
				l.Space()
			}
			return src[start : i+1], escaped, nil
		} else if b == '\\' && i+1 < len(src) {
			if shortEscape[src[i+1]] {
				i = skipShortEscapes(src, i+2, stop)
				escaped = true
				continue
			}
			if src[i+1] == 'u' && i+6 <= len(src) && isHex(src[i+2]) && isHex(src[i+3]) && isHex(src[i+4]) && isHex(src[i+5]) {
				i += 6
				escaped = true
				continue
			}
		} else if b >= utf8.RuneSelf { // only under RequireUTF8
			if r, size := utf8.DecodeRune(src[i:]); r != utf8.RuneError || size > 1 {
				i += size
				continue
			}
		}
		break
	}
	return nil, false, l.stringError(i)
}

// stringError is the error for a string that str could not read past
// src[i].
func (l *Lexer) stringError(i int) error {
	src := l.src
	l.pos = i
	switch {
	case i >= len(src) || src[i] == '\\' && i+1 >= len(src):
		l.pos = len(src)
		return l.Errorf("unterminated string")
	case src[i] == '\\' && src[i+1] == 'u':
		return l.Errorf(`invalid \u escape`)
	case src[i] == '\\':
		return l.Errorf(`invalid escape \%c`, src[i+1])
	case src[i] < 0x20:
		return l.Errorf("unescaped control character %U in a string", src[i])
	}
	return l.Errorf("invalid UTF-8 in a string")
}

func isHex(b byte) bool {
	return '0' <= b && b <= '9' || 'a' <= b && b <= 'f' || 'A' <= b && b <= 'F'
}

// Number moves past the number at the lexer's position, in JSON's
// grammar -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, and reports
// whether it is an integer (no fraction, no exponent). Its magnitude is
// not checked: any number the grammar allows is read.
func (l *Lexer) Number() (integer bool, err error) {
	src, i := l.src, l.pos
	if src[i] == '-' {
		i++
	}
	if i < len(src) && src[i] == '0' {
		i++
	} else if j := digits(src, i); j > i {
		i = j
	} else {
		return false, l.wantDigit(i, "")
	}
	integer = true
	if i < len(src) && src[i] == '.' {
		integer = false
		if i = digits(src, i+1); src[i-1] == '.' {
			return false, l.wantDigit(i, " after '.'")
		}
	}
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		integer = false
		if i++; i < len(src) && (src[i] == '+' || src[i] == '-') {
			i++
		}
		j := digits(src, i)
		if j == i {
			return false, l.wantDigit(i, " in the exponent")
		}
		i = j
	}
	l.pos = i
	return integer, nil
}

// digits returns the offset of the first byte from src[i] on that is not
// a decimal digit.
func digits(src []byte, i int) int {
	for i < len(src) && '0' <= src[i] && src[i] <= '9' {
		i++
	}
	return i
}

func (l *Lexer) wantDigit(i int, where string) error {
	l.pos = i
	return l.Want("a digit" + where)
}

// Literal moves past the true, false or null at the lexer's position.
func (l *Lexer) Literal() error {
	var lit string
	switch l.Peek() {
	case 't':
		lit = "true"
	case 'f':
		lit = "false"
	case 'n':
		lit = "null"
	}
	if lit == "" || !l.Consume(lit) {
		return l.Want("a value")
	}
	return nil
}
