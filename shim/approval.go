package shim

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strconv"

	"github.com/sharedos/sharedos-mcp/internal/clip"
	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
)

// Capabilities are what this shim announces in integration.hello: it
// answers approval.ask, asking the harness's person through MCP
// elicitation when its client can be asked (docs/approvals.md).
var Capabilities = &kproto.ShimCapabilities{Approvals: &struct{}{}}

// How the shim asks the harness's person about a call the kernel holds.
//
// Legacy eras (2025-06-18 and later): the shim sends the client an
// elicitation/create request, form mode, with one boolean field,
// approve, and relays the answer to the kernel as approval.ask's result.
// It is the shim's one request to the client: its id is the shim's own,
// and the answer comes back on stdin. When the kernel withdraws the
// question (the operator decided first, the call timed out or was
// cancelled), the client is sent notifications/cancelled for it.
//
// The 2026-07-28 era has no server-to-client requests: the shim answers
// approval.ask "deferred", the kernel answers the call approval_pending,
// and the shim turns that answer into an input-required result holding
// the same elicitation/create and a requestState token (SEP-2322). The
// client's retry of the call carries the person's answer and the token:
// the shim sends the kernel approval.answer, then the call, which runs
// on the approval the kernel has just recorded. The token is the shim's
// own, random and single-use, and names one question the kernel asked
// this turn; a retry with a token the shim does not know is relayed as a
// fresh call, which the kernel decides like any other.
//
// Either way the shim decides nothing: "accept" with approve true is
// approved, approve false and "decline" are declined, "cancel" and an
// error are no decision. Only the kernel records a decision, and only for
// a question it asked of this turn.

// asking is one question the kernel asked this turn's person.
type asking struct {
	ask   kproto.ApprovalAskParams
	reply func(kproto.ApprovalAskResult) // approval.ask's answer, legacy eras; once
	call  *pending                       // the held call
	token string                         // the requestState, 2026-07-28 era
}

// approvalKey is the key of the one input request the shim makes.
const approvalKey = "approval"

// maxAskMessage bounds the text a person is shown (the kernel bounds its
// parts; this keeps a kernel from flooding a dialog).
const maxAskMessage = 4096

// maxDeferred bounds the questions kept for a retry in the 2026-07-28
// era: beyond it the oldest are forgotten (their retries ask again).
const maxDeferred = 64

// onApprovalAsk takes the kernel's approval.ask, on the kernel client's
// reading goroutine: it asks the client, or answers at once when it
// cannot.
func (s *server) onApprovalAsk(a kproto.ApprovalAskParams, reply func(kproto.ApprovalAskResult)) {
	decision := ""
	s.update(func(st *turnState) {
		p := st.callOf(a.CallID)
		switch {
		case p == nil:
			decision = kproto.ApprovalCancelled // answered or cancelled already
		case !p.call.req.elicit:
			decision = kproto.ApprovalUnavailable
		case p.call.dismissed:
			// A retry that brought no decision (the person cancelled):
			// asking again would only loop; the call is answered
			// approval_pending, and the operator may still decide.
			decision = kproto.ApprovalCancelled
		case p.call.req.modern:
			token := newToken
			if s.cfg.token != nil {
				token = s.cfg.token
			}
			as := &asking{ask: a, call: p, token: token()}
			if len(st.deferred) >= maxDeferred {
				st.deferred = st.deferred[1:]
			}
			st.deferred = append(st.deferred, as)
			p.call.asked = as
			decision = kproto.ApprovalDeferred
		default:
			st.nextAsk++
			id := "sharedos-approval-" + strconv.FormatInt(st.nextAsk, 10)
			st.asks[id] = &asking{ask: a, reply: reply, call: p}
			// At once, like a progress note: it is a request, not an
			// answer, and the call's answer waits for its reply.
			st.notes = append(st.notes, note{call: p, line: elicitLine(id, a, p.call.req.elicitMode)})
		}
	})
	if decision != "" {
		reply(kproto.ApprovalAskResult{Decision: decision})
	}
}

// onApprovalWithdrawn takes approval.withdrawn: the kernel no longer
// waits for the person's answer, so the client is told to stop asking.
func (s *server) onApprovalWithdrawn(w kproto.ApprovalWithdrawnParams) {
	s.update(func(st *turnState) {
		for id, as := range st.asks {
			if as.ask.ApprovalID != w.ApprovalID {
				continue
			}
			delete(st.asks, id)
			st.notes = append(st.notes, note{line: cancelledLine(id, withdrawnReason(w))})
		}
	})
}

func withdrawnReason(w kproto.ApprovalWithdrawnParams) string {
	switch {
	case w.Reason == kproto.WithdrawnDecided && w.By == "operator":
		return "the operator " + w.Decision + " this call first"
	case w.Reason == kproto.WithdrawnDecided:
		return "this call was " + w.Decision + " first"
	case w.Reason == kproto.WithdrawnTimeout:
		return "no answer in time: the call was answered approval_pending, and can still be approved"
	}
	return "the call no longer waits for an answer"
}

// clientAnswered takes the client's answer to an elicitation/create the
// shim sent (a response on stdin whose id is the shim's), and relays it
// to the kernel. An answer to a question that was withdrawn, or never
// asked, is dropped.
func (s *server) clientAnswered(id, result []byte, failed bool) {
	key, err := jsonrpc.DecodeString(id)
	if err != nil {
		return
	}
	var as *asking
	s.update(func(st *turnState) {
		if as = st.asks[key]; as != nil {
			delete(st.asks, key)
		}
	})
	if as == nil {
		return
	}
	decision := kproto.ApprovalCancelled
	if !failed {
		decision = elicitDecision(result)
	}
	as.reply(kproto.ApprovalAskResult{Decision: decision})
}

