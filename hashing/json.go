package hashing

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/sharedos/sharedos-mcp/internal/jsonlex"
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

// ecmaScript is how the canonicaliser lexes (docs/adr/0007): strings
// must be UTF-8, since replacing a byte that is not, as the reference's
// text decoder would, gives distinct catalogues one catalogHash; nesting
// stops at maxDepth.
var ecmaScript = jsonlex.Options{MaxDepth: maxDepth, UTF8: jsonlex.RequireUTF8}

type canonicalizer struct {
	lx        jsonlex.Lexer
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
	c.lx.Reset(nil, ecmaScript)
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

// CanonicalSHA256 is the SHA-256 of CanonicalJSON(raw), without keeping
// the canonical form.
func CanonicalSHA256(raw []byte) ([sha256.Size]byte, error) {
	c := getCanonicalizer()
	defer putCanonicalizer(c)
	c.out = c.out[:0]
	if err := c.canonicalize(raw, false); err != nil {
		return [sha256.Size]byte{}, err
	}
	return sha256.Sum256(c.out), nil
}

// canonicalize appends the canonical form of the JSON text src to c.out.
func (c *canonicalizer) canonicalize(src []byte, dropProto bool) error {
	c.lx.Reset(src, ecmaScript)
	c.dropProto = dropProto
	c.keys, c.members = c.keys[:0], c.members[:0]
	c.lx.Space()
	if err := c.value(); err != nil {
		return err
	}
	return c.lx.End()
}

// SyntaxError is a JSON text that cannot be read.
type SyntaxError = jsonlex.SyntaxError

// value appends the canonical form of the value at the lexer's position
// to c.out.
func (c *canonicalizer) value() error {
	l := &c.lx
	switch b := l.Peek(); {
	case b == '{':
		return c.object()
	case b == '[':
		return c.array()
	case b == '"':
		return c.stringValue()
	case b == '-' || b >= '0' && b <= '9':
		return c.number()
	}
	start := l.Pos()
	if err := l.Literal(); err != nil {
		return err
	}
	c.out = append(c.out, l.Src()[start:l.Pos()]...)
	return nil
}

func (c *canonicalizer) array() error {
	l := &c.lx
	more, err := l.Open()
	if err != nil {
		return err
	}
	c.out = append(c.out, '[')
	for more {
		if err := c.value(); err != nil {
			return err
		}
		if more, err = l.Next(']'); err != nil {
			return err
		}
		if more {
			c.out = append(c.out, ',')
		}
	}
	c.out = append(c.out, ']')
	return nil
}

func (c *canonicalizer) object() error {
	l := &c.lx
	more, err := l.Open()
	if err != nil {
		return err
	}
	c.out = append(c.out, '{')
	objStart := len(c.out)
	keysBase, membersBase := len(c.keys), len(c.members)
	for seq := 0; more; seq++ {
		quoted, escaped, err := l.Key()
		if err != nil {
			return err
		}
		k0 := len(c.keys)
		if escaped {
			c.keys = jsonlex.AppendUnescaped(c.keys, quoted[1:len(quoted)-1], jsonlex.KeepSurrogates)
		} else {
			c.keys = append(c.keys, quoted[1:len(quoted)-1]...)
		}
		key := c.keys[k0:]
		mark := len(c.out)
		if len(c.members) > membersBase {
			c.out = append(c.out, ',')
		}
		start := len(c.out)
		if escaped {
			c.out = appendQuoted(c.out, key)
		} else {
			c.out = append(c.out, quoted...) // canonical as is, see stringValue
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
		if more, err = l.Next('}'); err != nil {
			return err
		}
	}
	c.arrange(objStart, c.members[membersBase:])
	c.out = append(c.out, '}')
	c.keys, c.members = c.keys[:keysBase], c.members[:membersBase]
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

// stringValue appends the canonical form of the string at the lexer's
// position.
func (c *canonicalizer) stringValue() error {
	raw, escaped, err := c.lx.String()
	if err != nil {
		return err
	}
	if !escaped {
		// Nothing JSON.stringify escapes can appear unescaped in JSON
		// text, so the text is already canonical.
		c.out = append(c.out, raw...)
	} else {
		c.str = jsonlex.AppendUnescaped(c.str[:0], raw[1:len(raw)-1], jsonlex.KeepSurrogates)
		c.out = appendQuoted(c.out, c.str)
	}
	return nil
}

func isASCII(s []byte) bool {
	for _, b := range s {
		if b >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// number appends the canonical form of the number at the lexer's
// position.
func (c *canonicalizer) number() error {
	l := &c.lx
	start := l.Pos()
	integer, err := l.Number()
	if err != nil {
		return err
	}
	tok := l.Src()[start:l.Pos()]
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
		return l.ErrorAt(start, "number %s does not fit a double", tok)
	}
	c.out = appendNumber(c.out, f)
	return nil
}
