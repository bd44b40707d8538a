package jsonlex

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

var (
	wire = Options{}
	hash = Options{MaxDepth: 512, UTF8: RequireUTF8}
)

// compact reads one JSON text token by token and writes the tokens back
// without whitespace: what json.Compact writes, if the lexer finds the
// same tokens encoding/json does. Each string is followed by its decoded
// value under sur in strs.
func compact(src []byte, o Options, sur Surrogates) (out []byte, strs [][]byte, err error) {
	var l Lexer
	l.Reset(src, o)
	l.Space()
	var value func() error
	str := func(raw []byte) {
		out = append(out, raw...)
		strs = append(strs, AppendUnescaped(nil, raw[1:len(raw)-1], sur))
	}
	value = func() error {
		start, b := l.Pos(), l.Peek()
		switch b {
		case '{', '[':
			out = append(out, b)
			more, err := l.Open()
			for more {
				if b == '{' {
					key, escaped, err := l.Key()
					if err != nil {
						return err
					}
					if escaped != bytes.ContainsRune(key, '\\') {
						return errors.New("escaped is wrong")
					}
					str(key)
					out = append(out, ':')
				}
				if err := value(); err != nil {
					return err
				}
				if more, err = l.Next(b + 2); more {
					out = append(out, ',')
				}
			}
			if err != nil {
				return err
			}
			out = append(out, b+2)
			return nil
		case '"':
			raw, escaped, err := l.String()
			if err != nil {
				return err
			}
			if !bytes.Equal(raw, l.Src()[start:l.Pos()]) || escaped != bytes.ContainsRune(raw, '\\') {
				return errors.New("String is wrong")
			}
			str(raw)
			return nil
		}
		if b == '-' || '0' <= b && b <= '9' {
			integer, err := l.Number()
			if err != nil {
				return err
			}
			tok := l.Src()[start:l.Pos()]
			if integer == bytes.ContainsAny(tok, ".eE") {
				return errors.New("integer is wrong for " + string(tok))
			}
			out = append(out, tok...)
			return nil
		}
		if err := l.Literal(); err != nil {
			return err
		}
		out = append(out, l.Src()[start:l.Pos()]...)
		return nil
	}
	if err := value(); err != nil {
		return nil, nil, err
	}
	// Skip must agree with the walk on every text.
	var s Lexer
	s.Reset(src, o)
	s.Space()
	if err := s.Skip(); err != nil || s.Pos() != l.Pos() {
		return nil, nil, errors.New("Skip disagrees with the walk")
	}
	return out, strs, l.End()
}

func TestLexerReadsTokens(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"whitespace between tokens goes", " {\t\"a\" :\r\n[ 1 , -2.5e+3 ,true,false,null ] } ", `{"a":[1,-2.5e+3,true,false,null]}`},
		{"empty containers", `[{},[],{ },[ ]]`, `[{},[],{},[]]`},
		{"a bare scalar is a text", ` "x" `, `"x"`},
		{"numbers in every form", `[0,-0,1,10,0.5,1e9,1E-9,1e+9,-0.0e0]`, `[0,-0,1,10,0.5,1e9,1E-9,1e+9,-0.0e0]`},
		{"strings with every escape", `["\"\\\/\b\f\n\r\t\u00e9\uD83D\uDE00"]`, `["\"\\\/\b\f\n\r\t\u00e9\uD83D\uDE00"]`},
		{"a string longer than a word, with a stop in its second", `"abcdefghij\"klmnop"`, `"abcdefghij\"klmnop"`},
		{"non-ASCII in strings", `{"é":"中😀"}`, `{"é":"中😀"}`},
	}
	for _, tt := range tests {
		for _, o := range []Options{wire, hash} {
			got, _, err := compact([]byte(tt.in), o, ReplaceSurrogates)
			if err != nil || string(got) != tt.want {
				t.Errorf("%s (%+v): %s, %v; want %s", tt.name, o, got, err, tt.want)
			}
		}
	}
}

