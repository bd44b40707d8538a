package hashing

import (
	"cmp"
	"crypto/sha256"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCanonicalJSON(t *testing.T) {
	// Expected strings were checked against node: keys sorted with
	// localeCompare, then JSON.stringify.
	tests := []struct {
		name, in, want string
	}{
		{"whitespace is removed", " { \"a\" : [ 1 , 2 ] }\r\n", `{"a":[1,2]}`},
		{"arrays keep their order", `[3,1,2]`, `[3,1,2]`},
		{"minimum sorts before minLength", `{"minLength":1,"minimum":2}`, `{"minimum":2,"minLength":1}`},
		{"punctuation, symbols, digits, letters, case last", `{"A2":0,"a":0,"9":0,"10":0,"$id":0,"_private":0}`, `{"_private":0,"$id":0,"10":0,"9":0,"a":0,"A2":0}`},
		{"lowercase before uppercase on a tie", `{"B":0,"b":0}`, `{"b":0,"B":0}`},
		{"accents are secondary", `{"f":0,"é":0,"e":0}`, `{"e":0,"é":0,"f":0}`},
		{"underscore before hyphen before nothing", `{"x1":0,"x-1":0,"x_1":0}`, `{"x_1":0,"x-1":0,"x1":0}`},
		{"nested objects are sorted too", `{"b":{"d":1,"c":[{"f":1,"e":2}]},"a":null}`, `{"a":null,"b":{"c":[{"e":2,"f":1}],"d":1}}`},
		{"escapes are decoded and re-encoded", `"\u0041\/\u00e9\ud83d\ude00\u2028\u001F"`, "\"A/é😀\u2028\\u001f\""},
		{"a lone surrogate escape stays escaped", `"\uD800x"`, `"\ud800x"`},
		{"escaped keys are compared decoded", `{"\u0062":1,"a":2}`, `{"a":2,"b":1}`},
		{"a duplicate keeps its first position and last value", `{"b":1,"c":2,"b":3}`, `{"b":3,"c":2}`},
		{"a duplicate spelled with an escape is the same key", `{"a":1,"\u0061":2}`, `{"a":2}`},
		{"__proto__ is an ordinary key outside the projection", `{"__proto__":1}`, `{"__proto__":1}`},
		{"literals", `[true,false,null]`, `[true,false,null]`},
		{"empty containers", `[{},[]]`, `[{},[]]`},
		{"numbers are rewritten", `[1.0,-0,1e21,1E-7,2.50]`, `[1,0,1e+21,1e-7,2.5]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CanonicalJSON([]byte(tt.in))
			if err != nil {
				t.Fatalf("CanonicalJSON(%s): %v", tt.in, err)
			}
			if string(got) != tt.want {
				t.Errorf("CanonicalJSON(%s)\n got: %s\nwant: %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestSortKeyOrder(t *testing.T) {
	// The orders docs/catalog-hash.md states, and the fixed keys Canonical and
	// AppendMCP write without consulting the collator.
	orders := [][]string{
		{"minimum", "minLength"},
		{"_private", "$id", "10", "9", "a", "A2"},
		{"annotations", "description", "inputSchema", "metadata", "name", "outputSchema"},
		{"destructiveHint", "idempotentHint", "readOnlyHint"},
		{"namespace", "source"},
	}
	for _, keys := range orders {
		t.Run(strings.Join(keys, " < "), func(t *testing.T) {
			for i := 1; i < len(keys); i++ {
				if a, b := sortKey([]byte(keys[i-1])), sortKey([]byte(keys[i])); a >= b {
					t.Errorf("%q does not sort before %q", keys[i-1], keys[i])
				}
			}
		})
	}
}

func TestCollationTiesKeepJSONParseOrder(t *testing.T) {
	// U+0001 is ignorable in root collation, so "a\u0001" ties with "a".
	// JSON.parse order decides: the text order for ordinary keys, and
	// array indices first, in numeric order.
	if sortKey([]byte("a\x01")) != sortKey([]byte("a")) {
		t.Skip("the collator does not treat U+0001 as ignorable")
	}
	tests := []struct {
		name, in, want string
	}{
		{"text order", `{"a\u0001":1,"a":2}`, `{"a\u0001":1,"a":2}`},
		{"text order reversed", `{"a":2,"a\u0001":1}`, `{"a":2,"a\u0001":1}`},
		{"an array index comes first", `{"1\u0001":1,"1":2}`, `{"1":2,"1\u0001":1}`},
		{"a duplicate keeps its first place among ties", `{"a":1,"a\u0001":2,"a":3}`, `{"a":3,"a\u0001":2}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CanonicalJSON([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestCanonicalJSONRefuses(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty input", ``, "want a value, have end of input"},
		{"trailing garbage", `{} x`, "after the value"},
		{"a trailing comma", `[1,]`, "want a value"},
		{"a leading zero", `01`, "after the value"},
		{"a bare fraction", `1.`, "after '.'"},
		{"an empty exponent", `1e`, "in the exponent"},
		{"a number too large for a double", `1e400`, "does not fit a double"},
		{"a negative number too large", `[-1e309]`, "does not fit a double"},
		{"a single-quoted string", `'a'`, "want a value"},
		{"an unquoted key", `{a:1}`, "want a string key"},
		{"a missing colon", `{"a" 1}`, "want ':'"},
		{"a raw control character", "\"a\tb\"", "unescaped control character"},
		{"an unknown escape", `"\x41"`, "invalid escape"},
		{"a short \\u escape", `"\u12"`, "invalid \\u escape"},
		{"invalid UTF-8", "\"\xff\"", "invalid UTF-8"},
		{"an unterminated string", `"abc`, "unterminated string"},
		{"a misspelt literal", `nul`, "want a value"},
		{"NaN", `NaN`, "want a value"},
		{"nesting too deep", strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1), "nested deeper"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := CanonicalJSON([]byte(tt.in))
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("CanonicalJSON(%q) = %v, want a *SyntaxError", tt.in, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
		})
	}
}

func TestProtoDropped(t *testing.T) {
	tests := []struct {
		name, schema, want string
	}{
		{"at the top", `{"__proto__":{"x":1},"type":"object"}`, `{"type":"object"}`},
		{"as the only key", `{"__proto__":1}`, `{}`},
		{"as the last key", `{"type":"object","__proto__":1}`, `{"type":"object"}`},
		{"between keys", `{"b":1,"__proto__":1,"a":2}`, `{"a":2,"b":1}`},
		{"deep inside", `{"properties":{"p":{"__proto__":{"polluted":true},"type":"string"}}}`, `{"properties":{"p":{"type":"string"}}}`},
		{"inside an array", `{"anyOf":[{"__proto__":null},{"type":"null"}]}`, `{"anyOf":[{},{"type":"null"}]}`},
		{"spelled with an escape", `{"\u005f_proto__":1,"a":1}`, `{"a":1}`},
		{"twice", `{"__proto__":1,"a":1,"__proto__":2}`, `{"a":1}`},
		{"but a look-alike stays", `{"__proto":1,"_proto__":2}`, `{"__proto":1,"_proto__":2}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tools, err := Project([]Definition{{
				Name: "t", Description: "d", Namespace: "n", Source: "s", ReadWrite: "read",
				InputSchema: []byte(tt.schema), OutputSchema: []byte(tt.schema),
			}})
			if err != nil {
				t.Fatal(err)
			}
			if got := string(tools[0].InputSchema); got != tt.want {
				t.Errorf("inputSchema = %s, want %s", got, tt.want)
			}
			if got := string(tools[0].OutputSchema); got != tt.want {
				t.Errorf("outputSchema = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestJSRank(t *testing.T) {
	keys := []string{"b", "4294967295", "10", "a", "4294967294", "0", "01", "-1", "1.5", "2"}
	rank := make(map[string]uint64, len(keys))
	for seq, k := range keys {
		rank[k] = jsRank([]byte(k), seq)
	}
	got := slices.Clone(keys)
	slices.SortFunc(got, func(a, b string) int { return cmp.Compare(rank[a], rank[b]) })
	// Object.keys(JSON.parse(...)) in node, for the same keys in the same text order.
	want := []string{"0", "2", "10", "4294967294", "b", "4294967295", "a", "01", "-1", "1.5"}
	if !slices.Equal(got, want) {
		t.Errorf("JSON.parse order = %q, want %q", got, want)
	}
}

func TestASCIICompareMatchesSortKey(t *testing.T) {
	// Every ASCII character against every other (that pins asciiOrder),
	// every two-character string over a mix of letters, digits,
	// punctuation, space and control characters, and random longer ones.
	var keys [][]byte
	for c := range byte(utf8.RuneSelf) {
		keys = append(keys, []byte{c})
	}
	alphabet := []byte("aAbBzZ09_-.$ ~\x01\x7f\t")
	for _, a := range alphabet {
		for _, b := range alphabet {
			keys = append(keys, []byte{a, b})
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		k := make([]byte, 1+r.IntN(8))
		for i := range k {
			k[i] = byte(r.IntN(128))
		}
		keys = append(keys, k)
	}
	for _, a := range keys {
		for _, b := range keys[:400] {
			want := strings.Compare(sortKey(a), sortKey(b))
			if got := asciiCompare(a, b); got != want {
				t.Fatalf("asciiCompare(%q, %q) = %d, sort keys say %d", a, b, got, want)
			}
			if pa, pb := asciiPrefix(a), asciiPrefix(b); pa != pb && cmp.Compare(pa, pb) != want {
				t.Fatalf("asciiPrefix orders %q and %q as %d, sort keys say %d", a, b, cmp.Compare(pa, pb), want)
			}
		}
	}
}

func TestCanonicalSHA256IsTheCanonicalFormsDigest(t *testing.T) {
	for _, in := range []string{`{"b":1,"a":[true,null,"x"]}`, ` { "a" : 1.0 } `, `"\u00e9"`} {
		c, err := CanonicalJSON([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		got, err := CanonicalSHA256([]byte(in))
		if err != nil || got != sha256.Sum256(c) {
			t.Errorf("%s: %x, %v; want the SHA-256 of %s", in, got, err, c)
		}
	}
	if _, err := CanonicalSHA256([]byte(`{"a":`)); err == nil {
		t.Error("accepted JSON that is not")
	}
}
