package kernel

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sharedos/sharedos-mcp/internal/clip"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
	"github.com/sharedos/sharedos-mcp/policy"
)

// Approvals (docs/approvals.md, docs/adr/0040). A call that the grants
// allow only once a person approves it is held in its place in its turn
// while a person is asked: the person at the harness through the shim
// (approval.ask, when the grants let the harness approve and the shim
// announced it can ask), and the operator out of band (approvals.list,
// approvals.approve, approvals.deny). Each step is on the record before
// it matters: tool.approval.requested, synced, before anyone is asked;
// tool.approval.granted or tool.approval.declined, synced, before the
// call acts or is refused.
//
// An approval binds one exact call: the integration, the tool, the
// action, the resource the call resolved to, and the SHA-256 of its
// arguments as they will be executed. It is good for one call, for
// ask_ttl from when it was granted: a retry of the same call after an
// out-of-band approval runs without asking again; anything else asks
// again. Approvals live in the kernel's memory: a restarted kernel knows
// none, so nothing runs on an approval the running kernel did not record.

// approvalState is where an approval request is.
type approvalState uint8

const (
	approvalPending  approvalState = iota // asked, not decided
	approvalApproved                      // approved, not used yet
	approvalDeclined
	approvalUsed // approved, and a call ran on it
)

// binding is what an approval is good for: one exact call.
type binding struct {
	integration, tool, action, resource, argsSHA string
}

// approval is one request for a person's approval. Its fields below the
// line change only under approvals.mu.
type approval struct {
	id          string
	b           binding
	ask         string        // who may approve: policy.AskHarness (the harness's person or the operator) or AskOperator
	ttl         time.Duration // how long an approval is good for, from when it is granted
	preview     string        // the arguments, bounded, control characters escaped
	execID      string        // the turn that asked
	callID      string
	requestedAt time.Time
	expiresAt   time.Time     // until when it can be decided
	decided     chan struct{} // closed once decided

	state         approvalState
	by            string // who decided: "harness" or "operator"
	approvedUntil time.Time
	// asker is the turn whose shim is asking the person now, or whose
	// shim deferred the question (the 2026-07-28 era's input-required
	// result) and may answer it with approval.answer; nil otherwise. At
	// most one shim is asked at a time.
	asker    *turn
	deferred bool
}

// approvals is the kernel's approval requests, across turns: an
// approval a person gives out of band is used by the retry, which may
// come in a later turn of the same integration.
type approvals struct {
	mu     sync.Mutex
	byID   map[string]*approval
	latest map[binding]*approval // the newest request of each binding
}

// Bounds on what the kernel keeps. A request is kept until it can be
// neither decided nor used; past maxApprovals open at once, a call that
// needs approval is refused approval_required rather than asked.
const (
	maxApprovals = 1024
	// maxPreviewBytes bounds the arguments a person is shown and the
	// record keeps of them.
	maxPreviewBytes = 1024
)

// Who decided an approval, as its record and its answers say.
const (
	byHarness  = "harness"
	byOperator = "operator"
)

// approvalError is a decision the kernel refuses: an unknown or expired
// id, or one decided before.
type approvalError struct {
	code string // kproto.ErrUnknownApproval or kproto.ErrApprovalDecided
	msg  string
}

func (e *approvalError) Error() string { return e.msg }

// errApprovalUnrecorded is a decision, or a request, whose record could
// not be written: it did not happen.
var errApprovalUnrecorded = errors.New("the audit log cannot be written, so nothing was decided")

func newApprovalID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "apr_" + hex.EncodeToString(b[:])
}

// requestOutcome is what a call that needs approval finds.
type requestOutcome uint8

const (
	requestWaits    requestOutcome = iota // pending: wait for a decision
	requestGranted                        // an approval of this binding was given and is now the call's
	requestDeclined                       // declined, and the call's turn may not ask again
	requestRefused                        // no request could be made: answer the outcome given
)

