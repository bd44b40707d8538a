// Package kproto holds the message shapes of the kernel socket protocol
// (docs/kernel-protocol.md), version 1. Both the shim's kernel client and
// the reference kernel use them, so the two cannot drift apart silently.
package kproto

import "encoding/json"

// Version is the protocol version this package describes.
const Version = 1

// Method names.
const (
	MethodHello    = "integration.hello"
	MethodList     = "tools.list"
	MethodInvoke   = "tools.invoke"
	MethodCancel   = "call.cancel"
	MethodEscalate = "turn.escalate"
	MethodPing     = "ping"
	// MethodProgress is the one notification a kernel sends: how far a
	// call has got. A kernel that never sends it is conforming.
	MethodProgress = "call.progress"
	// MethodExplain is an operator method: how the kernel would decide a
	// call now, without running it (ExplainParams, ExplainResult).
	MethodExplain = "kernel.explain"

	// Approvals (docs/approvals.md). MethodApprovalAsk is the kernel's
	// one request to the shim: ask the person at the harness about a
	// call the kernel holds (ApprovalAskParams, ApprovalAskResult). A
	// kernel sends it only to a shim whose hello announced
	// ShimCapabilities.Approvals. MethodApprovalWithdrawn (kernel → shim,
	// notification) says the kernel no longer waits for that answer.
	// MethodApprovalAnswer (shim → kernel, notification) is the person's
	// answer to an ask the shim deferred (ApprovalDeferred).
	MethodApprovalAsk       = "approval.ask"
	MethodApprovalWithdrawn = "approval.withdrawn"
	MethodApprovalAnswer    = "approval.answer"
	// Operator methods: what waits for approval (ApprovalsListResult),
	// and a decision on one (ApprovalDecideParams, ApprovalDecideResult).
	MethodApprovalsList    = "approvals.list"
	MethodApprovalsApprove = "approvals.approve"
	MethodApprovalsDeny    = "approvals.deny"
)

// Reason codes carried in a JSON-RPC error's data.code.
const (
	ErrInvalidIntegrationName = "invalid_integration_name"
	ErrAlreadyIntroduced      = "already_introduced"
	ErrHelloRequired          = "hello_required"
	ErrUnsupportedProtocol    = "unsupported_protocol"
	// ErrOperatorOnly refuses an operator method to a connection that is
	// not the operator's (one that said hello, or whose uid the kernel
	// does not serve as operator), and a hello from a uid served as
	// operator only.
	ErrOperatorOnly = "operator_only"
	// ErrUnknownApproval: approvals.approve or approvals.deny named no
	// approval that waits: it never existed, it expired, or the kernel
	// restarted since.
	ErrUnknownApproval = "unknown_approval"
	// ErrApprovalDecided: the approval was decided before (the first
	// decision wins); the error's message says how and by whom.
	ErrApprovalDecided = "approval_decided"
)

// Invocation statuses.
const (
	StatusSucceeded = "succeeded"
	StatusDenied    = "denied"
	StatusFailed    = "failed"
)

// Invocation codes.
const (
	CodeToolUnavailable   = "tool_unavailable"
	CodeNoMatchingGrant   = "no_matching_grant"
	CodeGrantExpired      = "grant_expired"
	CodeInvalidArguments  = "invalid_arguments"
	CodeCatalogMismatch   = "catalog_mismatch"
	CodeEscalationPending = "escalation_pending"
	CodeCancelled         = "cancelled"
	CodeInternal          = "internal"
	CodeNotFound          = "not_found"
	CodeTooLarge          = "too_large"
	// CodeRateLimited: denied, a grant's limit or turn_limit is used up.
	// For a limit, retryable, with RetryAfterMs; for a turn_limit, not
	// within the turn.
	CodeRateLimited = "rate_limited"
	// CodeApprovalRequired: denied, the grants allow the call only once a
	// person approves it, and the kernel cannot ask.
	CodeApprovalRequired = "approval_required"
	// CodeApprovalPending: denied, retryable. A person has been asked to
	// approve the call (InvokeResult.ApprovalID) and has not answered
	// within the kernel's ask_timeout; once they approve it, the same
	// call (same arguments) runs without asking again.
	CodeApprovalPending = "approval_pending"
	// CodeApprovalDeclined: denied, not retryable. A person declined the
	// call; it is not asked again in this turn.
	CodeApprovalDeclined = "approval_declined"
	// Codes of brokered calls (a tool of an upstream MCP server).
	CodeUpstreamError       = "upstream_error"       // failed: the upstream answered isError or a JSON-RPC error
	CodeUpstreamTimeout     = "upstream_timeout"     // failed, retryable: no answer within its call_timeout
	CodeUpstreamUnavailable = "upstream_unavailable" // failed, retryable: not ready, crashed, or unreadable; restarting
	// Codes only the shim produces.
	CodeKernelUnavailable = "kernel_unavailable"
	CodeKernelTimeout     = "kernel_timeout"
)

