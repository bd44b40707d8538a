package upstream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/sharedos/sharedos-mcp/kernel/secret"
)

// State is where an upstream is in its life.
type State string

// The states of an upstream.
const (
	StateStarting   State = "starting"   // being started: spawned, initialized, its tools listed
	StateReady      State = "ready"      // serving; its tools can be published
	StateFailed     State = "failed"     // the last start failed; it is tried again at Retry
	StateRestarting State = "restarting" // it stopped after being ready; it is started again at Retry
	StateStopped    State = "stopped"    // the Manager was closed
)

// Status is an upstream's state as it is now, for the kernel's log,
// catalog and doctor.
type Status struct {
	Name     string
	State    State
	Reason   string    // why it is failed or restarting
	Since    time.Time // when it entered State
	Retry    time.Time // when it is started again, while failed or restarting
	PID      int       // the upstream's process, and process group, while ready
	Server   string    // the name and version it reports, while ready
	Tools    int       // how many tools it offers, while ready
	Restarts int       // how many times it was started after the first
	Stderr   []string  // its last lines of stderr, oldest first

	Transport string      // TransportStdio or TransportHTTP
	URL       string      // a remote upstream's URL without its query
	Auth      *AuthStatus // a remote upstream's credentials; nil for a process
}

// How a remote upstream authenticates (AuthStatus.Method).
const (
	AuthMethodOAuth   = "oauth"   // tokens from kernel login
	AuthMethodHeaders = "headers" // the configured headers, secrets in them
	AuthMethodNone    = "none"    // nothing configured
)

// AuthStatus is how a remote upstream authenticates now, never with a
// credential in it.
type AuthStatus struct {
	Method string
	// OAuth: whether a login's tokens are there, until when the access
	// token is good (zero: unknown), and whether it can be refreshed.
	LoggedIn   bool
	Expiry     time.Time
	CanRefresh bool
	// Required says why a person has to act (log in again, renew a
	// secret); "" when nothing is.
	Required string
}

// Kinds of Event. The first two are the audit events the kernel records.
const (
	EventToolPinned      = "upstream.tool.pinned"      // a tool seen for the first time was pinned
	EventToolQuarantined = "upstream.tool.quarantined" // a tool's definition differs from its pin
	EventState           = "upstream.state"            // an upstream changed state
	EventToolsChanged    = "upstream.tools.changed"    // an upstream's tools were listed again after it said they changed
	EventAuth            = "upstream.auth"             // a remote upstream's credentials were refused, or work again
	EventReinitialized   = "upstream.reinitialized"    // a remote upstream's session ended and a new one took its place
)

// Event is something the kernel may want to record or show.
type Event struct {
	Kind     string
	Time     time.Time
	Upstream string
	Tool     string   // pinned, quarantined: the upstream's name for the tool
	Reason   string   // pinned: ReasonFirstSeen or ReasonApproved
	Hash     string   // pinned, quarantined: SHA-256 of the definition seen
	Previous string   // quarantined, and pinned by an approval: SHA-256 of the definition pinned before
	Changed  []string // quarantined, and pinned by an approval: the definition fields that differ
	Status   *Status  // state: the new status
}

// Why a tool was pinned (Event.Reason of EventToolPinned).
const (
	ReasonFirstSeen = "first_seen" // the kernel saw the tool for the first time
	ReasonApproved  = "approved"   // kernel approve pinned the definition that was quarantined
)

// Backoff paces restarts: the first comes Initial after a failure, each
// next one twice as late up to Max; an upstream that was ready for Reset
// or longer before it stopped starts over from Initial.
type Backoff struct {
	Initial, Max, Reset time.Duration
}

// Defaults of Options.
const (
	DefaultMaxResultBytes = 4 << 20
	DefaultStopGrace      = 2 * time.Second
)

// DefaultBackoff is the Backoff of zero Options fields.
var DefaultBackoff = Backoff{Initial: 500 * time.Millisecond, Max: 30 * time.Second, Reset: time.Minute}

