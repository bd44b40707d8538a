// Package kernel is the reference host kernel: it listens on a Unix
// socket, checks each peer's credentials, serves one turn per connection
// (docs/kernel-protocol.md), authorizes every tool call against the grants
// it was configured with, and appends what happened to an audit log.
//
// It keeps the server, the turns, the sequencer and the tool registry,
// with the brokered tools' publishing and authorizing. The record is
// kernel/audit, the file tools are kernel/files, the config is
// kernel/config, the status file the commands read is kernel/status, and
// the brokered servers run in kernel/upstream.
package kernel

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/sharedos/sharedos-mcp/hashing"
	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/peercred"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
	"github.com/sharedos/sharedos-mcp/kernel/config"
	"github.com/sharedos/sharedos-mcp/kernel/files"
	"github.com/sharedos/sharedos-mcp/kernel/secret"
	"github.com/sharedos/sharedos-mcp/kernel/telemetry"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
	"github.com/sharedos/sharedos-mcp/policy"
)

// kernelName is what hello reports as the kernel's name.
const kernelName = "sharedos-mcp reference kernel"

// shutdownGrace bounds how long shutdown waits on a peer that does not
// read the answers to its cancelled calls.
const shutdownGrace = 2 * time.Second

// Server is the reference kernel. Set its fields, then call Serve once.
type Server struct {
	// Root is the files root, an existing directory; "" serves no file
	// tools (a kernel that only brokers upstreams).
	Root      string
	Grants    []policy.Grant // deny by default
	AllowUIDs []uint32       // peers served; nil means the kernel's own uid only
	// Integrations are the children's parents: a child's call is decided
	// at every level of its chain (policy.Rules).
	Integrations policy.Hierarchy
	// OperatorUIDs are served operator methods (kernel.explain), besides
	// the kernel's own uid and root; see isOperator.
	OperatorUIDs []uint32
	// AskTimeout is how long a call that waits for a person's approval
	// is held; 0 means config.DefaultAskTimeout.
	AskTimeout time.Duration
	Audit      *audit.Log // required
	Log        zerolog.Logger
	Version    string // reported in hello; "" means "devel"
	MaxLine    int    // longest request line; 0 means jsonrpc.DefaultMaxLine
	// AllowHardLinks serves regular files that have more than one name.
	// Off, they are refused (hard_link): another name may be anywhere on
	// the file system, and the grants see only this one.
	AllowHardLinks bool
	// Upstreams are the stdio MCP servers the kernel brokers (see
	// SetUpstreams to change them while it runs), and StateDir holds
	// their pins and status; required when there are upstreams. The
	// program must call upstream.MaybeSupervise first thing in main.
	Upstreams []upstream.Spec
	StateDir  string

	// Config is the config the fields above came from, with the flags
	// over it and its paths resolved: what Reload compares a new one
	// with to tell what takes a restart.
	Config config.Config

	// Secrets are the values of Config's [[secret]] tables, loaded
	// before Serve (secret.Load); SetSecrets replaces them on a reload.
	// nil holds none.
	Secrets *secret.Set
	// Redactor keeps every secret and OAuth token out of what the kernel
	// writes: it is given the secrets and the upstreams' tokens, and the
	// upstreams' failures, states and credential-holding results, and so
	// the audit log and the status file, go through it (the command wraps
	// the kernel's log in it too). It must already hold Secrets. nil
	// redacts nothing.
	Redactor *secret.Redactor
	// Telemetry is where the kernel exports its spans and metrics; nil
	// exports nothing, at no cost to a call.
	Telemetry *telemetry.Telemetry

	// Now is the clock grants are checked against; nil means time.Now.
	Now func() time.Time
	// PeerCred reads a connection's peer credentials; nil means
	// peercred.Get. Tests replace it to play another user.
	PeerCred func(*net.UnixConn) (peercred.Cred, error)

	files   *files.Root
	tools   []*tool // nil means registry(); tests in this package add their own
	brokers brokerState
	secrets atomic.Pointer[secret.Set] // set by SetSecrets; nil means Secrets
	budgets *budgets                   // the grants' limits, set by Serve
	// sink is where events go; nil means Audit. Tests make it fail.
	sink auditSink

	approvals approvals // the approval requests, across turns

	auditDown atomic.Bool // the last record failed
	policy    atomic.Pointer[Policy]
	running   chan struct{} // one token per call running, across turns
	bigLines  chan struct{} // one token per long request line held, across turns

	// Bounds, set by Serve to the constants below; tests make them small.
	turnCalls, runningCalls, bigLineCount int
	// upstreamEvents, when set, is told every upstream event first; tests
	// wait on it for an upstream to be ready again.
	upstreamEvents func(upstream.Event)
	// waits, when set, is told before the kernel waits for a bound:
	// "turn", "running" or "line". Tests use it to know a wait began.
	waits   func(bound string)
	mu      sync.Mutex
	conns   map[*net.UnixConn]struct{}
	err     error         // why the audit log could not be written, while it cannot
	inForce config.Config // the config the policy and upstreams came from: Config, or the last reload
}

