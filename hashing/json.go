package hashing

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// The canonicaliser reads JSON text and writes its canonical form in one
// pass, without building a tree: each object's members are written in the
// order read, and once the object is closed their byte spans are
// rearranged into collation order. Nothing is ever held in a map, so the
// order of keys that tie under collation stays the order JSON.parse would
// have given them.
//
// Parsing follows ECMAScript JSON.parse (RFC 8259, strictly: no comments,
// no trailing commas, no leading zeros), except that invalid UTF-8 is
// refused rather than replaced, and numbers that overflow a double are
// refused rather than turned into Infinity (which JSON.stringify would
// write as null).

// maxDepth bounds nesting so hostile input cannot exhaust the stack.
// Real schemas stay far below it.
const maxDepth = 512

type canonicalizer struct {
	src       []byte
	pos       int
	depth     int
	dropProto bool     // drop own "__proto__" members, as the projection does
	out       []byte   // canonical output so far
	keys      []byte   // decoded keys of the open objects, innermost last
	members   []member // members of the open objects, innermost last
	scratch   []byte   // one object's members while they are rearranged
	str       []byte   // one decoded string value
	fields    []byte   // the decoded string fields of one definition
	order     []entry  // one object's members in collation order
	sortKeys  []string // sort keys of one object with non-ASCII keys
}

// member is one member of an open object.
type member struct {
	rank       uint64 // position JSON.parse would give the key (see jsRank)
	k0, k1     int    // decoded key: keys[k0:k1]
	start, end int    // `"key":value` in out; start < 0 once dropped
}

// entry is what arrange sorts in place of a member: small, so the sort
// moves little, and holding the asciiPrefix of the key, which decides
// most comparisons without a look at the member.
type entry struct {
	prefix uint64
	i      int // index of the member in the object
}

var canonicalizers = sync.Pool{New: func() any { return new(canonicalizer) }}

func getCanonicalizer() *canonicalizer { return canonicalizers.Get().(*canonicalizer) }

func putCanonicalizer(c *canonicalizer) {
	// Keep the buffers only when they are of ordinary size.
	if cap(c.out) > 1<<20 || cap(c.scratch) > 1<<20 {
		return
	}
	c.src = nil
	canonicalizers.Put(c)
}

// CanonicalJSON returns the canonical form of the JSON text raw: no
// whitespace, object keys in CLDR root collation order, strings and
// numbers written as ECMAScript JSON.stringify writes them. Duplicate keys
// keep their first position and last value, as JSON.parse does. It fails
// on invalid JSON, invalid UTF-8 and numbers too large for a double.
func CanonicalJSON(raw []byte) ([]byte, error) {
	c := getCanonicalizer()
	defer putCanonicalizer(c)
	c.out = c.out[:0]
	if err := c.canonicalize(raw, false); err != nil {
		return nil, err
	}
	return bytes.Clone(c.out), nil
}

// canonicalize appends the canonical form of the JSON text src to c.out.
func (c *canonicalizer) canonicalize(src []byte, dropProto bool) error {
	c.src, c.pos, c.depth, c.dropProto = src, 0, 0, dropProto
	c.keys, c.members = c.keys[:0], c.members[:0]
	c.skipSpace()
	if err := c.value(); err != nil {
		return err
	}
	c.skipSpace()
	if c.pos < len(c.src) {
		return c.errorf("unexpected %s after the value", c.describe())
	}
	return nil
}

// SyntaxError is a JSON text that cannot be read.
type SyntaxError struct {
	Offset int // byte offset of the problem
	msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at offset %d: %s", e.Offset, e.msg)
}

func (c *canonicalizer) errorf(format string, args ...any) error {
	return &SyntaxError{Offset: c.pos, msg: fmt.Sprintf(format, args...)}
}

// describe names the byte at c.pos for an error message.
func (c *canonicalizer) describe() string {
	if c.pos >= len(c.src) {
		return "end of input"
	}
	return strconv.QuoteRune(rune(c.src[c.pos]))
}

