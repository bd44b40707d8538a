package files

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/sharedos/sharedos-mcp/hashing"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/policy"
)

// Tool is one file tool as the kernel registers it: its definition's
// fields, its parameters (every one a required string), how a call's
// arguments name the resource it acts on, and how it runs. Every file
// tool resolves what the named path really is and authorizes that itself,
// through Call.Authorize.
type Tool struct {
	Name, Action string
	ReadWrite    string // "read" or "write", as hashing.Definition has it
	Description  string
	Params       []Param
	OutputSchema json.RawMessage // nil: the result is text
	Annotations  *hashing.Annotations
	// Target derives the resource a call names from its checked
	// arguments. A non-nil error refuses the call: invalid_arguments, or
	// the code of an *ArgError.
	Target func(args map[string]string) (policy.Resource, error)
	Run    func(ctx context.Context, c *Call, res policy.Resource, args map[string]string) Outcome
}

// Param is one input field of a tool.
type Param struct {
	Name        string
	Description string
}

// ArgError refuses arguments with a code of its own.
type ArgError struct{ Code, Msg string }

func (e *ArgError) Error() string { return e.Msg }

// filePath checks a path argument and returns it cleaned: it must be
// absolute ("/" is the files root), at most maxPathBytes, valid UTF-8,
// free of NUL and of ".." segments. Refusing ".." rather than cleaning
// it away keeps a confused or hostile caller from learning anything by
// walking up.
func filePath(p string) (string, error) {
	if len(p) > maxPathBytes {
		return "", fmt.Errorf("path is %d bytes, over the %d-byte limit", len(p), maxPathBytes)
	}
	if p == "" || !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("path %q must be absolute: \"/\" is the files root", shown(p))
	}
	if strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("path must not contain NUL")
	}
	if !utf8.ValidString(p) {
		return "", fmt.Errorf("path must be valid UTF-8")
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return "", fmt.Errorf("path %q must not contain \"..\"", shown(p))
		}
	}
	return path.Clean(p), nil
}

func filesTarget(args map[string]string) (policy.Resource, error) {
	p, err := filePath(args["path"])
	if err != nil {
		return policy.Resource{}, err
	}
	return policy.Resource{Namespace: Namespace, Path: p}, nil
}

func searchTarget(args map[string]string) (policy.Resource, error) {
	query := args["query"]
	if query == "" || len(query) > maxQueryBytes {
		return policy.Resource{}, fmt.Errorf("query must be 1 to %d bytes", maxQueryBytes)
	}
	if strings.ContainsAny(query, "\n\r") {
		return policy.Resource{}, errors.New("query must be one line (it is matched line by line)")
	}
	return filesTarget(args)
}

func writeTarget(args map[string]string) (policy.Resource, error) {
	if n := len(args["content"]); n > MaxReadBytes {
		return policy.Resource{}, &ArgError{kproto.CodeTooLarge, fmt.Sprintf("content is %d bytes, over the %d-byte limit", n, MaxReadBytes)}
	}
	res, err := filesTarget(args)
	if err == nil && res.Path == "/" {
		return policy.Resource{}, &ArgError{CodeNotFile, "/ is the root directory; name a file under it"}
	}
	return res, err
}

var pathParam = Param{"path", `Absolute path inside the shared files root, e.g. "/" or "/src/main.go". "/" is the root itself; ".." is refused.`}

// The output schemas are built when the registry is, not at package init:
// every sharedos-mcp command links the file tools, and serve should not pay
// for encoding them.
func listOutputSchema() json.RawMessage {
	return mustJSON(map[string]any{
		"type": "object",
		"properties": map[string]any{
			"entries": map[string]any{
				"type": "array",
				"items": map[string]any{
					"type": "object",
					"properties": map[string]any{
						"name": map[string]any{"type": "string"},
						"type": map[string]any{"type": "string", "enum": []string{"file", "dir"}},
						"size": map[string]any{"type": "integer", "description": "Size in bytes; 0 for directories."},
					},
					"required":             []string{"name", "type", "size"},
					"additionalProperties": false,
				},
			},
			"truncated": map[string]any{"type": "boolean", "description": "True when the directory had more entries than were returned."},
		},
		"required":             []string{"entries", "truncated"},
		"additionalProperties": false,
	})
}

