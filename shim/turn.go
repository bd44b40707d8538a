package shim

import "context"

// pending is one request read from stdin whose answer is owed, from the
// moment it is read until its answer is written or dropped. Once the
// reader has made it, its fields (and its relayCall's) change only under
// server.mu, inside server.update.
type pending struct {
	key     string // the request id as written, while it can be cancelled; "" for none
	ordered bool   // it involves the kernel: its answer leaves in arrival order (ADR 0011)

	state     answerState
	cancelled bool        // by the client or the turn's end: nothing is written for it
	lines     [][]byte    // the answer once decided, in pieces (see listLine); none writes nothing
	call      *relayCall  // a call at the kernel: its answer, once decided, is the kernel's to render
	stop      func()      // stops the work behind an open request (an escalation)
	parts     []*pending  // a batch's messages, answered together as one array line
	progress  *progressTo // the client asked for progress on this call
}

// answerState is where a request's answer is.
type answerState uint8

const (
	open    answerState = iota // not decided yet: at the kernel, or waiting for the catalogue
	decided                    // known, and waiting for its turn to be written
	claimed                    // taken by the writer: written or dropped, and nothing follows it
)

// progressTo is where a call's progress goes: the client's token, and
// the last progress sent (MCP requires it to increase).
type progressTo struct {
	token []byte
	last  float64
	sent  bool
}

// turnState is every request of the turn between stdin and stdout, and
// what is known of them. It is changed only under server.mu, through
// server.update, which then wakes whoever can go on: the writer when
// something can be written, the reader when it waits for room.
type turnState struct {
	byID     map[string]*pending // requests a cancellation can still reach, by id as written
	calls    map[string]*pending // calls at the kernel whose client asked for progress, by call id
	ordered  ring                // answers that leave in arrival order
	loose    ring                // the shim's own answers, which leave at once
	notes    []note              // progress notifications and requests to the client, in the order made
	asks     map[string]*asking  // elicitations sent to the client and not answered, by the shim's request id
	deferred []*asking           // questions asked by an input-required result, for the retry (2026-07-28)
	nextAsk  int64
	cat      catalogueState
	ended    bool // the reader queues nothing more
	aborted  bool // the turn is over: calls still at the kernel were stopped
	waitRoom bool // the reader waits for room (push)
}

// note is one line the shim sends the client on its own: a
// notifications/progress or an elicitation/create for call, dropped once
// the call's answer is claimed, or (call nil) a notifications/cancelled,
// always sent.
type note struct {
	call *pending
	line []byte
}

// maxInFlight bounds requests read but not yet answered: ordered answers
// waiting for their turn, and the shim's own answers waiting for stdout,
// as many of each. The reader waits when either is full, so a flood of
// calls cannot grow memory without end.
const maxInFlight = 256

// maxNotes bounds progress notifications waiting to be written. Beyond it
// a report is dropped rather than wait: progress is advice, a later
// report supersedes it, and the goroutine that reports it also reads
// every answer from the kernel.
const maxNotes = 64

// maxWriteBytes bounds what one write gathers beyond its first answer:
// the rest goes in the next write.
const maxWriteBytes = 1 << 20

