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
// errs, and that every {secret:NAME} of a well-formed upstream (specs,
// parsed from ups) and of [telemetry]'s headers (tel, nil when it has
// none or is wrong) names one of them. Nothing is read or run: the kernel
// loads the values when it starts (secret.Load), kernel check checks them
// (secret.Check). A relative file is taken from base, the config file's
// directory, and ~/ from the home directory.
func parseSecrets(errs *problems, name string, data []byte, base string, lines Lines, cfgs []secret.Config, ups []upstream.Config, specs []upstream.Spec, tel *Telemetry) []secret.Spec {
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
	for _, ref := range tel.secretRefs() {
		if !slices.Contains(known, ref.secret) {
			errs.add(telemetryError(name, lines, fmt.Errorf("[telemetry] headers: %s: %w", ref.header,
				&secret.RefError{Name: ref.secret, Err: secret.ErrUnknownSecret})))
		}
	}
	if len(secrets) == 0 {
		return nil
	}
	return secrets
}

// telemetryError places a problem of [telemetry] at the table's line.
func telemetryError(name string, lines Lines, err error) error {
	if lines.Telemetry > 0 {
		return fmt.Errorf("%s:%d: %w", name, lines.Telemetry, err)
	}
	return fmt.Errorf("%s: %w", name, err)
}

// SecretUsers returns, for each secret of the config, what refers to
// it: the upstreams by name, then "[telemetry]" for its headers. It is
// what kernel check shows beside each secret.
func (c Config) SecretUsers() map[string][]string {
	users := map[string][]string{}
	use := func(secret, user string) {
		if !slices.Contains(users[secret], user) {
			users[secret] = append(users[secret], user)
		}
	}
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		for _, ref := range u.SecretRefs() {
			use(ref.Name, u.Name)
		}
	}
	for _, ref := range c.Telemetry.secretRefs() {
		use(ref.secret, "[telemetry]")
	}
	return users
}