// elicitDecision reads an ElicitResult: accept with approve true
// approves, accept with approve false and decline decline, anything
// else decides nothing.
func elicitDecision(result []byte) string {
	var r struct {
		Action  string `json:"action"`
		Content struct {
			Approve *bool `json:"approve"`
		} `json:"content"`
	}
	if json.Unmarshal(result, &r) != nil {
		return kproto.ApprovalCancelled
	}
	switch {
	case r.Action == "accept" && r.Content.Approve != nil && *r.Content.Approve:
		return kproto.ApprovalApproved
	case r.Action == "accept" && r.Content.Approve != nil, r.Action == "decline":
		return kproto.ApprovalDeclined
	}
	return kproto.ApprovalCancelled
}

// retryAnswer is the person's answer a 2026-07-28 retry carries: the
// question it answers and the decision (cancelled when it brings none),
// for dispatch to send the kernel before the call.
type retryAnswer struct {
	approvalID string
	tool       string // the held call's tool: the retry must be of the same
	decision   string
}

// takeDeferred finds the question a retry's requestState names, once,
// and reads the person's answer from its inputResponses; nil when the
// token is unknown.
func (st *turnState) takeDeferred(token string, responses []byte) *retryAnswer {
	for i, as := range st.deferred {
		if as.token != token {
			continue
		}
		st.deferred = append(st.deferred[:i], st.deferred[i+1:]...)
		d := kproto.ApprovalCancelled
		var rs map[string]json.RawMessage
		if json.Unmarshal(responses, &rs) == nil && rs[approvalKey] != nil {
			d = elicitDecision(rs[approvalKey])
		}
		return &retryAnswer{approvalID: as.ask.ApprovalID, tool: as.call.call.name, decision: d}
	}
	return nil
}

// callOf finds the call at the kernel whose call id is callID: the
// requests a cancellation can reach hold every call whose answer is
// owed.
func (st *turnState) callOf(callID string) *pending {
	for _, p := range st.byID {
		if p.call != nil && p.call.callID == callID && p.state == open {
			return p
		}
	}
	return nil
}

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// elicitParams is the elicitation/create a person answers: the kernel's
// message and one boolean field. mode is "form", or "" where the
// negotiated version predates it (2025-06-18).
func elicitParams(a kproto.ApprovalAskParams, mode string) []byte {
	b := []byte(`{`)
	if mode != "" {
		b = append(b, `"mode":"form",`...)
	}
	b = append(b, `"message":`...)
	b = jsonrpc.AppendString(b, clip.String(a.Message, maxAskMessage))
	b = append(b, `,"requestedSchema":{"type":"object","properties":{"approve":{"type":"boolean","title":"Approve this call",`+
		`"description":"Yes runs this one call, once, with exactly these arguments. No refuses it.","default":false}},"required":["approve"]}}`...)
	return b
}

// elicitLine is the elicitation/create request of id.
func elicitLine(id string, a kproto.ApprovalAskParams, mode string) []byte {
	line := []byte(`{"jsonrpc":"2.0","id":`)
	line = jsonrpc.AppendString(line, id)
	line = append(line, `,"method":"elicitation/create","params":`...)
	line = append(line, elicitParams(a, mode)...)
	return append(line, "}\n"...)
}

// cancelledLine tells the client the shim no longer wants an answer to
// its request id.
func cancelledLine(id, reason string) []byte {
	line := []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`)
	line = jsonrpc.AppendString(line, id)
	line = append(line, `,"reason":`...)
	line = jsonrpc.AppendString(line, reason)
	return append(line, "}}\n"...)
}

// inputRequired is the 2026-07-28 result that asks the person through
// the client: the elicitation, and the token the retry brings back.
func (s *server) inputRequired(r *reply, c *relayCall) {
	as := c.asked
	line := []byte(`{"jsonrpc":"2.0","id":`)
	line = append(line, c.req.id...)
	line = append(line, `,"result":{"resultType":"input_required","inputRequests":{"`+approvalKey+`":{"method":"elicitation/create","params":`...)
	line = append(line, elicitParams(as.ask, "form")...)
	line = append(line, `}},"requestState":`...)
	line = jsonrpc.AppendString(line, as.token)
	line = append(line, `,"_meta":{`+epochMeta+`,"`+metaServerInfo+`":`...)
	line = append(line, s.serverInfo...)
	r.pieces = append(r.buf[:0], append(line, "}}}\n"...))
}

// elicitsForm reports whether a capabilities object's elicitation member
// declares form mode: {} (form, for backward compatibility) or one that
// names form.
func elicitsForm(caps []byte) bool {
	form := false
	_ = jsonrpc.EachValidMember(caps, func(key, value []byte) error {
		if string(jsonrpc.KeyName(key)) != "elicitation" || len(value) == 0 || value[0] != '{' {
			return nil
		}
		members := 0
		_ = jsonrpc.EachValidMember(value, func(k, _ []byte) error {
			members++
			if string(jsonrpc.KeyName(k)) == "form" {
				form = true
			}
			return nil
		})
		if members == 0 {
			form = true
		}
		return nil
	})
	return form
}
