package shim

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/sharedos/sharedos-mcp/hashing"
	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/kernelclient"
)

// catalogue is the turn's published tool set. It is fetched when the first
// tools/list or tools/call is read, and once fetched never changes:
// listChanged is false. Its fields are set by the fetch before
// catalogueState.ready, and only read after.
type catalogue struct {
	tools     []hashing.Tool
	hash      string
	byName    map[string]int
	portable  map[string]int // portable name → index, -1 when two tools share it
	toolsJSON []byte         // the MCP wire array
}

// catalogueState is where the turn's catalogue is, in turnState.
//
// The reader never waits for it. A request read before it is ready waits
// in a list, in arrival order, and the fetch answers those lists and
// sends those calls on, in that order, once it has the catalogue, in one
// update; it then sets ready, after which only the reader sends calls.
// Either way one goroutine at a time decides calls (name, escalation
// state, call id), under mu, and they reach the kernel in arrival order.
//
// The fetch is bounded by the call timeout. One that times out answers
// what waits for it, and the next request that needs the catalogue asks
// again: the kernel may have been slow, not gone. A catalogue the kernel
// cannot give (the connection is lost, the catalogue is refused) stays
// failed for the turn.
type catalogueState struct {
	ready    bool
	fetching bool  // a fetch is under way
	failed   error // set when the catalogue cannot be had this turn
	waiting  []waitingRequest
}

// waitingRequest is a tools/list or tools/call read before the catalogue
// was ready.
type waitingRequest struct {
	req    *request
	call   *callParams // nil for tools/list
	p      *pending
	readAt time.Time
}

// errFetchTimeout is a fetch the kernel did not answer within the call
// timeout.
var errFetchTimeout = errors.New("the kernel did not send the catalogue in time")

// startFetch begins a fetch unless one is under way. It runs in update.
func (s *server) startFetch(ctx context.Context, st *turnState) {
	if st.cat.fetching {
		return
	}
	st.cat.fetching = true
	s.calls.Add(1)
	go s.fetchCatalogue(ctx)
}

func (s *server) fetchCatalogue(ctx context.Context) {
	defer s.calls.Done()
	fctx, cancel := ctx, context.CancelFunc(func() {})
	if s.cfg.CallTimeout > 0 {
		fctx, cancel = context.WithTimeout(ctx, s.cfg.CallTimeout)
	}
	tools, hash, err := s.kernel.Catalogue(fctx)
	cancel()
	switch {
	case err == nil:
		s.cat.index(tools, hash)
		s.cfg.Log.Debug().Int("tools", len(tools)).Str("catalogHash", s.cat.hash).Msg("catalogue ready")
	case ctx.Err() != nil:
		err = ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		s.cfg.Log.Warn().Dur("callTimeout_ms", s.cfg.CallTimeout).Msg("the kernel did not send the catalogue within the call timeout")
		err = errFetchTimeout
	default:
		s.cfg.Log.Error().Err(err).Msg("the catalogue cannot be served")
	}

	s.update(func(st *turnState) {
		c := &st.cat
		waiting := c.waiting
		c.waiting, c.fetching = nil, false
		if err != nil && err != errFetchTimeout {
			c.failed = err
		}
		for _, w := range waiting {
			switch {
			case w.call == nil && err == nil:
				st.decide(w.p, s.listLine(w.req.id, w.req.modern)...)
			case w.call == nil && ctx.Err() != nil:
				st.decide(w.p) // the turn is over
			case w.call == nil:
				st.decide(w.p, s.listError(w.req, err))
			case err != nil:
				s.failWithoutCatalogue(st, w.req, w.p, err)
			default:
				timeout := s.cfg.CallTimeout
				// The call's bound runs from when it was read.
				if timeout > 0 {
					if timeout -= time.Since(w.readAt); timeout <= 0 {
						s.failWithoutCatalogue(st, w.req, w.p, errFetchTimeout)
						continue
					}
				}
				s.dispatch(ctx, st, w.req, *w.call, w.p, timeout)
			}
		}
		c.ready = err == nil
	})
}

// index keeps the fetched tools and what the shim looks them up by.
func (c *catalogue) index(tools []hashing.Tool, hash string) {
	c.tools, c.hash = tools, hash
	c.byName = make(map[string]int, len(tools))
	c.portable = make(map[string]int, len(tools))
	// Room for the MCP array up front, generously: a 512-tool catalogue is
	// half a megabyte, and regrowing it would copy that and zero the new
	// capacity. Room to spare costs nothing: make leaves memory fresh from
	// the operating system untouched until it is written.
	size := 2
	for _, t := range tools {
		size += len(t.Name) + 2*len(t.Description) + len(t.InputSchema) + len(t.OutputSchema) + 256
	}
	buf := append(make([]byte, 0, size), '[')
	for i, t := range tools {
		c.byName[t.Name] = i
		p := portableName(t.Name)
		if _, dup := c.portable[p]; dup {
			c.portable[p] = -1
		} else {
			c.portable[p] = i
		}
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = hashing.AppendMCP(buf, t)
	}
	c.toolsJSON = append(buf, ']')
}

// failWithoutCatalogue answers a call that cannot go to the kernel
// because the catalogue could not be had. The text the model reads names
// no socket or error chain; the log has those. It runs in update.
func (s *server) failWithoutCatalogue(st *turnState, req *request, p *pending, err error) {
	res := kproto.InvokeResult{Status: kproto.StatusFailed, Code: kproto.CodeInternal,
		Message: "the kernel's catalogue cannot be served; this turn has no tools"}
	switch {
	case errors.Is(err, errFetchTimeout):
		yes := true
		res = kproto.InvokeResult{Status: kproto.StatusFailed, Code: kproto.CodeKernelTimeout,
			Message: "the kernel did not send the catalogue within " + s.cfg.CallTimeout.String(), Retryable: &yes}
	case errors.Is(err, kernelclient.ErrClosed):
		res.Code, res.Message = kproto.CodeKernelUnavailable, "the kernel connection was lost; this turn cannot reach it again"
	case errors.Is(err, context.Canceled):
		st.decide(p) // the turn is over
		return
	}
	st.decide(p, resultLine(req.id, s.refusal(req, res)))
}

// listError is the JSON-RPC error tools/list gets without a catalogue.
func (s *server) listError(req *request, err error) []byte {
	msg := "internal error: the kernel's catalogue cannot be served"
	if errors.Is(err, errFetchTimeout) {
		msg = "internal error: the kernel did not send the catalogue within " + s.cfg.CallTimeout.String() + "; ask again"
	}
	return errorLine(req.id, jsonrpc.CodeInternalError, msg, nil)
}

// portableName is the form harnesses that allow only [A-Za-z0-9_-] give a
// tool name.
func portableName(name string) string { return strings.ReplaceAll(name, ".", "_") }

// resolve maps a called name to the canonical one: an exact match, else
// the single published tool whose portable form matches, else the name
// unchanged, so the kernel still sees (and records, and refuses) a name it
// never published. tool is nil when the name is not published.
func (c *catalogue) resolve(name string) (tool *hashing.Tool, canonical string) {
	if i, ok := c.byName[name]; ok {
		return &c.tools[i], name
	}
	if i, ok := c.portable[name]; ok && i >= 0 {
		return &c.tools[i], c.tools[i].Name
	}
	return nil, name
}
