package cmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/sharedos/sharedos-mcp/internal/cli"
	"github.com/sharedos/sharedos-mcp/internal/nearest"
	"github.com/sharedos/sharedos-mcp/kernel/config"
	"github.com/sharedos/sharedos-mcp/kernel/oauth"
	"github.com/sharedos/sharedos-mcp/kernel/secret"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
	"github.com/sharedos/sharedos-mcp/kernel/webclient"
)

// loginTimeout bounds a login: the person has this long to approve it
// in the browser.
const loginTimeout = 10 * time.Minute

func runKernelLogin(ctx context.Context, stdio cli.IO, args []string) error {
	fs := newFlagSet(stdio, "kernel login", "UPSTREAM [--config FILE]",
		"Sign the kernel in to a remote upstream configured with auth = \"oauth\": find the server's\n"+
			"authorization server (its protected resource metadata), register a client there unless the\n"+
			"upstream sets client_id, and run the authorization code flow with PKCE. It prints the URL\n"+
			"to open (and opens a browser when it can: $BROWSER, else xdg-open or open), waits for the\n"+
			"redirect on a loopback port, and stores the tokens in the state directory (oauth/UPSTREAM.json,\n"+
			"mode 0600). A running kernel uses them from its next request; it refreshes them itself.")
	configFile := fs.String("config", "", configHelp)
	cfg, sp, store, err := oauthTarget(fs, configFile, args, "kernel login")
	if err != nil {
		return err
	}
	name, r := sp.Name, sp.Remote
	clientSecret, err := loginClientSecret(ctx, cfg, r.ClientSecret)
	if err != nil {
		return err
	}
	client, err := webclient.New(webclient.Options{CAFile: r.CAFile})
	if err != nil {
		return cli.Hintf(fmt.Errorf("kernel login %s: %w", name, err), "fix ca_file of upstream %s in %s", name, cfg.File)
	}
	ctx, cancel := context.WithTimeout(ctx, loginTimeout)
	defer cancel()
	rec, err := oauth.Login(ctx, oauth.LoginOptions{
		Upstream: name, URL: r.URL, ClientID: r.ClientID, ClientSecret: clientSecret, Scopes: r.Scopes,
		HTTPClient: client, Store: store, Out: stdio.Out,
	})
	switch {
	case errors.Is(err, oauth.ErrNoAuthNeeded):
		return cli.Hintf(fmt.Errorf("kernel login %s: %w", name, err), "remove auth = \"oauth\" from upstream %s in %s: it needs no login", name, cfg.File)
	case errors.Is(err, context.DeadlineExceeded):
		return cli.Hintf(fmt.Errorf("kernel login %s: the authorization was not completed within %v", name, loginTimeout), "run it again and open the URL it prints")
	case err != nil:
		return cli.Hintf(fmt.Errorf("kernel login %s: %w", name, err), "check that %s is reachable from here, and client_id and scopes of upstream %s in %s", sp.DisplayURL(), name, cfg.File)
	}
	until := "the server did not say until when"
	if !rec.Expiry.IsZero() {
		until = "until " + rec.Expiry.UTC().Format(time.RFC3339)
	}
	refresh := "the kernel refreshes it before it expires"
	if rec.RefreshToken == "" {
		refresh = "no refresh token was given: log in again when it expires"
	}
	fmt.Fprintf(stdio.Out, "logged in to upstream %s: a token %s; %s\n", name, until, refresh)
	fmt.Fprintf(stdio.Out, "tokens in %s (mode 0600); a running kernel uses them from its next request, and starts an upstream that was waiting for them within %v\n",
		store.Path(name), upstream.DefaultBackoff.Max)
	return nil
}

