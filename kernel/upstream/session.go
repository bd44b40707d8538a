package upstream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
)

// protocolVersion is the MCP revision the kernel speaks to upstreams. The
// SDK would try the 2026-07-28 draft first, whose stateless requests and
// cached listings differ from what stdio servers speak today; one fixed
// revision keeps one behaviour to test (docs/adr/0014).
const protocolVersion = "2025-11-25"

// maxListPages bounds the tools/list pages read from one upstream.
const maxListPages = 64

// lineEnvelope is what a line from an upstream may hold besides a
// result's content and structuredContent: a line longer than
// MaxResultBytes plus this is refused while it is read (boundedLines).
const lineEnvelope = 64 << 10

// refreshInterval is the least time between two listings of one
// upstream's tools: an upstream announcing list changes without end
// cannot make the kernel list, pin and report without end.
const refreshInterval = time.Second

// session is one run of an upstream: its process and its MCP connection,
// or, for a remote upstream, its MCP session over Streamable HTTP (which
// may be initialized again within the run: see remoteSession).
type session struct {
	u      *upstream
	cs     *mcp.ClientSession // a process's; a remote upstream's is remote.client()
	proc   *process           // nil for a remote upstream
	remote *remoteSession     // nil for a process
	server string             // name and version the upstream reported

	ctx    context.Context // ends when the session is stopped; calls end with it
	cancel context.CancelFunc
	wg     sync.WaitGroup // the refresher

	refresh chan struct{} // a list change to fetch; holds at most one
	done    chan struct{} // closed when the connection has ended

	mu       sync.Mutex
	listing  []listed
	current  map[string]string       // the upstream's tool name → SHA-256 of its definition now
	progress map[string]ProgressFunc // by progress token
	seq      uint64
	killed   string // why the kernel ended the session, if it did
}

