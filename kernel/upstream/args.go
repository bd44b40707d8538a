package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sharedos/sharedos-mcp/internal/jsonlex"
	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/policy"
)

// Forward is the arguments of one call as the upstream receives them:
// the bytes Tool.Resolve produced from what it decided on. Only Resolve
// makes one, so Manager.Call cannot forward arguments nobody resolved.
type Forward struct {
	raw json.RawMessage
}

// Bytes returns the arguments to send, a JSON object.
func (f Forward) Bytes() json.RawMessage { return f.raw }

// maxNameShown bounds a member name quoted in a message.
const maxNameShown = 64

// maxWhereShown bounds the location of a member quoted in a message.
const maxWhereShown = 200

// Resolve reads a call's arguments once and returns the resource the call
// acts on, the one the kernel must authorize, and the arguments to
// forward, produced from that same reading: every string as it decodes
// (invalid UTF-8 and lone surrogates as U+FFFD), each placeholder's
// argument in the form that names its resource (policy.Filled.Forward: a
// path cleaned, or resolved on this host with host_paths; a URL
// normalized), whitespace
// dropped, members in the order given. Arguments whose object, at any
// depth, repeats a member name, or holds two names equal under Unicode
// simple case folding ("user" and "uſer", "k" and "K"), are refused: a
// decoder that matches names case-insensitively (Go's encoding/json) or
// keeps the last of two would read another value than the one decided
// on. An error wraps ErrInvalidArguments and says, for the model, what
// is wrong.
func (t *Tool) Resolve(arguments json.RawMessage) (policy.Resource, Forward, error) {
	a, err := readArguments(arguments)
	if err != nil {
		return policy.Resource{}, Forward{}, fmt.Errorf("%w: %w", ErrInvalidArguments, err)
	}
	if len(t.Resource.Arguments()) == 0 {
		return policy.Resource{Namespace: t.Upstream, Path: t.Resource.String()}, Forward{raw: a.out}, nil
	}
	values := make(map[string]json.RawMessage, len(a.members))
	for _, m := range a.members {
		values[m.name] = a.out[m.start:m.end]
	}
	f, err := t.Resource.Fill(values, t.host)
	if err != nil {
		return policy.Resource{}, Forward{}, fmt.Errorf("%w: %w", ErrInvalidArguments, err)
	}
	return policy.Resource{Namespace: t.Upstream, Path: f.Path}, Forward{raw: a.with(f.Forward)}, nil
}

// arguments is a call's arguments object as read once: out is its
// encoding to forward, and members locate each top-level member's value
// in out.
type arguments struct {
	out     []byte
	members []member
}

type member struct {
	name       string
	start, end int // the value's bytes in out
}

// with returns the encoding with the values of the named top-level
// members replaced.
func (a *arguments) with(replace map[string]json.RawMessage) []byte {
	out := make([]byte, 0, len(a.out)+64)
	last := 0
	for _, m := range a.members {
		v, ok := replace[m.name]
		if !ok {
			continue
		}
		out = append(out, a.out[last:m.start]...)
		out = append(out, v...)
		last = m.end
	}
	return append(out, a.out[last:]...)
}

// argReader reads arguments with the module's lexer and writes them out
// as they are forwarded.
type argReader struct {
	lx   jsonlex.Lexer
	out  []byte
	path []string // the members and elements the reader is inside, for messages
	buf  []byte   // scratch for a decoded name
}

// readArguments reads an arguments object: absent or null is {}.
func readArguments(raw []byte) (*arguments, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return &arguments{out: []byte("{}")}, nil
	}
	if raw[0] != '{' {
		return nil, errors.New("arguments must be a JSON object")
	}
	r := &argReader{}
	r.lx.Reset(raw, jsonlex.Options{})
	r.out = make([]byte, 0, len(raw))
	a := &arguments{}
	if err := r.object(&a.members); err != nil {
		return nil, err
	}
	if err := r.lx.End(); err != nil {
		return nil, errSyntax
	}
	a.out = r.out
	return a, nil
}

// value reads the value at the lexer's position and writes it out.
func (r *argReader) value() error {
	switch c := r.lx.Peek(); {
	case c == '{':
		return r.object(nil)
	case c == '[':
		return r.array()
	case c == '"':
		raw, escaped, err := r.lx.String()
		if err != nil {
			return errSyntax
		}
		r.out = appendDecoded(r.out, raw, escaped)
		return nil
	case c == '-' || '0' <= c && c <= '9':
		start := r.lx.Pos()
		if _, err := r.lx.Number(); err != nil {
			return errSyntax
		}
		r.out = append(r.out, r.lx.Src()[start:r.lx.Pos()]...)
		return nil
	}
	start := r.lx.Pos()
	if err := r.lx.Literal(); err != nil {
		return errSyntax
	}
	r.out = append(r.out, r.lx.Src()[start:r.lx.Pos()]...)
	return nil
}

