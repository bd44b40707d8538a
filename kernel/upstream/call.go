package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Codes a call fails with. The first four are the brokered call's own;
// the others are the kernel's codes of the same name.
const (
	CodeUpstreamError       = "upstream_error"       // the upstream answered isError, or with a JSON-RPC error
	CodeUpstreamTimeout     = "upstream_timeout"     // no answer within call_timeout; the upstream was sent notifications/cancelled
	CodeUpstreamUnavailable = "upstream_unavailable" // not ready, crashed, or sent what the client cannot read; it is restarted
	CodeTooLarge            = "too_large"            // the result is over the Manager's MaxResultBytes
	CodeToolUnavailable     = "tool_unavailable"     // the upstream no longer offers the definition the caller's snapshot had
	CodeInvalidArguments    = "invalid_arguments"    // see ErrInvalidArguments
	CodeCancelled           = "cancelled"            // the caller's context ended; the upstream was sent notifications/cancelled
)

// maxErrorText bounds the upstream's own words in a failure's message.
const maxErrorText = 4096

// CallError is a call that did not succeed.
type CallError struct {
	Code      string // one of the Code constants
	Message   string // for the model: what happened, with the upstream's text bounded
	Retryable bool   // the same call may succeed later (timeout, unavailable)
	// NotSent says the upstream never received the call, so nothing it
	// does was done. Without it, the call may have reached the upstream
	// and acted, whatever the error says: a caller that assumes so is
	// never wrong about an effect.
	NotSent bool
	Err     error // the cause, for the kernel's log; may be nil
}

func (e *CallError) Error() string { return e.Code + ": " + e.Message }

func (e *CallError) Unwrap() error { return e.Err }

// NotSent reports whether err, from Call, says the upstream never
// received the call (see CallError.NotSent).
func NotSent(err error) bool {
	var ce *CallError
	return errors.As(err, &ce) && ce.NotSent
}

// Result is what a successful call returned, as JSON.
type Result struct {
	Content           json.RawMessage // the content blocks: a JSON array
	StructuredContent json.RawMessage // nil when the upstream sent none
}

// ProgressFunc receives an upstream's progress on one call. It is called
// from the Manager's goroutines, one report at a time per upstream, and
// must not block. Reports that arrive after Call returned are dropped.
type ProgressFunc func(progress, total float64, message string)

var errCallTimeout = errors.New("call timeout")

type metaKey struct{}

// WithMeta returns ctx carrying meta, which a Call made in it sends the
// upstream as its params._meta (beside the progress token): the trace
// context of the kernel's span, traceparent and tracestate, as the MCP
// semantic conventions carry it. meta is not changed.
func WithMeta(ctx context.Context, meta map[string]any) context.Context {
	return context.WithValue(ctx, metaKey{}, meta)
}

// Call calls t, from a snapshot, with the arguments t.Resolve produced,
// the ones whose resource the caller authorized, and returns its result
// or a *CallError. The call is bounded by the upstream's call_timeout; ending
// ctx cancels it. Both send the upstream notifications/cancelled. With a
// non-nil progress, the call carries a progress token and the upstream's
// progress notifications are relayed to it.
func (m *Manager) Call(ctx context.Context, t *Tool, args Forward, progress ProgressFunc) (*Result, error) {
	u := m.byName[t.Upstream]
	if u == nil {
		return nil, &CallError{Code: CodeToolUnavailable, Message: fmt.Sprintf("no upstream is named %q", t.Upstream), NotSent: true}
	}
	if args.raw == nil {
		return nil, &CallError{Code: CodeInvalidArguments, Message: fmt.Sprintf("%s: the arguments were not resolved", t.Name), NotSent: true}
	}
	s, state, reason := u.session()
	if s == nil {
		msg := fmt.Sprintf("upstream %s is %s", t.Upstream, state)
		if reason != "" {
			msg += ": " + shorten(reason, maxErrorText)
		}
		return nil, &CallError{Code: CodeUpstreamUnavailable, Message: msg, Retryable: true, NotSent: true}
	}
	if s.currentHash(t.UpstreamTool) != t.Hash {
		return nil, &CallError{Code: CodeToolUnavailable, Message: fmt.Sprintf("%s changed or was withdrawn by its upstream after this catalogue was taken", t.Name), NotSent: true}
	}
	r, err := s.call(ctx, t, args, progress)
	if ce, ok := err.(*CallError); ok {
		// The upstream's own words are in it, and may quote what it was
		// sent.
		ce.Message = m.redact(ce.Message)
	}
	return r, err
}

// codeRejectedByTransport is the code of the SDK's jsonrpc2.ErrRejected,
// which its HTTP transport wraps around a request that never reached the
// server or whose answer was not a message (a status, a transport
// error): a failure of the connection, not an answer of the server.
const codeRejectedByTransport = -32005

