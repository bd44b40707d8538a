package upstream

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/sharedos/sharedos-mcp/kernel/oauth"
)

// upstream is one configured upstream and its life: started, ready,
// stopped, started again.
type upstream struct {
	m      *Manager
	spec   Spec
	log    zerolog.Logger
	stderr *stderrLog // across restarts, so the last lines survive a crash
	// credentials: the upstream is given a secret or a token, which its
	// results could quote back (they are redacted).
	credentials bool

	settled    chan struct{} // closed once it has been ready or failed once
	settleOnce sync.Once

	mu          sync.Mutex
	status      Status
	sess        *session      // while ready
	tokens      *oauth.Source // auth = "oauth": made at the first start, kept across sessions
	authRefused string        // why the server last refused the credentials; "" once it took them
}

func newUpstream(m *Manager, spec Spec) *upstream {
	log := m.opts.Log.With().Str("upstream", spec.Name).Logger()
	return &upstream{
		m: m, spec: spec, log: log, stderr: newStderrLog(log, time.Now),
		settled:     make(chan struct{}),
		credentials: spec.Remote != nil && spec.Remote.Auth == AuthOAuth || len(spec.SecretRefs()) > 0,
		status:      Status{Name: spec.Name, State: StateStarting, Since: time.Now(), Transport: spec.Transport(), URL: spec.DisplayURL()},
	}
}

// session returns the session while ready, else the state and why: what
// a call needs, without the rest of the status.
func (u *upstream) session() (*session, State, string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.sess, u.status.State, u.status.Reason
}

// current returns the status and, while ready, the session.
func (u *upstream) current() (Status, *session) {
	u.mu.Lock()
	st, s := u.status, u.sess
	u.mu.Unlock()
	st.Reason = u.m.redact(st.Reason)
	st.Stderr = u.stderr.lastLines()
	for i, l := range st.Stderr {
		st.Stderr[i] = u.m.redact(l)
	}
	st.Auth = u.authStatus()
	if s != nil {
		st.Tools = s.toolCount()
	}
	return st, s
}

// run starts the upstream and starts it again whenever it stops, until
// ctx ends.
func (u *upstream) run(ctx context.Context) {
	defer u.settle()
	b := u.m.opts.Backoff
	delay := b.Initial
	for attempt := 0; ; attempt++ {
		u.set(func(st *Status) {
			st.State, st.Reason, st.Retry, st.PID, st.Server = StateStarting, "", time.Time{}, 0, ""
			if attempt > 0 {
				st.Restarts++
			}
		})
		s, err := u.start(ctx)
		if err != nil {
			u.settle()
			if ctx.Err() != nil {
				u.set(func(st *Status) { st.State, st.Reason = StateStopped, "" })
				return
			}
			u.set(func(st *Status) { st.State, st.Reason, st.Retry = StateFailed, err.Error(), time.Now().Add(delay) })
			if !u.waitRetry(ctx, delay) {
				u.set(func(st *Status) { st.State, st.Reason, st.Retry = StateStopped, "", time.Time{} })
				return
			}
			delay = min(2*delay, b.Max)
			continue
		}
		readyAt := time.Now()
		u.mu.Lock()
		u.sess = s
		u.mu.Unlock()
		u.set(func(st *Status) { st.State, st.PID, st.Server = StateReady, s.pid(), s.server })
		u.settle()
		reason := s.wait(ctx)
		u.mu.Lock()
		u.sess = nil
		u.mu.Unlock()
		s.stop()
		if ctx.Err() != nil {
			u.set(func(st *Status) { st.State, st.Reason, st.PID, st.Server = StateStopped, "", 0, "" })
			return
		}
		if time.Since(readyAt) >= b.Reset {
			delay = b.Initial
		}
		u.set(func(st *Status) {
			st.State, st.Reason, st.Retry, st.PID, st.Server = StateRestarting, reason, time.Now().Add(delay), 0, ""
		})
		if !sleep(ctx, delay) {
			u.set(func(st *Status) { st.State, st.Reason, st.Retry = StateStopped, "", time.Time{} })
			return
		}
		delay = min(2*delay, b.Max)
	}
}

func (u *upstream) settle() { u.settleOnce.Do(func() { close(u.settled) }) }

// set changes the status, logs the change and reports it.
func (u *upstream) set(change func(*Status)) {
	u.mu.Lock()
	before := u.status.State
	change(&u.status)
	if u.status.State != before {
		u.status.Since = time.Now()
	}
	st := u.status
	u.mu.Unlock()
	if st.State == before {
		return
	}
	st.Stderr = u.stderr.lastLines()
	ev := u.log.Info()
	switch st.State {
	case StateFailed, StateRestarting:
		ev = u.log.Warn().Str("reason", st.Reason).Time("retry", st.Retry)
		if len(st.Stderr) > 0 {
			// Its last lines: why a server did not start is most often in
			// them (a proxy or certificate npm could not get through).
			ev = ev.Strs("lastStderr", st.Stderr)
		}
	case StateReady:
		if st.URL != "" {
			ev = ev.Str("url", st.URL)
		} else {
			ev = ev.Int("pid", st.PID)
		}
		ev = ev.Str("server", st.Server)
	}
	ev.Str("state", string(st.State)).Msg("upstream " + string(st.State))
	u.m.emit(Event{Kind: EventState, Upstream: u.spec.Name, Status: &st})
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// environ is the upstream's whole environment: PATH and HOME as the
// kernel has them, then the configured variables (which may override
// them), and nothing else: the kernel's own environment may hold
// credentials meant for other programs.
func environ(configured map[string]string, lookup func(string) (string, bool)) []string {
	vars := map[string]string{}
	for _, k := range []string{"PATH", "HOME"} {
		if v, ok := lookup(k); ok {
			vars[k] = v
		}
	}
	for k, v := range configured {
		vars[k] = v
	}
	env := make([]string, 0, len(vars))
	for _, k := range sortedKeys(vars) {
		env = append(env, k+"="+vars[k])
	}
	return env
}

// commandLine shows a command for the log, shortened.
func commandLine(argv []string) string {
	return shorten(strings.Join(argv, " "), 200)
}
