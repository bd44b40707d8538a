package jsonlex

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// prescanned scans src as a reader would while it arrives, piece bytes
// at a time, and then once more whole, as the last read is.
func prescanned(src []byte, o Options, piece int) *Prescan {
	var p Prescan
	p.Reset(o)
	for n := piece; n < len(src); n += piece {
		p.Scan(src[:n])
	}
	p.Scan(src)
	return &p
}

// long is a string body of at least LongString bytes: text like source
// code, with every escape the grammar has.
var long = strings.Repeat(`if s == \"a\\b\" {\n\treturn \u00e9\/\b\f\r}`+"é", LongString/40+1)

// TestPrescanIsReadAsTheLexerReads reads texts with and without their
// long strings found ahead, cut into pieces of many sizes: the tokens,
// the strings and the error, offset included, are the same. The valid
// texts' long strings are all recorded, so it is the prescan's records
// that are being read.
func TestPrescanIsReadAsTheLexerReads(t *testing.T) {
	for _, tt := range []struct {
		name   string
		src    string
		strs   int  // long strings recorded, when the text is valid
		wantOK bool // under the wire's options; the hash's also refuse bytes that are not UTF-8
	}{
		{"one long string", `"` + long + `"`, 1, true},
		{"a long key and value", `{"` + long + `":"` + long + `","b":["x","` + long + `"]}`, 3, true},
		{"a result as a kernel sends it", `{"jsonrpc":"2.0","id":7,"result":{"status":"succeeded","output":{"text":"` + long + `"}}}`, 1, true},
		{"short strings only", `{"a":"b","c":["` + long[:100] + `"]}`, 0, true},
		{"a bad escape at the end", `"` + long + `\x"`, 0, false},
		{"a bad unicode escape", `["` + long + `\u12g4"]`, 0, false},
		{"a control character", `["` + long + "\x01" + `"]`, 0, false},
		{"not UTF-8, which only the wire takes", `["` + long + "\xff" + `"]`, 1, true},
		{"unterminated", `["` + long, 0, false},
		{"an escape the text ends in", `["` + long + `\u00`, 0, false},
		{"bad before the string", `{"a":01,"b":"` + long + `"}`, 0, false},
		{"a quote outside a string", `{"a":1}\"` + long + `"`, 0, false},
		{"bad after a good long string", `["` + long + `","` + long + `\q"]`, 0, false},
	} {
		for _, o := range []Options{wire, hash} {
			src := []byte(tt.src)
			want, wantStrs, wantErr := compact(src, o, ReplaceSurrogates)
			if (wantErr == nil) != (tt.wantOK && (o == wire || utf8.Valid(src))) {
				t.Fatalf("%s, %+v: the lexer alone says %v", tt.name, o, wantErr)
			}
			for _, piece := range []int{1, 2, 5, 6, 7, 64, 4093, 4096, len(src)} {
				p := prescanned(src, o, piece)
				if wantErr == nil && len(p.spans) != tt.strs {
					t.Errorf("%s, %+v, pieces of %d: %d long strings recorded, want %d", tt.name, o, piece, len(p.spans), tt.strs)
				}
				got, gotStrs, err := compactKnown(src, o, ReplaceSurrogates, p)
				if fmt.Sprint(err) != fmt.Sprint(wantErr) || !bytes.Equal(got, want) || fmt.Sprint(gotStrs) != fmt.Sprint(wantStrs) {
					t.Fatalf("%s, %+v, pieces of %d: with the prescan %v, %.80q; without %v, %.80q", tt.name, o, piece, err, got, wantErr, want)
				}
			}
		}
	}
}

// TestLexerChecksWhatThePrescanDidNot: a record says what the bytes from
// its opening quote hold, so one the lexer does not reach from that same
// quote is not used. Here the prescan records a string whose opening
// quote, for the lexer, closes a short one; what follows is not valid.
func TestLexerChecksWhatThePrescanDidNot(t *testing.T) {
	src := []byte(`["a\"` + strings.Repeat("x", LongString) + `"]`)
	var p Prescan
	p.Reset(wire)
	p.Scan(src[:2]) // `["`
	p.open = -1     // as if it had lost its place
	p.pos = 4       // at the '"' after `a\`
	p.Scan(src)
	if len(p.spans) != 1 || p.spans[0].start != 4 {
		t.Fatalf("spans %+v, want one from offset 4", p.spans)
	}
	_, _, want := compact(src, wire, ReplaceSurrogates)
	_, _, got := compactKnown(src, wire, ReplaceSurrogates, &p)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("with a record out of place: %v; the lexer alone: %v", got, want)
	}
}

// FuzzPrescan holds a lexer given a prescan to the lexer alone on any
// text, in any pieces. Each '~' of the input stands for LongString bytes
// of 'a', so that the fuzzer reaches long strings in a few bytes.
func FuzzPrescan(f *testing.F) {
	for _, s := range []string{`"~"`, `{"~":["~\n",1]}`, `"~\u00e~"`, `["~\x"]`, `"~` + "\x01", `"~\`, `{"a":"~"}\"~"`} {
		f.Add([]byte(s), uint16(3))
	}
	f.Fuzz(func(t *testing.T, in []byte, cut uint16) {
		src := bytes.ReplaceAll(in, []byte("~"), bytes.Repeat([]byte("a"), LongString))
		piece := int(cut)%(len(src)+1) + 1
		for _, o := range []Options{wire, hash} {
			want, wantStrs, wantErr := compact(src, o, ReplaceSurrogates)
			got, gotStrs, err := compactKnown(src, o, ReplaceSurrogates, prescanned(src, o, piece))
			if fmt.Sprint(err) != fmt.Sprint(wantErr) || !bytes.Equal(got, want) || fmt.Sprint(gotStrs) != fmt.Sprint(wantStrs) {
				t.Fatalf("%+v, %q in pieces of %d: with the prescan %v; without %v", o, in, piece, err, wantErr)
			}
		}
	})
}
