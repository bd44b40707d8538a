package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/sharedos/sharedos-mcp/hashing"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/policy"
)

// Sources and namespaces of the tools this kernel registers.
const (
	toolSource        = "sharedos-mcp"
	namespaceFiles    = "files"
	namespaceSharedOS = "sharedos"
	escalateToolName  = "sharedos.escalate"
)

// definition is the kernel-side tool definition (docs/catalog-hash.md input):
// the fields hashing reads, plus RequiredCapability, which is
// kernel-internal and which the shim's projection never publishes.
type definition struct {
	hashing.Definition
	RequiredCapability capability `json:"requiredCapability"`
}

type capability struct {
	Resource capabilityResource `json:"resource"`
	Action   string             `json:"action"`
}

type capabilityResource struct {
	Namespace string `json:"namespace"`
	Path      string `json:"path,omitempty"`
}

// param is one input field. Every field of every tool here is a required
// string, which keeps the schema and its check in one place.
type param struct {
	name        string
	description string
}

// outcome is what running a tool produced, before it becomes an
// InvokeResult.
type outcome struct {
	status  string
	code    string
	message string
	output  any
	text    string // when set, sent as one text content block
}

func succeeded(output any, text string) outcome {
	return outcome{status: kproto.StatusSucceeded, output: output, text: text}
}

func failed(code, format string, args ...any) outcome {
	return outcome{status: kproto.StatusFailed, code: code, message: fmt.Sprintf(format, args...)}
}

func denied(code, format string, args ...any) outcome {
	return outcome{status: kproto.StatusDenied, code: code, message: fmt.Sprintf(format, args...)}
}

// callEnv is what a running tool may use besides its arguments.
type callEnv struct {
	files *filesRoot
	// allowed re-checks a grant for resources a tool reaches beyond the
	// one it was authorized for (files.search visits many files).
	allowed func(r policy.Resource, action string) bool
	// escalate ends the turn by asking a person.
	escalate func(reason string)
}

// tool is a registered tool: its definition, how to read its arguments,
// which resource a call acts on, and how to run it.
type tool struct {
	def    definition
	params []param
	// scope is where a grant must sit for the tool to be discoverable.
	scope  policy.Resource
	action string
	// target derives the exact resource a call acts on from its checked
	// arguments; a non-nil error is an invalid_arguments failure.
	target func(args map[string]string) (policy.Resource, error)
	run    func(ctx context.Context, env *callEnv, res policy.Resource, args map[string]string) outcome
}

// parseArgs checks raw against the tool's schema: an object whose keys are
// exactly the declared parameters, each a string. It returns a message for
// the model on failure.
func (t *tool) parseArgs(raw json.RawMessage) (map[string]string, string) {
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return nil, "arguments must be a JSON object"
	}
	args := make(map[string]string, len(t.params))
	for _, p := range t.params {
		v, ok := fields[p.name]
		if !ok {
			return nil, fmt.Sprintf("missing required argument %q", p.name)
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil || string(v) == "null" {
			return nil, fmt.Sprintf("argument %q must be a string", p.name)
		}
		args[p.name] = s
	}
	for k := range fields {
		if _, ok := args[k]; !ok {
			return nil, fmt.Sprintf("unknown argument %q (allowed: %s)", k, t.paramNames())
		}
	}
	return args, ""
}

func (t *tool) paramNames() string {
	names := make([]string, len(t.params))
	for i, p := range t.params {
		names[i] = p.name
	}
	return strings.Join(names, ", ")
}

// inputSchema renders params as a JSON Schema that refuses anything else.
func inputSchema(params []param) json.RawMessage {
	props := map[string]any{}
	required := []string{}
	for _, p := range params {
		props[p.name] = map[string]any{"type": "string", "description": p.description}
		required = append(required, p.name)
	}
	return mustJSON(map[string]any{
		"type":                 "object",
		"properties":           props,
		"required":             required,
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

// filePath checks a path argument and returns it cleaned: it must be
// absolute ("/" is the files root), free of NUL and of ".." segments.
// Refusing ".." rather than cleaning it away keeps a confused or hostile
// caller from learning anything by walking up.
func filePath(p string) (string, error) {
	if p == "" || !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("path %q must be absolute: \"/\" is the files root", p)
	}
	if strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("path must not contain NUL")
	}
	if !utf8.ValidString(p) {
		return "", fmt.Errorf("path must be valid UTF-8")
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return "", fmt.Errorf("path %q must not contain \"..\"", p)
		}
	}
	return path.Clean(p), nil
}

func filesTarget(args map[string]string) (policy.Resource, error) {
	p, err := filePath(args["path"])
	if err != nil {
		return policy.Resource{}, err
	}
	return policy.Resource{Namespace: namespaceFiles, Path: p}, nil
}

