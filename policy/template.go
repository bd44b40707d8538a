package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// A Template is a resource path whose segments are literals or
// placeholders, such as "/repos/{owner}/{repo}". A placeholder is a whole
// segment and is filled from the call argument of that name. A plain one,
// "{owner}", takes one argument value as one segment; a typed one, last
// in its template, takes a path ("{p:path}") or a URL ("{u:url}") as the
// segments it names (see Kind). A call can only ever name a resource
// under the template's fixed prefix.
type Template struct {
	text string
	segs []templateSegment
}

type templateSegment struct {
	literal string
	arg     string // the placeholder's argument name; "" for a literal
	kind    Kind
}

// Kind is what a placeholder takes.
type Kind string

// The kinds of placeholder, as written after the name ("{name:path}").
const (
	// KindSegment, "{name}": a string or integer, one segment.
	KindSegment Kind = ""
	// KindPath, "{name:path}": a string path, absolute or relative,
	// cleaned lexically into the segments it names (see Fill).
	KindPath Kind = "path"
	// KindURL, "{name:url}": an http or https URL, naming
	// "/<host>/<path segments>" (see Fill).
	KindURL Kind = "url"
)

// Placeholder is one placeholder of a template.
type Placeholder struct {
	Name string
	Kind Kind
}

// MaxArgumentName is the longest placeholder name, in bytes.
const MaxArgumentName = 64

// MaxSegment is the longest value an argument may put into one segment,
// in bytes. A resource is an identity that every decision records; a
// value longer than this is not a name but data.
const MaxSegment = 1024

// maxSafeInteger is the largest integer an IEEE-754 double holds exactly
// (2^53-1): an upstream written in JavaScript reads a larger one as a
// different number than the kernel authorized.
const maxSafeInteger = 1<<53 - 1

// ParseTemplate parses a resource template: an absolute path ("/" alone
// is the namespace root) of non-empty segments, each either a literal or
// a placeholder "{name}", "{name:path}" or "{name:url}", where name is
// 1–64 of ASCII letters, digits, '_', '-', '.'. Literals may not be "."
// or "..", nor contain NUL, '{' or '}'; no placeholder may appear twice;
// a path or URL placeholder must be the last segment, since it fills as
// many segments as its value names.
func ParseTemplate(s string) (Template, error) {
	if !strings.HasPrefix(s, "/") {
		return Template{}, fmt.Errorf("resource template %q: must be an absolute path", s)
	}
	t := Template{text: s}
	if s == "/" {
		return t, nil
	}
	seen := map[string]bool{}
	for _, seg := range strings.Split(s[1:], "/") {
		switch {
		case seg == "":
			return Template{}, fmt.Errorf("resource template %q: empty segment (a doubled or trailing '/')", s)
		case strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") && len(seg) >= 2:
			name, kind, typed := strings.Cut(seg[1:len(seg)-1], ":")
			if !validArgumentName(name) {
				return Template{}, fmt.Errorf("resource template %q: placeholder %q: want {name}, {name:path} or {name:url} with a name of 1-%d ASCII letters, digits, '_', '-', '.'", s, seg, MaxArgumentName)
			}
			if typed && Kind(kind) != KindPath && Kind(kind) != KindURL {
				return Template{}, fmt.Errorf("resource template %q: placeholder %q: the type after ':' must be path or url", s, seg)
			}
			if seen[name] {
				return Template{}, fmt.Errorf("resource template %q: placeholder {%s} appears twice", s, name)
			}
			if n := len(t.segs); n > 0 && t.segs[n-1].kind != KindSegment {
				return Template{}, fmt.Errorf("resource template %q: placeholder {%s:%s} must be the last segment: it fills as many as its value names", s, t.segs[n-1].arg, t.segs[n-1].kind)
			}
			seen[name] = true
			t.segs = append(t.segs, templateSegment{arg: name, kind: Kind(kind)})
		case seg == "." || seg == "..":
			return Template{}, fmt.Errorf("resource template %q: segment %q is not allowed", s, seg)
		case strings.ContainsAny(seg, "{}\x00"):
			return Template{}, fmt.Errorf("resource template %q: segment %q: a placeholder must be a whole segment, and NUL is not allowed", s, seg)
		default:
			if n := len(t.segs); n > 0 && t.segs[n-1].kind != KindSegment {
				return Template{}, fmt.Errorf("resource template %q: placeholder {%s:%s} must be the last segment: it fills as many as its value names", s, t.segs[n-1].arg, t.segs[n-1].kind)
			}
			t.segs = append(t.segs, templateSegment{literal: seg})
		}
	}
	return t, nil
}

