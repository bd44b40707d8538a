package install

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// The JSON files are edited as text: a small parser records where every
// value and member sits, and an edit splices bytes at those offsets. That
// keeps the user's key order, spacing and — since VS Code and others
// accept JSON with comments — their comments and trailing commas.

// jnode is one parsed JSON value and its span src[start:end].
type jnode struct {
	kind       byte // '{', '[', '"', or 'v' for numbers and literals
	start, end int
	members    []jmember // objects
}

type jmember struct {
	key      string
	keyStart int
	val      *jnode
}

func (n *jnode) member(key string) (int, bool) {
	for i, m := range n.members {
		if m.key == key {
			return i, true
		}
	}
	return -1, false
}

const maxJSONDepth = 256

type jparser struct {
	src []byte
	pos int
}

// parseJSON parses src, which may carry // and /* */ comments and trailing
// commas, and returns its one top-level value.
func parseJSON(src []byte) (*jnode, error) {
	p := &jparser{src: src}
	if err := p.skip(); err != nil {
		return nil, err
	}
	n, err := p.value(0)
	if err != nil {
		return nil, err
	}
	if err := p.skip(); err != nil {
		return nil, err
	}
	if p.pos < len(src) {
		return nil, p.errorf("unexpected %q after the top-level value", src[p.pos])
	}
	return n, nil
}

func (p *jparser) errorf(format string, args ...any) error {
	return p.errorAt(p.pos, format, args...)
}

func (p *jparser) errorAt(offset int, format string, args ...any) error {
	line, col := position(p.src, offset)
	return &ParseError{Line: line, Column: col, Msg: fmt.Sprintf(format, args...)}
}

// skip passes whitespace and comments.
func (p *jparser) skip() error {
	for p.pos < len(p.src) {
		switch c := p.src[p.pos]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			p.pos++
		case c == '/' && p.pos+1 < len(p.src) && p.src[p.pos+1] == '/':
			if i := bytes.IndexByte(p.src[p.pos:], '\n'); i >= 0 {
				p.pos += i + 1
			} else {
				p.pos = len(p.src)
			}
		case c == '/' && p.pos+1 < len(p.src) && p.src[p.pos+1] == '*':
			i := bytes.Index(p.src[p.pos+2:], []byte("*/"))
			if i < 0 {
				return p.errorf("unterminated /* comment")
			}
			p.pos += 2 + i + 2
		default:
			return nil
		}
	}
	return nil
}

func (p *jparser) value(depth int) (*jnode, error) {
	if depth > maxJSONDepth {
		return nil, p.errorf("nested deeper than %d", maxJSONDepth)
	}
	if p.pos >= len(p.src) {
		return nil, p.errorf("unexpected end of input, expected a value")
	}
	start := p.pos
	switch c := p.src[p.pos]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		if _, err := p.str(); err != nil {
			return nil, err
		}
		return &jnode{kind: '"', start: start, end: p.pos}, nil
	case c == '-' || (c >= '0' && c <= '9'):
		for p.pos < len(p.src) && strings.IndexByte("+-.0123456789eE", p.src[p.pos]) >= 0 {
			p.pos++
		}
		if !json.Valid(p.src[start:p.pos]) {
			return nil, p.errorAt(start, "invalid number %q", p.src[start:p.pos])
		}
		return &jnode{kind: 'v', start: start, end: p.pos}, nil
	default:
		for _, lit := range []string{"true", "false", "null"} {
			if bytes.HasPrefix(p.src[p.pos:], []byte(lit)) {
				p.pos += len(lit)
				return &jnode{kind: 'v', start: start, end: p.pos}, nil
			}
		}
		return nil, p.errorf("unexpected %q, expected a value", c)
	}
}

