package upstream

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharedos/sharedos-mcp/kernel/oauth"
	"github.com/sharedos/sharedos-mcp/kernel/webclient"
)

// startRemote connects to a remote upstream over Streamable HTTP,
// initializes the MCP session and lists its tools; ctx carries the
// startup timeout. There is no process: the session's end is its
// remoteSession being lost.
func (u *upstream) startRemote(ctx context.Context) (*session, error) {
	r := u.spec.Remote
	headers, err := u.m.secrets().ExpandValues(r.Headers)
	if err != nil {
		return nil, fmt.Errorf("headers %w", err)
	}
	opts := RemoteOptions{URL: r.URL, Headers: headers, CAFile: r.CAFile, MaxResultBytes: u.m.opts.MaxResultBytes}
	if r.Auth == AuthOAuth {
		if opts.Tokens, err = u.tokenSource(); err != nil {
			return nil, err
		}
	}
	// The expanded headers and the CA file, checked before anything is
	// sent; each connection makes its transport anew.
	if _, err := remoteTransport(opts); err != nil {
		return nil, err
	}
	s := u.newSession()
	client := s.newClient()
	connect := func(ctx context.Context) (*mcp.ClientSession, error) {
		tr, err := remoteTransport(opts)
		if err != nil {
			return nil, err
		}
		return client.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: protocolVersion})
	}
	u.log.Debug().Str("url", u.spec.DisplayURL()).Msg("connecting to upstream")
	cs, err := connect(ctx)
	if err != nil {
		return nil, u.remoteStartFailure(ctx, "initialize", err)
	}
	tools, err := s.fetchTools(ctx, cs)
	if err != nil {
		cs.Close()
		return nil, u.remoteStartFailure(ctx, "list tools", err)
	}
	s.server = serverName(cs)
	s.remote = newRemoteSession(cs, connect, s.relist, u.spec.StartupTimeout)
	s.remote.reinitialized = func(why error) {
		u.log.Info().Str("ended", u.m.redact(scrubbedError(why).Error())).Msg("upstream session initialized again: the server had forgotten or dropped the last one")
		u.m.emit(Event{Kind: EventReinitialized, Upstream: u.spec.Name})
	}
	lost, _ := s.remote.Lost()
	go func() {
		select {
		case <-lost:
			close(s.done)
		case <-s.ctx.Done():
		}
	}()
	s.apply(tools)
	u.setAuthRefused("")
	s.wg.Add(1)
	go s.refresher()
	return s, nil
}

// relist lists a new session's tools and applies them, before any call
// uses it: a definition that changed across a server's restart is
// judged against its pin.
func (s *session) relist(ctx context.Context, cs *mcp.ClientSession) error {
	tools, err := s.fetchTools(ctx, cs)
	if err != nil {
		return err
	}
	s.apply(tools)
	return nil
}

// remoteStartFailure says why a remote upstream did not start: the
// startup timeout when it passed, else what went wrong with the HTTP
// request (the SDK's and net/http's wrappings dropped), with every URL in
// it cut to what webclient.Display shows. Refused credentials are noted
// for the upstream's status.
func (u *upstream) remoteStartFailure(ctx context.Context, step string, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%s: no answer within startup_timeout (%v)", step, u.spec.StartupTimeout)
	}
	if errors.Is(err, webclient.ErrAuthRequired) {
		u.setAuthRefused(authRefusal(err))
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("%s: %w", step, scrubbedError(err))
}

// authRefusal says why a person has to act, from an error wrapping
// webclient.ErrAuthRequired: the token source's reason, or the server
// refusing the configured headers.
func authRefusal(err error) string {
	var ar *oauth.AuthRequiredError
	if errors.As(err, &ar) {
		return ar.Reason
	}
	return "the server refused the configured credentials"
}

// tokenSource is the OAuth token source of the upstream, made once and
// kept across its sessions: a refresh token it found refused stays
// refused until a new login, whatever restarts in between.
func (u *upstream) tokenSource() (*oauth.Source, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.tokens != nil {
		return u.tokens, nil
	}
	r := u.spec.Remote
	client, err := webclient.New(webclient.Options{CAFile: r.CAFile})
	if err != nil {
		return nil, fmt.Errorf("oauth: %w", err)
	}
	clientSecret, err := u.m.secrets().Expand(r.ClientSecret)
	if err != nil {
		return nil, fmt.Errorf("client_secret %w", err)
	}
	u.tokens = oauth.NewSource(oauth.SourceOptions{
		Store: oauth.NewStore(u.m.opts.StateDir), Upstream: u.spec.Name, HTTPClient: client,
		ClientSecret: clientSecret, Redactor: u.m.opts.Redactor,
	})
	return u.tokens, nil
}

// setAuthRefused notes why the upstream's credentials were refused ("":
// they were taken), and reports a change.
func (u *upstream) setAuthRefused(why string) {
	u.mu.Lock()
	changed := u.authRefused != why
	u.authRefused = why
	u.mu.Unlock()
	if changed {
		u.m.emit(Event{Kind: EventAuth, Upstream: u.spec.Name})
	}
}

// authStatus is how a remote upstream authenticates now; nil for a
// process.
func (u *upstream) authStatus() *AuthStatus {
	r := u.spec.Remote
	if r == nil {
		return nil
	}
	u.mu.Lock()
	refused, tokens := u.authRefused, u.tokens
	u.mu.Unlock()
	switch {
	case r.Auth == AuthOAuth && tokens != nil:
		st := tokens.Status()
		return &AuthStatus{Method: AuthMethodOAuth, LoggedIn: st.LoggedIn, Expiry: st.Expiry, CanRefresh: st.CanRefresh, Required: st.AuthRequired}
	case r.Auth == AuthOAuth:
		return &AuthStatus{Method: AuthMethodOAuth, Required: refused}
	case len(r.Headers) == 0:
		return &AuthStatus{Method: AuthMethodNone, Required: refused}
	}
	return &AuthStatus{Method: AuthMethodHeaders, Required: refused}
}

// loginPoll is how often an upstream waiting to start again looks for a
// new login: one stat of its token file.
const loginPoll = time.Second

// waitRetry waits d before the upstream is started again, or until ctx
// ends (it then reports false). An upstream with auth = "oauth" is
// started again as soon as its token file changes (kernel login wrote
// it), not at the end of a backoff that may be 30 s long.
func (u *upstream) waitRetry(ctx context.Context, d time.Duration) bool {
	if u.spec.Remote == nil || u.spec.Remote.Auth != AuthOAuth {
		return sleep(ctx, d)
	}
	store := oauth.NewStore(u.m.opts.StateDir)
	before, _ := store.Stat(u.spec.Name)
	t := time.NewTimer(d)
	defer t.Stop()
	tick := time.NewTicker(loginPoll)
	defer tick.Stop()
	for {
		select {
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		case <-tick.C:
			now, _ := store.Stat(u.spec.Name)
			if !sameFile(before, now) {
				return true
			}
		}
	}
}
