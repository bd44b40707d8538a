package cmd

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/sharedos/sharedos-mcp/internal/cli"
	"github.com/sharedos/sharedos-mcp/kernel/config"
	"github.com/sharedos/sharedos-mcp/kernel/secret"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
)

// loadSecrets reads every [[secret]] of cfg, as the kernel does when it
// starts, and returns them with a redactor that holds them. A secret that
// cannot be loaded (a file others can read, a command that fails, an env
// variable that is unset) refuses the start: an upstream would otherwise
// run without the credential it was configured with.
func loadSecrets(ctx context.Context, cfg config.Config, configFile string) (*secret.Set, *secret.Redactor, error) {
	set, err := secret.Load(ctx, cfg.Secrets, secret.Options{})
	if err != nil {
		return nil, nil, cli.Hintf(secretsError(err), "fix each secret named above, then start the kernel again; '%s kernel check%s' checks them without starting a kernel", prog, configArg(configFile))
	}
	red := secret.NewRedactor()
	red.AddSet(set)
	return set, red, nil
}

// secretsError is one line naming every secret that could not be loaded.
// Its text holds names and sources, never a value.
func secretsError(err error) error {
	errs := secretErrors(err)
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return fmt.Errorf("%s could not be loaded: %s", cli.Count(len(errs), "secret", "secrets"), strings.Join(msgs, "; "))
}

// secretErrors splits what secret.Load or secret.Check returned.
func secretErrors(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// printSecrets lists the config's secrets by name, with where each comes
// from and which upstreams use it; never a value.
func printSecrets(w io.Writer, cfg config.Config) {
	if len(cfg.Secrets) == 0 {
		return
	}
	users := cfg.SecretUsers()
	fmt.Fprintln(w, "secrets (read when the kernel starts and on SIGHUP; their values are never shown):")
	for _, s := range cfg.Secrets {
		used := "used by no upstream"
		if u := users[s.Name]; len(u) > 0 {
			used = "used by " + strings.Join(u, ", ")
		}
		fmt.Fprintf(w, "  %s: %s (%s)\n", s.Name, s.Source(), used)
	}
}

// secretProblems is what kernel check finds wrong with the secrets
// without running any command: a file that is missing, not the kernel's
// uid's or readable by others, a command not on PATH, an unset variable.
func secretProblems(cfg config.Config) []string {
	err := secret.Check(cfg.Secrets, secret.Options{})
	if err == nil {
		return nil
	}
	var out []string
	for _, e := range secretErrors(err) {
		out = append(out, e.Error())
	}
	return out
}

// upstreamLine says how the kernel runs or reaches an upstream, for
// kernel check and the kernel's start: its command, or its transport and
// URL (without query), its credentials by header and secret name.
func upstreamLine(cfg config.Config, name string, command []string) string {
	i := slices.IndexFunc(cfg.Upstreams, func(s upstream.Spec) bool { return s.Name == name })
	if i < 0 || cfg.Upstreams[i].Remote == nil {
		line := shellWords(command)
		if i >= 0 {
			if refs := refsOf(cfg.Upstreams[i], "env"); refs != "" {
				line += " (env " + refs + ")"
			}
		}
		return line
	}
	sp := cfg.Upstreams[i]
	r := sp.Remote
	var how []string
	switch {
	case r.Auth == upstream.AuthOAuth:
		how = append(how, fmt.Sprintf("auth oauth: '%s kernel login %s' signs in", prog, sp.Name))
	case len(r.Headers) == 0:
		how = append(how, "no credentials")
	}
	if refs := refsOf(sp, "headers"); refs != "" {
		how = append(how, "headers "+refs)
	} else if len(r.Headers) > 0 {
		how = append(how, "headers "+strings.Join(slices.Sorted(maps.Keys(r.Headers)), ", "))
	}
	if r.CAFile != "" {
		how = append(how, "ca_file "+r.CAFile)
	}
	return fmt.Sprintf("%s %s (%s)", sp.Transport(), sp.DisplayURL(), strings.Join(how, "; "))
}

// refsOf names the secrets an upstream's key refers to: "secret a, secret b".
func refsOf(sp upstream.Spec, key string) string {
	var names []string
	for _, ref := range sp.SecretRefs() {
		if ref.Key == key {
			names = append(names, "{secret:"+ref.Name+"}")
		}
	}
	return strings.Join(names, ", ")
}