// str scans a string literal at p.pos and returns its decoded value.
func (p *jparser) str() (string, error) {
	start := p.pos
	i := p.pos + 1
	for ; i < len(p.src); i++ {
		switch c := p.src[i]; {
		case c == '\\':
			i++
		case c == '"':
			var s string
			if err := json.Unmarshal(p.src[start:i+1], &s); err != nil {
				return "", p.errorAt(start, "invalid string")
			}
			p.pos = i + 1
			return s, nil
		case c < 0x20:
			return "", p.errorAt(i, "control character in string")
		}
	}
	return "", p.errorAt(start, "unterminated string")
}

func (p *jparser) object(depth int) (*jnode, error) {
	n := &jnode{kind: '{', start: p.pos}
	p.pos++
	for {
		if err := p.skip(); err != nil {
			return nil, err
		}
		if p.pos < len(p.src) && p.src[p.pos] == '}' {
			p.pos++
			n.end = p.pos
			return n, nil
		}
		if p.pos >= len(p.src) || p.src[p.pos] != '"' {
			return nil, p.errorf("expected a member name or '}'")
		}
		keyStart := p.pos
		key, err := p.str()
		if err != nil {
			return nil, err
		}
		if err := p.skip(); err != nil {
			return nil, err
		}
		if p.pos >= len(p.src) || p.src[p.pos] != ':' {
			return nil, p.errorf("expected ':' after member name")
		}
		p.pos++
		if err := p.skip(); err != nil {
			return nil, err
		}
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		n.members = append(n.members, jmember{key: key, keyStart: keyStart, val: v})
		if err := p.skip(); err != nil {
			return nil, err
		}
		switch {
		case p.pos < len(p.src) && p.src[p.pos] == ',':
			p.pos++
		case p.pos < len(p.src) && p.src[p.pos] == '}':
		default:
			return nil, p.errorf("expected ',' or '}' after object member")
		}
	}
}

func (p *jparser) array(depth int) (*jnode, error) {
	n := &jnode{kind: '[', start: p.pos}
	p.pos++
	for {
		if err := p.skip(); err != nil {
			return nil, err
		}
		if p.pos < len(p.src) && p.src[p.pos] == ']' {
			p.pos++
			n.end = p.pos
			return n, nil
		}
		if _, err := p.value(depth + 1); err != nil {
			return nil, err
		}
		if err := p.skip(); err != nil {
			return nil, err
		}
		switch {
		case p.pos < len(p.src) && p.src[p.pos] == ',':
			p.pos++
		case p.pos < len(p.src) && p.src[p.pos] == ']':
		default:
			return nil, p.errorf("expected ',' or ']' after array element")
		}
	}
}

// field and obj are an ordered JSON object for rendering our entry. A
// value is a string, []string, bool, int or obj.
type field struct {
	key string
	val any
}

type obj []field

// compactJSON renders v without insignificant space and without escaping
// <, > and & (paths may hold them; no harness reads this as HTML).
func compactJSON(v any) []byte {
	var b bytes.Buffer
	var write func(v any)
	write = func(v any) {
		switch v := v.(type) {
		case obj:
			b.WriteByte('{')
			for i, f := range v {
				if i > 0 {
					b.WriteByte(',')
				}
				write(f.key)
				b.WriteByte(':')
				write(f.val)
			}
			b.WriteByte('}')
		case []string:
			b.WriteByte('[')
			for i, s := range v {
				if i > 0 {
					b.WriteByte(',')
				}
				write(s)
			}
			b.WriteByte(']')
		default:
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(v); err != nil {
				panic(fmt.Sprintf("install: render %T: %v", v, err))
			}
			b.Truncate(b.Len() - 1) // Encode's newline
		}
	}
	write(v)
	return b.Bytes()
}

// jsonText renders compact JSON either on one line or indented, every
// line after the first prefixed with indent.
func jsonText(compact []byte, multiline bool, indent, unit string) string {
	if !multiline {
		return string(compact)
	}
	var b bytes.Buffer
	if err := json.Indent(&b, compact, indent, unit); err != nil {
		panic(fmt.Sprintf("install: indent rendered JSON: %v", err))
	}
	return b.String()
}

