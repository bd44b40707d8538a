package jsonrpc

import (
	"fmt"
	"testing"
)

// FuzzEachValidMember: on any text the validating scanner accepts as an
// object, EachValidMember finds the same members, and on any other text it
// returns without panicking.
func FuzzEachValidMember(f *testing.F) {
	for _, s := range []string{
		`{}`, ` { } `, `{"a":1}`, `{"a":"x\"y","b":[1,{"c":"]}"}],"d":null}`, `{"a\\":"\\\\","b":"\\\""}`,
		`{"a": -1.5e3 , "b" :true,"c":false}`, `{"a":{"b":{"c":[[],{}]}}}`, `[1]`, `{"a"`, `{"a":}`, `{"a":"\u00e9\ud800"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		var want, got []string
		collect := func(to *[]string) func(k, v []byte) error {
			return func(k, v []byte) error {
				*to = append(*to, fmt.Sprintf("%s=%s", k, v))
				return nil
			}
		}
		gotErr := EachValidMember(src, collect(&got))
		if EachMember(src, collect(&want)) != nil {
			return // invalid text: only not panicking is promised
		}
		if gotErr != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("EachValidMember(%q) = %q, %v; EachMember: %q", src, got, gotErr, want)
		}
	})
}

// FuzzStringPieces: a string escaped a piece at a time, cut where
// CutString says, is the string escaped whole.
func FuzzStringPieces(f *testing.F) {
	for _, s := range []string{"", "plain text", "a\"b\\c\n\t\x01", "é€😀\u2028\u2029", "\xff\xe2\x82", "\xe2\x82\xac\xe2"} {
		f.Add(s, 1)
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n <= 0 || n > 64 {
			return
		}
		whole := AppendString(nil, s)
		got := []byte{'"'}
		for rest := s; len(rest) > 0; {
			cut := CutString(rest, n)
			got = AppendStringBody(got, rest[:cut])
			rest = rest[cut:]
		}
		if got = append(got, '"'); string(got) != string(whole) {
			t.Fatalf("%q in pieces of %d: %q; whole: %q", s, n, got, whole)
		}
	})
}