// auditSink is what the kernel needs of its audit log.
type auditSink interface {
	Write(audit.Event) error
	Sync() error
}

// Serve accepts connections on ln until ctx is cancelled or the audit log
// fails. On the way out it stops accepting, closes every open turn (each
// records turn.closed), syncs the audit log, and only then closes ln
// (removing the socket file and releasing its lock), so no other kernel
// takes the path while this one still has turns. It returns nil after a
// cancellation and the audit error otherwise.
func (s *Server) Serve(ctx context.Context, ln *Listener) error {
	if s.Audit == nil {
		return errors.New("kernel: no audit log")
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.PeerCred == nil {
		s.PeerCred = peercred.Get
	}
	if s.AllowUIDs == nil {
		s.AllowUIDs = []uint32{uint32(os.Getuid())}
	}
	if s.policy.Load() == nil {
		s.SetPolicy(s.initialPolicy())
	}
	b, err := openBudgets(s.StateDir, s.Log, s.Now())
	if err != nil {
		ln.Close()
		return err
	}
	s.budgets = b
	defer func() { s.budgets.save(s.Now()) }()
	s.running = make(chan struct{}, cmp.Or(s.runningCalls, maxRunning))
	s.bigLines = make(chan struct{}, cmp.Or(s.bigLineCount, maxBigLines))
	s.turnCalls = cmp.Or(s.turnCalls, maxTurnCalls)
	if s.Version == "" {
		s.Version = "devel"
	}
	if s.Root != "" {
		root, err := files.OpenRoot(s.Root)
		if err != nil {
			ln.Close()
			return err
		}
		defer root.Close()
		s.mu.Lock()
		s.files = root
		s.mu.Unlock()
		s.updatePrivate()
	}
	if s.tools == nil {
		s.tools = registry()
		if s.files == nil {
			s.tools = slices.DeleteFunc(s.tools, func(t *tool) bool { return t.scope.Namespace == files.Namespace })
		}
	}
	// The config is on the record before any decision is made under it.
	s.mu.Lock()
	s.inForce = s.Config
	s.mu.Unlock()
	if !s.recordConfig("start", config.Config{}, s.Config) {
		ln.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		return fmt.Errorf("record the config: %w", s.err)
	}
	if err := s.startBrokers(); err != nil {
		ln.Close()
		return err
	}
	s.Telemetry.ObserveUpstreams(s.upstreamStates)
	s.Telemetry.ObserveApprovals(s.approvalsWaiting)
	s.conns = map[*net.UnixConn]struct{}{}

	ctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		<-ctx.Done()
		_ = ln.StopAccepting()
	}()

	var wg sync.WaitGroup
	backoff := time.Duration(0)
	for {
		conn, err := ln.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				break
			}
			// EMFILE and kin: wait a little rather than spin.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.Log.Warn().Err(err).Dur("retry_in_ms", backoff).Msg("accept failed")
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
			}
			continue
		}
		backoff = 0
		s.mu.Lock()
		s.conns[conn] = struct{}{}
		s.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.serveConn(ctx, conn)
			s.mu.Lock()
			delete(s.conns, conn)
			s.mu.Unlock()
		}()
	}

	// Shutting the read side ends each turn's read loop; the turn then
	// answers its cancelled calls and records turn.closed. A peer that
	// stopped reading gets shutdownGrace before its writes fail.
	s.mu.Lock()
	for c := range s.conns {
		_ = c.CloseRead()
		_ = c.SetWriteDeadline(time.Now().Add(shutdownGrace))
	}
	s.mu.Unlock()
	wg.Wait()
	// The turns are over; end the upstreams (and what they spawned)
	// before the last sync, so their final records are in it.
	s.closeBrokers()
	syncErr := s.Audit.Sync()
	if err := ln.Close(); err != nil {
		s.Log.Warn().Err(err).Str("socket", ln.Path()).Msg("closing the socket")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(s.err, syncErr)
}