// lineIndent returns the whitespace that starts the line holding offset,
// and whether only whitespace precedes offset on that line.
func lineIndent(src []byte, offset int) (string, bool) {
	start := bytes.LastIndexByte(src[:offset], '\n') + 1
	end := start
	for end < offset && (src[end] == ' ' || src[end] == '\t') {
		end++
	}
	return string(src[start:end]), end == offset
}

func splice(src []byte, from, to int, text string) []byte {
	out := make([]byte, 0, len(src)-(to-from)+len(text))
	out = append(out, src[:from]...)
	out = append(out, text...)
	return append(out, src[to:]...)
}

// indentUnit guesses the file's indentation from the top-level object's
// first member; two spaces when there is nothing to go by.
func indentUnit(src []byte, root *jnode) string {
	if len(root.members) > 0 {
		if ind, alone := lineIndent(src, root.members[0].keyStart); alone && ind != "" {
			return ind
		}
	}
	return "  "
}

func isBlank(src []byte) bool { return len(bytes.TrimSpace(src)) == 0 }

// errNotObject is a path through the document that meets a non-object.
var errNotObject = errors.New("is not a JSON object")

// jsonSet returns src with path[0]…path[n-1] set to the JSON value v,
// creating the objects along the path that are missing. A blank src is
// an empty object.
func jsonSet(src []byte, path []string, v any) ([]byte, error) {
	if isBlank(src) {
		src = []byte("{}\n")
	}
	root, err := parseJSON(src)
	if err != nil {
		return nil, err
	}
	if root.kind != '{' {
		return nil, fmt.Errorf("the top-level value %w", errNotObject)
	}
	unit := indentUnit(src, root)
	cur := root
	for i, key := range path {
		j, ok := cur.member(key)
		if !ok {
			// Build what is missing from the inside out.
			for k := len(path) - 1; k > i; k-- {
				v = obj{{path[k], v}}
			}
			return insertMember(src, cur, key, v, unit), nil
		}
		m := cur.members[j]
		if i == len(path)-1 {
			ind, alone := lineIndent(src, m.keyStart)
			return splice(src, m.val.start, m.val.end, jsonText(compactJSON(v), alone, ind, unit)), nil
		}
		if m.val.kind != '{' {
			return nil, fmt.Errorf("%q %w", strings.Join(path[:i+1], "."), errNotObject)
		}
		cur = m.val
	}
	return nil, errors.New("empty path")
}

// insertMember adds "key": v as the last member of object o, in the style
// of the members already there.
func insertMember(src []byte, o *jnode, key string, v any, unit string) []byte {
	name := string(compactJSON(key))
	if n := len(o.members); n > 0 {
		last := o.members[n-1]
		ind, alone := lineIndent(src, last.keyStart)
		if !alone {
			return splice(src, last.val.end, last.val.end, ", "+name+": "+string(compactJSON(v)))
		}
		return splice(src, last.val.end, last.val.end, ",\n"+ind+name+": "+jsonText(compactJSON(v), true, ind, unit))
	}
	outer, _ := lineIndent(src, o.start)
	inner := outer + unit
	member := inner + name + ": " + jsonText(compactJSON(v), true, inner, unit)
	if isBlank(src[o.start+1 : o.end-1]) {
		return splice(src, o.start, o.end, "{\n"+member+"\n"+outer+"}")
	}
	// Only comments inside: keep them after the new member.
	return splice(src, o.start+1, o.start+1, "\n"+member)
}

// jsonLookup follows path from the top-level object and returns the value
// there, or nil when some step is missing or not an object.
func jsonLookup(src []byte, path []string) (*jnode, error) {
	if isBlank(src) {
		return nil, nil
	}
	root, err := parseJSON(src)
	if err != nil {
		return nil, err
	}
	cur := root
	for _, key := range path {
		if cur.kind != '{' {
			return nil, nil
		}
		j, ok := cur.member(key)
		if !ok {
			return nil, nil
		}
		cur = cur.members[j].val
	}
	return cur, nil
}