func searchOutputSchema() json.RawMessage {
	return mustJSON(map[string]any{
		"type": "object",
		"properties": map[string]any{
			"matches": map[string]any{
				"type": "array",
				"items": map[string]any{
					"type": "object",
					"properties": map[string]any{
						"path": map[string]any{"type": "string"},
						"line": map[string]any{"type": "integer", "description": "1-based line number."},
						"text": map[string]any{"type": "string", "description": "The matching line, shortened if very long."},
					},
					"required":             []string{"path", "line", "text"},
					"additionalProperties": false,
				},
			},
			"truncated": map[string]any{"type": "boolean", "description": "True when a limit stopped the search early; narrow the path or query."},
		},
		"required":             []string{"matches", "truncated"},
		"additionalProperties": false,
	})
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only called on literal schemas built in this file
	}
	return b
}

func boolp(b bool) *bool { return &b }

// Tools returns the file tools, in name order.
func Tools() []Tool {
	return []Tool{
		{
			Name: "files.list", Action: policy.ActionList, ReadWrite: "read",
			Description: fmt.Sprintf("List the entries of a directory in the shared files root. Returns each entry's name, type (\"file\" or \"dir\") and size in bytes, sorted by name: "+
				"at most %d entries, the first by name, and truncated is true when there were more. "+
				"A symbolic link is shown as what it points to, and only when that is inside the root in a directory you may list; entries that are neither files nor directories are left out. "+
				"Start with path \"/\" to see what is shared.", maxListEntries),
			Params: []Param{pathParam}, OutputSchema: listOutputSchema(), Annotations: &hashing.Annotations{ReadOnly: boolp(true), Idempotent: boolp(true)},
			Target: filesTarget, Run: runList,
		},
		{
			Name: "files.read", Action: policy.ActionRead, ReadWrite: "read",
			Description: fmt.Sprintf("Read a UTF-8 text file from the shared files root and return its whole content. "+
				"Files larger than %d bytes, binary files and directories are refused, and so is a file with more than one name (a hard link) unless the host allows them; "+
				"use files.search to find lines in large trees.", MaxReadBytes),
			Params: []Param{pathParam}, Annotations: &hashing.Annotations{ReadOnly: boolp(true), Idempotent: boolp(true)},
			Target: filesTarget, Run: runRead,
		},
		{
			Name: "files.search", Action: policy.ActionSearch, ReadWrite: "read",
			Description: fmt.Sprintf("Find lines containing a literal substring (case-sensitive, no regular expressions) in the text files under a directory of the shared files root, or in one file. "+
				"Returns at most %d matches as {path, line, text}, each path where the file really is; binary files, files over %d bytes, hard-linked files (unless the host allows them), "+
				"symbolic links and .git directories are skipped. One search looks at %d entries and reads %d MiB at most; truncated is true when a limit cut it short.",
				MaxSearchMatches, MaxReadBytes, maxSearchVisited, MaxSearchBytes>>20),
			Params: []Param{pathParam, {"query", "The exact text to look for, 1 to 1024 bytes."}}, OutputSchema: searchOutputSchema(),
			Annotations: &hashing.Annotations{ReadOnly: boolp(true), Idempotent: boolp(true)},
			Target:      searchTarget, Run: runSearch,
		},
		{
			Name: "files.write", Action: policy.ActionWrite, ReadWrite: "write",
			Description: fmt.Sprintf("Create or replace a UTF-8 text file in the shared files root with the given content (at most %d bytes). "+
				"The parent directory must already exist. The file is replaced atomically: readers see the old or the new content, never a mix, and it keeps its permission bits. "+
				"A symbolic link is not written through. Overwriting destroys the previous content.", MaxReadBytes),
			Params:      []Param{pathParam, {"content", "The complete new content of the file."}},
			Annotations: &hashing.Annotations{ReadOnly: boolp(false), Destructive: boolp(true), Idempotent: boolp(true)},
			Target:      writeTarget, Run: runWrite,
		},
	}
}
