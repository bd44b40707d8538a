package doctor

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sharedos/sharedos-mcp/internal/cli"
	"github.com/sharedos/sharedos-mcp/kernel/status"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
)

// Upstreams is what doctor checks of the kernel's brokered servers: the
// config's [[upstream]] names, the status the kernel writes in its state
// directory, and the pins that hold quarantined definitions.
type Upstreams struct {
	Config   string   // the config file that names them
	Names    []string // the configured upstreams, in config order
	OAuth    []string // those with auth = "oauth", whose logins doctor checks
	StateDir string
	// ConfigArg is " --config FILE" when the user named the config, for
	// the commands a fix shows.
	ConfigArg string
	// Report is what the kernel last wrote (ReportErr why there is none;
	// status.ErrNoReport when no kernel has yet).
	Report    status.Report
	ReportErr error
	// Quarantined are the pins' quarantined tools (QuarantineErr why
	// they could not be read).
	Quarantined   []upstream.Quarantine
	QuarantineErr error
}

// upstreams reports each configured upstream's state and every tool of
// theirs the kernel does not publish, with why and what to do.
func (d *doctor) upstreams(u *Upstreams) {
	if u.QuarantineErr != nil {
		d.problem(fmt.Sprintf("upstream pins in %s: %s", u.StateDir, cli.Words(u.QuarantineErr)),
			"the state directory and its pins must be yours and not writable by others (chmod go-w); the kernel refuses them too")
	}
	r := u.Report
	switch {
	case errors.Is(u.ReportErr, status.ErrNoReport):
		d.skip("no upstream status in %s yet: a kernel running %s writes it once its upstreams start", u.StateDir, u.Config)
	case u.ReportErr != nil:
		d.problem("upstream status: "+cli.Words(u.ReportErr), "restart the kernel; it rewrites the status whole")
	}
	var seen []string
	if u.ReportErr == nil {
		as := "now"
		if !alive(r.PID) {
			as = fmt.Sprintf("when kernel pid %d, no longer running, last reported at %s", r.PID, r.Written.UTC().Format(time.RFC3339))
			d.skip("upstream status is from kernel pid %d, which is not running: the states below are the last it saw", r.PID)
		}
		for _, st := range r.Upstreams {
			if !slices.Contains(u.Names, st.Name) {
				continue
			}
			seen = append(seen, st.Name)
			d.upstreamState(st, as, u)
		}
	}
	d.logins(u, seen)
	for _, name := range u.Names {
		if u.ReportErr == nil && !slices.Contains(seen, name) {
			d.skip("upstream %s is in %s but not in the kernel's last status: send the kernel SIGHUP to reload its config", name, u.Config)
		}
	}
	// Quarantines the status did not show (no kernel running, say): the
	// pins alone say what changed.
	for _, q := range u.Quarantined {
		name := q.Upstream + "." + q.Tool
		if slices.Contains(u.Names, q.Upstream) && !d.shown[name] {
			d.quarantined(name, q, u)
		}
	}
}

