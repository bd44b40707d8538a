package hashing

import (
	"math"
	"strconv"
	"testing"
)

func TestAppendNumber(t *testing.T) {
	// Expected strings are what node's JSON.stringify(JSON.parse(in)) writes.
	tests := []struct {
		name, in, want string
	}{
		{"zero", "0", "0"},
		{"negative zero loses its sign", "-0", "0"},
		{"a whole double drops its fraction", "1.0", "1"},
		{"a negative integer keeps its sign", "-1", "-1"},
		{"1e21 is the first exponent form", "1e21", "1e+21"},
		{"1e20 is still written out", "1e20", "100000000000000000000"},
		{"the largest written-out value rounds to shortest digits", "123456789012345680000", "123456789012345680000"},
		{"21 nines round up to 1e+21", "999999999999999999999", "1e+21"},
		{"more than 21 integer digits use the exponent", "123456789012345678901234567890", "1.2345678901234568e+29"},
		{"exponent form with a fraction", "1.7e21", "1.7e+21"},
		{"a large exponent", "1e100", "1e+100"},
		{"the largest double", "1.7976931348623157e308", "1.7976931348623157e+308"},
		{"1e-7 is the first small exponent form", "1e-7", "1e-7"},
		{"1e-6 is still written out", "0.000001", "0.000001"},
		{"1e-6 in exponent input is written out", "1e-6", "0.000001"},
		{"small with several digits", "1.2345e-6", "0.0000012345"},
		{"small negative exponent form", "-1.5e-10", "-1.5e-10"},
		{"a tiny negative", "-1e-100", "-1e-100"},
		{"the smallest subnormal", "5e-324", "5e-324"},
		{"the smallest normal", "2.2250738585072014e-308", "2.2250738585072014e-308"},
		{"shortest round-trip digits are kept", "0.30000000000000004", "0.30000000000000004"},
		{"one tenth", "0.1", "0.1"},
		{"a fraction", "12345.678", "12345.678"},
		{"an integer beyond 2^53 rounds to even", "9007199254740993", "9007199254740992"},
		{"a 16-digit integer", "1234567890123456", "1234567890123456"},
		{"1e15 is written out", "1e15", "1000000000000000"},
		{"2^32-1", "4294967295", "4294967295"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := strconv.ParseFloat(tt.in, 64)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(appendNumber(nil, f)); got != tt.want {
				t.Errorf("appendNumber(%s) = %s, want %s", tt.in, got, tt.want)
			}
			// The fast path for short integers must agree too.
			if got, err := CanonicalJSON([]byte(tt.in)); err != nil || string(got) != tt.want {
				t.Errorf("CanonicalJSON(%s) = %s, %v, want %s", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestAppendNumberRoundTrips(t *testing.T) {
	for _, f := range []float64{math.MaxFloat64, math.SmallestNonzeroFloat64, math.Pi, 1 / 3.0, 1e21 - 65536, 1e-7 + 1e-23} {
		s := string(appendNumber(nil, f))
		back, err := strconv.ParseFloat(s, 64)
		if err != nil || back != f {
			t.Errorf("%v written as %s reads back as %v, %v", f, s, back, err)
		}
	}
}

func TestAppendQuoted(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain ASCII is raw", "abc", `"abc"`},
		{"quote and backslash are escaped", `a"b\c`, `"a\"b\\c"`},
		{"short escapes are used where they exist", "\b\t\n\f\r", `"\b\t\n\f\r"`},
		{"other control characters use lowercase hex", "\x00\x01\x1f", `"\u0000\u0001\u001f"`},
		{"DEL is raw", "\x7f", "\"\x7f\""},
		{"slash and HTML characters are raw", "/<>&", `"/<>&"`},
		{"line and paragraph separators are raw", "\u2028\u2029", "\"\u2028\u2029\""},
		{"non-ASCII and emoji are raw", "é中😀", `"é中😀"`},
		{"a lone high surrogate is escaped", "a\xed\xa0\xbdb", `"a\ud83db"`},
		{"a lone low surrogate is escaped", "\xed\xb8\x80", `"\ude00"`},
		{"a byte that is not UTF-8 becomes U+FFFD", "a\xffb", "\"a\uFFFDb\""},
		{"a truncated sequence becomes U+FFFD", "a\xe4\xb8", "\"a\uFFFD\uFFFD\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(appendQuoted(nil, tt.in)); got != tt.want {
				t.Errorf("appendQuoted(%q) = %s, want %s", tt.in, got, tt.want)
			}
			if got := string(appendQuoted(nil, []byte(tt.in))); got != tt.want {
				t.Errorf("appendQuoted([]byte(%q)) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestValidWTF8(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		units int
		ok    bool
	}{
		{"ASCII counts one unit a byte", "abc", 3, true},
		{"a BMP character is one unit", "é中", 2, true},
		{"a supplementary character is two units", "😀", 2, true},
		{"a lone surrogate is one unit", "\xed\xa0\xbd", 1, true},
		{"an overlong form is invalid", "\xc0\xaf", 0, false},
		{"a stray continuation byte is invalid", "\x80", 0, false},
		{"beyond U+10FFFF is invalid", "\xf4\x90\x80\x80", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			units, ok := validWTF8(tt.in)
			if units != tt.units || ok != tt.ok {
				t.Errorf("validWTF8(%q) = %d, %v, want %d, %v", tt.in, units, ok, tt.units, tt.ok)
			}
		})
	}
}