// Options configure a Manager.
type Options struct {
	// StateDir holds the pins file (see DefaultStateDir). Required.
	StateDir string
	// Log receives each upstream's states and its stderr, bounded.
	Log zerolog.Logger
	// OnEvent, if set, is called for every Event, on the Manager's
	// goroutines: events of one upstream in order, those of different
	// upstreams concurrently. It must not block for long, and must not
	// call Close.
	OnEvent func(Event)
	// RecordApproval is called for each approval (an EventToolPinned with
	// ReasonApproved; Time is when it was made) that another process made
	// with Approve and no kernel has recorded yet, before the approved
	// definition is published. It reports whether the approval is now on
	// the record; until it is, the tool stays unpublished and it is asked
	// again at the next snapshot. nil takes every approval as recorded.
	RecordApproval func(Event) bool
	// MaxResultBytes bounds one call's result (content and
	// structuredContent, as JSON); a larger one fails too_large. A line
	// from the upstream longer than this and 64 KiB for its envelope is
	// refused while it is read, never held whole: the call it answers
	// fails too_large and the upstream goes on (an over-long line whose id
	// is not in its first 64 KiB ends the connection instead). 0 is
	// DefaultMaxResultBytes.
	MaxResultBytes int
	// StopGrace is how long an upstream has to exit once its stdin is
	// closed, and again once its process group got SIGTERM, before
	// SIGKILL. 0 is DefaultStopGrace.
	StopGrace time.Duration
	// Backoff paces restarts; zero fields take DefaultBackoff's.
	Backoff Backoff
	// Supervisor is the program started as each upstream's supervisor; it
	// must call MaybeSupervise first. "" is the running program.
	Supervisor string
	// Version is the kernel's version, told to upstreams as the client's.
	Version string
	// Secrets holds the values of the {secret:NAME} references in the
	// upstreams' env, headers and client_secret; nil holds none, and an
	// upstream that refers to one then fails to start.
	Secrets *secret.Set
	// Redactor is given each OAuth token the upstreams' token sources
	// hold, and every text the Manager composes from what an upstream
	// said (a call's failure, a state's reason, stderr) and every result
	// of an upstream that holds a secret or a token goes through it. nil
	// redacts nothing.
	Redactor *secret.Redactor
}

// Manager runs the configured upstreams: it starts each one, restarts it
// when it stops, pins its tools, and brokers calls to them. Its methods
// are safe for concurrent use.
type Manager struct {
	opts   Options
	pins   *pinStore
	ups    []*upstream // by name
	byName map[string]*upstream

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	approvals sync.Mutex // one recorder of approvals at a time
}

// Start opens the pins in opts.StateDir and starts every upstream of
// specs in the background; it returns without waiting for any of them
// (see WaitSettled). An upstream that cannot start is retried and leaves
// the others serving. Start fails only when there is no state
// directory or its pins cannot be read, specs repeat a name, or no
// supervisor program can be found.
func Start(specs []Spec, opts Options) (*Manager, error) {
	if opts.StateDir == "" {
		return nil, errors.New("start upstreams: no state directory")
	}
	if opts.MaxResultBytes <= 0 {
		opts.MaxResultBytes = DefaultMaxResultBytes
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = DefaultStopGrace
	}
	if opts.Backoff.Initial <= 0 {
		opts.Backoff.Initial = DefaultBackoff.Initial
	}
	if opts.Backoff.Max <= 0 {
		opts.Backoff.Max = max(DefaultBackoff.Max, opts.Backoff.Initial)
	}
	if opts.Backoff.Reset <= 0 {
		opts.Backoff.Reset = DefaultBackoff.Reset
	}
	if opts.Version == "" {
		opts.Version = "devel"
	}
	if opts.Supervisor == "" {
		exe, err := selfExecutable()
		if err != nil {
			return nil, fmt.Errorf("start upstreams: find this program to supervise them: %w", err)
		}
		opts.Supervisor = exe
	}
	pins, err := openPins(opts.StateDir)
	if err != nil {
		return nil, fmt.Errorf("start upstreams: %w", err)
	}
	m := &Manager{opts: opts, pins: pins, byName: map[string]*upstream{}}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	for _, s := range specs {
		if m.byName[s.Name] != nil {
			m.cancel()
			return nil, fmt.Errorf("start upstreams: %q: %w", s.Name, ErrDuplicateName)
		}
		u := newUpstream(m, s)
		m.byName[s.Name] = u
		m.ups = append(m.ups, u)
	}
	slices.SortFunc(m.ups, func(a, b *upstream) int { return strings.Compare(a.spec.Name, b.spec.Name) })
	m.recordApprovals()
	for _, u := range m.ups {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			u.run(m.ctx)
		}()
	}
	return m, nil
}

// Close stops every upstream — stdin closed, then SIGTERM to its process
// group, then SIGKILL, each after StopGrace — and returns once they and
// everything they spawned in their groups are gone. Calls in flight fail
// upstream_unavailable. Close is idempotent.
func (m *Manager) Close() error {
	m.cancel()
	m.wg.Wait()
	return nil
}

// WaitSettled returns once every upstream has either become ready or
// failed to start at least once, or when ctx ends.
func (m *Manager) WaitSettled(ctx context.Context) error {
	for _, u := range m.ups {
		select {
		case <-u.settled:
		case <-ctx.Done():
			return fmt.Errorf("wait for upstreams: %w", ctx.Err())
		}
	}
	return nil
}

