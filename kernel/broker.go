package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
	"github.com/sharedos/sharedos-mcp/kernel/secret"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
	"github.com/sharedos/sharedos-mcp/policy"
)

// maxBrokeredResult bounds a brokered call's result, its content and
// structuredContent together as JSON; a larger one is answered too_large
// and the turn goes on. It stays under the shim's default message limit
// (16 MiB) with room for the envelope, and is lowered to fit a smaller
// MaxLine (see Server.brokeredResultBound).
const maxBrokeredResult = upstream.DefaultMaxResultBytes

// resultEnvelope is what an answer line holds besides a result's content
// and output: the JSON-RPC envelope, status and the like.
const resultEnvelope = 64 << 10

// broker is one [[upstream]] the kernel runs: its spec, as configured,
// and the manager that runs it. Each upstream has a manager of its own,
// so a reload can stop, start or restart one without touching the rest.
type broker struct {
	spec    upstream.Spec
	m       *upstream.Manager
	secrets *secret.Set // the set it was started with
}

// brokerSet is the upstreams a kernel runs at one moment, by name. It is
// replaced whole, never changed.
type brokerSet struct {
	byName map[string]*broker
	names  []string // sorted
}

func (bs *brokerSet) get(name string) *broker {
	if bs == nil {
		return nil
	}
	return bs.byName[name]
}

func (bs *brokerSet) with(b *broker) *brokerSet {
	next := &brokerSet{byName: map[string]*broker{}}
	if bs != nil {
		for n, x := range bs.byName {
			next.byName[n] = x
		}
	}
	next.byName[b.spec.Name] = b
	next.sort()
	return next
}

func (bs *brokerSet) without(name string) *brokerSet {
	next := &brokerSet{byName: map[string]*broker{}}
	for n, x := range bs.byName {
		if n != name {
			next.byName[n] = x
		}
	}
	next.sort()
	return next
}

func (bs *brokerSet) sort() {
	bs.names = bs.names[:0]
	for n := range bs.byName {
		bs.names = append(bs.names, n)
	}
	slices.Sort(bs.names)
}

// brokerState is what the Server keeps about its upstreams.
type brokerState struct {
	set atomic.Pointer[brokerSet]

	mu      sync.Mutex // serializes starting and stopping managers
	started bool       // Serve has started them; SetUpstreams now acts at once
	closed  bool

	// cache holds each published brokered tool's kernel-side form, keyed
	// by the snapshot's tool (shared between snapshots until the
	// upstream lists its tools again), so a hello encodes a definition
	// only once.
	cacheMu sync.Mutex
	cache   map[*upstream.Tool]*tool

	// kick asks the status writer to write the status file again.
	kick     chan struct{}
	stopped  chan struct{}
	stopOnce sync.Once
}

// SetUpstreams replaces the upstreams the kernel brokers. Before Serve it
// only sets them. While Serve runs, it stops those no longer configured,
// restarts those whose [[upstream]] changed (stopping the old process
// first) and starts the new ones; an unchanged upstream keeps running.
// New turns see the new set; an open turn keeps its catalogue, and its
// calls to a tool whose upstream was removed are refused
// tool_unavailable. It returns the upstreams that could not be started
// (the others are started).
func (s *Server) SetUpstreams(specs []upstream.Spec) error {
	b := &s.brokers
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.started || b.closed {
		s.Upstreams = specs
		return nil
	}
	want := map[string]upstream.Spec{}
	for _, sp := range specs {
		want[sp.Name] = sp
	}
	cur := b.set.Load()
	var errs []error
	for _, name := range slices.Clone(cur.names) {
		old := cur.byName[name]
		sp, keep := want[name]
		if keep && reflect.DeepEqual(sp, old.spec) && sameSecretValues(&sp, old.secrets, s.CurrentSecrets()) {
			continue
		}
		if !keep {
			// Removed: new turns do not see it, open turns' calls to it
			// are tool_unavailable.
			b.set.Store(b.set.Load().without(name))
		}
		// Changed: stopped before its replacement starts, so two copies
		// of one server (one memory file, say) never run at once; while
		// it restarts, calls to it are upstream_unavailable.
		if err := old.m.Close(); err != nil {
			s.Log.Warn().Err(err).Str("upstream", name).Msg("stop upstream")
		}
		s.Log.Info().Str("upstream", name).Bool("removed", !keep).Msg("upstream stopped: its [[upstream]] was removed or changed")
		if !keep {
			continue
		}
		nb, err := s.startBroker(sp)
		if err != nil {
			b.set.Store(b.set.Load().without(name))
			errs = append(errs, err)
			continue
		}
		b.set.Store(b.set.Load().with(nb))
	}
	for _, sp := range specs {
		if b.set.Load().get(sp.Name) != nil || cur.get(sp.Name) != nil {
			continue
		}
		nb, err := s.startBroker(sp)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		b.set.Store(b.set.Load().with(nb))
	}
	s.Upstreams = specs
	s.kickStatus()
	return errors.Join(errs...)
}