// record appends ev to the audit log and reports whether it was written.
// A failure does not stop the kernel: whoever asked refuses what the
// record was for (a call is answered audit_unavailable, or
// outcome_unrecorded once it acted; a turn that cannot be opened is
// closed), and the next record tries the log again,
// so the kernel serves as soon as the log can be written
// (docs/adr/0008-authorize-the-opened-object.md).
func (s *Server) record(ev audit.Event) bool {
	return s.noteAudit(s.auditSink().Write(ev))
}

// recordDurably records ev and syncs the log: for the decision written
// before a call changes something, which must be on disk before the
// change is.
func (s *Server) recordDurably(ev audit.Event) bool {
	return s.record(ev) && s.noteAudit(s.auditSink().Sync())
}

func (s *Server) auditSink() auditSink {
	if s.sink != nil {
		return s.sink
	}
	return s.Audit
}

// noteAudit logs the audit log's changes between working and not, once
// each way, and reports whether err is nil.
func (s *Server) noteAudit(err error) bool {
	if err == nil {
		if s.auditDown.Load() && s.auditDown.CompareAndSwap(true, false) {
			s.mu.Lock()
			s.err = nil
			s.mu.Unlock()
			s.Log.Warn().Msg("audit log can be written again; serving calls")
		}
		return true
	}
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
	if s.auditDown.CompareAndSwap(false, true) {
		s.Log.Error().Err(err).Msg("audit log cannot be written; refusing calls until it can")
	}
	return false
}

// Policy is what a running kernel can change without a restart: SetPolicy
// replaces it at once for every later decision, in open turns too (their
// catalogues stay as they were resolved at hello; only what each call is
// allowed changes). The upstreams change with SetUpstreams. The files
// root, the socket, the audit log and the state directory are fixed for
// the kernel's life.
type Policy struct {
	Grants []policy.Grant
	// Integrations are the children's parents.
	Integrations policy.Hierarchy
	// GrantLines are the config's line of each grant, for the audit's
	// record of which grant decided; nil when the grants came from no
	// file.
	GrantLines     []int
	AllowUIDs      []uint32 // nil means the kernel's own uid only
	OperatorUIDs   []uint32 // besides the kernel's own uid and root
	AllowHardLinks bool
	// Arguments is what the audit records of a call's arguments, a
	// config.Arguments* value; "" means config.ArgumentsDigest.
	Arguments string
	// AskTimeout is how long a call that waits for a person's approval
	// is held; 0 means config.DefaultAskTimeout.
	AskTimeout time.Duration

	rules policy.Rules // Grants and Integrations, as decisions read them
}

// PolicyOf is the part of a config a running kernel can change.
func PolicyOf(c config.Config) Policy {
	return Policy{Grants: c.Grants, Integrations: c.Hierarchy, GrantLines: c.Lines.Grants,
		AllowUIDs: c.AllowUIDs, OperatorUIDs: c.OperatorUIDs, AllowHardLinks: c.AllowHardLinks, Arguments: c.Arguments, AskTimeout: c.AskTimeout}
}

func (s *Server) initialPolicy() Policy {
	return Policy{Grants: s.Grants, Integrations: s.Integrations, GrantLines: s.Config.Lines.Grants,
		AllowUIDs: s.AllowUIDs, OperatorUIDs: s.OperatorUIDs, AllowHardLinks: s.AllowHardLinks, Arguments: s.Config.Arguments, AskTimeout: s.AskTimeout}
}

// SetPolicy replaces the kernel's grants, its integrations' parents, the
// uids it serves and whether it serves hard links, atomically. It may be
// called at any time, also while Serve runs (on SIGHUP, say). The
// budgets' counts are kept: a grant whose limit changed goes on counting
// from where it was (policy.Grant.Key).
func (s *Server) SetPolicy(p Policy) {
	if p.AllowUIDs == nil {
		p.AllowUIDs = []uint32{uint32(os.Getuid())}
	}
	p.rules = policy.Rules{Grants: p.Grants, Integrations: p.Integrations}
	s.policy.Store(&p)
}

