package hashing

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func FuzzCanonicalJSON(f *testing.F) {
	for _, v := range loadVectors(f) {
		for _, raw := range v.Catalogue {
			f.Add([]byte(raw))
		}
		f.Add([]byte(v.ExpectedPublished))
		f.Add([]byte(v.ExpectedCanonical))
	}
	f.Add([]byte(`{"__proto__":1,"a":{"b":2,"a":[1e21,-0,"\ud800"]},"a":3}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := CanonicalJSON(in)
		// What json.Valid accepts, the canonicaliser reads, unless it is
		// not UTF-8, nests too deep or holds a number no double can hold.
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("CanonicalJSON(%q): %v, not a *SyntaxError", in, err)
			}
			if json.Valid(in) && utf8.Valid(in) && !strings.Contains(se.Msg, "nested deeper than") && !strings.Contains(se.Msg, "does not fit a double") {
				t.Fatalf("CanonicalJSON(%q): %v, json.Valid takes it", in, err)
			}
			return
		}
		if !json.Valid(in) {
			t.Fatalf("CanonicalJSON(%q) read a text json.Valid refuses", in)
		}
		if !json.Valid(out) {
			t.Fatalf("CanonicalJSON(%q) = %q, not valid JSON", in, out)
		}
		again, err := CanonicalJSON(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent:\n once: %q\ntwice: %q, %v", out, again, err)
		}
		// Key order in the input must not matter, except between keys that
		// tie under collation: those keep the order JSON.parse gives them.
		if reversed, ok := reverseKeys(t, out); ok {
			if got, err := CanonicalJSON(reversed); err != nil || !bytes.Equal(got, out) {
				t.Fatalf("key order changed the canonical form:\n   input: %q\nreversed: %q\n     got: %q, %v\n    want: %q", in, reversed, got, err, out)
			}
		}
	})
}

// reverseKeys rewrites the JSON text in with every object's members in
// reverse order. It reports false when some object has keys that tie
// under collation, since reordering those is allowed to change the result.
func reverseKeys(t *testing.T, in []byte) ([]byte, bool) {
	c := new(canonicalizer)
	c.lx.Reset(in, ecmaScript)
	c.lx.Space()
	switch c.lx.Peek() {
	case '{':
		type kv struct{ key, value []byte }
		var members []kv
		seen := map[string]bool{}
		ok := true
		err := c.eachMember(func(key []byte) error {
			value, err := c.rawField()
			if err != nil {
				return err
			}
			sk := sortKey(key)
			if seen[sk] {
				ok = false
			}
			seen[sk] = true
			rv, rok := reverseKeys(t, value)
			ok = ok && rok
			members = append(members, kv{bytes.Clone(key), rv})
			return nil
		})
		if err != nil {
			t.Fatalf("reverseKeys(%q): %v", in, err)
		}
		out := []byte{'{'}
		for i := len(members) - 1; i >= 0; i-- {
			out = appendQuoted(out, members[i].key)
			out = append(out, ':')
			out = append(out, members[i].value...)
			if i > 0 {
				out = append(out, ',')
			}
		}
		return append(out, '}'), ok
	case '[':
		out := []byte{'['}
		ok := true
		more, err := c.lx.Open()
		for err == nil && more {
			var value []byte
			if value, err = c.rawField(); err != nil {
				break
			}
			rv, rok := reverseKeys(t, value)
			ok = ok && rok
			out = append(out, rv...)
			if more, err = c.lx.Next(']'); more {
				out = append(out, ',')
			}
		}
		if err != nil {
			t.Fatalf("reverseKeys(%q): %v", in, err)
		}
		return append(out, ']'), ok
	}
	return in, true
}
