package jsonrpc

import (
	"bytes"
	"errors"

	"github.com/sharedos/sharedos-mcp/internal/jsonlex"
)

// A kernel's tools.list answer is one line of half a megabyte. Decoding it
// into a Message with encoding/json scans it twice (validation, then the
// skip over Result) and copies Result, and decoding Result into its struct
// does the same again, at about a tenth of the speed of a plain byte loop.
// The functions here validate a line once, with the module's lexer, and
// hand out its values as sub-slices, so a reader routes a message without
// decoding what it only passes on.

// wire is how the relay reads JSON: as json.Valid does (bytes that are
// not UTF-8 pass, nesting up to encoding/json's limit), so a message is
// valid here exactly when encoding/json would have taken it.
var wire = jsonlex.Options{UTF8: jsonlex.PassBytes}

// Envelope is the top level of one JSON-RPC message with every value left
// raw (sub-slices of the line: valid until the line's buffer is reused).
// A member that is absent is nil; JSONRPC and Method, when present, are
// JSON strings with their quotes.
type Envelope struct {
	JSONRPC, ID, Method, Params, Result, Error []byte
}

// ParseEnvelope checks that line is one valid JSON object and returns its
// members. Names match exactly, once their escapes are decoded
// (encoding/json would also take "Result"); if a name repeats, the last
// one wins, as in encoding/json.
func ParseEnvelope(line []byte) (Envelope, error) {
	var e Envelope
	err := walk(line, '{', func(key, value []byte) error {
		if !e.set(key, value) && bytes.IndexByte(key, '\\') >= 0 {
			var buf [32]byte
			name := jsonlex.AppendUnescaped(append(buf[:0], '"'), key[1:len(key)-1], jsonlex.ReplaceSurrogates)
			e.set(append(name, '"'), value)
		}
		return nil
	})
	return e, err
}

// set stores value as the member named by key (quoted, without escapes)
// and reports whether that is a member of an envelope.
func (e *Envelope) set(key, value []byte) bool {
	switch string(key) {
	case `"jsonrpc"`:
		e.JSONRPC = value
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
	default:
		return false
	}
	return true
}

// EachMember checks that src is one valid JSON object (whitespace around
// it allowed) and calls f with each member's key, as raw JSON with its
// quotes and escapes, and value, as raw JSON. An error from f stops the
// walk and is returned.
func EachMember(src []byte, f func(key, value []byte) error) error {
	return walk(src, '{', f)
}

// EachElement checks that src is one valid JSON array and calls f with
// each element as raw JSON.
func EachElement(src []byte, f func(elem []byte) error) error {
	return walk(src, '[', func(_, elem []byte) error { return f(elem) })
}

// ScanError is invalid JSON, with the byte offset where it was found.
type ScanError = jsonlex.SyntaxError

// walk checks that src is one valid JSON object or array (as open says)
// and calls f with each member (key nil for an element).
func walk(src []byte, open byte, f func(key, value []byte) error) error {
	var l jsonlex.Lexer
	l.Reset(src, wire)
	l.Space()
	if l.Peek() != open {
		if open == '{' {
			return l.Want("an object")
		}
		return l.Want("an array")
	}
	more, err := l.Open()
	for more {
		var key []byte
		if open == '{' {
			if key, _, err = l.Key(); err != nil {
				return err
			}
		}
		start := l.Pos()
		if err = l.Skip(); err != nil {
			return err
		}
		if err = f(key, src[start:l.Pos()]); err != nil {
			return err
		}
		if more, err = l.Next(open + 2); err != nil {
			return err
		}
	}
	if err != nil {
		return err
	}
	return l.End()
}

// KeyName is the name a member's key (as EachMember hands it out, quoted,
// escapes intact) spells: a slice of key when it has no escapes, which is
// what a switch on string(KeyName(key)) compares without allocating.
func KeyName(key []byte) []byte {
	body := key[1 : len(key)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		return body
	}
	return jsonlex.AppendUnescaped(nil, body, jsonlex.ReplaceSurrogates)
}

// EachValidMember is EachMember for text a validating reader has already
// accepted, such as a value ParseEnvelope handed out: it finds the members
// without checking them again, so a large value costs a search for its
// closing quote (bytes.IndexByte) rather than a second look at every
// byte. Text that is not valid JSON gives an error or wrong members, never
// a panic.
func EachValidMember(src []byte, f func(key, value []byte) error) error {
	i := validSpace(src, 0)
	if i >= len(src) || src[i] != '{' {
		return errNotObject
	}
	i = validSpace(src, i+1)
	if i < len(src) && src[i] == '}' {
		return nil
	}
	for i < len(src) {
		if src[i] != '"' {
			return errNotObject
		}
		kend := skipValidString(src, i)
		key := src[i:kend]
		i = validSpace(src, kend)
		if i >= len(src) || src[i] != ':' {
			return errNotObject
		}
		i = validSpace(src, i+1)
		vend := skipValidValue(src, i)
		if vend <= i {
			return errNotObject
		}
		if err := f(key, src[i:vend]); err != nil {
			return err
		}
		i = validSpace(src, vend)
		if i >= len(src) {
			break
		}
		switch src[i] {
		case '}':
			return nil
		case ',':
			i = validSpace(src, i+1)
		default:
			return errNotObject
		}
	}
	return errNotObject
}

var errNotObject = errors.New("not a JSON object")

func validSpace(src []byte, i int) int {
	for i < len(src) && (src[i] == ' ' || src[i] == '\t' || src[i] == '\n' || src[i] == '\r') {
		i++
	}
	return i
}

// skipValidString returns the end of the string that starts at src[i]:
// past the first quote not escaped by an odd run of backslashes.
func skipValidString(src []byte, i int) int {
	for j := i + 1; j < len(src); {
		k := bytes.IndexByte(src[j:], '"')
		if k < 0 {
			break
		}
		q := j + k
		n := 0
		for p := q - 1; p > i && src[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
	return len(src)
}

// skipValidValue returns the end of the value that starts at src[i].
func skipValidValue(src []byte, i int) int {
	if i >= len(src) {
		return i
	}
	switch src[i] {
	case '"':
		return skipValidString(src, i)
	case '{', '[':
		depth := 0
		for i < len(src) {
			switch src[i] {
			case '"':
				i = skipValidString(src, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(src)
	}
	for i < len(src) {
		switch src[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// ValidID reports whether id, a value of a text a validating reader has
// accepted, is what MCP allows a request id to be: a string or a number
// (not null).
func ValidID(id []byte) bool {
	if len(id) == 0 {
		return false
	}
	c := id[0]
	return c == '"' || c == '-' || ('0' <= c && c <= '9')
}
