package secret

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
)

func TestRedactEveryForm(t *testing.T) {
	v := `tok/en+with spaces&"quotes"<x>=`
	r := NewRedactor()
	r.AddSet(&Set{values: map[string]string{"github": v}})
	js, _ := json.Marshal(v)
	tests := []struct{ name, text string }{
		{"as it is", "value " + v + " end"},
		{"in a bearer header", "Authorization: Bearer " + v},
		{"in a JSON string, HTML-escaped", string(js)},
		{"in a JSON string, not HTML-escaped", `"tok/en+with spaces&\"quotes\"<x>="`},
		{"query-escaped", "https://h/p?token=" + url.QueryEscape(v)},
		{"path-escaped", "https://h/" + url.PathEscape(v)},
		{"base64", base64.StdEncoding.EncodeToString([]byte(v))},
		{"base64 URL alphabet without padding", base64.RawURLEncoding.EncodeToString([]byte(v))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := r.Redact(tt.text)
			if !strings.Contains(got, "[secret:github]") {
				t.Errorf("Redact(%q) = %q, nothing redacted", tt.text, got)
			}
			for _, f := range forms(v) {
				if strings.Contains(got, f) {
					t.Errorf("Redact(%q) = %q still holds %q", tt.text, got, f)
				}
			}
		})
	}
}

func TestRedactPrefersTheLongerSecret(t *testing.T) {
	r := NewRedactor()
	r.AddSet(&Set{values: map[string]string{"short": "abcdefgh", "long": "abcdefgh-and-more"}})
	if got := r.Redact("x abcdefgh-and-more y abcdefgh z"); got != "x [secret:long] y [secret:short] z" {
		t.Errorf("got %q", got)
	}
}

func TestRedactorKeepsRecentValuesOfAName(t *testing.T) {
	r := NewRedactor()
	var all []string
	for i := range keepValues + 2 {
		tok := fmt.Sprintf("access-token-number-%02d", i)
		all = append(all, tok)
		r.Add("oauth:github", tok)
	}
	for i, tok := range all {
		redacted := !strings.Contains(r.Redact(tok), tok)
		if want := i >= len(all)-keepValues; redacted != want {
			t.Errorf("token %d redacted = %v, want %v", i, redacted, want)
		}
	}
	r.Add("oauth:github", "short") // below MinLength: not matched
	if got := r.Redact("a short word"); got != "a short word" {
		t.Errorf("a short value was matched: %q", got)
	}
}

func TestANilOrEmptyRedactorPassesTextThrough(t *testing.T) {
	var nilR *Redactor
	if got := nilR.Redact("text"); got != "text" {
		t.Error(got)
	}
	if got := NewRedactor().Redact("text"); got != "text" {
		t.Error(got)
	}
}

func TestRedactWriter(t *testing.T) {
	r := NewRedactor()
	var buf lockedBuffer
	w := r.Writer(&buf)
	r.Add("k", "supersecretvalue")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			n, err := w.Write([]byte("{\"msg\":\"token supersecretvalue\"}\n"))
			if err != nil || n != 33 {
				t.Errorf("Write = %d, %v", n, err)
			}
		})
	}
	wg.Wait()
	if got := buf.b.String(); strings.Contains(got, "supersecretvalue") || strings.Count(got, "[secret:k]") != 8 {
		t.Errorf("written: %q", got)
	}
}

// lockedBuffer is a sink safe for concurrent writes, as a log file is.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
