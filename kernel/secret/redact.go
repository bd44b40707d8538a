package secret

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// keepValues is how many values of one name a Redactor keeps: an OAuth
// access token is replaced every hour or so, and the text a replaced one
// appears in (a log line, an error) may still be on its way out.
const keepValues = 4

// Redactor replaces every secret value it was given, in the forms text
// usually carries it (as it is, in a JSON string, URL-escaped, base64),
// with [secret:NAME]. It is the one list of what no output may hold: the
// kernel gives it each Set it loads and each OAuth token it obtains, and
// runs every output path through it (its log, errors the model reads,
// what check, catalog and doctor print). Safe for concurrent use; a nil
// *Redactor redacts nothing.
type Redactor struct {
	mu     sync.Mutex
	values map[string][]string // by name, oldest first, at most keepValues
	r      atomic.Pointer[strings.Replacer]
}

// NewRedactor returns a Redactor that redacts nothing yet.
func NewRedactor() *Redactor {
	return &Redactor{values: map[string][]string{}}
}

// AddSet adds every value of s under its secret's name. On a nil
// *Redactor it does nothing.
func (r *Redactor) AddSet(s *Set) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, name := range sortedKeys(s.values) {
		r.add(name, s.values[name])
	}
	r.build()
}

// Add adds value under name ("oauth:github" for an upstream's tokens).
// Values shorter than MinLength are not matched: they would match
// ordinary text (Load refuses such secrets). On a nil *Redactor it does
// nothing.
func (r *Redactor) Add(name, value string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.add(name, value)
	r.build()
}

func (r *Redactor) add(name, value string) {
	if len(value) < MinLength {
		return
	}
	vs := r.values[name]
	if i := slices.Index(vs, value); i >= 0 {
		vs = slices.Delete(vs, i, i+1)
	}
	vs = append(vs, value)
	if len(vs) > keepValues {
		vs = vs[len(vs)-keepValues:]
	}
	r.values[name] = vs
}

// build makes the replacer of every form of every value, longest first:
// a strings.Replacer tries its pairs in order at each position, so a form
// that contains another (a URL-escaped value holding the plain one's
// prefix) must come first.
func (r *Redactor) build() {
	type pair struct{ form, name string }
	var pairs []pair
	seen := map[string]bool{}
	for name, vs := range r.values {
		for _, v := range vs {
			for _, f := range forms(v) {
				if !seen[f] {
					seen[f] = true
					pairs = append(pairs, pair{f, name})
				}
			}
		}
	}
	slices.SortFunc(pairs, func(a, b pair) int {
		if c := cmp.Compare(len(b.form), len(a.form)); c != 0 {
			return c
		}
		return strings.Compare(a.form, b.form)
	})
	args := make([]string, 0, 2*len(pairs))
	for _, p := range pairs {
		args = append(args, p.form, "[secret:"+p.name+"]")
	}
	r.r.Store(strings.NewReplacer(args...))
}

// forms are the ways text may carry v: as it is; inside a JSON string,
// with and without HTML escaping (zerolog writes none, encoding/json does);
// URL query- and path-escaped; base64 in the standard and URL alphabets,
// padded or not. ("Bearer v" holds v as it is.)
func forms(v string) []string {
	out := []string{v}
	for _, html := range []bool{true, false} {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(html)
		if enc.Encode(v) == nil {
			j := strings.TrimSuffix(b.String(), "\n")
			out = append(out, j[1:len(j)-1])
		}
	}
	out = append(out, url.QueryEscape(v), url.PathEscape(v))
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		out = append(out, enc.EncodeToString([]byte(v)))
	}
	return out
}

// Redact returns text with every form of every value replaced.
func (r *Redactor) Redact(text string) string {
	if r == nil {
		return text
	}
	rep := r.r.Load()
	if rep == nil {
		return text
	}
	return rep.Replace(text)
}

// Writer returns a writer that redacts what it is given and writes it to
// w. A value split across two writes is not seen: give it whole lines (a
// zerolog logger writes each event in one write).
func (r *Redactor) Writer(w io.Writer) io.Writer {
	return &redactWriter{r: r, w: w}
}

type redactWriter struct {
	r *Redactor
	w io.Writer
}

func (w *redactWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(w.w, w.r.Redact(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
