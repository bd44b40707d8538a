package upstream

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sharedos/sharedos-mcp/policy"
)

// TestNamesADecoderMayTakeForOneAreRefused: an arguments object that, at
// any depth, holds two member names equal under Unicode simple case
// folding, or one name twice, is refused, and the message names both
// members and where they are. Go's encoding/json, decoding into a
// struct, matches "uſer" (U+017F) and "USER" to a field "user" and keeps
// the last one: the kernel would authorize alice and the upstream read
// bob.
func TestNamesADecoderMayTakeForOneAreRefused(t *testing.T) {
	users, err := policy.ParseTemplate("/users/{user}")
	if err != nil {
		t.Fatal(err)
	}
	fixed, err := policy.ParseTemplate("/graph")
	if err != nil {
		t.Fatal(err)
	}
	gh := &Tool{Name: "gh.get_user", Upstream: "gh", Resource: users}
	graph := &Tool{Name: "memory.read_graph", Upstream: "memory", Resource: fixed}
	tests := []struct {
		name string
		tool *Tool
		args string
		want []string // in the message
	}{
		{"long s folds onto s", gh, `{"user":"alice","uſer":"bob"}`, []string{`"user"`, `"uſer"`, "the arguments"}},
		{"an escaped long s", gh, `{"user":"alice","u\u017fer":"bob"}`, []string{`"user"`, `"uſer"`}},
		{"the long s first", gh, `{"uſer":"bob","user":"alice"}`, []string{`"uſer"`, `"user"`}},
		{"Kelvin sign folds onto k", gh, `{"user":"alice","kind":"a","\u212aIND":"b"}`, []string{`"kind"`, "\"\u212aIND\""}},
		{"upper case", gh, `{"user":"alice","USER":"bob"}`, []string{`"user"`, `"USER"`}},
		{"an exact duplicate", gh, `{"user":"alice","user":"bob"}`, []string{`member "user" appears twice in the arguments`}},
		{"a duplicate written with an escape", gh, `{"user":"alice","\u0075ser":"bob"}`, []string{`"user" appears twice`}},
		{"two levels down", gh, `{"user":"alice","q":{"filter":{"Owner":"a","owner":"b"}}}`, []string{`"Owner"`, `"owner"`, `arguments/q/filter`}},
		{"in an object inside an array", gh, `{"user":"alice","items":[{"x":1},{"id":1,"ID":2}]}`, []string{`"id"`, `"ID"`, `arguments/items/1`}},
		{"a byte that is not UTF-8 and U+FFFD", graph, "{\"a\xffb\":1,\"a\\ufffdb\":2}", []string{"\"a\ufffdb\" appears twice"}},
		{"without placeholders too", graph, `{"query":"a","QUERY":"b"}`, []string{`"query"`, `"QUERY"`}},
		{"without placeholders, nested", graph, `{"e":[[{"n":1,"n":2}]]}`, []string{`"n" appears twice in arguments/e/0/0`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, fwd, err := tt.tool.Resolve(json.RawMessage(tt.args))
			if !errors.Is(err, ErrInvalidArguments) {
				t.Fatalf("Resolve = %v, %s, %v; want ErrInvalidArguments", r, fwd.Bytes(), err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message %q does not say %q", err, w)
				}
			}
		})
	}
	// Names that differ under folding pass: "ss" is not "ß" to
	// EqualFold, nor "i" "İ".
	for _, args := range []string{`{"user":"alice","ss":1,"ß":2}`, `{"user":"alice","i":1,"İ":2}`, `{"user":"alice","a":{"user":1}}`} {
		if _, _, err := gh.Resolve(json.RawMessage(args)); err != nil {
			t.Errorf("Resolve(%s) = %v, want accepted", args, err)
		}
	}
}

// TestAClashIsQuotedBounded: the names a message quotes are cut, and
// their control and format characters escaped, so that a model reads a
// short, printable message whatever the call sent.
func TestAClashIsQuotedBounded(t *testing.T) {
	fixed, err := policy.ParseTemplate("/x")
	if err != nil {
		t.Fatal(err)
	}
	tl := &Tool{Name: "u.x", Upstream: "u", Resource: fixed}
	long := strings.Repeat("é", 4000)
	args := `{"` + long + `\n\u202e":1,"` + strings.ToUpper(long) + `\n\u202e":2}`
	_, _, err = tl.Resolve(json.RawMessage(args))
	if !errors.Is(err, ErrInvalidArguments) {
		t.Fatalf("Resolve = %v", err)
	}
	msg := err.Error()
	if len(msg) > 600 || !utf8.ValidString(msg) || strings.ContainsAny(msg, "\n\u202e") {
		t.Errorf("message of %d bytes: %q", len(msg), msg)
	}
}

func TestFoldKeyIsEqualFold(t *testing.T) {
	words := []string{"user", "USER", "uſer", "UſER", "kind", "\u212aind", "KIND", "ss", "ß", "ẞ", "i", "I", "İ", "ı", "Σ", "σ", "ς", "ǅ", "ǆ", "Ǆ", "ω", "Ω", "Ω", "a\uFFFD", "", "x"}
	for _, a := range words {
		for _, b := range words {
			if got, want := foldKey(a) == foldKey(b), strings.EqualFold(a, b); got != want {
				t.Errorf("foldKey(%q) == foldKey(%q) is %v, EqualFold %v", a, b, got, want)
			}
		}
	}
}

func FuzzFoldKeyIsEqualFold(f *testing.F) {
	f.Add("user", "uſer")
	f.Add("kind", "\u212aIND")
	f.Add("ss", "ß")
	f.Fuzz(func(t *testing.T, a, b string) {
		if !utf8.ValidString(a) || !utf8.ValidString(b) {
			return // names are decoded, so always UTF-8
		}
		if got, want := foldKey(a) == foldKey(b), strings.EqualFold(a, b); got != want {
			t.Errorf("foldKey(%q) == foldKey(%q) is %v, EqualFold %v", a, b, got, want)
		}
	})
}
