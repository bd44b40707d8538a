package kernel

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"

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
	// files root", "state_dir", "socket", "audit_log", "[telemetry]".
	Restart []string
}

// Reload applies next, the kernel's config read again (with the same
// flags over it as s.Config had), to the running kernel. The grants, the
// [[integration]] parents, allow_uids, operator_uids, allow_hard_links
// and [audit] arguments take effect at once, in open turns too
// (SetPolicy), and the limits' counts are kept, also for a grant whose
// limit changed; the upstreams as now configured serve new turns
// (SetUpstreams). What only a restart changes (the files root,
// state_dir, the socket, the audit log, [telemetry]) is logged and left
// as it is; a socket or audit_log that next leaves out keeps the running
// one. Reload compares next with s.Config, the config the kernel was
// started on, and returns the upstreams that could not be started as its
// error (the others are started).
//
// The new config is recorded (config.loaded, with what it changes
// against the one in force) before any of it applies; a config that
// cannot be recorded does not apply, and the error says so.
func (s *Server) Reload(next config.Config) (Reloaded, error) {
	running := s.Config
	if next.File != running.File {
		s.Log.Warn().Str("config", next.File).Msg("a different config file applies now; it takes effect when the kernel restarts")
		return Reloaded{}, nil
	}
	s.mu.Lock()
	prev := s.inForce
	s.mu.Unlock()
	if !s.recordConfig("reload", prev, next) {
		s.Log.Error().Str("config", next.File).Msg("config reload refused: the audit log cannot be written, and a config must be on the record before it applies")
		return Reloaded{}, errors.New("the reloaded config could not be recorded in the audit log; the running config is kept")
	}
	s.mu.Lock()
	s.inForce = next
	s.mu.Unlock()
	r := Reloaded{Applied: true}
	telemetryWas, telemetryNow := telemetryText(running.Telemetry), telemetryText(next.Telemetry)
	switch {
	case telemetryWas != telemetryNow:
	case !reflect.DeepEqual(running.Telemetry, next.Telemetry):
		telemetryNow += " (a header's value changed)"
	case !sameValues(running.Telemetry.SecretNames(), s.Secrets, s.CurrentSecrets()):
		// The exporters send the values the kernel started with.
		telemetryNow += " (a secret its headers name has a new value)"
	}
	for _, c := range []struct{ what, was, now string }{
		{"the files root", running.Root, next.Root},
		{"state_dir", running.StateDir, next.StateDir},
		{"socket", running.Socket, cmp.Or(next.Socket, running.Socket)},
		{"audit_log", running.AuditLog, cmp.Or(next.AuditLog, running.AuditLog)},
		{"[telemetry]", telemetryWas, telemetryNow},
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

// telemetryText stands for a [telemetry] table in Reload's comparison and
// its log line: its headers by name, never by value.
func telemetryText(t *config.Telemetry) string {
	if t == nil {
		return "none"
	}
	return fmt.Sprintf("otlp_endpoint=%q otlp_protocol=%q service_name=%q audit_logs=%t headers=%q",
		t.Endpoint, t.Protocol, t.ServiceName, t.AuditLogs, slices.Sorted(maps.Keys(t.Headers)))
}
