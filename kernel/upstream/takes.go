package upstream

import (
	"encoding/json"
	"slices"
	"strings"
	"unicode"

	"github.com/sharedos/sharedos-mcp/policy"
)

// What an argument takes, as its schema reads (Argument.Takes).
const (
	TakesPath = "path"
	TakesURL  = "url"
)

// Argument is what a tool's input schema says of the argument a
// placeholder of its resource names: enough to tell a plain {name} on an
// argument that takes a path or a URL, which the plain placeholder
// refuses whole as soon as it holds a '/' (`kernel check` suggests
// {name:path} or {name:url} for it).
type Argument struct {
	Name string      // the placeholder's, and the argument's
	Kind policy.Kind // the placeholder's kind
	// Takes is TakesPath or TakesURL when the schema reads as the
	// argument taking one, "" otherwise; By says what in the schema says
	// so: "format" (its format), "name" (a name such as path, file_path,
	// dir or url) or "description" (its description names a path or a
	// URL).
	Takes, By string
	Format    string // the argument's format in the schema, when it has one
}

// pathNames and urlNames are the last words of an argument's name that
// say what it takes (file_path, sourceDir, targetURL).
var (
	pathNames = []string{"path", "paths", "pathname", "filepath", "file", "filename", "dir", "dirname", "directory", "folder"}
	urlNames  = []string{"url", "urls", "uri", "uris", "href"}
)

// pathWords and urlWords are the words of a description that say what
// the argument takes. A description that only mentions a file ("the
// text to write into the file") does not.
var (
	pathWords = []string{"path", "paths", "filepath", "pathname"}
	urlWords  = []string{"url", "urls", "uri", "uris"}
)

// placeholderArguments says, for each placeholder of r, what schema says
// of its argument. A placeholder whose argument the schema does not
// declare is left out (the judge withholds such a tool).
func placeholderArguments(r policy.Template, schema json.RawMessage) []Argument {
	placeholders := r.Placeholders()
	if len(placeholders) == 0 {
		return nil
	}
	var s struct {
		Properties map[string]struct {
			Format      any `json:"format"`
			Description any `json:"description"`
		} `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return nil
	}
	var out []Argument
	for _, ph := range placeholders {
		p, ok := s.Properties[ph.Name]
		if !ok {
			continue
		}
		a := Argument{Name: ph.Name, Kind: ph.Kind}
		a.Format, _ = p.Format.(string)
		description, _ := p.Description.(string)
		a.Takes, a.By = takes(ph.Name, a.Format, description)
		out = append(out, a)
	}
	return out
}

// takes says whether an argument with this name, format and description
// takes a path or a URL, and what says so; the format first, then the
// name, then the description.
func takes(name, format, description string) (what, by string) {
	switch f := strings.ToLower(format); {
	case f == "uri" || f == "url" || f == "iri" || f == "uri-reference" || f == "iri-reference":
		return TakesURL, "format"
	case strings.Contains(f, "path") || f == "file" || f == "directory":
		return TakesPath, "format"
	}
	if w := words(name); len(w) > 0 {
		switch last := w[len(w)-1]; {
		case slices.Contains(pathNames, last):
			return TakesPath, "name"
		case slices.Contains(urlNames, last):
			return TakesURL, "name"
		}
	}
	for _, w := range words(description) {
		switch {
		case slices.Contains(pathWords, w):
			return TakesPath, "description"
		case slices.Contains(urlWords, w):
			return TakesURL, "description"
		}
	}
	return "", ""
}

// words splits s into lowercase words at every rune that is not a letter
// or a digit, and where a lowercase letter or digit is followed by an
// uppercase one (filePath, sourceURL).
func words(s string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	var prev rune
	for _, r := range s {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush()
		case unicode.IsUpper(r) && (unicode.IsLower(prev) || unicode.IsDigit(prev)):
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
		prev = r
	}
	flush()
	return out
}