// requestApproval finds the approval request for the call c of turn t, or makes
// one: an unused approval of the same binding is taken at once (it is
// the call's from now on); a pending one is joined; a declined one the
// turn asked for stands; otherwise a new request is recorded, durably,
// before anyone can be asked.
func (s *Server) requestApproval(t *turn, c *call, b binding, v policy.Verdict, now time.Time) (*approval, requestOutcome, outcome) {
	ap := &s.approvals
	ap.mu.Lock()
	defer ap.mu.Unlock()
	ap.prune(now)
	if a := ap.latest[b]; a != nil {
		switch {
		case a.state == approvalApproved && now.Before(a.approvedUntil):
			a.state = approvalUsed
			return a, requestGranted, outcome{}
		case a.state == approvalDeclined && a.execID == t.execID:
			return a, requestDeclined, outcome{}
		case a.state == approvalPending && now.Before(a.expiresAt):
			return a, requestWaits, outcome{}
		}
	}
	if len(ap.byID) >= maxApprovals {
		return nil, requestRefused, denied(kproto.CodeApprovalRequired,
			"a person must approve this call before it runs, and %d approvals are open already, so it is not asked: tell the user", maxApprovals)
	}
	a := &approval{
		id: newApprovalID(), b: b, ask: v.Ask, ttl: v.AskTTL, preview: c.preview(), execID: t.execID, callID: c.callID,
		requestedAt: now, expiresAt: now.Add(v.AskTTL), decided: make(chan struct{}),
	}
	if !s.recordDurably(t.event(audit.EventApprovalRequested, func(e *audit.Event) {
		e.CallID, e.Seq, e.Tool, e.Action, e.Resource, e.Requested = c.callID, c.seq, b.tool, b.action, b.resource, requestedIfOther(*c)
		e.Upstream, e.Grants = c.upstream, c.decided.grantRefs()
		e.ApprovalID, e.ArgumentsSHA256, e.Ask, e.Expires = a.id, b.argsSHA, a.ask, audit.Stamp(a.expiresAt)
	})) {
		return nil, requestRefused, auditUnavailable(false)
	}
	if ap.byID == nil {
		ap.byID, ap.latest = map[string]*approval{}, map[binding]*approval{}
	}
	ap.byID[a.id], ap.latest[b] = a, a
	return a, requestWaits, outcome{}
}

// prune forgets requests that can no longer be decided or used.
func (ap *approvals) prune(now time.Time) {
	for id, a := range ap.byID {
		if now.Before(a.expiresAt) || a.state == approvalApproved && now.Before(a.approvedUntil) {
			continue
		}
		delete(ap.byID, id)
		if ap.latest[a.b] == a {
			delete(ap.latest, a.b)
		}
	}
}

// use takes the approved a for one call; false when it is not approved
// (or no longer good, or another call took it first).
func (s *Server) use(a *approval, now time.Time) bool {
	s.approvals.mu.Lock()
	defer s.approvals.mu.Unlock()
	if a.state != approvalApproved || !now.Before(a.approvedUntil) {
		return false
	}
	a.state = approvalUsed
	return true
}

// giveBack returns an approval a call took but did not run on (its
// grants changed while it waited, or a limit had no room by then): a
// retry may still use it while it is good.
func (s *Server) giveBack(a *approval) {
	s.approvals.mu.Lock()
	defer s.approvals.mu.Unlock()
	if a.state == approvalUsed {
		a.state = approvalApproved
	}
}