// Status returns every upstream's status, by name.
func (m *Manager) Status() []Status {
	out := make([]Status, 0, len(m.ups))
	for _, u := range m.ups {
		st, _ := u.current()
		out = append(out, st)
	}
	return out
}

// Snapshot is the brokered tools as they were when it was taken. Later
// changes (a list change, a restart, an approval) show in later
// snapshots only. Its values must not be modified: tools are shared
// between snapshots.
type Snapshot struct {
	Tools     []*Tool    // published, by name
	Withheld  []Withheld // not published, by name, with why
	Upstreams []Status   // every upstream, by name; only ready ones contribute tools
}

// Snapshot takes a snapshot: the tools of every ready upstream whose
// definition is the pinned one, and the reasons for the others. It first
// rereads the pins file if it changed on disk, so an approval shows in
// the next snapshot.
func (m *Manager) Snapshot() *Snapshot {
	if err := m.pins.refresh(); err != nil {
		m.opts.Log.Error().Err(err).Msg("reread upstream pins; using the ones read before")
	}
	m.recordApprovals()
	snap := &Snapshot{}
	for _, u := range m.ups {
		st, s := u.current()
		snap.Upstreams = append(snap.Upstreams, st)
		if s == nil {
			continue
		}
		for _, l := range s.judged() {
			if l.tool == nil {
				snap.Withheld = append(snap.Withheld, *l.withheld)
				continue
			}
			ok, pinned := m.pins.verdict(u.spec.Name, l.def)
			switch {
			case ok:
				snap.Tools = append(snap.Tools, l.tool)
			case pinned != nil && pinned.SHA256 == l.def.sha:
				snap.Withheld = append(snap.Withheld, Withheld{
					Upstream: u.spec.Name, Tool: l.tool.UpstreamTool, Name: l.tool.Name, Reason: ReasonUnrecorded, Hash: l.def.sha,
					Detail: "its new definition was approved, but the approval could not be recorded in the audit log yet; it is published once it is",
				})
			case pinned == nil:
				snap.Withheld = append(snap.Withheld, Withheld{
					Upstream: u.spec.Name, Tool: l.tool.UpstreamTool, Name: l.tool.Name, Reason: ReasonNotPinned, Hash: l.def.sha,
					Detail: "its definition could not be pinned, so it is not published; the kernel log says why",
				})
			default:
				changed := changedFields(pinned.Definition, l.def.canonical)
				snap.Withheld = append(snap.Withheld, Withheld{
					Upstream: u.spec.Name, Tool: l.tool.UpstreamTool, Name: l.tool.Name, Reason: ReasonQuarantined,
					Changed: changed, Hash: l.def.sha, Pinned: pinned.SHA256,
					Detail: fmt.Sprintf("its definition changed since it was pinned (%s); it stays unpublished until the new one is approved",
						strings.Join(changed, ", ")),
				})
			}
		}
	}
	slices.SortFunc(snap.Tools, func(a, b *Tool) int { return strings.Compare(a.Name, b.Name) })
	slices.SortStableFunc(snap.Withheld, func(a, b Withheld) int { return strings.Compare(a.Name, b.Name) })
	return snap
}

// recordApprovals hands each approval no kernel has recorded yet to
// RecordApproval, and marks those it recorded.
func (m *Manager) recordApprovals() {
	m.approvals.Lock()
	defer m.approvals.Unlock()
	for _, u := range m.ups {
		for _, ev := range m.pins.unrecorded(u.spec.Name) {
			if m.opts.RecordApproval != nil && !m.opts.RecordApproval(ev) {
				continue
			}
			u.log.Info().Str("tool", ev.Tool).Strs("changed", ev.Changed).Str("sha256", ev.Hash).Msg("upstream tool approved: its new definition is pinned")
			if err := m.pins.markRecorded(ev); err != nil {
				u.log.Error().Err(err).Str("tool", ev.Tool).Msg("note the approval as recorded; it is recorded again at the next snapshot")
			}
		}
	}
}

// secrets is Options.Secrets, or an empty set.
func (m *Manager) secrets() *secret.Set {
	if m.opts.Secrets == nil {
		return new(secret.Set)
	}
	return m.opts.Secrets
}

// redact keeps every secret and token out of text.
func (m *Manager) redact(text string) string { return m.opts.Redactor.Redact(text) }

func (m *Manager) emit(ev Event) {
	if m.opts.OnEvent != nil {
		ev.Time = time.Now()
		m.opts.OnEvent(ev)
	}
}
