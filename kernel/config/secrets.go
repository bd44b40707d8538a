package config

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/sharedos/sharedos-mcp/kernel/secret"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
)

// parseSecrets checks the [[secret]] tables, adding their problems to
// errs, and that every {secret:NAME} of a well-formed upstream names one
// of them (specs, parsed from ups). Nothing is read or run: the kernel
// loads the values when it starts (secret.Load), kernel check checks them
// (secret.Check). A relative file is taken from base, the config file's
// directory, and ~/ from the home directory.
func parseSecrets(errs *problems, name string, data []byte, base string, lines Lines, cfgs []secret.Config, ups []upstream.Config, specs []upstream.Spec) []secret.Spec {
	home, _ := os.UserHomeDir()
	secrets, err := secret.Parse(cfgs, base, home)
	if err != nil {
		var ce *secret.ConfigError
		if errors.As(err, &ce) && ce.Index < len(lines.Secrets) && lines.Secrets[ce.Index] > 0 {
			errs.add(fmt.Errorf("%s:%d: %w", name, lines.Secrets[ce.Index], err))
		} else {
			errs.add(fmt.Errorf("%s: %w", name, err))
		}
		return nil
	}
	known := make([]string, len(secrets))
	for i, s := range secrets {
		known[i] = s.Name
	}
	for i := range specs {
		for _, ref := range specs[i].SecretRefs() {
			if !slices.Contains(known, ref.Name) {
				errs.add(upstreamError(name, data, ups, &upstream.ConfigError{
					Upstream: i, Tool: -1, Key: ref.Key,
					Err: &secret.RefError{Name: ref.Name, Err: secret.ErrUnknownSecret},
				}))
			}
		}
	}
	if len(secrets) == 0 {
		return nil
	}
	return secrets
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