func runKernelLogout(stdio cli.IO, args []string) error {
	fs := newFlagSet(stdio, "kernel logout", "UPSTREAM [--config FILE]",
		"Forget the OAuth tokens 'kernel login' stored for UPSTREAM. A running kernel finds them gone at\n"+
			"its next request and answers calls to that upstream upstream_auth_required until the next login.")
	configFile := fs.String("config", "", configHelp)
	_, sp, store, err := oauthTarget(fs, configFile, args, "kernel logout")
	if err != nil {
		return err
	}
	name := sp.Name
	existed, err := oauth.Logout(store, name)
	if err != nil {
		return cli.Hintf(fmt.Errorf("kernel logout %s: %w", name, err), "the state directory and its oauth directory must be yours and private (chmod 700)")
	}
	if !existed {
		fmt.Fprintf(stdio.Out, "upstream %s had no tokens (%s does not exist)\n", name, store.Path(name))
		return nil
	}
	fmt.Fprintf(stdio.Out, "forgot the tokens of upstream %s; '%s kernel login %s%s' signs in again\n", name, prog, name, configArg(*configFile))
	return nil
}

// oauthTarget parses the command line of kernel login or logout,
// UPSTREAM with flags before or after it, and returns the config named by
// configFile (a flag of fs), the upstream, which must use auth = "oauth",
// and the store its tokens are kept in.
func oauthTarget(fs *flag.FlagSet, configFile *string, args []string, cmd string) (config.Config, upstream.Spec, *oauth.Store, error) {
	names, err := parseInterleaved(fs, args)
	if err != nil {
		return config.Config{}, upstream.Spec{}, nil, err
	}
	if len(names) != 1 {
		return config.Config{}, upstream.Spec{}, nil, cli.Usagef("name the upstream: "+cmd+" github", "%s: want UPSTREAM, got %d argument(s)", cmd, len(names))
	}
	cfg, sp, err := oauthUpstream(*configFile, names[0], cmd)
	if err != nil {
		return cfg, sp, nil, err
	}
	stateDir, err := cfg.StateDirOrDefault(os.Getenv)
	if err != nil {
		return cfg, sp, nil, cli.Hintf(fmt.Errorf("%s: state directory: %w", cmd, err), "set state_dir in the config")
	}
	return cfg, sp, oauth.NewStore(stateDir), nil
}

// oauthUpstream finds the upstream name of the config, which must use
// auth = "oauth".
func oauthUpstream(configFile, name, cmd string) (config.Config, upstream.Spec, error) {
	cfg, err := loadConfigFile(configFile)
	if err != nil {
		return cfg, upstream.Spec{}, err
	}
	var names []string
	for _, sp := range cfg.Upstreams {
		if sp.Name != name {
			names = append(names, sp.Name)
			continue
		}
		if sp.Remote == nil || sp.Remote.Auth != upstream.AuthOAuth {
			return cfg, sp, cli.Hintf(fmt.Errorf("%s: upstream %s does not use auth = \"oauth\"", cmd, name),
				"its credentials are in its [[upstream]] in %s (headers, env), from [[secret]] tables; only an upstream with auth = \"oauth\" logs in", cfg.File)
		}
		return cfg, sp, nil
	}
	hint := "the upstreams are the [[upstream]] tables of the kernel's config"
	switch m := nearest.Find(name, nearest.Names(names...)); {
	case m != "":
		hint = fmt.Sprintf("did you mean %s?", m)
	case len(names) == 0:
		hint = "the config has no [[upstream]]; pass the kernel's --config"
	}
	return cfg, upstream.Spec{}, cli.Hintf(fmt.Errorf("%s: the config %s names no upstream %q", cmd, configName(cfg), name), "%s", hint)
}

// loginClientSecret loads the one secret a configured client_secret
// names ({secret:NAME}), and nothing else: a login runs no other
// secret's command.
func loginClientSecret(ctx context.Context, cfg config.Config, ref string) (string, error) {
	if ref == "" {
		return "", nil
	}
	names, _ := secret.Refs(ref)
	i := slices.IndexFunc(cfg.Secrets, func(s secret.Spec) bool { return len(names) == 1 && s.Name == names[0] })
	if i < 0 {
		return "", cli.Hintf(fmt.Errorf("kernel login: client_secret %s names no [[secret]]", ref), "add the [[secret]] it names to %s", configName(cfg))
	}
	set, err := secret.Load(ctx, cfg.Secrets[i:i+1], secret.Options{})
	if err != nil {
		return "", cli.Hintf(secretsError(err), "fix the secret, then log in again")
	}
	v, _ := set.Value(names[0])
	return v, nil
}
