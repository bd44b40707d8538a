package jsonlex

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"
)

// FuzzLex holds the lexer to encoding/json under both option sets the
// module uses: it accepts exactly the texts json.Valid accepts (under
// RequireUTF8 and MaxDepth, those that are also UTF-8 and no deeper), it
// finds the tokens json.Compact keeps, and the strings it decodes are
// the strings json.Unmarshal decodes (with a lone surrogate kept, under
// KeepSurrogates, where encoding/json writes U+FFFD). SkipPlain is held
// to a byte loop on the same input.
func FuzzLex(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"/a"}}}`,
		`[0,-0,1.5e-3,1E+9,true,false,null,"",{},[]]`,
		` { "a" : [ 1 , "x\n\u00e9\ud83d\ude00" ] } `,
		`"\ud800\udc00\ud800x\udc00"`, "\"\xff\xfe\"", `"\u00zz"`, `[1,]`, `{"a":01}`, `1e`, `-`,
		`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		valid := json.Valid(src)
		for _, c := range []struct {
			o      Options
			sur    Surrogates
			accept bool
		}{
			{wire, ReplaceSurrogates, valid},
			{hash, KeepSurrogates, valid && utf8.Valid(src) && depth(src) <= hash.MaxDepth},
		} {
			out, strs, err := compact(src, c.o, c.sur)
			if (err == nil) != c.accept {
				t.Fatalf("%+v: lexing %q: %v; json.Valid %v", c.o, src, err, valid)
			}
			if err != nil {
				if se := (*SyntaxError)(nil); !errors.As(err, &se) {
					t.Fatalf("%+v: lexing %q: %v is not a *SyntaxError", c.o, src, err)
				}
				continue
			}
			var want bytes.Buffer
			if err := json.Compact(&want, src); err != nil || !bytes.Equal(out, want.Bytes()) {
				t.Fatalf("%+v: tokens of %q are %q; json.Compact gives %q, %v", c.o, src, out, want.Bytes(), err)
			}
			all := decodedStrings(src)
			if len(all) != len(strs) {
				t.Fatalf("%+v: %d strings in %q, encoding/json has %d", c.o, len(strs), src, len(all))
			}
			for i, s := range strs {
				if c.sur == KeepSurrogates {
					s = replaceSurrogates(s)
				}
				if string(s) != all[i] {
					t.Fatalf("%+v: string %d of %q decodes as %q, json.Unmarshal gives %q", c.o, i, src, s, all[i])
				}
			}
		}
		for i := range min(len(src), 24) {
			for _, stop := range []Stop{StopSpecial, StopNonASCII} {
				want := i
				for want < len(src) && !stop.has(src[want]) {
					want++
				}
				if got := SkipPlain(src, i, stop); got != want {
					t.Fatalf("SkipPlain(%q, %d, %#x) = %d, want %d", src, i, uint64(stop), got, want)
				}
			}
		}
	})
}

// decodedStrings returns every key and string value of the JSON text
// src, in text order, as encoding/json decodes them.
func decodedStrings(src []byte) []string {
	var all []string
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.UseNumber() // a number past float64's range is still JSON
	for {
		tok, err := dec.Token()
		if err != nil {
			return all
		}
		if s, ok := tok.(string); ok {
			all = append(all, s)
		}
	}
}

// replaceSurrogates turns each lone surrogate in WTF-8 into U+FFFD, as
// encoding/json decodes one.
func replaceSurrogates(s []byte) []byte {
	var out []byte
	for i := 0; i < len(s); {
		if i+2 < len(s) && s[i] == 0xED && s[i+1] >= 0xA0 && s[i+1] <= 0xBF && s[i+2] >= 0x80 && s[i+2] <= 0xBF {
			out = append(out, "\uFFFD"...)
			i += 3
			continue
		}
		out = append(out, s[i])
		i++
	}
	return out
}

// depth is the deepest nesting of a valid JSON text.
func depth(src []byte) int {
	d, most, inString := 0, 0, false
	for i := 0; i < len(src); i++ {
		switch b := src[i]; {
		case inString && b == '\\':
			i++
		case b == '"':
			inString = !inString
		case inString:
		case b == '[' || b == '{':
			d++
			most = max(most, d)
		case b == ']' || b == '}':
			d--
		}
	}
	return most
}