// startBrokers starts every configured upstream, for Serve. An upstream
// that cannot start is retried by its manager; only a state directory
// that cannot hold the pins fails the kernel.
func (s *Server) startBrokers() error {
	b := &s.brokers
	b.mu.Lock()
	defer b.mu.Unlock()
	b.set.Store(&brokerSet{byName: map[string]*broker{}})
	b.kick = make(chan struct{}, 1)
	b.stopped = make(chan struct{})
	b.started = true
	for _, sp := range s.Upstreams {
		nb, err := s.startBroker(sp)
		if err != nil {
			for _, x := range b.set.Load().byName {
				_ = x.m.Close()
			}
			b.closed = true
			return err
		}
		b.set.Store(b.set.Load().with(nb))
	}
	go s.writeStatusLoop()
	s.kickStatus()
	return nil
}

func (s *Server) startBroker(sp upstream.Spec) (*broker, error) {
	if s.StateDir == "" {
		return nil, errors.New("start upstreams: no state directory")
	}
	set := s.CurrentSecrets()
	m, err := upstream.Start([]upstream.Spec{sp}, upstream.Options{
		StateDir:       s.StateDir,
		Log:            s.Log,
		OnEvent:        s.onUpstreamEvent,
		RecordApproval: s.recordApproval,
		MaxResultBytes: s.brokeredResultBound(),
		Version:        s.Version,
		Secrets:        set,
		Redactor:       s.Redactor,
	})
	if err != nil {
		return nil, fmt.Errorf("upstream %s: %w", sp.Name, err)
	}
	return &broker{spec: sp, m: m, secrets: set}, nil
}

// closeBrokers stops every upstream and everything they spawned, and
// writes the status file one last time, for Serve's exit.
func (s *Server) closeBrokers() {
	b := &s.brokers
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.started || b.closed {
		return
	}
	b.closed = true
	set := b.set.Load()
	var wg sync.WaitGroup
	for _, x := range set.byName {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = x.m.Close()
		}()
	}
	wg.Wait()
	b.stopOnce.Do(func() { close(b.stopped) })
	s.writeStatus()
}

// brokeredResultBound is the result bound given to the managers: at most
// maxBrokeredResult, and small enough that the answer fits a line of
// MaxLine bytes.
func (s *Server) brokeredResultBound() int {
	return max(1, min(maxBrokeredResult, s.maxLine()-resultEnvelope))
}

// onUpstreamEvent records pins and quarantines in the audit log and
// refreshes the status file. (The managers log every event themselves.)
func (s *Server) onUpstreamEvent(ev upstream.Event) {
	if s.upstreamEvents != nil {
		s.upstreamEvents(ev)
	}
	switch ev.Kind {
	case upstream.EventToolPinned, upstream.EventToolQuarantined:
		s.record(s.upstreamEvent(ev))
	}
	s.kickStatus()
}

// recordApproval records an approval made by kernel approve, durably,
// before the approved definition is published.
func (s *Server) recordApproval(ev upstream.Event) bool {
	ok := s.recordDurably(s.upstreamEvent(ev))
	s.kickStatus()
	return ok
}