// jsonDelete returns src without the member at path (the last element is
// the member's name), and whether it was there.
func jsonDelete(src []byte, path []string) ([]byte, bool, error) {
	o, err := jsonLookup(src, path[:len(path)-1])
	if err != nil || o == nil || o.kind != '{' {
		return src, false, err
	}
	i, ok := o.member(path[len(path)-1])
	if !ok {
		return src, false, nil
	}
	ms := o.members
	m := ms[i]
	onlySpaceAndComma := func(b []byte) bool { return len(bytes.Trim(b, " \t\r\n,")) == 0 }
	switch {
	case len(ms) == 1 && isBlank(src[o.start+1:m.keyStart]):
		if onlySpaceAndComma(src[m.val.end : o.end-1]) {
			return splice(src, o.start, o.end, "{}"), true, nil
		}
		// Comments follow: keep them, as insertMember found them.
		return splice(src, o.start+1, m.val.end, ""), true, nil
	case i > 0 && onlySpaceAndComma(src[ms[i-1].val.end:m.keyStart]):
		// Undo what insertMember did: from the previous value's end.
		return splice(src, ms[i-1].val.end, m.val.end, ""), true, nil
	case i+1 < len(ms):
		return splice(src, m.keyStart, ms[i+1].keyStart, ""), true, nil
	default:
		// The last member, with comments before it: cut the member and
		// its own line, leaving the comments and any trailing comma.
		from := m.keyStart
		if _, alone := lineIndent(src, from); alone {
			from = bytes.LastIndexByte(src[:from], '\n') + 1
		}
		to := m.val.end
		if to < len(src) && src[to] == ',' {
			to++
		}
		if from > 0 && src[from-1] == '\n' && bytes.HasPrefix(src[to:], []byte("\n")) {
			to++
		}
		return splice(src, from, to, ""), true, nil
	}
}

// jsonFormat is a JSON (or JSON with comments) file whose entries are
// container…/sharedos and container…/sharedos-NAME.
type jsonFormat struct {
	container    []string
	entry        func(Entry) obj
	commandArray bool // the command is the first element of "command" (opencode)
}

func (f jsonFormat) path(name string) []string {
	return append(append([]string{}, f.container...), name)
}

func (f jsonFormat) merge(src []byte, name string, e Entry) ([]byte, error) {
	return jsonSet(src, f.path(name), f.entry(e))
}

func (f jsonFormat) remove(src []byte, name string) ([]byte, error) {
	out, _, err := jsonDelete(src, f.path(name))
	return out, err
}

func (f jsonFormat) names(src []byte) ([]string, error) {
	n, err := jsonLookup(src, f.container)
	if err != nil || n == nil || n.kind != '{' {
		return nil, err
	}
	var out []string
	for _, m := range n.members {
		if isOurs(m.key) {
			out = append(out, m.key)
		}
	}
	return out, nil
}

func (f jsonFormat) inspect(src []byte, name string) (bool, Entry, error) {
	n, err := jsonLookup(src, f.path(name))
	if err != nil || n == nil {
		return false, Entry{}, err
	}
	var e Entry
	if n.kind != '{' {
		return true, e, nil
	}
	// Values of the wrong type read as absent: doctor reports the entry
	// as one without a command, which is what the harness would make of it.
	value := func(key string, v any) {
		if j, ok := n.member(key); ok {
			_ = json.Unmarshal(src[n.members[j].val.start:n.members[j].val.end], v)
		}
	}
	if f.commandArray {
		var argv []string
		value("command", &argv)
		if len(argv) > 0 {
			e.Command, e.Args = argv[0], argv[1:]
		}
	} else {
		value("command", &e.Command)
		value("args", &e.Args)
	}
	return true, e, nil
}