// ErrorData is the data member of a kernel JSON-RPC error.
type ErrorData struct {
	Code string `json:"code"`
}

// Peer names a program on the other side: the shim, or the MCP client.
type Peer struct {
	Name    string `json:"name,omitempty"`
	Version string `json:"version"`
}

// HelloParams opens a turn.
type HelloParams struct {
	Name   string `json:"name"`
	Shim   Peer   `json:"shim"`
	Client *Peer  `json:"client,omitempty"`
	// Capabilities are what the shim speaks beyond protocol 1's
	// requests; absent, nothing more.
	Capabilities *ShimCapabilities `json:"capabilities,omitempty"`
}

// ShimCapabilities are the optional parts of the protocol a shim speaks.
type ShimCapabilities struct {
	// Approvals: the shim answers approval.ask and approval.withdrawn,
	// and may send approval.answer. Without it the kernel asks only the
	// operator, out of band.
	Approvals *struct{} `json:"approvals,omitempty"`
}

// Principal is who a turn acts for.
type Principal struct {
	Kind string `json:"kind"` // always "integration"
	Name string `json:"name"`
}

// HelloResult answers integration.hello.
type HelloResult struct {
	Protocol     int       `json:"protocol"`
	Principal    Principal `json:"principal"`
	ExecutionID  string    `json:"executionId"`
	Instructions string    `json:"instructions,omitempty"`
	Kernel       Peer      `json:"kernel"`
	// MaxLine is the longest request line the kernel reads, in bytes
	// without the newline; 0 (absent) means the protocol's default,
	// jsonrpc.DefaultMaxLine. The shim never sends a longer line.
	MaxLine int `json:"maxLine,omitempty"`
}

// ListResult answers tools.list. Tools are kernel-side definitions
// (docs/catalog-hash.md), possibly with kernel-internal fields the shim ignores.
type ListResult struct {
	Tools       []json.RawMessage `json:"tools"`
	CatalogHash string            `json:"catalogHash"`
}

// InvokeParams asks the kernel to authorize and run one call.
type InvokeParams struct {
	CallID      string          `json:"callId"`
	Tool        string          `json:"tool"`
	Arguments   json.RawMessage `json:"arguments"`
	CatalogHash string          `json:"catalogHash"`
	// MCP is what the shim knows of the MCP request the call relays;
	// optional, and a kernel may ignore it.
	MCP InvokeMCP `json:"mcp,omitzero"`
}

// InvokeMCP is tools.invoke's optional mcp member: what a kernel that
// exports traces needs of the MCP request a call relays. Every member is
// optional.
type InvokeMCP struct {
	// RequestID is the request's JSON-RPC id as the client sent it: a
	// string or a number.
	RequestID       json.RawMessage `json:"requestId,omitempty"`
	ProtocolVersion string          `json:"protocolVersion,omitempty"` // the MCP protocol version the request was made under
	// TraceParent and TraceState are the W3C trace context the client
	// sent in the request's params._meta: the kernel's span of the call
	// is a child of it.
	TraceParent string `json:"traceparent,omitempty"`
	TraceState  string `json:"tracestate,omitempty"`
}