// upstreamEvent is the audit record of an event about a brokered tool's
// definition: upstream.EventToolPinned (pinned on first sight, reason
// first_seen, or by kernel approve, reason approved with previous and
// changed; an approval is recorded, and synced, before the tool is
// published again) or upstream.EventToolQuarantined (the definition
// differs from its pin: sha256 offered, previous pinned, changed fields;
// the tool is not published until it is approved). It belongs to no
// turn: executionId and integration are empty and peer is the kernel
// process; tool is the published name, upstream the upstream's.
func (s *Server) upstreamEvent(ev upstream.Event) audit.Event {
	t := ev.Time
	if t.IsZero() {
		t = s.now()
	}
	return audit.Event{
		Time: audit.Stamp(t), Event: ev.Kind, Peer: audit.Peer{UID: uint32(os.Getuid()), PID: os.Getpid()},
		Tool: ev.Upstream + "." + ev.Tool, Upstream: ev.Upstream, Reason: ev.Reason,
		SHA256: ev.Hash, Previous: ev.Previous, Changed: ev.Changed,
	}
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// brokeredCatalogue returns the brokered tools a turn of integration
// lists, at most room of them, by name: each published tool of a ready
// upstream that the live grants publish to it (brokeredDiscoverable).
func (s *Server) brokeredCatalogue(integration string, now time.Time, room int) []*tool {
	set := s.brokers.set.Load()
	if set == nil || len(set.names) == 0 {
		return nil
	}
	rules := &s.currentPolicy().rules
	var published []*upstream.Tool
	for _, name := range set.names {
		for _, ut := range set.byName[name].m.Snapshot().Tools {
			if brokeredDiscoverable(rules, integration, ut.Upstream, ut.Resource, ut.Action, now) {
				published = append(published, ut)
			}
		}
	}
	if len(published) > room {
		s.Log.Warn().Str("integration", integration).Int("published", len(published)).Int("room", room).
			Msg("more brokered tools than a catalogue holds; the last by name are left out of this turn")
		published = published[:max(room, 0)]
	}
	c := &s.brokers
	c.cacheMu.Lock()
	defer c.cacheMu.Unlock()
	next := make(map[*upstream.Tool]*tool, len(published))
	out := make([]*tool, 0, len(published))
	for _, ut := range published {
		tl := c.cache[ut]
		if tl == nil {
			var err error
			if tl, err = newBrokeredTool(ut); err != nil {
				s.Log.Error().Err(err).Str("tool", ut.Name).Msg("encode brokered tool; it is left out")
				continue
			}
		}
		next[ut] = tl
		out = append(out, tl)
	}
	c.cache = next
	return out
}

// brokeredDiscoverable is the rule a brokered tool is published by: live
// grants of integration, and of each of its ancestors, allow action on
// its resource or, for a resource with placeholders, on some resource
// under the template's fixed prefix (the rule the file tools follow,
// policy.Rules.Discoverable).
func brokeredDiscoverable(rules *policy.Rules, integration, ns string, r policy.Template, action string, now time.Time) bool {
	return rules.Discoverable(integration, templateScope(ns, r), action, now)
}

// templateScope is where calls of a resource template land: the one
// resource it names, or with placeholders everything under its fixed
// prefix.
func templateScope(ns string, r policy.Template) policy.Scope {
	if len(r.Arguments()) == 0 {
		return policy.Scope{Resource: policy.Resource{Namespace: ns, Path: r.String()}}
	}
	return policy.Scope{Resource: policy.Resource{Namespace: ns, Path: r.Prefix()}, Below: true}
}

// catalogScope is where the tool's calls land, as publishing reads it.
func (t *tool) catalogScope() policy.Scope {
	if t.brokered != nil {
		return templateScope(t.brokered.Upstream, t.brokered.Resource)
	}
	return policy.Scope{Resource: t.scope, Below: true}
}

// newBrokeredTool is the kernel-side form of a published upstream tool.
// Its requiredCapability names the resource template and action, for
// whoever reads kernel-internal fields (the catalog command); the shim
// never publishes it.
func newBrokeredTool(ut *upstream.Tool) (*tool, error) {
	tl := &tool{
		def: definition{
			Definition: ut.Definition(),
			RequiredCapability: capability{
				Resource: capabilityResource{Namespace: ut.Upstream, Path: ut.Resource.String()},
				Action:   ut.Action,
			},
		},
		scope:    policy.Resource{Namespace: ut.Upstream, Path: ut.Resource.Prefix()},
		action:   ut.Action,
		brokered: ut,
	}
	raw, err := json.Marshal(tl.def)
	if err != nil {
		return nil, err
	}
	tl.raw = raw
	return tl, nil
}

// runBrokered decides and forwards a call of a brokered tool, after the
// catalogue, catalogHash, escalation and size checks of run: the tool as
// its upstream is configured now (brokerNow), the resource the arguments
// name, read once (a placeholder value that would widen it, or member
// names a decoder could take for one, refuse the call before anything
// reaches the upstream), the live grants on it, for a call with an
// effect the durable tool.authorized, and only then the upstream, which
// receives the arguments of that one reading.
func (t *turn) runBrokered(ctx context.Context, tl *tool, p invokeParams, named *call) (call, outcome) {
	ut := tl.brokered
	b, c, refused := t.brokerNow(tl)
	c.callID, c.seq, c.tool, c.token, c.recorded = named.callID, named.seq, named.tool, named.token, named.recorded
	seq := c.seq
	if b == nil {
		return c, refused
	}
	res, forward, err := ut.Resolve(p.Arguments.raw)
	if err != nil {
		return c, failed(kproto.CodeInvalidArguments, "%s: %s", tl.def.Name, strings.TrimPrefix(err.Error(), upstream.ErrInvalidArguments.Error()+": "))
	}
	c.requested, c.resource = res.String(), res.String()
	c.args = func() []byte { return forward.Bytes() }
	if o, ok := t.authorize(ctx, &c, res, tl.action, ""); !ok {
		return c, o
	}
	if ctx.Err() != nil {
		return c, failed(kproto.CodeCancelled, "cancelled")
	}
	effect := tl.hasEffect()
	if effect && !t.s.recordDurably(t.event(audit.EventToolAuthorized, func(e *audit.Event) {
		e.CallID, e.Seq, e.Tool, e.Action, e.CatalogHash = p.CallID, seq, tl.def.Name, c.action, p.CatalogHash
		e.Resource, e.Upstream, e.Grants, e.ApprovalID = c.resource, c.upstream, c.decided.grantRefs(), c.approvalID
		e.ArgumentsDigest, e.Arguments = c.recorded.digest, c.recorded.full
	})) {
		return c, auditUnavailable(false)
	}
	ctx, meta, span := t.s.Telemetry.StartUpstreamCall(ctx, ut.Upstream, ut.UpstreamTool)
	if meta != nil {
		ctx = upstream.WithMeta(ctx, meta)
	}
	r, err := b.m.Call(ctx, ut, forward, func(progress, total float64, message string) {
		t.progress(p.CallID, progress, total, message)
	})
	if err != nil {
		o := brokeredFailure(err)
		o.acted = effect && !upstream.NotSent(err)
		if o.acted && o.retryable {
			// A call with an effect that its upstream may have received
			// may have acted whatever became of its answer (a timeout, a
			// crash): a model told to retry would do it twice (ADR 0035).
			o.retryable = false
			o.message += "; it may have acted: check before calling it again"
		}
		span.End(o.code)
		return c, o
	}
	span.End("")
	o := outcome{status: kproto.StatusSucceeded, content: r.Content, acted: effect}
	if r.StructuredContent != nil {
		o.output = r.StructuredContent
	}
	return c, o
}

// brokeredFailure turns the manager's error into the call's answer.
func brokeredFailure(err error) outcome {
	var ce *upstream.CallError
	if !errors.As(err, &ce) {
		return failed(kproto.CodeInternal, "the brokered call failed: internal error")
	}
	o := failed(ce.Code, "%s", ce.Message)
	o.retryable = ce.Retryable
	if ce.Code == kproto.CodeToolUnavailable {
		o.status = kproto.StatusDenied
	}
	return o
}