func TestLexerRefuses(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	tests := []struct {
		name, in string
		o        Options
		offset   int
		msg      string
	}{
		{"nothing", ``, wire, 0, "want a value, have end of input"},
		{"trailing garbage", `{} x`, wire, 3, "unexpected 'x' after the value"},
		{"a second value", `1 2`, wire, 2, "unexpected '2' after the value"},
		{"a trailing comma in an array", `[1,]`, wire, 3, "want a value, have ']'"},
		{"a trailing comma in an object", `{"a":1,}`, wire, 7, `want a string key, have '}'`},
		{"a missing comma", `[1 2]`, wire, 3, "want ',' or ']', have '2'"},
		{"an unclosed object", `{"a":1`, wire, 6, "want ',' or '}', have end of input"},
		{"an unquoted key", `{a:1}`, wire, 1, "want a string key, have 'a'"},
		{"a missing colon", `{"a" 1}`, wire, 5, "want ':', have '1'"},
		{"a leading zero", `01`, wire, 1, "unexpected '1' after the value"},
		{"a bare minus", `-`, wire, 1, "want a digit, have end of input"},
		{"a bare fraction", `1.`, wire, 2, "want a digit after '.', have end of input"},
		{"an empty exponent", `1e+`, wire, 3, "want a digit in the exponent, have end of input"},
		{"a plus sign", `+1`, wire, 0, "want a value, have '+'"},
		{"a misspelt literal", `nul`, wire, 0, "want a value, have 'n'"},
		{"a capital literal", `True`, wire, 0, "want a value, have 'T'"},
		{"single quotes", `'a'`, wire, 0, `want a value, have '\''`},
		{"an unterminated string", `"abc`, wire, 4, "unterminated string"},
		{"a string ending in a backslash", `"abc\`, wire, 5, "unterminated string"},
		{"an unknown escape", `"a\x"`, wire, 2, `invalid escape \x`},
		{"a short \\u escape", `"\u12"`, wire, 1, `invalid \u escape`},
		{"a \\u escape with a non-hex digit", `"\u12g4"`, wire, 1, `invalid \u escape`},
		{"a raw control character", "\"a\tb\"", wire, 2, "unescaped control character U+0009 in a string"},
		{"a raw NUL far into a string", "\"abcdefghijk\x00\"", wire, 12, "unescaped control character U+0000 in a string"},
		{"invalid UTF-8 under RequireUTF8", "\"abcdefgh\xff\"", hash, 9, "invalid UTF-8 in a string"},
		{"a raw surrogate under RequireUTF8", "\"\xed\xa0\x80\"", hash, 1, "invalid UTF-8 in a string"},
		{"a non-ASCII byte outside a string", "\xc3\xa9", wire, 0, `want a value, have 'Ã'`},
		{"nesting past the default", deep(DefaultMaxDepth + 1), wire, DefaultMaxDepth, "nested deeper than 10000"},
		{"nesting past MaxDepth", deep(513), hash, 512, "nested deeper than 512"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l Lexer
			l.Reset([]byte(tt.in), tt.o)
			l.Space()
			err := l.Skip()
			if err == nil {
				err = l.End()
			}
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("%q: %v, want a *SyntaxError", tt.in, err)
			}
			if se.Offset != tt.offset || se.Msg != tt.msg {
				t.Errorf("%q: offset %d %q, want offset %d %q", tt.in, se.Offset, se.Msg, tt.offset, tt.msg)
			}
		})
	}
}

func TestOptions(t *testing.T) {
	tests := []struct {
		name       string
		in         string
		wire, hash bool // accepted
	}{
		{"invalid UTF-8 passes on the wire only", "\"\xff\xfe\"", true, false},
		{"a truncated sequence passes on the wire only", "[\"a\xe4\xb8\"]", true, false},
		{"valid UTF-8 passes both", `"é中😀"`, true, true},
		{"an escaped lone surrogate passes both", `"\ud800"`, true, true},
		{"512 levels pass both", strings.Repeat("[", 512) + strings.Repeat("]", 512), true, true},
		{"513 levels pass the wire only", strings.Repeat("[", 513) + strings.Repeat("]", 513), true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for o, want := range map[Options]bool{wire: tt.wire, hash: tt.hash} {
				var l Lexer
				l.Reset([]byte(tt.in), o)
				err := l.Skip()
				if (err == nil) != want {
					t.Errorf("%+v: %v, want accepted %v", o, err, want)
				}
			}
		})
	}
}

func TestAppendUnescaped(t *testing.T) {
	tests := []struct {
		name, body, replace, keep string
	}{
		{"plain text is copied", `abc`, "abc", "abc"},
		{"short escapes", `\"\\\/\b\f\n\r\t`, "\"\\/\b\f\n\r\t", "\"\\/\b\f\n\r\t"},
		{"a BMP escape", `\u00e9\u4E2D`, "é中", "é中"},
		{"a surrogate pair is one code point", `\ud83d\ude00`, "😀", "😀"},
		{"a lone high surrogate", `a\ud83db`, "a\uFFFDb", "a\xed\xa0\xbdb"},
		{"a lone low surrogate", `\ude00`, "\uFFFD", "\xed\xb8\x80"},
		{"two high surrogates", `\ud83d\ud83d`, "\uFFFD\uFFFD", "\xed\xa0\xbd\xed\xa0\xbd"},
		{"a high surrogate then a plain escape", `\ud83d\n`, "\uFFFD\n", "\xed\xa0\xbd\n"},
		{"bytes that are not UTF-8", "a\xffb\xe4\xb8", "a\uFFFDb\uFFFD\uFFFD", "a\xffb\xe4\xb8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(AppendUnescaped([]byte("x"), []byte(tt.body), ReplaceSurrogates)); got != "x"+tt.replace {
				t.Errorf("ReplaceSurrogates: %q, want %q", got, "x"+tt.replace)
			}
			if got := string(AppendUnescaped(nil, []byte(tt.body), KeepSurrogates)); got != tt.keep {
				t.Errorf("KeepSurrogates: %q, want %q", got, tt.keep)
			}
		})
	}
}