// decide records a decision on approval id, made by by (byHarness or
// byOperator) over the connection whose peer is peer, and then wakes
// whoever waits for it. The first decision wins: a later one is an
// *approvalError saying what was decided, by whom. An unknown or expired
// id is an *approvalError too. Nothing is decided unless its record is
// written and synced (errApprovalUnrecorded).
func (s *Server) decide(id string, approve bool, by string, peer audit.Peer) (kproto.ApprovalDecideResult, error) {
	ap := &s.approvals
	ap.mu.Lock()
	defer ap.mu.Unlock()
	now := s.now()
	a := ap.byID[id]
	switch {
	case a == nil:
		return kproto.ApprovalDecideResult{}, &approvalError{kproto.ErrUnknownApproval,
			fmt.Sprintf("no approval %s waits: it never existed, it expired, or the kernel restarted since it was asked", shownID(id))}
	case a.state == approvalPending && !now.Before(a.expiresAt):
		return kproto.ApprovalDecideResult{}, &approvalError{kproto.ErrUnknownApproval,
			fmt.Sprintf("approval %s expired at %s without a decision", a.id, audit.Stamp(a.expiresAt))}
	case a.state != approvalPending:
		return kproto.ApprovalDecideResult{}, &approvalError{kproto.ErrApprovalDecided, a.decidedText()}
	}
	ev := audit.EventApprovalDeclined
	until := ""
	if approve {
		ev, until = audit.EventApprovalGranted, audit.Stamp(now.Add(a.ttl))
	}
	if !s.recordDurably(audit.Event{
		Time: audit.Stamp(now), Event: ev, ExecutionID: a.execID, Integration: a.b.integration, Peer: peer,
		CallID: a.callID, Tool: a.b.tool, Action: a.b.action, Resource: a.b.resource,
		ApprovalID: a.id, ArgumentsSHA256: a.b.argsSHA, Ask: a.ask, Expires: until, By: by,
	}) {
		return kproto.ApprovalDecideResult{}, errApprovalUnrecorded
	}
	a.state, a.by = approvalDeclined, by
	r := kproto.ApprovalDecideResult{ID: a.id, Decision: kproto.ApprovalDeclined, Integration: a.b.integration, Tool: a.b.tool, Resource: a.b.resource}
	if approve {
		a.state, a.approvedUntil = approvalApproved, now.Add(a.ttl)
		r.Decision, r.ApprovedUntil = kproto.ApprovalApproved, until
	}
	close(a.decided)
	s.Log.Info().Str("approvalId", a.id).Str("integration", a.b.integration).Str("tool", a.b.tool).Str("resource", a.b.resource).
		Str("decision", r.Decision).Str("by", by).Uint32("uid", peer.UID).Msg("approval")
	return r, nil
}

// decidedText says how a decided approval was decided, under
// approvals.mu.
func (a *approval) decidedText() string {
	switch a.state {
	case approvalDeclined:
		return fmt.Sprintf("approval %s was already declined by %s", a.id, byWhom(a.by))
	case approvalUsed:
		return fmt.Sprintf("approval %s was already approved by %s, and the call ran", a.id, byWhom(a.by))
	}
	return fmt.Sprintf("approval %s was already approved by %s", a.id, byWhom(a.by))
}

func byWhom(by string) string {
	if by == byHarness {
		return "the person at the harness"
	}
	return "the operator"
}

// shownID is an approval id as a message may quote it: what a client
// sent is bounded and quoted.
func shownID(id string) string { return strconv.Quote(clip.String(id, 64)) }