// InvokeResult is the kernel's answer to one call. A refusal is a result.
type InvokeResult struct {
	Status    string          `json:"status"`
	Output    json.RawMessage `json:"output,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	Code      string          `json:"code,omitempty"`
	Message   string          `json:"message,omitempty"`
	Retryable *bool           `json:"retryable,omitempty"`
	// RetryAfterMs is, for rate_limited, how long in milliseconds until
	// the same call can be allowed again.
	RetryAfterMs *int64 `json:"retryAfterMs,omitempty"`
	// ApprovalID is, for approval_pending and approval_declined, the
	// approval a person was asked for.
	ApprovalID string `json:"approvalId,omitempty"`
}

// CancelParams is call.cancel's params.
type CancelParams struct {
	CallID string `json:"callId"`
}

// ProgressParams is call.progress's params: the kernel's report on a call
// still running. Progress should increase from one report to the next;
// Total, when known, is what Progress counts toward.
type ProgressParams struct {
	CallID   string   `json:"callId"`
	Progress float64  `json:"progress"`
	Total    *float64 `json:"total,omitempty"`
	Message  string   `json:"message,omitempty"`
}

// EscalateParams ends a turn by asking a person.
type EscalateParams struct {
	CallID string `json:"callId"`
	Reason string `json:"reason"`
	Note   string `json:"note,omitempty"`
}

// ExplainParams asks how the kernel would decide one call of Tool with
// Arguments (absent: {}) by Integration, now.
type ExplainParams struct {
	Integration string          `json:"integration"`
	Tool        string          `json:"tool"`
	Arguments   json.RawMessage `json:"arguments,omitempty"`
}

// Causes of tool_unavailable in ExplainResult.Unavailable.
const (
	UnavailableNotRegistered    = "not_registered"     // no tool of that name, built in or brokered
	UnavailableQuarantined      = "quarantined"        // its upstream offers it, but the kernel withholds it (Detail says why)
	UnavailableNotGranted       = "not_granted"        // no grant publishes it to the integration and each of its ancestors
	UnavailableUpstreamNotReady = "upstream_not_ready" // its upstream is not running now
)

// ExplainResult is how the kernel would decide a call now: whether it
// would run it, and if not how it would refuse it, with the grants that
// decided (Grants) or that came nearest (Checks).
type ExplainResult struct {
	// Allowed: the kernel would run the call now. Otherwise Status, Code
	// and Message are the refusal the model would read, and
	// RetryAfterMs its wait for rate_limited.
	Allowed      bool   `json:"allowed"`
	Status       string `json:"status,omitempty"`
	Code         string `json:"code,omitempty"`
	Message      string `json:"message,omitempty"`
	RetryAfterMs *int64 `json:"retryAfterMs,omitempty"`

	Tool     string `json:"tool"`
	Resource string `json:"resource,omitempty"` // the resource the arguments name
	Action   string `json:"action,omitempty"`
	// Chain is the integration, then each ancestor up to its root: the
	// levels the call is decided at.
	Chain []string `json:"chain"`
	// Ask is who must approve the call before it runs, when the grants
	// allow it only so.
	Ask string `json:"ask,omitempty"`
	// Unavailable is, for tool_unavailable, why the tool is not in the
	// integration's catalogue (an Unavailable* value); UnavailableDetail
	// says it in words.
	Unavailable       string `json:"unavailable,omitempty"`
	UnavailableDetail string `json:"unavailableDetail,omitempty"`
	// Grants are, for a call the grants allow (perhaps only with
	// asking), the deciding grant at each level, nearest first.
	Grants []ExplainGrant `json:"grants,omitempty"`
	// Checks are, for a call the grants refuse, each grant of each level
	// with the first condition it failed, nearest first.
	Checks []ExplainGrant `json:"checks,omitempty"`
	// Config is the config file the grants' lines are in.
	Config string `json:"config,omitempty"`
	// Notes say what the explanation could not know, or did not do.
	Notes []string `json:"notes,omitempty"`
}

// ExplainGrant is one grant at one level of an explanation.
type ExplainGrant struct {
	Integration string `json:"integration"`
	Grant       int    `json:"grant"` // #N, from 1
	Line        int    `json:"line,omitempty"`
	// Failed is the first condition it failed (subject, namespace,
	// resource, descendants, action, expiry, limit, ask); "" allows.
	Failed       string `json:"failed,omitempty"`
	Detail       string `json:"detail,omitempty"`
	Ask          string `json:"ask,omitempty"`
	RetryAfterMs *int64 `json:"retryAfterMs,omitempty"`
}

// Approval decisions, as a shim answers approval.ask and approval.answer.
const (
	// ApprovalApproved: the person approved the call (an elicitation
	// accepted with approve true).
	ApprovalApproved = "approved"
	// ApprovalDeclined: the person declined it.
	ApprovalDeclined = "declined"
	// ApprovalCancelled: asked, and no decision came (the person
	// dismissed the question, or the client answered it with an error).
	ApprovalCancelled = "cancelled"
	// ApprovalUnavailable: the shim cannot ask the harness's person (its
	// client did not declare elicitation, or the call is gone).
	ApprovalUnavailable = "unavailable"
	// ApprovalDeferred: the shim asked in a way that ends the call's
	// request first (the 2026-07-28 era's input-required result); the
	// answer follows as approval.answer, before the call's retry.
	ApprovalDeferred = "deferred"
)

// ApprovalAskParams asks the shim to ask the person at the harness
// whether the held call CallID may run. Message is what the person
// reads, written by the kernel: the integration, tool, action, resource
// and a bounded preview of the arguments with control characters shown
// escaped.
type ApprovalAskParams struct {
	ApprovalID      string `json:"approvalId"`
	CallID          string `json:"callId"`
	Integration     string `json:"integration"`
	Tool            string `json:"tool"`
	Action          string `json:"action"`
	Resource        string `json:"resource"`
	Arguments       string `json:"arguments"`       // the preview
	ArgumentsSHA256 string `json:"argumentsSha256"` // of the arguments as they will be executed
	ExpiresAt       string `json:"expiresAt"`       // RFC 3339: until when it can be approved
	Message         string `json:"message"`
}

// ApprovalAskResult is the shim's answer to approval.ask: one of the
// Approval* decisions.
type ApprovalAskResult struct {
	Decision string `json:"decision"`
}

// Reasons of approval.withdrawn.
const (
	WithdrawnDecided   = "decided"   // decided elsewhere first: Decision and By say how
	WithdrawnTimeout   = "timeout"   // the call waited ask_timeout and was answered approval_pending
	WithdrawnCancelled = "cancelled" // the call was cancelled, or its turn or the kernel is ending
)

// ApprovalWithdrawnParams tells the shim the kernel no longer waits for
// its answer to the ask for ApprovalID: the shim stops asking, and an
// answer it still sends is ignored.
type ApprovalWithdrawnParams struct {
	ApprovalID string `json:"approvalId"`
	Reason     string `json:"reason"`
	Decision   string `json:"decision,omitempty"` // approved or declined, for WithdrawnDecided
	By         string `json:"by,omitempty"`       // who decided, for WithdrawnDecided
}

// ApprovalAnswerParams is the person's answer to an ask the shim
// deferred: approved or declined.
type ApprovalAnswerParams struct {
	ApprovalID string `json:"approvalId"`
	Decision   string `json:"decision"`
}

// Approval is one approval request, as approvals.list shows it.
type Approval struct {
	ID              string `json:"id"`
	Integration     string `json:"integration"`
	Tool            string `json:"tool"`
	Action          string `json:"action"`
	Resource        string `json:"resource"`
	Arguments       string `json:"arguments"` // a bounded preview, control characters escaped
	ArgumentsSHA256 string `json:"argumentsSha256"`
	// Ask is who may approve it: AskHarness (the person at the harness,
	// or the operator) or AskOperator (only the operator).
	Ask         string `json:"ask"`
	ExecutionID string `json:"executionId"`
	RequestedAt string `json:"requestedAt"` // RFC 3339
	ExpiresAt   string `json:"expiresAt"`   // until when it can be decided
}

// ApprovalsListResult answers approvals.list: the approvals that wait
// for a decision, oldest first.
type ApprovalsListResult struct {
	Approvals []Approval `json:"approvals"`
}

// ApprovalDecideParams names the approval approvals.approve or
// approvals.deny decides.
type ApprovalDecideParams struct {
	ID string `json:"id"`
}

// ApprovalDecideResult is the decision recorded: approved (good until
// ApprovedUntil, for one call) or declined.
type ApprovalDecideResult struct {
	ID            string `json:"id"`
	Decision      string `json:"decision"`
	Integration   string `json:"integration"`
	Tool          string `json:"tool"`
	Resource      string `json:"resource"`
	ApprovedUntil string `json:"approvedUntil,omitempty"` // RFC 3339
}