func (d *doctor) upstreamState(st status.Upstream, as string, u *Upstreams) {
	switch upstream.State(st.State) {
	case upstream.StateReady:
		if d.authRequired(st, as, u) {
			break
		}
		withheld := cli.Count(len(st.Withheld), "is", "are")
		if len(st.Withheld) == 0 {
			withheld = "none is"
		}
		d.ok("upstream %s: ready (%s, %s): %s can be published (the grants say to whom), %s withheld (%s)",
			st.Name, cmpOr(st.Server, "server unnamed"), where(st), cli.Count(len(st.Published), "tool", "tools"), withheld, as)
	case upstream.StateStarting:
		d.skip("upstream %s: starting (%s)", st.Name, as)
	case upstream.StateStopped:
		d.skip("upstream %s: stopped (%s)", st.Name, as)
	default:
		if d.authRequired(st, as, u) {
			break
		}
		what := fmt.Sprintf("upstream %s: %s (%s): %s", st.Name, st.State, as, st.Reason)
		if st.Restarts > 0 {
			what += "; restarted " + cli.Count(st.Restarts, "time", "times")
		}
		if len(st.Stderr) > 0 {
			what += "\n  its last lines of stderr:"
			for _, l := range st.Stderr {
				what += "\n    " + l
			}
		}
		fix := fmt.Sprintf("check its command, cwd and env in %s (it gets only env, PATH and HOME, so a proxy or a private CA must be in env: HTTPS_PROXY, NODE_EXTRA_CA_CERTS); its stderr is in the kernel's log", u.Config)
		if st.Transport == upstream.TransportHTTP {
			fix = remoteFix(st, u)
		}
		if strings.Contains(st.Reason, "startup_timeout") {
			fix = fmt.Sprintf("if it is only slow to start (npx fetching a package, say), raise startup_timeout in its [[upstream]]; else %s", fix)
		}
		d.problem(what, fix)
	}
	for _, w := range st.Withheld {
		if w.Reason == upstream.ReasonQuarantined {
			i := slices.IndexFunc(u.Quarantined, func(q upstream.Quarantine) bool { return q.Upstream+"."+q.Tool == w.Name })
			if i >= 0 {
				d.quarantined(w.Name, u.Quarantined[i], u)
				continue
			}
		}
		switch w.Reason {
		case upstream.ReasonNotOffered, upstream.ReasonBadPlaceholder, upstream.ReasonBadResource:
			d.problem(fmt.Sprintf("%s is not published (%s): %s", w.Name, w.Reason, w.Detail), fmt.Sprintf("fix its [[upstream.tool]] in %s, then reload the kernel (SIGHUP)", u.Config))
		case upstream.ReasonQuarantined:
			d.problem(fmt.Sprintf("%s is quarantined: %s", w.Name, w.Detail), approveFix(w.Name, u))
		case upstream.ReasonUnrecorded, upstream.ReasonNotPinned:
			d.problem(fmt.Sprintf("%s is not published (%s): %s", w.Name, w.Reason, w.Detail), "check the kernel's log and the disk its audit log and state directory are on")
		default:
			// The upstream's own definition cannot be published (a bad
			// name, a missing description): nothing to fix here.
			d.skip("%s is not published (%s): %s", w.Name, w.Reason, w.Detail)
		}
	}
}

// quarantined reports a tool whose definition changed since it was
// pinned, with the old and new values of what changed.
func (d *doctor) quarantined(name string, q upstream.Quarantine, u *Upstreams) {
	if d.shown == nil {
		d.shown = map[string]bool{}
	}
	d.shown[name] = true
	var b strings.Builder
	fmt.Fprintf(&b, "%s is quarantined: its %s changed since it was pinned; it is not published until approved (seen %s)",
		name, strings.Join(q.Changed, ", "), q.Since.UTC().Format(time.RFC3339))
	for _, f := range q.Changed {
		fmt.Fprintf(&b, "\n  %s pinned:  %s\n  %s offered: %s", f, DefinitionField(q.PinnedDefinition, f), f, DefinitionField(q.PendingDefinition, f))
	}
	d.problem(b.String(), fmt.Sprintf("read what changed above; if you trust the new definition: %s kernel approve %s %s --sha256 %s%s", prog, q.Upstream, q.Tool, q.Pending, u.ConfigArg))
}

// approveFix is the fix for a quarantine the pins file does not show
// (it changed since the kernel's report): approve names a definition by
// its hash, which doctor then shows.
func approveFix(name string, u *Upstreams) string {
	up, tool, _ := strings.Cut(name, ".")
	return fmt.Sprintf("run doctor again to see the definition and its hash, then: %s kernel approve %s %s --sha256 HASH%s", prog, up, tool, u.ConfigArg)
}

// DefinitionField is one field of a canonical tool definition as JSON,
// cut to keep a line readable; "(none)" when the definition has no such
// field. doctor and kernel approve show what changed with it.
func DefinitionField(def json.RawMessage, name string) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(def, &m) != nil {
		return "(unreadable)"
	}
	v, ok := m[name]
	if !ok {
		return "(none)"
	}
	const max = 400
	if r := []rune(string(v)); len(r) > max {
		return string(r[:max]) + "…"
	}
	return string(v)
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// alive reports whether a process with this pid exists.
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