// pending lists the requests that wait for a decision, oldest first.
func (s *Server) pending() []kproto.Approval {
	ap := &s.approvals
	ap.mu.Lock()
	defer ap.mu.Unlock()
	now := s.now()
	ap.prune(now)
	var out []*approval
	for _, a := range ap.byID {
		if a.state == approvalPending {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(x, y *approval) int { return x.requestedAt.Compare(y.requestedAt) })
	list := make([]kproto.Approval, 0, len(out))
	for _, a := range out {
		list = append(list, kproto.Approval{
			ID: a.id, Integration: a.b.integration, Tool: a.b.tool, Action: a.b.action, Resource: a.b.resource,
			Arguments: a.preview, ArgumentsSHA256: a.b.argsSHA, Ask: a.ask, ExecutionID: a.execID,
			RequestedAt: audit.Stamp(a.requestedAt), ExpiresAt: audit.Stamp(a.expiresAt),
		})
	}
	return list
}

// claimAsker makes t the shim that asks the person about a, unless
// another is asking (t's own deferred question is asked again: its retry
// came without an answer).
func (s *Server) claimAsker(a *approval, t *turn) bool {
	s.approvals.mu.Lock()
	defer s.approvals.mu.Unlock()
	if a.state != approvalPending || a.asker != nil && !(a.asker == t && a.deferred) {
		return false
	}
	a.asker, a.deferred = t, false
	return true
}

// releaseAsker ends t's asking about a; deferred keeps t as the shim
// that may still answer it (approval.answer).
func (s *Server) releaseAsker(a *approval, t *turn, deferred bool) {
	s.approvals.mu.Lock()
	defer s.approvals.mu.Unlock()
	if a.asker != t {
		return
	}
	if deferred {
		a.deferred = true
		return
	}
	a.asker, a.deferred = nil, false
}

// forgetAsker releases every approval t's shim was asking or deferred,
// when t ends: a later turn's shim may ask again.
func (s *Server) forgetAsker(t *turn) {
	s.approvals.mu.Lock()
	defer s.approvals.mu.Unlock()
	for _, a := range s.approvals.byID {
		if a.asker == t {
			a.asker, a.deferred = nil, false
		}
	}
}

// takeDeferred reports whether approval id is one t's shim deferred and
// may answer now, and if so ends t's asking about it: one answer only.
func (s *Server) takeDeferred(id string, t *turn) bool {
	s.approvals.mu.Lock()
	defer s.approvals.mu.Unlock()
	a := s.approvals.byID[id]
	if a == nil || a.asker != t || !a.deferred || a.state != approvalPending {
		return false
	}
	a.asker, a.deferred = nil, false
	return true
}

// approvalState reads a's state and who decided it.
func (s *Server) approvalState(a *approval) (approvalState, string) {
	s.approvals.mu.Lock()
	defer s.approvals.mu.Unlock()
	return a.state, a.by
}

// runToken is a call's token of the kernel's running bound. A call that
// waits for a person gives it back while it waits: a held call must not
// keep other turns' calls from running.
type runToken struct {
	s    *Server
	held bool
}

func (r *runToken) take(ctx context.Context) error {
	if r == nil || r.held {
		return nil
	}
	if err := r.s.acquire(ctx, r.s.running, "running"); err != nil {
		return err
	}
	r.held = true
	return nil
}

func (r *runToken) give() {
	if r != nil && r.held {
		<-r.s.running
		r.held = false
	}
}

// awaitApproval holds the call c, which the grants allow only once a
// person approves it, until its approval is decided or ask_timeout
// passes, asking the person at the harness through t's shim when the
// grants let them decide and the shim can ask. It reports whether the
// call may run now; otherwise the outcome to answer. c.approvalID is set
// to the approval it ran, or was refused, under.
func (t *turn) awaitApproval(ctx context.Context, c *call) (outcome, bool) {
	v := c.decided.v
	b := binding{integration: t.name, tool: c.tool, action: c.action, resource: c.resource, argsSHA: c.argsSHA()}
	if id, ok := t.declinedID(b); ok {
		c.approvalID = id
		return declinedOutcome(id, byHarness), false
	}
	// A held call gives back its running token: it must not keep other
	// turns' calls from running while a person thinks. ranOn takes one
	// again before the call runs.
	c.token.give()
	deadline := time.Now().Add(t.s.currentPolicy().askTimeout())
	// A pass ends with a decision, or goes round again when another call
	// of the same binding took the approval first: then this one asks
	// anew. Each pass records a request, so a few are enough.
	var a *approval
	for range 4 {
		var got requestOutcome
		var o outcome
		a, got, o = t.s.requestApproval(t, c, b, v, t.s.Now())
		if a != nil {
			c.approvalID = a.id
		}
		switch got {
		case requestRefused:
			return o, false
		case requestGranted:
			return t.ranOn(ctx, c, a)
		case requestDeclined:
			t.markDeclined(b, a.id)
			return declinedOutcome(a.id, a.by), false
		}
		// Held until ask_timeout, and never past the request's expiry.
		timer := time.NewTimer(min(time.Until(deadline), a.expiresAt.Sub(t.s.Now())))
		w, why := t.waitFor(ctx, c, a, timer.C)
		timer.Stop()
		switch w {
		case waitDecided:
			state, by := t.s.approvalState(a)
			if state == approvalDeclined {
				t.markDeclined(b, a.id)
				return declinedOutcome(a.id, by), false
			}
			if t.s.use(a, t.s.Now()) {
				return t.ranOn(ctx, c, a)
			}
		case waitCancelled:
			return failed(kproto.CodeCancelled, "cancelled while it waited for a person's approval (%s); nothing was done", a.id), false
		case waitUnrecorded:
			return auditUnavailable(false), false
		default: // the time to wait is up, or the person was asked in a way that answers later
			o := pendingOutcome(a)
			o.note = why
			return o, false
		}
	}
	return pendingOutcome(a), false
}

// ranOn checks an approved call against the grants as they are now (a
// reload or an expiry while it waited counts) and charges its budgets,
// every one or none. A call refused now gives its approval back.
func (t *turn) ranOn(ctx context.Context, c *call, a *approval) (outcome, bool) {
	if err := c.token.take(ctx); err != nil {
		t.s.giveBack(a)
		return failed(kproto.CodeCancelled, "cancelled before it ran"), false
	}
	pol := t.s.currentPolicy()
	req := c.decided.req
	req.Time = t.s.Now()
	v := t.s.budgets.decide(&pol.rules, req, t.budget)
	c.decided = &decision{v: v, req: req, pol: pol}
	if v.Decision != policy.Allowed {
		t.s.giveBack(a)
		return refusal(v, c.action, shown(c.requested), ""), false
	}
	if v.Ask == "" { // a reload dropped the ask: decide charged it
		return outcome{}, true
	}
	if o, ok := t.chargeApproved(c); !ok {
		t.s.giveBack(a)
		return o, false
	}
	return outcome{}, true
}

// waitResult is how a wait for a decision ended.
type waitResult uint8

const (
	waitDecided    waitResult = iota // decided, by anyone
	waitTimeout                      // ask_timeout passed
	waitNoAnswer                     // the harness's person was asked and gave no decision, or was asked in a way that answers later
	waitCancelled                    // the call was cancelled, or its turn or the kernel ended
	waitUnrecorded                   // the harness's decision could not be recorded
)

// waitFor waits for a decision on a. When the person at the harness may
// decide, t's shim can ask, and no other shim is asking, it asks
// (approval.ask); the shim's answer is recorded as the harness's
// decision, unless the operator's came first. A question the kernel
// stops waiting for is withdrawn (approval.withdrawn). why says, for the
// record of a call that ends undecided, how the harness was or was not
// asked.
func (t *turn) waitFor(ctx context.Context, c *call, a *approval, timeout <-chan time.Time) (w waitResult, why string) {
	var answer <-chan string
	asking := false
	switch {
	case a.ask != policy.AskHarness:
		why = "only the operator may approve it"
	case !t.canAsk:
		why = "the harness cannot be asked: its shim does not speak approval.ask"
	case t.s.claimAsker(a, t):
		asking = true
		var id string
		id, answer = t.ask(a, c)
		defer t.forgetAsk(id) // an answer that comes after this is dropped
	default:
		why = "another turn's harness is being asked about it"
	}
	withdraw := func(reason, decision, by string) {
		if asking {
			asking = false
			t.s.releaseAsker(a, t, false)
			t.notify(kproto.MethodApprovalWithdrawn, kproto.ApprovalWithdrawnParams{ApprovalID: a.id, Reason: reason, Decision: decision, By: by})
		}
	}
	for {
		select {
		case <-a.decided:
			state, by := t.s.approvalState(a)
			decision := kproto.ApprovalApproved
			if state == approvalDeclined {
				decision = kproto.ApprovalDeclined
			}
			withdraw(kproto.WithdrawnDecided, decision, by)
			return waitDecided, ""
		case d := <-answer:
			answer, asking = nil, false
			switch d {
			case kproto.ApprovalApproved, kproto.ApprovalDeclined:
				t.s.releaseAsker(a, t, false)
				_, err := t.s.decide(a.id, d == kproto.ApprovalApproved, byHarness, audit.Peer{UID: t.cred.UID, PID: t.cred.PID})
				var ae *approvalError
				switch {
				case errors.Is(err, errApprovalUnrecorded):
					return waitUnrecorded, ""
				case errors.As(err, &ae) && ae.code == kproto.ErrUnknownApproval:
					return waitTimeout, "it expired as the harness's answer came"
				}
				// Decided now, by this answer or by the operator's just
				// before it: a.decided is closed either way.
			case kproto.ApprovalUnavailable:
				// Only the operator can decide now: wait for them.
				t.s.releaseAsker(a, t, false)
				why = "the harness's client cannot be asked: it declared no form elicitation"
			case kproto.ApprovalDeferred:
				t.s.releaseAsker(a, t, true)
				return waitNoAnswer, "the harness was asked with an input-required result; its answer comes with the call's retry"
			default: // cancelled, or an answer the kernel does not know
				t.s.releaseAsker(a, t, false)
				return waitNoAnswer, "the person at the harness was asked and gave no decision (" + clip.String(d, 32) + ")"
			}
		case <-timeout:
			if asking {
				why = "the person at the harness was asked and did not answer in time"
			}
			withdraw(kproto.WithdrawnTimeout, "", "")
			return waitTimeout, why
		case <-ctx.Done():
			withdraw(kproto.WithdrawnCancelled, "", "")
			return waitCancelled, ""
		}
	}
}

// ask sends approval.ask about a to t's shim and returns the request's
// id and where its answer arrives (a decision; cancelled for an error
// answer).
func (t *turn) ask(a *approval, c *call) (string, <-chan string) {
	t.mu.Lock()
	t.nextAsk++
	id := "a" + strconv.FormatInt(t.nextAsk, 10)
	ch := make(chan string, 1)
	t.asks[id] = ch
	t.mu.Unlock()
	params, err := json.Marshal(kproto.ApprovalAskParams{
		ApprovalID: a.id, CallID: c.callID, Integration: t.name, Tool: c.tool, Action: c.action,
		Resource: c.resource, Arguments: a.preview, ArgumentsSHA256: a.b.argsSHA,
		ExpiresAt: audit.Stamp(a.expiresAt), Message: approvalMessage(t.name, c, a),
	})
	if err != nil {
		ch <- kproto.ApprovalCancelled
		return id, ch
	}
	line := append([]byte(`{"jsonrpc":"2.0","id":"`+id+`","method":"`+kproto.MethodApprovalAsk+`","params":`), params...)
	t.write(append(line, "}\n"...))
	return id, ch
}

// forgetAsk stops waiting for the shim's answer to approval.ask id.
func (t *turn) forgetAsk(id string) {
	t.mu.Lock()
	delete(t.asks, id)
	t.mu.Unlock()
}

// askAnswered takes the shim's answer to an approval.ask (id is the
// request's id as the kernel wrote it). An answer the kernel no longer
// waits for is dropped.
func (t *turn) askAnswered(id json.RawMessage, result json.RawMessage, failed bool) {
	var key string
	if json.Unmarshal(id, &key) != nil {
		return
	}
	t.mu.Lock()
	ch := t.asks[key]
	delete(t.asks, key)
	t.mu.Unlock()
	if ch == nil {
		return
	}
	var r kproto.ApprovalAskResult
	if failed || json.Unmarshal(result, &r) != nil {
		r.Decision = kproto.ApprovalCancelled
	}
	ch <- r.Decision
}

// answerApproval takes approval.answer: the person's decision on an ask
// t's shim deferred. Any other approval is not the shim's to decide: the
// attempt is refused and recorded, as an operator method asked by an
// integration's connection is.
func (t *turn) answerApproval(p kproto.ApprovalAnswerParams) {
	approve := p.Decision == kproto.ApprovalApproved
	if !approve && p.Decision != kproto.ApprovalDeclined || !t.s.takeDeferred(p.ApprovalID, t) {
		why := "approval " + shownID(p.ApprovalID) + " was not asked of this connection, or is decided"
		t.s.Log.Warn().Str("integration", t.name).Uint32("uid", t.cred.UID).Int("pid", t.cred.PID).Msg("refused an approval answer: " + why)
		t.s.record(t.event(audit.EventOperatorRefused, func(e *audit.Event) { e.Reason = kproto.MethodApprovalAnswer + ": " + why }))
		return
	}
	if _, err := t.s.decide(p.ApprovalID, approve, byHarness, audit.Peer{UID: t.cred.UID, PID: t.cred.PID}); err != nil {
		t.s.Log.Warn().Err(err).Str("approvalId", p.ApprovalID).Msg("the harness's answer to an approval was not recorded")
	}
}

// notify sends the shim a notification.
func (t *turn) notify(method string, params any) {
	b, err := json.Marshal(struct {
		JSONRPC string `json:"jsonrpc"`
		Method  string `json:"method"`
		Params  any    `json:"params"`
	}{"2.0", method, params})
	if err != nil {
		return
	}
	t.write(append(b, '\n'))
}

// markDeclined remembers that a person declined binding b in this turn:
// the turn does not ask about it again.
func (t *turn) markDeclined(b binding, id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.declined == nil {
		t.declined = map[binding]string{}
	}
	t.declined[b] = id
}

// declinedID is the approval under which a person declined binding b
// in this turn, if they did.
func (t *turn) declinedID(b binding) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	id, ok := t.declined[b]
	return id, ok
}

