package kernel

import (
	"cmp"

	"github.com/sharedos/sharedos-mcp/kernel/config"
)

// Reloaded is what Reload made of a new config.
type Reloaded struct {
	// Applied is false when the new config came from another file than
	// the running one (a default config file that appeared or went):
	// none of it applies until the kernel restarts.
	Applied bool
	// Restart names what changed in the config and takes effect only
	// when the kernel restarts, each of which Reload has logged: "the
	// files root", "state_dir", "socket", "audit_log".
	Restart []string
}

// Reload applies next, the kernel's config read again (with the same
// flags over it as s.Config had), to the running kernel. The grants, the
// [[integration]] parents, allow_uids, operator_uids and
// allow_hard_links take effect at once, in open turns too (SetPolicy),
// and the limits' counts are kept, also for a grant whose limit changed; the upstreams as now configured serve new turns
// (SetUpstreams). What only a restart changes (the files root,
// state_dir, the socket, the audit log) is logged and left as it is;
// a socket or audit_log that next leaves out keeps the running one.
// Reload compares next with s.Config, the config the kernel was started
// on, and returns the upstreams that could not be started as its error
// (the others are started).
func (s *Server) Reload(next config.Config) (Reloaded, error) {
	running := s.Config
	if next.File != running.File {
		s.Log.Warn().Str("config", next.File).Msg("a different config file applies now; it takes effect when the kernel restarts")
		return Reloaded{}, nil
	}
	r := Reloaded{Applied: true}
	for _, c := range []struct{ what, was, now string }{
		{"the files root", running.Root, next.Root},
		{"state_dir", running.StateDir, next.StateDir},
		{"socket", running.Socket, cmp.Or(next.Socket, running.Socket)},
		{"audit_log", running.AuditLog, cmp.Or(next.AuditLog, running.AuditLog)},
	} {
		if c.was != c.now {
			s.Log.Warn().Str("running", c.was).Str("config", c.now).Msg(c.what + " changed in the config; it takes effect when the kernel restarts")
			r.Restart = append(r.Restart, c.what)
		}
	}
	s.SetPolicy(PolicyOf(next))
	err := s.SetUpstreams(next.Upstreams)
	if err != nil {
		s.Log.Error().Err(err).Msg("config reload: an upstream could not be started")
	}
	s.Log.Info().Str("config", next.File).Int("grants", len(next.Grants)).Int("upstreams", len(next.Upstreams)).Msg("config reloaded: new grants apply from the next decision, the upstreams from the next turn")
	return r, err
}
