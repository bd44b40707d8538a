package jsonrpc

import (
	"bytes"
	"encoding/json"
	"testing"
)

func encodingJSONString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return string(bytes.TrimSuffix(b.Bytes(), []byte{'\n'}))
}

func TestAppendString(t *testing.T) {
	for s, want := range map[string]string{
		"":                       `""`,
		"plain":                  `"plain"`,
		"q\"b\\s/<&>":            `"q\"b\\s/<&>"`,
		"\b\f\n\r\t\x00\x1f\x7f": `"\b\f\n\r\t\u0000\u001f` + "\x7f" + `"`,
		"é\u2028\u2029😀":         `"é\u2028\u2029😀"`,
		"bad\xffutf8\xe2\x82":    `"bad\ufffdutf8\ufffd\ufffd"`,
	} {
		if got := string(AppendString(nil, s)); got != want {
			t.Errorf("AppendString(%q) = %s, want %s", s, got, want)
		}
		if got := string(AppendString([]byte("x"), []byte(s))); got != "x"+want {
			t.Errorf("AppendString(x, []byte(%q)) = %s, want x%s", s, got, want)
		}
	}
}

func TestDecodeString(t *testing.T) {
	for raw, want := range map[string]string{
		`null`: "", `""`: "", `"abc"`: "abc", `"a\"b\u00e9\n"`: "a\"bé\n", "\"\xff\"": "\ufffd",
	} {
		got, err := DecodeString([]byte(raw))
		if err != nil || got != want {
			t.Errorf("DecodeString(%s) = %q, %v; want %q", raw, got, err, want)
		}
	}
	for _, raw := range []string{`1`, `true`, `{}`, `[]`} {
		if _, err := DecodeString([]byte(raw)); err == nil {
			t.Errorf("DecodeString(%s) took a non-string", raw)
		}
	}
}

// FuzzStrings holds AppendString and DecodeString to encoding/json.
func FuzzStrings(f *testing.F) {
	for _, s := range []string{"", "a", "\"\\", "\x00\u2028", "\xff\xfe", "é😀", `\u0041`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := AppendString(nil, s)
		if want := encodingJSONString(s); string(got) != want {
			t.Fatalf("AppendString(%q) = %s, encoding/json writes %s", s, got, want)
		}
		back, err := DecodeString(got)
		var want string
		json.Unmarshal(got, &want)
		if err != nil || back != want {
			t.Fatalf("DecodeString(%s) = %q, %v; json.Unmarshal gives %q", got, back, err, want)
		}
		// A string value as a scanner hands it out: valid, no whitespace around.
		if raw := []byte(s); json.Valid(raw) && raw[0] == '"' && raw[len(raw)-1] == '"' {
			back, err := DecodeString(raw)
			var want string
			json.Unmarshal(raw, &want)
			if err != nil || back != want {
				t.Fatalf("DecodeString(%s) = %q, %v; json.Unmarshal gives %q", s, back, err, want)
			}
		}
	})
}
