package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/sharedos/sharedos-mcp/hashing"
	"github.com/sharedos/sharedos-mcp/internal/clip"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
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
	output  any             // a json.RawMessage is sent as it is
	text    string          // when set, sent as one text content block
	content json.RawMessage // when set, the content blocks as they are (a brokered result)
	acted   bool            // the call changed something (a file written, a turn escalated)
	// retryable says the same call may succeed later (a brokered call
	// that timed out, an upstream restarting).
	retryable bool
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
	// hardLinks serves regular files that have more than one name.
	hardLinks bool
	// requested is the resource the call named.
	requested policy.Resource
	// authorize decides the call's grant on the resource the tool has
	// resolved, the one it is about to touch, and reports the denial to
	// answer when no grant allows it. A tool that resolves (tool.resolves)
	// calls it exactly once, before it reads or acts.
	authorize func(r policy.Resource) (outcome, bool)
	// allowed checks a grant for resources a tool reaches beyond its own
	// (files.search reads many files, files.list shows where links lead).
	allowed func(r policy.Resource, action string) bool
	// commit records, durably, that the call is about to change
	// something. When it returns false the audit log cannot be written
	// and the tool must not act.
	commit func() bool
	// escalate ends the turn by asking a person. It returns false, and
	// nothing happens, when that cannot be recorded.
	escalate func(reason string) bool
	// progress reports how far the call has got (total 0: unknown). A
	// tool may call it any number of times while it runs, never after.
	progress func(progress, total float64, message string)
}

// hasEffect reports whether a call of t may change anything: a tool that
// writes, and escalation, which ends the turn's ability to act. The turn
// orders calls by it (see sequencer).
func (t *tool) hasEffect() bool {
	return t.def.ReadWrite != "read" || t.action == policy.ActionEscalate
}

// tool is a registered tool: its definition, how to read its arguments,
// which resource a call acts on, and how to run it.
type tool struct {
	def    definition
	params []param
	// scope is where a grant must sit for the tool to be discoverable.
	scope  policy.Resource
	action string
	// target derives the resource a call names from its checked
	// arguments. A non-nil error refuses the call: invalid_arguments, or
	// the code of an *argError.
	target func(args map[string]string) (policy.Resource, error)
	// resolves is set for tools that find out what the named resource
	// really is (where its links lead) and authorize that themselves,
	// through callEnv.authorize. Other tools are authorized on target's
	// resource before they run.
	resolves bool
	run      func(ctx context.Context, env *callEnv, res policy.Resource, args map[string]string) outcome
	// brokered is set for a tool an upstream offers; turn.runBrokered
	// runs it, and params, target, resolves and run are unused.
	brokered *upstream.Tool
	// raw is def as JSON, when it was encoded ahead of the turn.
	raw json.RawMessage
}

// argError refuses arguments with a code of its own.
type argError struct{ code, msg string }

func (e *argError) Error() string { return e.msg }

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
	return policy.Resource{Namespace: namespaceFiles, Path: p}, nil
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
	if n := len(args["content"]); n > maxReadBytes {
		return policy.Resource{}, &argError{codeTooLarge, fmt.Sprintf("content is %d bytes, over the %d-byte limit", n, maxReadBytes)}
	}
	res, err := filesTarget(args)
	if err == nil && res.Path == "/" {
		return policy.Resource{}, &argError{codeNotFile, "/ is the root directory; name a file under it"}
	}
	return res, err
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
		target func(map[string]string) (policy.Resource, error), run func(context.Context, *callEnv, policy.Resource, map[string]string) outcome) *tool {
		return &tool{
			def: definition{
				Definition: hashing.Definition{
					Name: name, Description: desc, Namespace: namespaceFiles, Source: toolSource, ReadWrite: readWrite,
					InputSchema: inputSchema(params), OutputSchema: out, Annotations: ann,
				},
				RequiredCapability: readCap(action),
			},
			params: params, scope: filesScope, action: action, target: target, resolves: true, run: run,
		}
	}
	return []*tool{
		fileTool("files.list", policy.ActionList, "read",
			fmt.Sprintf("List the entries of a directory in the shared files root. Returns each entry's name, type (\"file\" or \"dir\") and size in bytes, sorted by name: "+
				"at most %d entries, the first by name, and truncated is true when there were more. "+
				"A symbolic link is shown as what it points to, and only when that is inside the root in a directory you may list; entries that are neither files nor directories are left out. "+
				"Start with path \"/\" to see what is shared.", maxListEntries),
			[]param{pathParam}, listOutputSchema(), &hashing.Annotations{ReadOnly: boolp(true), Idempotent: boolp(true)}, filesTarget, runList),
		fileTool("files.read", policy.ActionRead, "read",
			fmt.Sprintf("Read a UTF-8 text file from the shared files root and return its whole content. "+
				"Files larger than %d bytes, binary files and directories are refused, and so is a file with more than one name (a hard link) unless the host allows them; "+
				"use files.search to find lines in large trees.", maxReadBytes),
			[]param{pathParam}, nil, &hashing.Annotations{ReadOnly: boolp(true), Idempotent: boolp(true)}, filesTarget, runRead),
		fileTool("files.search", policy.ActionSearch, "read",
			fmt.Sprintf("Find lines containing a literal substring (case-sensitive, no regular expressions) in the text files under a directory of the shared files root, or in one file. "+
				"Returns at most %d matches as {path, line, text}, each path where the file really is; binary files, files over %d bytes, hard-linked files (unless the host allows them), "+
				"symbolic links and .git directories are skipped. One search looks at %d entries and reads %d MiB at most; truncated is true when a limit cut it short.",
				maxSearchMatches, maxReadBytes, maxSearchVisited, maxSearchBytes>>20),
			[]param{pathParam, {"query", "The exact text to look for, 1 to 1024 bytes."}}, searchOutputSchema(),
			&hashing.Annotations{ReadOnly: boolp(true), Idempotent: boolp(true)}, searchTarget, runSearch),
		fileTool("files.write", policy.ActionWrite, "write",
			fmt.Sprintf("Create or replace a UTF-8 text file in the shared files root with the given content (at most %d bytes). "+
				"The parent directory must already exist. The file is replaced atomically: readers see the old or the new content, never a mix, and it keeps its permission bits. "+
				"A symbolic link is not written through. Overwriting destroys the previous content.", maxReadBytes),
			[]param{pathParam, {"content", "The complete new content of the file."}}, nil,
			&hashing.Annotations{ReadOnly: boolp(false), Destructive: boolp(true), Idempotent: boolp(true)}, writeTarget, runWrite),
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
				if !env.escalate(args["reason"]) {
					return auditUnavailable(false)
				}
				o := succeeded(map[string]any{"escalated": true, "reason": clip.String(args["reason"], maxReasonBytes)},
					"Escalated to a person. Your turn is over: stop calling tools and tell the user what you asked for.")
				o.acted = true
				return o
			},
		},
	}
}
