package kernel

import (
	"github.com/sharedos/sharedos-mcp/kernel/secret"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
)

// SetSecrets replaces the secrets the kernel starts its upstreams with
// (a reload read them again: secret.Load) and gives them to the
// Redactor, which keeps the old values too. It restarts nothing by
// itself: the next SetUpstreams (Reload) restarts every upstream whose
// config refers to a secret whose value changed, as if its config had
// changed, so a rotated token takes effect. May be called at any time.
func (s *Server) SetSecrets(set *secret.Set) {
	s.Redactor.AddSet(set)
	s.secrets.Store(set)
	s.updatePrivate()
}

// updatePrivate tells the file tools what of the kernel's own they never
// serve: its config file, state directory and audit log, and the files
// its secrets are read from.
func (s *Server) updatePrivate() {
	s.mu.Lock()
	root := s.files
	s.mu.Unlock()
	if root == nil {
		return
	}
	paths := []string{s.Config.File, s.StateDir, s.Config.AuditLog}
	if set := s.CurrentSecrets(); set != nil {
		for _, sp := range set.Specs() {
			if sp.Kind == secret.KindFile {
				paths = append(paths, sp.File)
			}
		}
	}
	root.SetPrivate(paths)
}

// CurrentSecrets is the secret set now in force: the last SetSecrets's,
// else Secrets. Whatever else of the kernel expands {secret:NAME} reads
// it here.
func (s *Server) CurrentSecrets() *secret.Set {
	if set := s.secrets.Load(); set != nil {
		return set
	}
	return s.Secrets
}

// sameSecretValues reports whether every secret sp refers to has the
// same value in a as in b.
func sameSecretValues(sp *upstream.Spec, a, b *secret.Set) bool {
	var names []string
	for _, ref := range sp.SecretRefs() {
		names = append(names, ref.Name)
	}
	return sameValues(names, a, b)
}

// sameValues reports whether every secret of names has the same value in
// a as in b.
func sameValues(names []string, a, b *secret.Set) bool {
	for _, name := range names {
		va, oka := value(a, name)
		vb, okb := value(b, name)
		if va != vb || oka != okb {
			return false
		}
	}
	return true
}

func value(set *secret.Set, name string) (string, bool) {
	if set == nil {
		return "", false
	}
	return set.Value(name)
}
