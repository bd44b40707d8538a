package kernel

import (
	"slices"
	"testing"

	"github.com/sharedos/sharedos-mcp/kernel/config"
	"github.com/sharedos/sharedos-mcp/kernel/secret"
	"github.com/sharedos/sharedos-mcp/policy"
)

// TestReloadAppliesThePolicyAndNamesWhatNeedsARestart: a reloaded
// config's grants replace the running ones at once; a changed root or
// audit_log is named, not applied; a socket the new config leaves out
// keeps the running one; a config from another file applies nothing.
func TestReloadAppliesThePolicyAndNamesWhatNeedsARestart(t *testing.T) {
	running := config.Config{File: "k.toml", Root: "/srv/a", Socket: "/run/k.sock", AuditLog: "/var/a.jsonl", StateDir: "/var/s"}
	s := &Server{Config: running, Audit: openAudit(t)}
	g := grant(t, "integration:cc", "files:/", true, "read")
	next := running
	next.Root, next.Socket, next.AuditLog, next.Grants = "/srv/b", "", "/var/b.jsonl", []policy.Grant{g}
	r, err := s.Reload(next)
	if err != nil || !r.Applied || !slices.Equal(r.Restart, []string{"the files root", "audit_log"}) {
		t.Errorf("Reload = %+v, %v; want applied, restart for the files root and audit_log", r, err)
	}
	if got := s.currentPolicy().Grants; len(got) != 1 || got[0].Resource != g.Resource {
		t.Errorf("grants after the reload %+v, want the new one", got)
	}

	other := next
	other.File, other.Grants = "other.toml", nil
	if r, err := s.Reload(other); err != nil || r.Applied {
		t.Errorf("Reload from another file = %+v, %v; want nothing applied", r, err)
	}
	if got := s.currentPolicy().Grants; len(got) != 1 {
		t.Errorf("a config from another file changed the grants to %+v", got)
	}
}

// TestReloadSaysATelemetrySecretTakesARestart: the exporters keep the
// header values the kernel started with, so a secret [telemetry]'s
// headers name that has a new value on a reload is named for a restart,
// like a changed [telemetry]; the same value is not.
func TestReloadSaysATelemetrySecretTakesARestart(t *testing.T) {
	load := func(value string) *secret.Set {
		t.Helper()
		set, err := secret.Load(t.Context(), []secret.Spec{{Name: "otlp", Kind: secret.KindEnv, Env: "OTLP_TOKEN"}},
			secret.Options{LookupEnv: func(string) (string, bool) { return value, true }})
		if err != nil {
			t.Fatal(err)
		}
		return set
	}
	running := config.Config{File: "k.toml", Telemetry: &config.Telemetry{Headers: map[string]string{"authorization": "Bearer {secret:otlp}"}}}
	s := &Server{Config: running, Audit: openAudit(t), Secrets: load("first-value-0123")}
	s.SetSecrets(load("first-value-0123"))
	if r, err := s.Reload(running); err != nil || len(r.Restart) != 0 {
		t.Errorf("the same secret value: Reload = %+v, %v; want nothing to restart for", r, err)
	}
	s.SetSecrets(load("rotated-value-4567"))
	if r, err := s.Reload(running); err != nil || !slices.Equal(r.Restart, []string{"[telemetry]"}) {
		t.Errorf("a rotated secret: Reload = %+v, %v; want [telemetry] to restart for", r, err)
	}
}
