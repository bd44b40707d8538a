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