func (u *upstream) newSession() *session {
	s := &session{u: u, refresh: make(chan struct{}, 1), done: make(chan struct{}), progress: map[string]ProgressFunc{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// newClient is the SDK client of the session: every connection it makes
// reports list changes and progress to the session.
func (s *session) newClient() *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "sharedos-mcp", Version: s.u.m.opts.Version}, &mcp.ClientOptions{
		ToolListChangedHandler:      func(context.Context, *mcp.ToolListChangedRequest) { s.listChanged() },
		ProgressNotificationHandler: s.onProgress,
		Logger:                      slog.New(slog.NewTextHandler(sdkLog{s.u.log}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
}

// start starts the upstream (a process through its supervisor, or a
// connection to a remote server), initializes the MCP session and lists
// its tools, all within the startup timeout.
func (u *upstream) start(ctx context.Context) (*session, error) {
	ctx, cancel := context.WithTimeout(ctx, u.spec.StartupTimeout)
	defer cancel()
	if u.spec.Remote != nil {
		return u.startRemote(ctx)
	}
	env, err := u.m.secrets().ExpandValues(u.spec.Env)
	if err != nil {
		return nil, fmt.Errorf("env %w", err)
	}
	s := u.newSession()
	proc, transport, err := u.newProcess(env)
	if err != nil {
		return nil, err
	}
	s.proc = proc
	u.log.Debug().Str("command", commandLine(u.spec.Command)).Str("dir", u.spec.Dir).Msg("starting upstream")
	cs, err := s.newClient().Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: protocolVersion})
	if err != nil {
		// Why, before stopping it: the stop would be its exit.
		err = proc.failure(ctx, "initialize", u.spec.StartupTimeout, err)
		proc.stop(u.m.opts.StopGrace)
		return nil, err
	}
	s.cs = cs
	s.server = serverName(cs)
	go func() {
		_ = cs.Wait()
		close(s.done)
	}()
	go s.watchExit()
	tools, err := s.fetchTools(ctx, cs)
	if err != nil {
		err = proc.failure(ctx, "list tools", u.spec.StartupTimeout, err)
		s.stop()
		return nil, err
	}
	s.apply(tools)
	s.wg.Add(1)
	go s.refresher()
	return s, nil
}

// serverName is the name and version a server reported.
func serverName(cs *mcp.ClientSession) string {
	if r := cs.InitializeResult(); r != nil && r.ServerInfo != nil {
		return strings.TrimSpace(r.ServerInfo.Name + " " + r.ServerInfo.Version)
	}
	return ""
}

// client is the MCP session calls and listings go to now; nil once a
// remote session is lost.
func (s *session) client() *mcp.ClientSession {
	if s.remote != nil {
		return s.remote.client()
	}
	return s.cs
}

// pid is the upstream's process, 0 for a remote upstream.
func (s *session) pid() int {
	if s.proc == nil {
		return 0
	}
	return s.proc.upstreamPID()
}

// watchExit ends the session as soon as the upstream itself has exited,
// as its supervisor reports (or the supervisor is gone too), rather than
// when its stdout closes: a descendant may hold stdout open, and the
// calls in flight would wait for call_timeout.
func (s *session) watchExit() {
	select {
	case <-s.proc.statusDone:
	case <-s.done:
		return
	}
	if s.ctx.Err() != nil {
		return // stopped by the kernel, not exited by itself
	}
	how := s.proc.exitReport()
	if how == "" {
		how = "its supervisor ended without saying how"
	}
	s.kill("the upstream exited (" + how + ")")
}

// sdkLog puts the SDK's own warnings into the kernel's log.
type sdkLog struct{ log zerolog.Logger }

func (w sdkLog) Write(p []byte) (int, error) {
	w.log.Warn().Str("sdk", strings.TrimSpace(string(p))).Msg("upstream client")
	return len(p), nil
}

// fetchTools lists the upstream's tools, all pages, up to one more than
// MaxToolsPerUpstream. An upstream that does not offer tools has none.
func (s *session) fetchTools(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Tool, error) {
	if cs == nil {
		return nil, errSessionLost
	}
	if r := cs.InitializeResult(); r == nil || r.Capabilities == nil || r.Capabilities.Tools == nil {
		return nil, nil
	}
	var tools []*mcp.Tool
	params := &mcp.ListToolsParams{}
	for range maxListPages {
		res, err := cs.ListTools(ctx, params)
		if err != nil {
			return nil, err
		}
		tools = append(tools, res.Tools...)
		if res.NextCursor == "" || len(tools) > MaxToolsPerUpstream {
			break
		}
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
	}
	return tools, nil
}

// apply judges a listing, records its definitions in the pins, makes it
// the session's and reports what the pins say.
func (s *session) apply(tools []*mcp.Tool) {
	u := s.u
	judged := judge(&u.spec, tools)
	var defs []*definition
	current := map[string]string{}
	for _, l := range judged {
		if l.def != nil {
			defs = append(defs, l.def)
			current[l.def.name] = l.def.sha
		}
	}
	changes, err := u.m.pins.observe(u.spec.Name, defs, time.Now())
	if err != nil {
		u.log.Error().Err(err).Msg("record upstream pins; new and changed tools stay unpublished")
	}
	s.mu.Lock()
	s.listing, s.current = judged, current
	s.mu.Unlock()
	for _, l := range judged {
		if w := l.withheld; w != nil {
			u.log.Warn().Str("tool", w.Tool).Str("reason", w.Reason).Str("detail", w.Detail).Msg("upstream tool not published")
		}
	}
	for _, c := range changes {
		ev := Event{Kind: c.kind, Upstream: u.spec.Name, Tool: c.tool, Hash: c.hash, Previous: c.previous, Changed: c.changed}
		if c.kind == EventToolPinned {
			ev.Reason = ReasonFirstSeen
		}
		if c.kind == EventToolQuarantined {
			u.log.Warn().Str("tool", c.tool).Strs("changed", c.changed).Str("pinned", c.previous).Str("offered", c.hash).Msg("upstream tool quarantined: its definition differs from its pin")
		} else {
			u.log.Info().Str("tool", c.tool).Str("sha256", c.hash).Msg("upstream tool pinned")
		}
		u.m.emit(ev)
	}
}

func (s *session) judged() []listed {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listing
}

func (s *session) toolCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.current)
}