// LiteralTemplate returns the template of exactly one literal segment,
// "/" + seg: a tool's default resource, named after the tool. Unlike
// ParseTemplate, braces in seg are literal text, never a placeholder.
func LiteralTemplate(seg string) (Template, error) {
	if seg == "" || seg == "." || seg == ".." || strings.ContainsAny(seg, "/\x00") {
		return Template{}, fmt.Errorf("resource segment %q: must be non-empty, not \".\" or \"..\", without '/' or NUL", seg)
	}
	return Template{text: "/" + seg, segs: []templateSegment{{literal: seg}}}, nil
}

func validArgumentName(s string) bool {
	if len(s) == 0 || len(s) > MaxArgumentName {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// String returns the template as it was written.
func (t Template) String() string { return t.text }

// Arguments returns the placeholder names, in the order they appear.
func (t Template) Arguments() []string {
	var names []string
	for _, s := range t.segs {
		if s.arg != "" {
			names = append(names, s.arg)
		}
	}
	return names
}

// Placeholders returns the placeholders, in the order they appear.
func (t Template) Placeholders() []Placeholder {
	var out []Placeholder
	for _, s := range t.segs {
		if s.arg != "" {
			out = append(out, Placeholder{Name: s.arg, Kind: s.kind})
		}
	}
	return out
}

// Prefix returns the path made of the literal segments before the first
// placeholder ("/" when the template starts with one), which every filled
// path lies under; for a template without placeholders, the path itself.
// A tool is discoverable when some grant allows its action on or under
// the prefix (see Discoverable).
func (t Template) Prefix() string {
	var b strings.Builder
	for _, s := range t.segs {
		if s.arg != "" {
			break
		}
		b.WriteByte('/')
		b.WriteString(s.literal)
	}
	if b.Len() == 0 {
		return "/"
	}
	return b.String()
}

// ArgumentError is an argument that cannot name a resource segment: the
// call is invalid and must not reach the tool.
type ArgumentError struct {
	Argument string
	Problem  string
}

func (e *ArgumentError) Error() string {
	return fmt.Sprintf("argument %q %s", e.Argument, e.Problem)
}

// Filled is what a template names for one call.
type Filled struct {
	// Path is the resource's path: clean, absolute, under the template's
	// Prefix.
	Path string
	// Forward holds, for each placeholder's argument, the JSON value to
	// forward in its place: the form that names the same resource (an
	// integer as the integer it names, a path cleaned or resolved, a URL
	// normalized).
	Forward map[string]json.RawMessage
}

// HostPath resolves a path placeholder's cleaned value on the host whose
// files the tool reads: it returns the absolute, clean path the value
// really leads to (links followed), or an error whose text says, for the
// model, why it cannot. nil leaves paths as they are written.
type HostPath func(cleaned string) (string, error)

// Fill returns what the template names for a call's arguments (the
// members of its arguments object). A plain placeholder takes its
// argument's value, a string or an integer (see ArgumentSegment), as one
// segment. A path placeholder takes a string path (see fillPath): with
// host set, the path it really leads to on this host, which is then both
// the resource and the value forwarded. A URL placeholder takes an http
// or https URL (see fillURL). An error is an *ArgumentError.
func (t Template) Fill(args map[string]json.RawMessage, host HostPath) (Filled, error) {
	f := Filled{Path: "/", Forward: map[string]json.RawMessage{}}
	if len(t.segs) == 0 {
		return f, nil
	}
	var b strings.Builder
	b.Grow(len(t.text))
	for _, s := range t.segs {
		if s.arg == "" {
			b.WriteByte('/')
			b.WriteString(s.literal)
			continue
		}
		raw, ok := args[s.arg]
		if !ok {
			return Filled{}, &ArgumentError{Argument: s.arg, Problem: "is required: it names the resource"}
		}
		var segs []string
		var fwd json.RawMessage
		var err error
		switch s.kind {
		case KindPath:
			segs, fwd, err = fillPath(raw, host)
		case KindURL:
			segs, fwd, err = fillURL(raw)
		default:
			var seg string
			if seg, err = ArgumentSegment(raw); err == nil {
				segs, fwd = []string{seg}, segmentValue(raw, seg)
			}
		}
		if err != nil {
			var ae *ArgumentError
			if errors.As(err, &ae) {
				ae.Argument = s.arg
			}
			return Filled{}, err
		}
		for _, seg := range segs {
			b.WriteByte('/')
			b.WriteString(seg)
		}
		f.Forward[s.arg] = fwd
	}
	if b.Len() > 0 {
		f.Path = b.String()
	}
	return f, nil
}

// segmentValue is the JSON to forward for a plain placeholder's value
// that names seg: the string it decoded to, or the integer it names.
func segmentValue(raw json.RawMessage, seg string) json.RawMessage {
	if bytes.TrimSpace(raw)[0] == '"' {
		return quote(seg)
	}
	return json.RawMessage(seg)
}

// ArgumentSegment returns the path segment a JSON argument value names:
// a string as it decodes, or an integer in plain decimal (an integral
// number such as 3.0 names "3"). A string that is empty, "." or "..",
// contains '/' or NUL, is longer than MaxSegment bytes, or that some
// upstream could read as another segment or more than one (see
// segmentProblem) is refused, and so is an integer beyond ±(2^53-1) or
// any other kind of value. The error is an *ArgumentError whose Argument
// is empty.
//
// A string that is not valid UTF-8 (or a lone surrogate escape) decodes
// with U+FFFD in its place: whoever forwards the call must forward the
// decoded value (re-encoded), not the original text, so that the tool
// sees the resource that was authorized.
func ArgumentSegment(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", &ArgumentError{Problem: "is empty"}
	}
	switch c := raw[0]; {
	case c == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", &ArgumentError{Problem: "is not a valid JSON string"}
		}
		if problem := segmentProblem(s); problem != "" {
			return "", &ArgumentError{Problem: problem}
		}
		return s, nil
	case c == '-' || '0' <= c && c <= '9':
		n, ok := integerValue(string(raw))
		if !ok {
			return "", &ArgumentError{Problem: fmt.Sprintf("must be an integer between %d and %d", -maxSafeInteger, maxSafeInteger)}
		}
		return strconv.FormatInt(n, 10), nil
	}
	return "", &ArgumentError{Problem: "must be a string or an integer: it names a resource"}
}