var (
	pathParam = param{"path", `Absolute path inside the shared files root, e.g. "/" or "/src/main.go". "/" is the root itself; ".." is refused.`}

	escalateParams = []param{{"reason", "What you need from a person and why, in one or two sentences."}}
)

// The output schemas are built when the registry is, not at package init:
// every sharedos-mcp command links this package, and serve should not pay
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

// registry returns every tool this kernel can serve, in name order.
func registry() []*tool {
	filesScope := policy.Resource{Namespace: namespaceFiles, Path: "/"}
	readCap := func(action string) capability {
		return capability{Resource: capabilityResource{Namespace: namespaceFiles}, Action: action}
	}
	fileTool := func(name, action, readWrite, desc string, params []param, out json.RawMessage, ann *hashing.Annotations,
		run func(context.Context, *callEnv, policy.Resource, map[string]string) outcome) *tool {
		return &tool{
			def: definition{
				Definition: hashing.Definition{
					Name: name, Description: desc, Namespace: namespaceFiles, Source: toolSource, ReadWrite: readWrite,
					InputSchema: inputSchema(params), OutputSchema: out, Annotations: ann,
				},
				RequiredCapability: readCap(action),
			},
			params: params, scope: filesScope, action: action, target: filesTarget, run: run,
		}
	}
	return []*tool{
		fileTool("files.list", policy.ActionList, "read",
			"List the entries of a directory in the shared files root. Returns each entry's name, type (\"file\" or \"dir\") and size in bytes, sorted by name. "+
				"Symbolic links are shown as what they point to; entries that are neither files nor directories, or that point outside the root, are left out. "+
				"Start with path \"/\" to see what is shared.",
			[]param{pathParam}, listOutputSchema(), &hashing.Annotations{ReadOnly: boolp(true), Idempotent: boolp(true)}, runList),
		fileTool("files.read", policy.ActionRead, "read",
			fmt.Sprintf("Read a UTF-8 text file from the shared files root and return its whole content. "+
				"Files larger than %d bytes, binary files and directories are refused; use files.search to find lines in large trees.", maxReadBytes),
			[]param{pathParam}, nil, &hashing.Annotations{ReadOnly: boolp(true), Idempotent: boolp(true)}, runRead),
		fileTool("files.search", policy.ActionSearch, "read",
			fmt.Sprintf("Find lines containing a literal substring (case-sensitive, no regular expressions) in the text files under a directory of the shared files root, or in one file. "+
				"Returns at most %d matches as {path, line, text}; binary files, files over %d bytes and .git directories are skipped, and truncated is true when a limit cut the search short.",
				maxSearchMatches, maxReadBytes),
			[]param{pathParam, {"query", "The exact text to look for, 1 to 1024 bytes."}}, searchOutputSchema(),
			&hashing.Annotations{ReadOnly: boolp(true), Idempotent: boolp(true)}, runSearch),
		fileTool("files.write", policy.ActionWrite, "write",
			fmt.Sprintf("Create or replace a UTF-8 text file in the shared files root with the given content (at most %d bytes). "+
				"The parent directory must already exist. The file is replaced atomically: readers see the old or the new content, never a mix. "+
				"Overwriting destroys the previous content.", maxReadBytes),
			[]param{pathParam, {"content", "The complete new content of the file."}}, nil,
			&hashing.Annotations{ReadOnly: boolp(false), Destructive: boolp(true), Idempotent: boolp(true)}, runWrite),
		{
			def: definition{
				Definition: hashing.Definition{
					Name: escalateToolName,
					Description: "Stop and ask a person. Use this when the task needs something you are not allowed to do, or a decision a person should make. " +
						"It ends your turn: every later tool call in this turn is refused. Say in reason what you need and why.",
					Namespace: namespaceSharedOS, Source: toolSource, ReadWrite: "read",
					InputSchema: inputSchema(escalateParams),
				},
				RequiredCapability: capability{
					Resource: capabilityResource{Namespace: namespaceSharedOS, Path: "/escalate"},
					Action:   policy.ActionEscalate,
				},
			},
			params: escalateParams,
			scope:  policy.Resource{Namespace: namespaceSharedOS, Path: "/escalate"},
			action: policy.ActionEscalate,
			target: func(map[string]string) (policy.Resource, error) {
				return policy.Resource{Namespace: namespaceSharedOS, Path: "/escalate"}, nil
			},
			run: func(_ context.Context, env *callEnv, _ policy.Resource, args map[string]string) outcome {
				env.escalate(args["reason"])
				return succeeded(map[string]any{"escalated": true, "reason": args["reason"]},
					"Escalated to a person. Your turn is over: stop calling tools and tell the user what you asked for.")
			},
		},
	}
}
