package config

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/sharedos/sharedos-mcp/kernel/secret"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
)

// parseSecrets checks the [[secret]] tables and that every {secret:NAME}
// of an upstream names one of them. Nothing is read or run: the kernel
// loads the values when it starts (secret.Load), kernel check checks
// them (secret.Check). A relative file is taken from base, the config
// file's directory, and ~/ from the home directory.
func parseSecrets(name string, data []byte, base string, lines Lines, cfgs []secret.Config, ups []upstream.Spec) ([]secret.Spec, error) {
	home, _ := os.UserHomeDir()
	specs, err := secret.Parse(cfgs, base, home)
	if err != nil {
		var ce *secret.ConfigError
		if errors.As(err, &ce) && ce.Index < len(lines.Secrets) && lines.Secrets[ce.Index] > 0 {
			return nil, fmt.Errorf("%s:%d: %w", name, lines.Secrets[ce.Index], err)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	known := make([]string, len(specs))
	for i, s := range specs {
		known[i] = s.Name
	}
	for i := range ups {
		for _, ref := range ups[i].SecretRefs() {
			if !slices.Contains(known, ref.Name) {
				return nil, upstreamError(name, data, &upstream.ConfigError{
					Upstream: i, Tool: -1, Key: ref.Key,
					Err: &secret.RefError{Name: ref.Name, Err: secret.ErrUnknownSecret},
				})
			}
		}
	}
	if len(specs) == 0 {
		return nil, nil
	}
	return specs, nil
}

// SecretUsers returns, for each secret of the config, the upstreams
// whose config refers to it, by name: what kernel check shows beside
// each secret.
func (c Config) SecretUsers() map[string][]string {
	users := map[string][]string{}
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		for _, ref := range u.SecretRefs() {
			if !slices.Contains(users[ref.Name], u.Name) {
				users[ref.Name] = append(users[ref.Name], u.Name)
			}
		}
	}
	return users
}