// update runs f on the turn's state under its lock, and then wakes the
// writer if something can be written, and the reader if it waits for
// room and there is some. Every change to the state goes through here.
func (s *server) update(f func(st *turnState)) {
	s.mu.Lock()
	st := &s.st
	f(st)
	write := st.writable()
	room := st.waitRoom && st.hasRoom()
	if room {
		st.waitRoom = false
	}
	s.mu.Unlock()
	if write {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	if room {
		select {
		case s.room <- struct{}{}:
		default:
		}
	}
}

// register makes p cancellable by id until its answer is written.
func (st *turnState) register(id []byte, p *pending) {
	p.key = string(id)
	st.byID[p.key] = p
}

// decide sets p's answer, lines or none, unless it was decided before,
// and reports whether it was this call that decided it.
func (st *turnState) decide(p *pending, lines ...[]byte) bool {
	if p.state != open {
		return false
	}
	p.state, p.lines = decided, lines
	if p.call != nil && p.progress != nil {
		delete(st.calls, p.call.callID) // no progress follows the answer
	}
	return true
}

// cancel drops p's answer, and stops the work behind it if it is still
// open: a call at the kernel is told call.cancel.
func (s *server) cancel(st *turnState, p *pending) {
	if p.key != "" && st.byID[p.key] == p {
		delete(st.byID, p.key)
	}
	p.cancelled = true
	if !st.decide(p) {
		return // written, or decided: the writer drops it
	}
	if c := p.call; c != nil {
		s.kernel.Cancel(c.callID)
		c.done()
	}
	if p.stop != nil {
		p.stop()
	}
}

// isDecided reports whether p's answer, or every part of a batch, is known.
func isDecided(p *pending) bool {
	for _, part := range p.parts {
		if part.state == open {
			return false
		}
	}
	return p.state != open
}

// hasRoom reports whether the reader may queue another request of
// either kind.
func (st *turnState) hasRoom() bool {
	return st.ordered.n < maxInFlight && st.loose.n < maxInFlight
}

// writable reports whether the writer has something to do: an answer or
// a note to write, or the end of the turn to report.
func (st *turnState) writable() bool {
	return len(st.notes) > 0 ||
		st.loose.n > 0 && isDecided(st.loose.peek()) ||
		st.ordered.n > 0 && isDecided(st.ordered.peek()) ||
		st.over()
}

// over reports whether the reader has ended and every answer it queued
// is written.
func (st *turnState) over() bool {
	return st.ended && st.ordered.n == 0 && st.loose.n == 0
}

// take claims, for one write, the progress reported so far, the shim's
// own answers, and the ordered answers whose turn has come, at most
// about maxWriteBytes of them: what is to be written, in order. A
// cancelled answer is claimed and dropped; so is a note on a call
// claimed before it. A batch keeps only its parts still owed.
func (st *turnState) take(into []*pending, notes [][]byte) ([]*pending, [][]byte) {
	size := 0
	for _, n := range st.notes {
		if n.call == nil || n.call.state != claimed {
			notes = append(notes, n.line)
		}
	}
	clear(st.notes)
	st.notes = st.notes[:0]
	for _, q := range []*ring{&st.loose, &st.ordered} {
		for q.n > 0 && size < maxWriteBytes && isDecided(q.peek()) {
			if p := q.pop(); st.claim(p) {
				into = append(into, p)
				size += p.size()
			}
		}
	}
	return into, notes
}

// claim takes p for the writer: it can no longer be cancelled, and
// nothing follows it. It reports whether p has anything to write.
func (st *turnState) claim(p *pending) bool {
	if p.key != "" && st.byID[p.key] == p {
		delete(st.byID, p.key)
	}
	p.state = claimed
	if p.parts != nil {
		owed := p.parts[:0]
		for _, part := range p.parts {
			if st.claim(part) {
				owed = append(owed, part)
			}
		}
		p.parts = owed
		return !p.cancelled && len(owed) > 0
	}
	return !p.cancelled && (p.fromKernel() || len(p.lines) > 0)
}

// fromKernel reports whether p's answer is the kernel's, for the writer
// to render.
func (p *pending) fromKernel() bool { return p.call != nil && p.call.hasAnswer }

// size is about how many bytes p's answer takes, to bound one write: a
// call's answer from the kernel counts as large.
func (p *pending) size() int {
	if p.fromKernel() {
		return maxWriteBytes
	}
	n := 0
	for _, l := range p.lines {
		n += len(l)
	}
	for _, part := range p.parts {
		n += part.size()
	}
	return n
}

// push queues p, which the reader made, for writing. It waits while the
// queue of p's kind is full.
func (s *server) push(ctx context.Context, p *pending) error {
	for {
		queued := false
		s.update(func(st *turnState) {
			switch {
			case p.ordered && st.ordered.n < maxInFlight:
				st.ordered.push(p)
			case !p.ordered && st.loose.n < maxInFlight:
				st.loose.push(p)
			default:
				st.waitRoom = true
				return
			}
			queued = true
		})
		if queued {
			return nil
		}
		select {
		case <-s.room:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// abortCalls stops every call still at the kernel once the turn is over:
// each gets call.cancel and no answer. A call the reader or the
// catalogue's fetch would send after this is not sent (dispatch).
func (s *server) abortCalls() {
	s.update(func(st *turnState) {
		st.aborted = true
		for _, p := range st.byID {
			if p.state == open && (p.call != nil || p.stop != nil) {
				s.cancel(st, p)
			}
		}
	})
}

// ring is a queue of answers not yet written, oldest first, of at most
// maxInFlight.
type ring struct {
	s       [maxInFlight]*pending
	head, n int
}

func (r *ring) push(p *pending) { r.s[(r.head+r.n)%maxInFlight] = p; r.n++ }
func (r *ring) peek() *pending  { return r.s[r.head] }
func (r *ring) pop() *pending {
	p := r.s[r.head]
	r.s[r.head] = nil
	r.head = (r.head + 1) % maxInFlight
	r.n--
	return p
}
