package kernel

import (
	"encoding/json"
	"errors"
	"strconv"

	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
)

// operatorMethods are the methods of an operator connection: one that
// has not said integration.hello and whose peer uid the kernel serves as
// its operator (Server.isOperator: its own uid, root, or one of
// operator_uids). It is the one table they are dispatched from: a method
// added here (approvals, say) is refused to everyone else, recorded,
// without a line of its own. A handler answers m on the connection's read
// goroutine and must not block for long: it holds up the connection's
// next request, nothing else.
var operatorMethods = map[string]func(t *turn, m jsonrpc.Message){
	kproto.MethodExplain:          (*turn).explainRequest,
	kproto.MethodApprovalsList:    (*turn).approvalsList,
	kproto.MethodApprovalsApprove: func(t *turn, m jsonrpc.Message) { t.approvalDecide(m, true) },
	kproto.MethodApprovalsDeny:    func(t *turn, m jsonrpc.Message) { t.approvalDecide(m, false) },
}

// operatorRequest serves an operator method, or refuses it, recorded
// (operator.refused), to a connection that is an integration's or whose
// uid is not served as operator. A connection that asked one is the
// operator's from then on: it can never say hello.
func (t *turn) operatorRequest(m jsonrpc.Message, h func(*turn, jsonrpc.Message)) bool {
	why := ""
	switch {
	case t.name != "":
		why = "an integration's connection may not ask it"
	case !t.s.isOperator(t.cred.UID):
		why = "uid " + strconv.FormatUint(uint64(t.cred.UID), 10) + " is not served as operator"
	}
	if why != "" {
		t.s.Log.Warn().Str("method", m.Method).Str("integration", t.name).Uint32("uid", t.cred.UID).Int("pid", t.cred.PID).Msg("refused an operator method: " + why)
		if !t.s.record(t.event(audit.EventOperatorRefused, func(e *audit.Event) { e.Reason = m.Method + ": " + why })) {
			t.writeError(m.ID, jsonrpc.CodeInternalError, "the refusal could not be recorded: the audit log cannot be written", codeAuditUnavailable)
			return true
		}
		t.writeError(m.ID, jsonrpc.CodeInvalidRequest, m.Method+" is an operator method: "+why, kproto.ErrOperatorOnly)
		return true
	}
	t.operator = true
	h(t, m)
	return true
}

// explainRequest answers kernel.explain: how the kernel would decide the
// call now, from its live grants, tools and counters, without running it.
func (t *turn) explainRequest(m jsonrpc.Message) {
	var p kproto.ExplainParams
	if err := json.Unmarshal(m.Params, &p); err != nil {
		t.writeError(m.ID, jsonrpc.CodeInvalidParams, "kernel.explain params: "+err.Error(), "")
		return
	}
	r, err := t.s.Explain(p)
	if err != nil {
		t.writeError(m.ID, jsonrpc.CodeInvalidParams, err.Error(), "")
		return
	}
	t.writeResult(m.ID, r)
}

// approvalsList answers approvals.list: the calls that wait for a
// person's approval, oldest first.
func (t *turn) approvalsList(m jsonrpc.Message) {
	t.writeResult(m.ID, kproto.ApprovalsListResult{Approvals: t.s.pending()})
}

// approvalDecide answers approvals.approve (approve) or approvals.deny:
// the operator's decision, recorded with the operator connection's peer
// before it takes effect. The first decision wins; a later one is told
// what was decided, and by whom.
func (t *turn) approvalDecide(m jsonrpc.Message, approve bool) {
	var p kproto.ApprovalDecideParams
	if err := json.Unmarshal(m.Params, &p); err != nil {
		t.writeError(m.ID, jsonrpc.CodeInvalidParams, m.Method+" params: "+err.Error(), "")
		return
	}
	r, err := t.s.decide(p.ID, approve, byOperator, audit.Peer{UID: t.cred.UID, PID: t.cred.PID})
	var ae *approvalError
	switch {
	case errors.As(err, &ae):
		t.writeError(m.ID, jsonrpc.CodeInvalidParams, ae.msg, ae.code)
	case err != nil:
		t.writeError(m.ID, jsonrpc.CodeInternalError, err.Error(), codeAuditUnavailable)
	default:
		t.writeResult(m.ID, r)
	}
}