func TestAppendEscapedASCII(t *testing.T) {
	tests := []struct {
		name, in, want string
		stop           int
	}{
		{"plain ASCII as it is", "abc/<>&", "abc/<>&", 7},
		{"quote and backslash", `a"b\c`, `a\"b\\c`, 5},
		{"short escapes", "\b\f\n\r\t", `\b\f\n\r\t`, 5},
		{"other control characters in lowercase hex", "\x00\x01\x1f", `\u0000\u0001\u001f`, 3},
		{"DEL as it is", "\x7f", "\x7f", 1},
		{"it stops at the first non-ASCII byte", "a\"bcdefghijk\xc3\xa9z", `a\"bcdefghijk`, 12},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, stop := AppendEscapedASCII([]byte("x"), tt.in, 0)
			if string(got) != "x"+tt.want || stop != tt.stop {
				t.Errorf("%q: %s, stop %d; want x%s, stop %d", tt.in, got, stop, tt.want, tt.stop)
			}
			gotb, stopb := AppendEscapedASCII(nil, []byte(tt.in), 0)
			if string(gotb) != tt.want || stopb != tt.stop {
				t.Errorf("[]byte(%q): %s, stop %d; want %s, stop %d", tt.in, gotb, stopb, tt.want, tt.stop)
			}
		})
	}
}

// TestSkipPlain puts one or two bytes into a plain string, at every pair
// of positions two full words and a tail cover, and checks that SkipPlain
// stops at the first byte in the set and nowhere else. Two stops in a
// word are where a borrow could flag the wrong one.
func TestSkipPlain(t *testing.T) {
	values := []byte{0x00, 0x01, 0x1f, 0x20, 0x21, '"', 0x23, '[', '\\', ']', 0x7f, 0x80, 0xa2, 0xdc, 0xff}
	for _, stop := range []Stop{StopSpecial, StopNonASCII} {
		in := func(b byte) bool {
			return b < 0x20 || b == '"' || b == '\\' || b >= 0x80 && stop == StopNonASCII
		}
		for _, b1 := range values {
			for _, b2 := range values {
				for at1 := range 19 {
					for at2 := at1; at2 < 19; at2++ {
						s := []byte("abcdefghijklmnopqrs")
						s[at1], s[at2] = b1, b2
						want := len(s)
						for i, b := range s {
							if in(b) {
								want = i
								break
							}
						}
						if got := SkipPlain(s, 0, stop); got != want {
							t.Fatalf("SkipPlain(%q, %#x) = %d, want %d", s, uint64(stop), got, want)
						}
						if got := SkipPlain(string(s), 0, stop); got != want {
							t.Fatalf("SkipPlain(string(%q), %#x) = %d, want %d", s, uint64(stop), got, want)
						}
					}
				}
			}
		}
	}
}