// segmentProblem says why a decoded string cannot be one resource
// segment, or "" when it can. Besides what a path segment cannot be
// ("", "." or "..", '/', NUL), it refuses what some upstream could read
// as more than one segment or as another one: '%' (percent-decoding),
// '\\' (a separator on Windows and to some path libraries), control
// characters, white space at either end (trimmed by some), and a value
// whose NFKC form is "." or ".." or holds '/' or '\\' ("．．" with
// U+FF0E, "․․" with U+2024), for upstreams that normalize Unicode.
func segmentProblem(s string) string {
	switch {
	case s == "":
		return "must not be empty: it names a resource"
	case s == "." || s == "..":
		return fmt.Sprintf("must not be %q: it names a resource", s)
	case strings.Contains(s, "/"):
		return "must not contain '/': it names one resource segment"
	case strings.ContainsRune(s, 0):
		return "must not contain NUL"
	case len(s) > MaxSegment:
		return fmt.Sprintf("is %d bytes long; a resource segment is at most %d", len(s), MaxSegment)
	case strings.ContainsAny(s, `%\`):
		return `must not contain '%' or '\': an upstream may read them as an escape or a separator`
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return "must not contain control characters"
	}
	first, _ := utf8.DecodeRuneInString(s)
	last, _ := utf8.DecodeLastRuneInString(s)
	if unicode.IsSpace(first) || unicode.IsSpace(last) {
		return "must not begin or end with white space: an upstream may trim it"
	}
	if !isASCII(s) {
		if n := norm.NFKC.String(s); n == "." || n == ".." || strings.ContainsAny(n, `/\`) {
			return fmt.Sprintf("reads as %q to an upstream that normalizes Unicode (NFKC); it names one resource segment", n)
		}
	}
	return ""
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// integerValue reads a JSON number that is an integer within the safe
// range.
func integerValue(s string) (int64, bool) {
	if !json.Valid([]byte(s)) {
		return 0, false
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, n >= -maxSafeInteger && n <= maxSafeInteger
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > maxSafeInteger {
		return 0, false
	}
	return int64(f), true
}