func (s *Server) currentPolicy() *Policy {
	if p := s.policy.Load(); p != nil {
		return p
	}
	p := s.initialPolicy()
	p.rules = policy.Rules{Grants: p.Grants, Integrations: p.Integrations}
	return &p
}

// askTimeout is how long a call that waits for approval is held.
func (p *Policy) askTimeout() time.Duration {
	return cmp.Or(p.AskTimeout, config.DefaultAskTimeout)
}

// grantLine is the config line of grant i, 0 when unknown.
func (p *Policy) grantLine(i int) int {
	if i >= 0 && i < len(p.GrantLines) {
		return p.GrantLines[i]
	}
	return 0
}

// acquire takes a token of bound, waiting (and saying so to s.waits) when
// there is none, until ctx ends.
func (s *Server) acquire(ctx context.Context, tokens chan struct{}, bound string) error {
	select {
	case tokens <- struct{}{}:
		return nil
	default:
	}
	if s.waits != nil {
		s.waits(bound)
	}
	select {
	case tokens <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Server) uidAllowed(uid uint32) bool {
	return slices.Contains(s.currentPolicy().AllowUIDs, uid)
}

// isOperator reports whether a peer of uid is served as the kernel's
// operator: the kernel's own uid, one of operator_uids, or root when the
// kernel serves root at all (allow_uids): being root does not let a
// peer connect to a kernel that does not serve it.
func (s *Server) isOperator(uid uint32) bool {
	return uid == uint32(os.Getuid()) || slices.Contains(s.currentPolicy().OperatorUIDs, uid) || uid == 0 && s.uidAllowed(0)
}

// mayConnect reports whether a peer of uid is served at all: as an
// integration (allow_uids) or as an operator only (operator_uids).
func (s *Server) mayConnect(uid uint32) bool {
	return s.uidAllowed(uid) || slices.Contains(s.currentPolicy().OperatorUIDs, uid)
}

// Bounds across all turns. A call runs only with a running token, so the
// CPU and memory the file tools take at once are bounded whatever the
// number of turns; a call waiting for one holds only its arguments. A
// request line longer than a read buffer is read only with a bigLines
// token, held until its call is answered, so at most maxBigLines long
// lines (each at most the line limit) are in memory at once. Both make
// the excess wait rather than fail: the shim bounds what it sends, and
// its --call-timeout bounds the wait.
const (
	maxRunning  = 16
	maxBigLines = 4
	// maxTurnCalls bounds one turn's calls admitted and not yet
	// answered; past it the kernel stops reading the turn's socket until
	// one is. It is above the shim's own bound (256), so a shim never
	// meets it.
	maxTurnCalls = 512
)

func newExecutionID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "exe_" + hex.EncodeToString(b[:])
}

// instructions is what hello tells the model about this kernel.
// catalogue is what a turn of integration that said hello at now lists:
// each tool of the registry and each brokered tool the live grants of
// integration, and of each of its ancestors, publish (the intersection),
// in name order within each, at most hashing.MaxTools.
func (s *Server) catalogue(integration string, now time.Time) []*tool {
	rules := &s.currentPolicy().rules
	var listed []*tool
	for _, tl := range s.tools {
		if rules.Discoverable(integration, tl.catalogScope(), tl.action, now) {
			listed = append(listed, tl)
		}
	}
	return append(listed, s.brokeredCatalogue(integration, now, hashing.MaxTools-len(listed))...)
}

func (s *Server) instructions(integration string) string {
	text := fmt.Sprintf("Tools here are served by the SharedOS reference kernel to the integration %q. "+
		"Every call is authorized against the host's grants and recorded in an audit log. "+
		"A call refused with status \"denied\" will be refused again if retried unchanged: choose another path or ask the user.", integration)
	if s.files != nil {
		text += " File paths are absolute within the shared root, which is \"/\"."
	}
	if bs := s.brokers.set.Load(); bs != nil && len(bs.names) > 0 {
		text += " Tools named <server>.<tool> belong to other MCP servers the kernel brokers; their results come from those servers."
	}
	return text
}

func (s *Server) maxLine() int {
	if s.MaxLine > 0 {
		return s.MaxLine
	}
	return jsonrpc.DefaultMaxLine
}