func (c *canonicalizer) skipSpace() {
	for c.pos < len(c.src) {
		switch c.src[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

// expect consumes b, after optional whitespace.
func (c *canonicalizer) expect(b byte, what string) error {
	c.skipSpace()
	if c.pos < len(c.src) && c.src[c.pos] == b {
		c.pos++
		return nil
	}
	return c.errorf("want %s, have %s", what, c.describe())
}

// value appends the canonical form of the value at c.pos (no leading
// whitespace) to c.out.
func (c *canonicalizer) value() error {
	if c.pos >= len(c.src) {
		return c.errorf("want a value, have end of input")
	}
	switch b := c.src[c.pos]; {
	case b == '{':
		return c.object()
	case b == '[':
		return c.array()
	case b == '"':
		return c.stringValue()
	case b == '-' || b >= '0' && b <= '9':
		return c.number()
	case b == 't':
		return c.literal("true")
	case b == 'f':
		return c.literal("false")
	case b == 'n':
		return c.literal("null")
	}
	return c.errorf("want a value, have %s", c.describe())
}

func (c *canonicalizer) literal(lit string) error {
	if !bytes.HasPrefix(c.src[c.pos:], []byte(lit)) {
		return c.errorf("want a value, have %s", c.describe())
	}
	c.pos += len(lit)
	c.out = append(c.out, lit...)
	return nil
}

func (c *canonicalizer) enter() error {
	c.depth++
	if c.depth > maxDepth {
		return c.errorf("nested deeper than %d", maxDepth)
	}
	return nil
}

func (c *canonicalizer) array() error {
	if err := c.enter(); err != nil {
		return err
	}
	c.pos++
	c.out = append(c.out, '[')
	c.skipSpace()
	if c.pos < len(c.src) && c.src[c.pos] == ']' {
		c.pos++
		c.out = append(c.out, ']')
		c.depth--
		return nil
	}
	for {
		c.skipSpace()
		if err := c.value(); err != nil {
			return err
		}
		c.skipSpace()
		if c.pos < len(c.src) && c.src[c.pos] == ',' {
			c.pos++
			c.out = append(c.out, ',')
			continue
		}
		if err := c.expect(']', "',' or ']'"); err != nil {
			return err
		}
		c.out = append(c.out, ']')
		c.depth--
		return nil
	}
}

func (c *canonicalizer) object() error {
	if err := c.enter(); err != nil {
		return err
	}
	c.pos++
	c.out = append(c.out, '{')
	objStart := len(c.out)
	keysBase, membersBase := len(c.keys), len(c.members)
	c.skipSpace()
	if c.pos < len(c.src) && c.src[c.pos] == '}' {
		c.pos++
		c.out = append(c.out, '}')
		c.depth--
		return nil
	}
	for seq := 0; ; seq++ {
		c.skipSpace()
		if c.pos >= len(c.src) || c.src[c.pos] != '"' {
			return c.errorf("want a string key, have %s", c.describe())
		}
		end, escaped, err := c.scanString()
		if err != nil {
			return err
		}
		k0 := len(c.keys)
		if escaped {
			c.keys = appendUnescaped(c.keys, c.src[c.pos+1:end])
		} else {
			c.keys = append(c.keys, c.src[c.pos+1:end]...)
		}
		c.pos = end + 1
		key := c.keys[k0:]
		if err := c.expect(':', "':'"); err != nil {
			return err
		}
		c.skipSpace()
		mark := len(c.out)
		if len(c.members) > membersBase {
			c.out = append(c.out, ',')
		}
		start := len(c.out)
		if escaped {
			c.out = appendQuoted(c.out, key)
		} else {
			c.out = append(c.out, c.src[end-len(key)-1:end+1]...) // canonical as is, see stringValue
		}
		c.out = append(c.out, ':')
		if err := c.value(); err != nil {
			return err
		}
		if c.dropProto && string(key) == "__proto__" {
			c.out = c.out[:mark]
			c.keys = c.keys[:k0]
		} else {
			m := member{rank: jsRank(key, seq), k0: k0, k1: len(c.keys), start: start, end: len(c.out)}
			c.members = append(c.members, m)
		}
		c.skipSpace()
		if c.pos < len(c.src) && c.src[c.pos] == ',' {
			c.pos++
			continue
		}
		if err := c.expect('}', "',' or '}'"); err != nil {
			return err
		}
		break
	}
	c.arrange(objStart, c.members[membersBase:])
	c.out = append(c.out, '}')
	c.keys, c.members = c.keys[:keysBase], c.members[:membersBase]
	c.depth--
	return nil
}

// arrange rewrites the members written since objStart in collation order,
// dropping all but one of each duplicated key.
func (c *canonicalizer) arrange(objStart int, ms []member) {
	if len(ms) < 2 {
		return
	}
	// The keys of the object's members are all that follows its first key
	// in c.keys: those of closed inner objects are gone.
	allASCII := isASCII(c.keys[ms[0].k0:])
	c.order = c.order[:0]
	if allASCII {
		for i := range ms {
			c.order = append(c.order, entry{asciiPrefix(c.keys[ms[i].k0:ms[i].k1]), i})
		}
	} else {
		c.sortKeys = c.sortKeys[:0]
		for i := range ms {
			c.sortKeys = append(c.sortKeys, sortKey(c.keys[ms[i].k0:ms[i].k1]))
			c.order = append(c.order, entry{0, i})
		}
	}
	collate := func(a, b entry) int {
		if a.prefix != b.prefix {
			return cmp.Compare(a.prefix, b.prefix)
		}
		if allASCII {
			return asciiCompare(c.keys[ms[a.i].k0:ms[a.i].k1], c.keys[ms[b.i].k0:ms[b.i].k1])
		}
		return strings.Compare(c.sortKeys[a.i], c.sortKeys[b.i])
	}
	order := c.order
	slices.SortFunc(order, func(a, b entry) int {
		if r := collate(a, b); r != 0 {
			return r
		}
		if ra, rb := ms[a.i].rank, ms[b.i].rank; ra != rb {
			return cmp.Compare(ra, rb)
		}
		return a.i - b.i
	})
	rebuild := false
	for k := 1; k < len(order); k++ {
		if order[k].i < order[k-1].i {
			rebuild = true
		}
		if collate(order[k], order[k-1]) != 0 {
			continue
		}
		// A collation tie: the only place a duplicate can hide, since equal
		// keys collate equal. Ties sort by JSON.parse position, and a
		// duplicate's position is its first occurrence, its value the last.
		m := &ms[order[k].i]
		key := c.keys[m.k0:m.k1]
		for j := k - 1; j >= 0 && collate(order[j], order[k]) == 0; j-- {
			if d := &ms[order[j].i]; d.start >= 0 && bytes.Equal(c.keys[d.k0:d.k1], key) {
				d.start, d.end = m.start, m.end
				m.start = -1
				rebuild = true
				break
			}
		}
	}
	if !rebuild {
		return
	}
	c.scratch = append(c.scratch[:0], c.out[objStart:]...)
	c.out = c.out[:objStart]
	first := true
	for _, e := range order {
		m := &ms[e.i]
		if m.start < 0 {
			continue
		}
		if !first {
			c.out = append(c.out, ',')
		}
		first = false
		c.out = append(c.out, c.scratch[m.start-objStart:m.end-objStart]...)
	}
}

// jsRank is where JSON.parse puts a key among an object's own properties:
// array indices (canonical decimal integers below 2³²−1) first, in numeric
// order, then every other key in the order it first appeared. The
// reference sorts that list with a stable sort, so rank breaks ties.
func jsRank(key []byte, seq int) uint64 {
	if len(key) > 0 && len(key) <= 10 && (key[0] != '0' || len(key) == 1) {
		var n uint64
		for _, b := range key {
			if b < '0' || b > '9' {
				return 1<<32 + uint64(seq)
			}
			n = n*10 + uint64(b-'0')
		}
		if n < 1<<32-1 {
			return n
		}
	}
	return 1<<32 + uint64(seq)
}

// stringValue appends the canonical form of the string at c.pos.
func (c *canonicalizer) stringValue() error {
	end, escaped, err := c.scanString()
	if err != nil {
		return err
	}
	if !escaped {
		// Nothing JSON.stringify escapes can appear unescaped in JSON
		// text, so the text is already canonical.
		c.out = append(c.out, c.src[c.pos:end+1]...)
	} else {
		c.str = appendUnescaped(c.str[:0], c.src[c.pos+1:end])
		c.out = appendQuoted(c.out, c.str)
	}
	c.pos = end + 1
	return nil
}

// scanString checks the string whose opening quote is at c.pos and returns
// the offset of its closing quote and whether it holds escapes.
func (c *canonicalizer) scanString() (end int, escaped bool, err error) {
	src := c.src
	nonASCII := false
	i := c.pos + 1
	for ; i < len(src); i++ {
		i = skipPlain(src, i)
		for i < len(src) && plain[src[i]] {
			i++
		}
		if i == len(src) {
			break
		}
		switch b := src[i]; {
		case b == '"':
			if nonASCII && !utf8.Valid(src[c.pos+1:i]) {
				return 0, false, c.errorf("invalid UTF-8 in a string")
			}
			return i, escaped, nil
		case b == '\\':
			escaped = true
			i++
			if i >= len(src) {
				break
			}
			switch src[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(src) || !isHex(src[i+1]) || !isHex(src[i+2]) || !isHex(src[i+3]) || !isHex(src[i+4]) {
					c.pos = i - 1
					return 0, false, c.errorf("invalid \\u escape")
				}
				i += 4
			default:
				c.pos = i - 1
				return 0, false, c.errorf("invalid escape \\%c", src[i])
			}
		case b < 0x20:
			c.pos = i
			return 0, false, c.errorf("unescaped control character %U in a string", b)
		case b >= utf8.RuneSelf:
			nonASCII = true
		}
	}
	c.pos = len(src)
	return 0, false, c.errorf("unterminated string")
}

// plain marks the bytes a string can hold that need no second look:
// printable ASCII other than '"' and '\\'.
var plain = func() (t [256]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

func isASCII(s []byte) bool {
	for _, b := range s {
		if b >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func isHex(b byte) bool {
	return b >= '0' && b <= '9' || b >= 'a' && b <= 'f' || b >= 'A' && b <= 'F'
}

func hexVal(b []byte) rune {
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

// appendUnescaped appends the decoded contents of a string that
// scanString accepted. A \u surrogate pair becomes one code point; a lone
// surrogate stays one (WTF-8), as it does in a JavaScript string.
func appendUnescaped(dst, s []byte) []byte {
	for i := 0; i < len(s); {
		b := s[i]
		if b != '\\' {
			j := i + 1
			for j < len(s) && s[j] != '\\' {
				j++
			}
			dst = append(dst, s[i:j]...)
			i = j
			continue
		}
		switch e := s[i+1]; e {
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
			r := hexVal(s[i+2:])
			i += 6
			if r >= 0xD800 && r < 0xDC00 && i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
				if lo := hexVal(s[i+2:]); lo >= 0xDC00 && lo <= 0xDFFF {
					r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
					i += 6
				}
			}
			dst = appendWTF8(dst, r)
			continue
		default: // '"', '\\', '/'
			dst = append(dst, e)
		}
		i += 2
	}
	return dst
}

// number appends the canonical form of the number at c.pos.
func (c *canonicalizer) number() error {
	start := c.pos
	end, integer, err := c.scanNumber()
	if err != nil {
		return err
	}
	c.pos = end
	tok := c.src[start:end]
	// An integer of at most 15 digits is exactly a double and is already
	// written the way Number::toString writes it, except for -0.
	if integer && len(tok) <= 15 {
		if len(tok) == 2 && tok[0] == '-' && tok[1] == '0' {
			c.out = append(c.out, '0')
		} else {
			c.out = append(c.out, tok...)
		}
		return nil
	}
	f, err := strconv.ParseFloat(string(tok), 64)
	if err != nil || math.IsInf(f, 0) {
		c.pos = start
		return c.errorf("number %s does not fit a double", tok)
	}
	c.out = appendNumber(c.out, f)
	return nil
}

// scanNumber checks the number at c.pos against the JSON grammar and
// returns where it ends and whether it has neither fraction nor exponent.
func (c *canonicalizer) scanNumber() (end int, integer bool, err error) {
	src := c.src
	i := c.pos
	if src[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(src) && src[i] >= '0' && src[i] <= '9' {
			i++
			n++
		}
		return n
	}
	fail := func(msg string) (int, bool, error) {
		c.pos = i
		return 0, false, c.errorf("want a digit%s, have %s", msg, c.describe())
	}
	switch {
	case i < len(src) && src[i] == '0':
		i++
	case digits() == 0:
		return fail("")
	}
	integer = true
	if i < len(src) && src[i] == '.' {
		i++
		integer = false
		if digits() == 0 {
			return fail(" after '.'")
		}
	}
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		i++
		integer = false
		if i < len(src) && (src[i] == '+' || src[i] == '-') {
			i++
		}
		if digits() == 0 {
			return fail(" in the exponent")
		}
	}
	return i, integer, nil
}

// skip checks the value at c.pos (no leading whitespace) and moves past
// it without writing anything. Unlike value it accepts any number the
// grammar allows: JSON.parse does, and fields the projection never reads
// must not make a definition unreadable.
func (c *canonicalizer) skip() error {
	if c.pos >= len(c.src) {
		return c.errorf("want a value, have end of input")
	}
	switch b := c.src[c.pos]; {
	case b == '{' || b == '[':
		closing, want := byte('}'), "',' or '}'"
		if b == '[' {
			closing, want = ']', "',' or ']'"
		}
		if err := c.enter(); err != nil {
			return err
		}
		c.pos++
		c.skipSpace()
		if c.pos < len(c.src) && c.src[c.pos] == closing {
			c.pos++
			c.depth--
			return nil
		}
		for {
			c.skipSpace()
			if b == '{' {
				if c.pos >= len(c.src) || c.src[c.pos] != '"' {
					return c.errorf("want a string key, have %s", c.describe())
				}
				if err := c.skip(); err != nil {
					return err
				}
				if err := c.expect(':', "':'"); err != nil {
					return err
				}
				c.skipSpace()
			}
			if err := c.skip(); err != nil {
				return err
			}
			c.skipSpace()
			if c.pos < len(c.src) && c.src[c.pos] == ',' {
				c.pos++
				continue
			}
			if err := c.expect(closing, want); err != nil {
				return err
			}
			c.depth--
			return nil
		}
	case b == '"':
		end, _, err := c.scanString()
		if err != nil {
			return err
		}
		c.pos = end + 1
		return nil
	case b == '-' || b >= '0' && b <= '9':
		end, _, err := c.scanNumber()
		if err != nil {
			return err
		}
		c.pos = end
		return nil
	}
	mark := len(c.out)
	err := c.value() // a literal, or an error
	c.out = c.out[:mark]
	return err
}
