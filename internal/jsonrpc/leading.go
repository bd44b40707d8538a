package jsonrpc

import "encoding/json"

// LeadingMember finds a member in the beginning of a JSON object that
// may be cut short anywhere, as Reader.Skipped hands out the start of a
// line too long to read: path names a member of the top-level object, or
// of an object nested in it (LeadingMember(b, "params", "callId")). It
// returns the member's value, whole, only when all of it lies within
// prefix and every object on the way is well-formed as far as it goes;
// a value that continues past the cut is not returned. It is how a peer
// still tells whose request or answer an oversized line was.
func LeadingMember(prefix []byte, path ...string) ([]byte, bool) {
	if len(path) == 0 {
		return nil, false
	}
	l := leader{b: prefix}
	l.space()
	for depth := 0; ; depth++ {
		if !l.take('{') {
			return nil, false
		}
		found := false
		for first := true; ; first = false {
			l.space()
			if l.take('}') {
				return nil, false
			}
			if !first && (!l.take(',') || !l.spaceThen()) {
				return nil, false
			}
			key, ok := l.value()
			if !ok || len(key) < 2 || key[0] != '"' {
				return nil, false
			}
			l.space()
			if !l.take(':') || !l.spaceThen() {
				return nil, false
			}
			name, err := DecodeString(key)
			if err != nil {
				return nil, false
			}
			if name == path[depth] {
				if depth == len(path)-1 {
					return l.value()
				}
				found = true
				break
			}
			if _, ok := l.value(); !ok {
				return nil, false
			}
		}
		if !found {
			return nil, false
		}
	}
}

// leader walks a prefix of JSON text.
type leader struct {
	b []byte
	i int
}

func (l *leader) space() {
	for l.i < len(l.b) && (l.b[l.i] == ' ' || l.b[l.i] == '\t' || l.b[l.i] == '\n' || l.b[l.i] == '\r') {
		l.i++
	}
}

// spaceThen skips white space and reports whether anything follows.
func (l *leader) spaceThen() bool {
	l.space()
	return l.i < len(l.b)
}

func (l *leader) take(c byte) bool {
	if l.i < len(l.b) && l.b[l.i] == c {
		l.i++
		return true
	}
	return false
}

// value returns the JSON value at the cursor and moves past it, or false
// when it is not whole within the prefix (or not a value). Strings and
// nesting are followed exactly; the scalars and the contents of a
// complete value are checked by json.Valid.
func (l *leader) value() ([]byte, bool) {
	start := l.i
	depth := 0
	for l.i < len(l.b) {
		switch c := l.b[l.i]; c {
		case '"':
			l.i++
			for l.i < len(l.b) && l.b[l.i] != '"' {
				if l.b[l.i] == '\\' {
					l.i++
				}
				l.i++
			}
			if l.i >= len(l.b) {
				return nil, false
			}
			l.i++
		case '{', '[':
			depth++
			l.i++
		case '}', ']':
			if depth == 0 {
				return l.scalarEnd(start)
			}
			depth--
			l.i++
		case ',', ' ', '\t', '\n', '\r', ':':
			if depth == 0 {
				return l.scalarEnd(start)
			}
			l.i++
		default:
			l.i++
		}
		if depth == 0 && l.i > start && (l.b[l.i-1] == '"' || l.b[l.i-1] == '}' || l.b[l.i-1] == ']') {
			v := l.b[start:l.i]
			return v, json.Valid(v)
		}
	}
	return nil, false // cut short
}

// scalarEnd ends a number or literal that a delimiter follows.
func (l *leader) scalarEnd(start int) ([]byte, bool) {
	v := l.b[start:l.i]
	return v, len(v) > 0 && json.Valid(v)
}