// escapedByteByByte is AppendEscapedASCII as a byte loop.
func escapedByteByByte(dst []byte, s string) ([]byte, int) {
	for i := range len(s) {
		switch b := s[i]; {
		case b >= 0x80:
			return dst, i
		case b == '"' || b == '\\':
			dst = append(dst, '\\', b)
		case b == '\b' || b == '\f' || b == '\n' || b == '\r' || b == '\t':
			dst = append(dst, '\\', "btn fr"[b-'\b'])
		case b < 0x20:
			dst = append(dst, fmt.Sprintf(`\u%04x`, b)...)
		default:
			dst = append(dst, b)
		}
	}
	return dst, len(s)
}

// TestAppendEscapedASCIIEveryByteAnywhere puts each byte value at each
// offset of texts that span several words, one plain and one with a stop
// every few bytes, so that every kind of byte meets every place in a
// word: the bytes are a byte loop's.
func TestAppendEscapedASCIIEveryByteAnywhere(t *testing.T) {
	for _, text := range []string{
		"plain words and more plain words, then some more of them",
		"if (a) {\n\treturn \"b\\c\";\n}\r\n\"\"\\\\\b\f\t\t\t\"x\" + y;\n\n",
	} {
		for b := range 256 {
			for at := range len(text) {
				s := []byte(text)
				s[at] = byte(b)
				want, wantStop := escapedByteByByte(nil, string(s))
				got, stop := AppendEscapedASCII(nil, s, 0)
				if string(got) != string(want) || stop != wantStop {
					t.Fatalf("%q: %q, stop %d; want %q, stop %d", s, got, stop, want, wantStop)
				}
			}
		}
	}
}

// TestAppendEscapedASCIIAnyCapacity escapes text with every kind of
// escape into buffers of every capacity, so that the writes meet the end
// of the buffer at every offset: the bytes are a byte loop's, nothing is
// written past the capacity, and a buffer that has room for them is used,
// not grown.
func TestAppendEscapedASCIIAnyCapacity(t *testing.T) {
	s := "\x01\x02\x03\x04\x05\x06\x07\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17 if x {\n\treturn \"a\\b\"\x01\x1f\x7f\b\f\r} plain words, some more plain words\"\"\\\\\x00\xc3\xa9tail"
	want, stop := escapedByteByByte([]byte("pre"), s)
	for c := 3; c <= len(want)+64; c++ {
		// The buffer's capacity ends where guard bytes begin, which
		// no write may reach.
		mem := bytes.Repeat([]byte{0xAA}, c+64)
		dst := append(mem[:0:c], "pre"...)
		got, j := AppendEscapedASCII(dst, s, 0)
		if string(got) != string(want) || j != stop {
			t.Fatalf("capacity %d: %q, stop %d; want %q, stop %d", c, got, j, want, stop)
		}
		if fits := c >= len(want); fits != (&got[0] == &dst[0]) {
			t.Fatalf("capacity %d for %d bytes: the buffer was grown %v", c, len(want), !fits)
		}
		if guard := mem[c:]; !bytes.Equal(guard, bytes.Repeat([]byte{0xAA}, 64)) {
			t.Fatalf("capacity %d: written past the capacity: %q", c, guard)
		}
		if gotb, j := AppendEscapedASCII(dst, []byte(s), 0); string(gotb) != string(want) || j != stop {
			t.Fatalf("[]byte, capacity %d: %q, stop %d; want %q, stop %d", c, gotb, j, want, stop)
		}
	}
}

// TestDenseEscapesAreCheckedAtEveryOffset puts what a string cannot hold
// at every offset into a run of two-byte escapes, which the lexer steps
// over a word at a time, and holds its verdict to json.Valid's: an
// escape that is not one, a control character, a bad \u, or the string's
// end followed by more text.
func TestDenseEscapesAreCheckedAtEveryOffset(t *testing.T) {
	run := strings.Repeat(`\n\t\"\\\/`, 4)
	for _, bad := range []string{`\x`, "\x01", `\u12g4`, `\u00e9`, `"x`, `\`} {
		for at := 0; at <= len(run); at++ {
			src := []byte(`"` + run[:at] + bad + run[at:] + `"`)
			var l Lexer
			l.Reset(src, wire)
			_, _, err := l.String()
			if err == nil {
				err = l.End()
			}
			if (err == nil) != json.Valid(src) {
				t.Fatalf("%q: %v; json.Valid says %v", src, err, json.Valid(src))
			}
		}
	}
}