func (s *session) currentHash(tool string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current[tool]
}

// listChanged is the SDK's notification handler: it must not block.
func (s *session) listChanged() {
	select {
	case s.refresh <- struct{}{}:
	default: // a refresh is already due; it will see this change too
	}
}

// refresher lists the tools again after each list change, until the
// session stops.
func (s *session) refresher() {
	defer s.wg.Done()
	last := time.Now() // the listing made at start
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.refresh:
		}
		if !sleep(s.ctx, refreshInterval-time.Since(last)) {
			return
		}
		last = time.Now()
		ctx, cancel := context.WithTimeout(s.ctx, s.u.spec.StartupTimeout)
		tools, err := s.fetchTools(ctx, s.client())
		cancel()
		if err != nil {
			if s.ctx.Err() == nil {
				s.u.log.Warn().Err(err).Msg("list upstream tools after a change; keeping the previous list")
			}
			continue
		}
		s.apply(tools)
		s.u.m.emit(Event{Kind: EventToolsChanged, Upstream: s.u.spec.Name})
	}
}

// kill ends the session because the kernel can no longer use it.
func (s *session) kill(reason string) {
	s.mu.Lock()
	first := s.killed == ""
	if first {
		s.killed = reason
	}
	s.mu.Unlock()
	if !first {
		return
	}
	s.u.log.Warn().Str("reason", reason).Msg("ending the upstream's session")
	if s.remote != nil {
		s.remote.lose(errors.New(reason))
		return
	}
	go s.cs.Close()
}

// wait returns why the session ended, once it has, or "" when ctx ended
// first.
func (s *session) wait(ctx context.Context) string {
	select {
	case <-s.done:
	case <-ctx.Done():
		return ""
	}
	s.mu.Lock()
	reason := s.killed
	s.mu.Unlock()
	if reason != "" {
		return reason
	}
	if s.remote != nil {
		_, why := s.remote.Lost()
		return s.u.m.redact(scrubbedError(why).Error())
	}
	s.proc.waitReported(s.u.m.opts.StopGrace)
	if how := s.proc.exitReport(); how != "" {
		return "the upstream exited (" + how + ")"
	}
	return "the connection to the upstream closed"
}

// stop ends the session: calls in flight are cancelled, stdin is closed,
// and the process group ended.
func (s *session) stop() {
	s.cancel()
	s.wg.Wait()
	if s.remote != nil {
		_ = s.remote.Close()
		return
	}
	_ = s.cs.Close()
	s.proc.stop(s.u.m.opts.StopGrace)
}

// process is an upstream's supervisor process and what the kernel holds
// of it.
type process struct {
	supervisor string
	lifeline   *os.File // the kernel's end; closing it makes the supervisor end the group
	stderr     *os.File // the kernel's end of the upstream's stderr

	statusDone chan struct{} // closed when the supervisor's status pipe ends, i.e. it exited
	stderrDone chan struct{}

	mu       sync.Mutex
	pid      int    // the upstream's pid and process group, once reported
	startErr string // the supervisor could not start the upstream
	exit     string // how the upstream exited, as the supervisor saw it
}