func (s *session) call(ctx context.Context, t *Tool, args Forward, progress ProgressFunc) (*Result, error) {
	timeout := s.u.spec.CallTimeout
	callCtx, cancel := context.WithTimeoutCause(ctx, timeout, errCallTimeout)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel) // a session that stops ends its calls
	defer stop()
	params := &mcp.CallToolParams{Name: t.UpstreamTool, Arguments: args.raw}
	if meta, ok := ctx.Value(metaKey{}).(map[string]any); ok && len(meta) > 0 {
		params.Meta = maps.Clone(meta)
	}
	if progress != nil {
		token := s.addProgress(progress)
		defer s.removeProgress(token)
		params.SetProgressToken(token)
	}
	var res *mcp.CallToolResult
	var err error
	var d *delivery
	if s.remote != nil {
		res, d, err = s.remote.callTool(callCtx, params, func() error {
			if s.currentHash(t.UpstreamTool) != t.Hash {
				return &CallError{Code: CodeToolUnavailable, Message: fmt.Sprintf("%s changed or was withdrawn by its upstream when it restarted", t.Name), NotSent: true}
			}
			return nil
		})
	} else {
		res, err = s.cs.CallTool(callCtx, params)
	}
	if err != nil {
		var wire *jsonrpc.Error
		var ce *CallError
		switch {
		case errors.As(err, &ce):
			return nil, ce
		case ctx.Err() != nil:
			return nil, &CallError{Code: CodeCancelled, Message: "cancelled", Err: err}
		case errors.Is(context.Cause(callCtx), errCallTimeout):
			return nil, &CallError{Code: CodeUpstreamTimeout, Message: fmt.Sprintf("%s did not answer within %v", t.Name, timeout), Retryable: true, Err: err}
		case s.ctx.Err() != nil:
			return nil, &CallError{Code: CodeUpstreamUnavailable, Message: fmt.Sprintf("upstream %s stopped during the call", t.Upstream), Retryable: true, Err: err}
		case s.remote != nil && (!errors.As(err, &wire) || wire.Code == codeRejectedByTransport):
			ce := remoteFailure(t.Name, t.Upstream, err, d)
			if ce.Code == CodeUpstreamAuthRequired {
				s.u.setAuthRefused(authRefusal(err))
			}
			return nil, ce
		case errors.As(err, &wire) && wire.Code == answerTooLarge:
			return nil, &CallError{Code: CodeTooLarge, Message: fmt.Sprintf("%s: %s", t.Name, wire.Message), Err: err}
		case errors.As(err, &wire):
			return nil, &CallError{Code: CodeUpstreamError, Message: fmt.Sprintf("%s: the upstream answered with error %d: %s", t.Name, wire.Code, shorten(wire.Message, maxErrorText)), Err: err}
		}
		// The upstream closed its end (it exited; its exit is the reason
		// the session ends), or sent what the client cannot read: then
		// the session cannot be trusted any more.
		if !errors.Is(err, io.EOF) {
			s.kill("the upstream sent what the client cannot read: " + oneLine(err.Error()))
		}
		return nil, &CallError{Code: CodeUpstreamUnavailable, Message: fmt.Sprintf("upstream %s failed during the call; it is being restarted", t.Upstream), Retryable: true, Err: err}
	}
	if s.remote != nil {
		s.u.setAuthRefused("")
	}
	if res.IsError {
		return nil, &CallError{Code: CodeUpstreamError, Message: fmt.Sprintf("%s: %s", t.Name, errorText(res.Content))}
	}
	content := json.RawMessage("[]")
	if len(res.Content) > 0 {
		if content, err = json.Marshal(res.Content); err != nil {
			return nil, &CallError{Code: CodeUpstreamError, Message: fmt.Sprintf("%s: its content cannot be encoded", t.Name), Err: err}
		}
	}
	r := &Result{Content: content}
	if res.StructuredContent != nil {
		if r.StructuredContent, err = json.Marshal(res.StructuredContent); err != nil {
			return nil, &CallError{Code: CodeUpstreamError, Message: fmt.Sprintf("%s: its structuredContent cannot be encoded", t.Name), Err: err}
		}
	}
	if n, bound := len(r.Content)+len(r.StructuredContent), s.u.m.opts.MaxResultBytes; n > bound {
		return nil, &CallError{Code: CodeTooLarge, Message: fmt.Sprintf("%s returned %d bytes, more than the %d a result may have", t.Name, n, bound)}
	}
	if s.u.credentials {
		if err := s.u.m.redactResult(r); err != nil {
			return nil, &CallError{Code: CodeUpstreamError, Message: fmt.Sprintf("%s: %v", t.Name, err)}
		}
	}
	return r, nil
}

// redactResult replaces every secret and token in a result, in place.
// A replacement that leaves a result that is not JSON (a secret that
// spanned its structure) fails the call rather than passing it on.
func (m *Manager) redactResult(r *Result) error {
	for _, raw := range []*json.RawMessage{&r.Content, &r.StructuredContent} {
		if *raw == nil {
			continue
		}
		red := m.redact(string(*raw))
		if red == string(*raw) {
			continue
		}
		if !json.Valid([]byte(red)) {
			return errors.New("its result held a credential of the kernel's that could not be taken out of it")
		}
		*raw = json.RawMessage(red)
	}
	return nil
}

// errorText is the text an isError result carries, bounded.
func errorText(content []mcp.Content) string {
	var parts []string
	for _, c := range content {
		if tc, ok := c.(*mcp.TextContent); ok && tc.Text != "" {
			parts = append(parts, tc.Text)
		}
	}
	if len(parts) == 0 {
		return "the upstream reported an error without saying what it was"
	}
	return shorten(strings.Join(parts, "\n"), maxErrorText)
}

func (s *session) addProgress(f ProgressFunc) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	token := "sharedos-" + strconv.FormatUint(s.seq, 10)
	s.progress[token] = f
	return token
}

func (s *session) removeProgress(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.progress, token)
}

// onProgress is the SDK's progress handler: it relays a report to the
// call that carries its token.
func (s *session) onProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	token, ok := req.Params.ProgressToken.(string)
	if !ok {
		return
	}
	s.mu.Lock()
	f := s.progress[token]
	s.mu.Unlock()
	if f != nil {
		f(req.Params.Progress, req.Params.Total, req.Params.Message)
	}
}
