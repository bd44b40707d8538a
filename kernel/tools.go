package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/sharedos/sharedos-mcp/hashing"
	"github.com/sharedos/sharedos-mcp/internal/clip"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/kernel/files"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
	"github.com/sharedos/sharedos-mcp/policy"
)

// Sources and namespaces of the tools this kernel registers.
const (
	toolSource        = "sharedos-mcp"
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
	// acted says the call changed something (a file written, a turn
	// escalated), or may have: a brokered call with an effect once its
	// upstream may have received it, whatever it answered.
	acted bool
	// retryable says the same call may succeed later (a brokered call
	// that timed out, an upstream restarting, a limit whose window ends);
	// retryAfter, when set, says after how long.
	retryable  bool
	retryAfter time.Duration
	// approvalID is, for approval_pending and approval_declined, the
	// approval a person was asked for; note says for the record why an
	// asked call was not decided while it was held.
	approvalID string
	note       string
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

// fileOutcome is a file tool's outcome as the turn answers it.
func fileOutcome(o files.Outcome) outcome {
	return outcome{status: o.Status, code: o.Code, message: o.Message, output: o.Output, text: o.Text, acted: o.Acted}
}

// refusal is a refusal (its status, code and message) as the file tools
// hand it back.
func (o outcome) refusal() files.Outcome {
	return files.Outcome{Status: o.status, Code: o.code, Message: o.message}
}

// callEnv is what a running tool may use besides its arguments.
type callEnv struct {
	// file is what a file tool may use: the root, and the grants and the
	// audit log asked through the turn (see files.Call).
	file files.Call
	// escalate ends the turn by asking a person. It returns false, and
	// nothing happens, when that cannot be recorded.
	escalate func(reason string) bool
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
	// the code of a *files.ArgError.
	target func(args map[string]string) (policy.Resource, error)
	// resolves is set for tools that find out what the named resource
	// really is (where its links lead) and authorize that themselves,
	// through files.Call.Authorize. Other tools are authorized on target's
	// resource before they run.
	resolves bool
	run      func(ctx context.Context, env *callEnv, res policy.Resource, args map[string]string) outcome
	// brokered is set for a tool an upstream offers; turn.runBrokered
	// runs it, and params, target, resolves and run are unused.
	brokered *upstream.Tool
	// raw is def as JSON, when it was encoded ahead of the turn.
	raw json.RawMessage
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

var escalateParams = []param{{"reason", "What you need from a person and why, in one or two sentences."}}

// registry returns every tool this kernel can serve, in name order: the
// file tools, then sharedos.escalate.
func registry() []*tool {
	var tools []*tool
	for _, ft := range files.Tools() {
		tools = append(tools, fileTool(ft))
	}
	return append(tools, escalateTool())
}

// fileTool registers a file tool. Its calls are authorized where the
// tool resolves the path they name, through files.Call.Authorize.
func fileTool(ft files.Tool) *tool {
	params := make([]param, len(ft.Params))
	for i, p := range ft.Params {
		params[i] = param{p.Name, p.Description}
	}
	return &tool{
		def: definition{
			Definition: hashing.Definition{
				Name: ft.Name, Description: ft.Description, Namespace: files.Namespace, Source: toolSource, ReadWrite: ft.ReadWrite,
				InputSchema: inputSchema(params), OutputSchema: ft.OutputSchema, Annotations: ft.Annotations,
			},
			RequiredCapability: capability{Resource: capabilityResource{Namespace: files.Namespace}, Action: ft.Action},
		},
		params: params, scope: policy.Resource{Namespace: files.Namespace, Path: "/"}, action: ft.Action, target: ft.Target, resolves: true,
		run: func(ctx context.Context, env *callEnv, res policy.Resource, args map[string]string) outcome {
			return fileOutcome(ft.Run(ctx, &env.file, res, args))
		},
	}
}

// escalateTool is sharedos.escalate: the model asks a person, and its
// turn takes no more calls.
func escalateTool() *tool {
	return &tool{
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
	}
}