// newProcess prepares the supervisor's command, with env (the configured
// variables, secrets in them replaced), and the transport that starts it.
func (u *upstream) newProcess(env map[string]string) (*process, mcp.Transport, error) {
	var pipes [6]*os.File // lifeline r, w; status r, w; stderr r, w
	for i := 0; i < len(pipes); i += 2 {
		r, w, err := os.Pipe()
		if err != nil {
			for _, f := range pipes[:i] {
				f.Close()
			}
			return nil, nil, fmt.Errorf("start: %w", err)
		}
		pipes[i], pipes[i+1] = r, w
	}
	lifeR, lifeW, statR, statW, errR, errW := pipes[0], pipes[1], pipes[2], pipes[3], pipes[4], pipes[5]
	grace := u.m.opts.StopGrace
	args := append([]string{supervisorArg, grace.String(), "--"}, u.spec.Command...)
	cmd := exec.Command(u.m.opts.Supervisor, args...)
	cmd.Args[0] = os.Args[0] // what ps shows: the kernel's name, not /proc/self/exe
	cmd.Env = environ(env, os.LookupEnv)
	cmd.Dir = u.spec.Dir
	cmd.Stderr = errW
	cmd.ExtraFiles = []*os.File{lifeR, statW} // fds 3 and 4: lifelineFD, statusFD
	cmd.SysProcAttr = supervisorAttr()
	p := &process{supervisor: u.m.opts.Supervisor, lifeline: lifeW, stderr: errR, statusDone: make(chan struct{}), stderrDone: make(chan struct{})}
	t := &processTransport{cmd: cmd, grace: grace, lineBound: u.m.opts.MaxResultBytes + lineEnvelope}
	t.started = func(err error) {
		// The child has its copies; the kernel keeps only its own ends.
		lifeR.Close()
		statW.Close()
		errW.Close()
		if err != nil {
			lifeW.Close()
			statR.Close()
			errR.Close()
			close(p.statusDone)
			close(p.stderrDone)
			return
		}
		go p.readStatus(statR)
		go func() {
			defer close(p.stderrDone)
			defer errR.Close()
			u.stderr.copy(errR)
		}()
	}
	return p, t, nil
}

func (p *process) readStatus(r *os.File) {
	defer close(p.statusDone)
	defer r.Close()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		word, rest, _ := strings.Cut(sc.Text(), " ")
		p.mu.Lock()
		switch word {
		case "started":
			p.pid, _ = strconv.Atoi(rest)
		case "error":
			p.startErr = rest
		case "exited":
			p.exit = rest
		}
		p.mu.Unlock()
	}
}

func (p *process) upstreamPID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid
}

func (p *process) exitReport() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit
}

// waitReported waits, at most d, for the supervisor to have said all it
// will say.
func (p *process) waitReported(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.statusDone:
	case <-t.C:
	}
}

// failure explains why a start failed: the startup timeout when it
// passed, else what the supervisor reported, else the error.
func (p *process) failure(ctx context.Context, step string, timeout time.Duration, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%s: no answer within startup_timeout (%v)", step, timeout)
	}
	p.waitReported(time.Second)
	p.mu.Lock()
	startErr, exit, pid := p.startErr, p.exit, p.pid
	p.mu.Unlock()
	switch {
	case startErr != "":
		return fmt.Errorf("start: %s", startErr)
	case exit != "":
		return fmt.Errorf("%s: the upstream exited (%s)", step, exit)
	case pid == 0:
		return fmt.Errorf("%s: the supervisor (%s) never reported starting the upstream: %w", step, p.supervisor, err)
	}
	return fmt.Errorf("%s: %w", step, err)
}

// stop makes sure nothing of the process is left: the supervisor told to
// end the group (if it still runs), the group killed if the supervisor
// did not report having done it, the stderr reader finished.
func (p *process) stop(grace time.Duration) {
	p.lifeline.Close()
	p.waitReported(2 * grace)
	p.mu.Lock()
	pid, exit := p.pid, p.exit
	p.mu.Unlock()
	if exit == "" {
		// The supervisor died without ending the group (it was killed):
		// end whatever is left of it.
		killGroup(pid, syscall.SIGKILL)
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.stderrDone:
	case <-t.C:
		// Something that left the group still holds stderr; stop reading.
		p.stderr.Close()
		<-p.stderrDone
	}
}