// pendingOutcome answers a call whose approval was asked for and not
// given while it was held: retryable, with the approval's id and expiry
// in the text the model reads and in approvalId.
func pendingOutcome(a *approval) outcome {
	who := "the operator ('sharedos-mcp approve " + a.id + "')"
	if a.ask == policy.AskHarness {
		who = "the person at the harness or the operator ('sharedos-mcp approve " + a.id + "')"
	}
	o := denied(kproto.CodeApprovalPending, "a person has been asked to approve this call (approval %s, by %s) and has not answered yet; "+
		"it can be approved until %s. Once it is approved, retry this same call with the same arguments: it then runs without asking again. "+
		"Tell the user what you are waiting for.", a.id, who, audit.Stamp(a.expiresAt))
	o.retryable, o.approvalID = true, a.id
	return o
}

// declinedOutcome answers a call a person declined.
func declinedOutcome(id, by string) outcome {
	o := denied(kproto.CodeApprovalDeclined, "%s declined this call (approval %s); it was not run, and it will not be asked for again in this turn. "+
		"Do not retry it; tell the user.", upperFirst(byWhom(by)), id)
	o.approvalID = id
	return o
}

func upperFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:]
}

// approvalMessage is what the person at the harness reads: who asks to
// do what, where, with which arguments, and what approving means.
func approvalMessage(integration string, c *call, a *approval) string {
	return fmt.Sprintf("%s asks to run %s: %s on %s.\nArguments: %s\n"+
		"Approve this call? It runs once, with exactly these arguments. Approval %s, open until %s.",
		integration, c.tool, c.action, visible(shown(c.resource)), a.preview, a.id, audit.Stamp(a.expiresAt))
}