var errSyntax = errors.New("arguments are not valid JSON")

// object reads an object, refusing two member names that repeat or fold
// to one another; with top set, it records each member's value.
func (r *argReader) object(top *[]member) error {
	more, err := r.lx.Open()
	if err != nil {
		return errSyntax
	}
	r.out = append(r.out, '{')
	var seen map[string]string // fold key → the name as given
	first := true
	for more {
		key, _, err := r.lx.Key()
		if err != nil {
			return errSyntax
		}
		// As encoding/json decodes it: escapes decoded, what is not UTF-8
		// (a lone surrogate too) as U+FFFD.
		r.buf = jsonlex.AppendUnescaped(r.buf[:0], key[1:len(key)-1], jsonlex.ReplaceSurrogates)
		name := string(r.buf)
		if seen == nil {
			seen = map[string]string{}
		}
		fk := foldKey(name)
		if other, dup := seen[fk]; dup {
			return r.clash(other, name)
		}
		seen[fk] = name
		if !first {
			r.out = append(r.out, ',')
		}
		first = false
		r.out = append(jsonrpc.AppendString(r.out, name), ':')
		start := len(r.out)
		r.path = append(r.path, name)
		if err := r.value(); err != nil {
			return err
		}
		r.path = r.path[:len(r.path)-1]
		if top != nil {
			*top = append(*top, member{name: name, start: start, end: len(r.out)})
		}
		if more, err = r.lx.Next('}'); err != nil {
			return errSyntax
		}
	}
	r.out = append(r.out, '}')
	return nil
}

func (r *argReader) array() error {
	more, err := r.lx.Open()
	if err != nil {
		return errSyntax
	}
	r.out = append(r.out, '[')
	for i := 0; more; i++ {
		if i > 0 {
			r.out = append(r.out, ',')
		}
		r.path = append(r.path, strconv.Itoa(i))
		if err := r.value(); err != nil {
			return err
		}
		r.path = r.path[:len(r.path)-1]
		if more, err = r.lx.Next(']'); err != nil {
			return errSyntax
		}
	}
	r.out = append(r.out, ']')
	return nil
}

// clash is the error for two names of one object that a decoder may
// take for one: both are quoted, bounded, with where the object is.
func (r *argReader) clash(first, second string) error {
	where := "the arguments"
	if len(r.path) > 0 {
		where = "arguments/" + escaped(strings.Join(r.path, "/"), maxWhereShown)
	}
	if first == second {
		return fmt.Errorf("member %s appears twice in %s; give each argument once", shownName(first, maxNameShown), where)
	}
	return fmt.Errorf("members %s and %s of %s are one name to decoders that ignore case (Unicode case folding); give each argument once, under the name the tool's schema uses",
		shownName(first, maxNameShown), shownName(second, maxNameShown), where)
}

// shownName quotes s for a message, escaped as escaped does it.
func shownName(s string, n int) string {
	return `"` + escaped(s, n) + `"`
}

// escaped is s for a message: cut at n bytes on a character boundary
// and marked, with quotes, backslashes, control and format characters
// escaped as in a Go string.
func escaped(s string, n int) string {
	mark := ""
	if len(s) > n {
		i := n
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s, mark = s[:i], "…"
	}
	q := strconv.Quote(s)
	return q[1:len(q)-1] + mark
}

// foldKey returns a key that two names share exactly when
// strings.EqualFold holds for them: each character replaced by the
// least of its Unicode simple case folding orbit (s, S and ſ all become
// S). One key per name makes finding a clash linear in the members.
func foldKey(s string) string {
	plain := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= utf8.RuneSelf || 'a' <= c && c <= 'z' {
			plain = false
			break
		}
	}
	if plain {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, c := range s {
		b.WriteRune(leastFold(c))
	}
	return b.String()
}

// leastFold is the least rune of c's simple case folding orbit.
func leastFold(c rune) rune {
	if c < utf8.RuneSelf {
		if 'a' <= c && c <= 'z' {
			return c - 'a' + 'A'
		}
		return c
	}
	least := c
	for f := unicode.SimpleFold(c); f != c; f = unicode.SimpleFold(f) {
		least = min(least, f)
	}
	return least
}

// appendDecoded appends a string as it is forwarded: decoded as
// encoding/json decodes it, then written as encoding/json writes it.
func appendDecoded(dst, raw []byte, escaped bool) []byte {
	body := raw[1 : len(raw)-1]
	if escaped {
		body = jsonlex.AppendUnescaped(nil, body, jsonlex.ReplaceSurrogates)
	}
	return jsonrpc.AppendString(dst, body) // bytes that are not UTF-8 become \ufffd
}
