package secret

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Set is the values of the secrets loaded together. It is immutable; a
// reload loads a new one.
type Set struct {
	values map[string]string
	specs  []Spec
}

// Specs returns the specs the set was loaded from, in config order: what
// kernel check and doctor list (names and sources, never values).
func (s *Set) Specs() []Spec { return slices.Clone(s.specs) }

// Value returns the value of the secret name, for the kernel's own use of
// it (an OAuth client secret); ok is false when no secret of that name was
// loaded.
func (s *Set) Value(name string) (value string, ok bool) {
	value, ok = s.values[name]
	return value, ok
}

// refPrefix opens a reference to a secret: {secret:NAME}.
const refPrefix = "{secret:"

// Errors of Expand and Refs.
var (
	ErrUnknownSecret = errors.New("no [[secret]] has this name")
	ErrMalformedRef  = errors.New(`a reference is {secret:NAME}, NAME being 1-64 of A-Z, a-z, 0-9, '-', '_', '.'`)
)

// RefError is a {secret:…} reference that cannot be expanded. Name is the
// name as written (empty when it could not be read); the text around it,
// which may hold other secrets' values once expanded, is never part of the
// error.
type RefError struct {
	Name string
	Err  error // ErrUnknownSecret or ErrMalformedRef
}

func (e *RefError) Error() string {
	if e.Name == "" {
		return e.Err.Error()
	}
	return fmt.Sprintf("{secret:%s}: %v", e.Name, e.Err)
}

func (e *RefError) Unwrap() error { return e.Err }

// Refs returns the names text refers to with {secret:NAME}, in order, each
// once, or a *RefError for a reference that is not well formed. The
// kernel's config check uses it to name unknown secrets without loading
// any.
func Refs(text string) ([]string, error) {
	var names []string
	err := scan(text, func(name string) error {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
		return nil
	})
	return names, err
}

// Expand replaces every {secret:NAME} in text with that secret's value. A
// name the set does not hold, or a malformed reference, is a *RefError
// naming it. The kernel expands an upstream's env and headers values and
// [telemetry]'s headers with it, and nothing else.
func (s *Set) Expand(text string) (string, error) {
	if !strings.Contains(text, refPrefix) {
		return text, nil
	}
	var b strings.Builder
	last := 0
	err := scanAt(text, func(start, end int, name string) error {
		v, ok := s.values[name]
		if !ok {
			return &RefError{Name: name, Err: ErrUnknownSecret}
		}
		b.WriteString(text[last:start])
		b.WriteString(v)
		last = end
		return nil
	})
	if err != nil {
		return "", err
	}
	b.WriteString(text[last:])
	return b.String(), nil
}

// ExpandValues returns a copy of m with every value expanded; an error
// names the key whose value holds the bad reference.
func (s *Set) ExpandValues(m map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(m))
	for _, k := range sortedKeys(m) {
		v, err := s.Expand(m[k])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out[k] = v
	}
	return out, nil
}

func scan(text string, f func(name string) error) error {
	return scanAt(text, func(_, _ int, name string) error { return f(name) })
}

// scanAt calls f with the bounds and name of each reference in text.
func scanAt(text string, f func(start, end int, name string) error) error {
	for i := 0; ; {
		j := strings.Index(text[i:], refPrefix)
		if j < 0 {
			return nil
		}
		start := i + j
		rest := text[start+len(refPrefix):]
		k := strings.IndexByte(rest, '}')
		if k < 0 || !ValidName(rest[:k]) {
			return &RefError{Err: ErrMalformedRef}
		}
		end := start + len(refPrefix) + k + 1
		if err := f(start, end, rest[:k]); err != nil {
			return err
		}
		i = end
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