// argumentsText is the arguments of a call as they will be executed, as
// JSON: a file tool's checked arguments (members in name order), or the
// bytes a brokered tool's upstream receives.
func (c *call) argumentsText() []byte {
	if c.args != nil {
		return c.args()
	}
	return []byte("{}")
}

// argsSHA is the SHA-256, in hex, of the call's arguments as they will
// be executed: what an approval binds.
func (c *call) argsSHA() string {
	sum := sha256.Sum256(c.argumentsText())
	return hex.EncodeToString(sum[:])
}

// preview is the call's arguments as a person is shown them: bounded,
// with every character that is not graphic (controls, bidi overrides,
// other format characters) written as an escape.
func (c *call) preview() string {
	text := c.argumentsText()
	if len(text) <= maxPreviewBytes {
		return visible(string(text))
	}
	return visible(clip.String(string(text), maxPreviewBytes)) + fmt.Sprintf(" (%d bytes in all)", len(text))
}

// visible writes every rune of s that is not graphic, or is white space
// other than a space, as a Go-style escape, so that what a person reads
// is what the call holds.
func visible(s string) string {
	ok := true
	for _, r := range s {
		if !unicode.IsGraphic(r) || unicode.IsSpace(r) && r != ' ' {
			ok = false
			break
		}
	}
	if ok {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsGraphic(r) && !(unicode.IsSpace(r) && r != ' ') {
			b.WriteRune(r)
			continue
		}
		q := strconv.QuoteRuneToASCII(r)
		b.WriteString(q[1 : len(q)-1])
	}
	return b.String()
}

// filesArguments is a file tool's checked arguments as JSON, members in
// name order, strings as encoding/json writes them without HTML escapes.
func filesArguments(args map[string]string) []byte {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(args) != nil {
		return []byte("{}")
	}
	return []byte(strings.TrimSuffix(b.String(), "\n"))
}
