package oauth

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharedos/sharedos-mcp/internal/testoauth"
	"github.com/sharedos/sharedos-mcp/kernel/secret"
	"github.com/sharedos/sharedos-mcp/kernel/webclient"
)

// world is an authorization server and a protected MCP server on loopback
// TLS, the kernel's clients for them, and its state directory.
type world struct {
	ca     *testoauth.CA
	caFile string
	as     *testoauth.AuthServer
	mcp    *testoauth.MCPServer
	client *http.Client // the kernel's, for the authorization server
	store  *Store
}

func newWorld(t *testing.T, lifetime time.Duration) *world {
	t.Helper()
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	w := &world{ca: testoauth.NewCA(t)}
	w.caFile = w.ca.WriteFile(t)
	w.as = testoauth.NewAuthServer(t, w.ca, lifetime)
	w.mcp = testoauth.NewMCPServer(t, testoauth.MCPOptions{CA: w.ca, Auth: w.as, JSONResponse: true})
	c, err := webclient.New(webclient.Options{CAFile: w.caFile})
	if err != nil {
		t.Fatal(err)
	}
	w.client = c
	w.store = NewStore(t.TempDir())
	return w
}

// browser follows an authorization URL as a person's browser would.
func (w *world) browser(t *testing.T) func(string) error { return testoauth.Browser(t, w.ca) }

func (w *world) login(t *testing.T, opts LoginOptions) (*Record, string) {
	t.Helper()
	var out bytes.Buffer
	opts.Upstream, opts.URL, opts.HTTPClient, opts.Store, opts.Out = "github", w.mcp.URL, w.client, w.store, &out
	if opts.OpenBrowser == nil {
		opts.OpenBrowser = w.browser(t)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	rec, err := Login(ctx, opts)
	if err != nil {
		t.Fatalf("login: %v", err)
	}
	return rec, out.String()
}

func (w *world) source(t *testing.T, opts SourceOptions) *Source {
	opts.Store, opts.Upstream, opts.HTTPClient = w.store, "github", w.client
	return NewSource(opts)
}

// session connects to the MCP server with the source's tokens, as the
// kernel's remote transport does.
func (w *world) session(t *testing.T, src *Source) *mcp.ClientSession {
	t.Helper()
	origin, _ := url.Parse(w.mcp.URL)
	c, err := webclient.New(webclient.Options{CAFile: w.caFile, Origin: origin, Tokens: src})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "sharedos-mcp", Version: "test"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: w.mcp.URL, HTTPClient: c}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func echo(ctx context.Context, cs *mcp.ClientSession) error {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err == nil && res.Content[0].(*mcp.TextContent).Text != "hi" {
		err = errors.New("echo answered something else")
	}
	return err
}

func TestLoginThenACall(t *testing.T) {
	w := newWorld(t, time.Hour)
	rec, out := w.login(t, LoginOptions{})
	if !strings.Contains(out, w.as.Issuer+"/authorize?") {
		t.Errorf("the URL to open was not printed: %q", out)
	}
	if rec.Resource != w.mcp.URL || rec.RefreshToken == "" || rec.AccessToken == "" || rec.ClientID == "" || rec.Expiry.IsZero() {
		t.Errorf("record = %+v", rec)
	}
	if strings.Contains(out, rec.AccessToken) {
		t.Error("the login printed the token")
	}
	if n := w.as.Registrations(); n != 1 {
		t.Errorf("%d registrations, want 1 (no client_id configured)", n)
	}
	fi, err := os.Stat(w.store.Path("github"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v, %v", fi, err)
	}
	if di, err := os.Stat(filepath.Dir(w.store.Path("github"))); err != nil || di.Mode().Perm() != 0o700 {
		t.Fatalf("token directory: %v, %v", di, err)
	}
	cs := w.session(t, w.source(t, SourceOptions{}))
	if err := echo(t.Context(), cs); err != nil {
		t.Fatalf("echo: %v", err)
	}
	for _, h := range w.mcp.AuthHeaders()[1:] { // after the login's challenge
		if h != "Bearer "+rec.AccessToken {
			t.Errorf("a request carried %q", h)
		}
	}
}

func TestLoginWithAConfiguredClientAndNoBrowser(t *testing.T) {
	w := newWorld(t, time.Hour)
	w.as.Register("configured-client", "configured-secret-0123", "http://127.0.0.1/callback")
	t.Setenv("PATH", t.TempDir()) // no xdg-open, no open
	// The person reads the printed URL and opens it themselves.
	follow := w.browser(t)
	out := &urlWatcher{found: func(u string) { follow(u) }}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	rec, err := Login(ctx, LoginOptions{
		Upstream: "github", URL: w.mcp.URL, ClientID: "configured-client", ClientSecret: "configured-secret-0123",
		HTTPClient: w.client, Store: w.store, Out: out,
	})
	if err != nil {
		t.Fatalf("login: %v", err)
	}
	if w.as.Registrations() != 0 || rec.ClientID != "configured-client" || rec.ClientSecret != "" {
		t.Errorf("registrations %d, record %+v: a configured client is used as it is and its secret not stored", w.as.Registrations(), rec)
	}
	data, _ := os.ReadFile(w.store.Path("github"))
	if bytes.Contains(data, []byte("configured-secret-0123")) {
		t.Error("the configured client secret was written to the token file")
	}
	// Its refresh authenticates with the configured secret.
	w.as.ExpireAll()
	cs := w.session(t, w.source(t, SourceOptions{ClientSecret: "configured-secret-0123"}))
	if err := echo(t.Context(), cs); err != nil {
		t.Fatalf("echo after a refresh: %v", err)
	}
	if n, _ := w.as.Refreshes(); n != 1 {
		t.Errorf("%d refreshes, want 1", n)
	}
}

// urlWatcher calls found with the first https URL written to it.
type urlWatcher struct {
	once  sync.Once
	found func(string)
}

func (u *urlWatcher) Write(p []byte) (int, error) {
	for f := range strings.FieldsSeq(string(p)) {
		if strings.HasPrefix(f, "https://") {
			u.once.Do(func() { u.found(f) })
		}
	}
	return len(p), nil
}

func TestATokenIsRefreshedBeforeItExpiresWithTheResource(t *testing.T) {
	w := newWorld(t, time.Hour)
	rec, _ := w.login(t, LoginOptions{})
	var mu sync.Mutex
	now := time.Now()
	redactor := secret.NewRedactor()
	src := w.source(t, SourceOptions{Redactor: redactor, Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	tok, err := src.Token(t.Context())
	if err != nil || tok != rec.AccessToken {
		t.Fatalf("Token = %q, %v", tok, err)
	}
	if n, _ := w.as.Refreshes(); n != 0 {
		t.Fatalf("%d refreshes of a fresh token", n)
	}
	mu.Lock()
	now = rec.Expiry.Add(-30 * time.Second) // within DefaultRefreshBefore
	mu.Unlock()
	var wg sync.WaitGroup
	tokens := make([]string, 16)
	for i := range tokens {
		wg.Go(func() {
			var err error
			tokens[i], err = src.Token(t.Context())
			if err != nil {
				t.Errorf("Token: %v", err)
			}
		})
	}
	wg.Wait()
	n, resources := w.as.Refreshes()
	if n != 1 {
		t.Errorf("%d refreshes for 16 concurrent callers, want 1", n)
	}
	if len(resources) != 1 || resources[0] != w.mcp.URL {
		t.Errorf("refresh resources %q, want the MCP server's URL", resources)
	}
	for _, tok := range tokens {
		if tok == rec.AccessToken || tok != tokens[0] {
			t.Errorf("tokens after the refresh: %q", tokens)
			break
		}
	}
	// The rotated tokens are on disk, so a kernel started later has them.
	onDisk, _, err := w.store.Load("github")
	if err != nil || onDisk.AccessToken != tokens[0] || onDisk.RefreshToken == rec.RefreshToken {
		t.Errorf("stored record after the refresh: %+v, %v", onDisk, err)
	}
	for _, v := range []string{rec.AccessToken, rec.RefreshToken, onDisk.AccessToken, onDisk.RefreshToken} {
		if got := redactor.Redact("x " + v + " y"); got != "x [secret:oauth:github] y" {
			t.Errorf("the redactor does not know a token: %q", got)
		}
	}
}

func TestAnExpiredTokenRefusedIsRefreshedAndTheCallGoesThrough(t *testing.T) {
	w := newWorld(t, time.Hour)
	w.login(t, LoginOptions{})
	cs := w.session(t, w.source(t, SourceOptions{}))
	if err := echo(t.Context(), cs); err != nil {
		t.Fatal(err)
	}
	w.as.ExpireAll() // the server says so before the kernel's clock does
	if err := echo(t.Context(), cs); err != nil {
		t.Fatalf("echo after expiry: %v", err)
	}
	if n, _ := w.as.Refreshes(); n != 1 {
		t.Errorf("%d refreshes, want 1", n)
	}
}

func TestARevokedRefreshTokenIsAuthRequiredAndNotTriedAgain(t *testing.T) {
	w := newWorld(t, time.Hour)
	rec, _ := w.login(t, LoginOptions{})
	src := w.source(t, SourceOptions{})
	cs := w.session(t, src)
	w.as.ExpireAll()
	w.as.RevokeRefreshTokens()
	err := echo(t.Context(), cs)
	var ar *AuthRequiredError
	if !errors.Is(err, webclient.ErrAuthRequired) || !errors.As(err, &ar) {
		t.Fatalf("err = %v, want auth required", err)
	}
	// The authorization server echoes the refresh token in its error's
	// description; no text of ours carries it.
	if msg := err.Error(); strings.Contains(msg, rec.RefreshToken) || strings.Contains(msg, rec.AccessToken) {
		t.Errorf("the error shows a token: %v", msg)
	}
	if !strings.Contains(ar.Error(), "run: sharedos-mcp kernel login github") {
		t.Errorf("the error does not say what to do: %v", ar)
	}
	for range 3 {
		if err := echo(t.Context(), cs); !errors.Is(err, webclient.ErrAuthRequired) {
			t.Fatalf("a later call: %v", err)
		}
	}
	if n, _ := w.as.Refreshes(); n != 1 {
		t.Errorf("%d refreshes, want 1: a refused refresh token is not tried again", n)
	}
	if st := src.Status(); st.LoggedIn || st.AuthRequired == "" {
		t.Errorf("status = %+v", st)
	}
	// A new login is picked up without a restart.
	w.login(t, LoginOptions{})
	if err := echo(t.Context(), cs); err != nil {
		t.Errorf("echo after logging in again: %v", err)
	}
}

func TestA401StormIsOneRefreshThenAuthRequired(t *testing.T) {
	w := newWorld(t, time.Hour)
	w.login(t, LoginOptions{})
	src := w.source(t, SourceOptions{})
	cs := w.session(t, src)
	w.mcp.RefuseAll(true)
	start := w.mcp.Statuses(http.StatusUnauthorized) // the login's challenge
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := echo(t.Context(), cs); !errors.Is(err, webclient.ErrAuthRequired) {
				t.Errorf("err = %v, want auth required", err)
			}
		})
	}
	wg.Wait()
	// Each call was sent at most twice: once more after the refresh,
	// unless it went out with the refreshed token already.
	if got := w.mcp.Statuses(http.StatusUnauthorized) - start; got < 8 || got > 16 {
		t.Errorf("%d requests refused for 8 calls, want 8 to 16: %q", got, w.mcp.Requests())
	}
	before := w.mcp.Statuses(http.StatusUnauthorized)
	for range 3 {
		if err := echo(t.Context(), cs); !errors.Is(err, webclient.ErrAuthRequired) {
			t.Errorf("a later call: %v", err)
		}
	}
	// The first of them may still send the refreshed token, once; then
	// the source knows a person has to log in and sends nothing.
	if got := w.mcp.Statuses(http.StatusUnauthorized) - before; got > 1 {
		t.Errorf("3 later calls made %d requests, want at most 1", got)
	}
	if n, _ := w.as.Refreshes(); n != 1 {
		t.Errorf("%d refreshes, want exactly 1", n)
	}
}

func TestLogoutForgetsTheTokens(t *testing.T) {
	w := newWorld(t, time.Hour)
	w.login(t, LoginOptions{})
	src := w.source(t, SourceOptions{})
	if _, err := src.Token(t.Context()); err != nil {
		t.Fatal(err)
	}
	if had, err := Logout(w.store, "github"); !had || err != nil {
		t.Fatalf("Logout = %v, %v", had, err)
	}
	if _, err := src.Token(t.Context()); !errors.Is(err, ErrNotLoggedIn) || !errors.Is(err, webclient.ErrAuthRequired) {
		t.Errorf("Token after logout: %v", err)
	}
	if had, err := Logout(w.store, "github"); had || err != nil {
		t.Errorf("a second Logout = %v, %v", had, err)
	}
}

func TestLoginToAServerThatAsksForNothing(t *testing.T) {
	ca := testoauth.NewCA(t)
	srv := testoauth.NewMCPServer(t, testoauth.MCPOptions{CA: ca})
	c, err := webclient.New(webclient.Options{CAFile: ca.WriteFile(t)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Login(t.Context(), LoginOptions{Upstream: "open", URL: srv.URL, HTTPClient: c, Store: NewStore(t.TempDir()), Out: io.Discard})
	if !errors.Is(err, ErrNoAuthNeeded) {
		t.Errorf("err = %v, want ErrNoAuthNeeded", err)
	}
}

func TestTheStoreRefusesWhatOthersCouldRead(t *testing.T) {
	dir := t.TempDir()
	s := NewStore(dir)
	rec := &Record{Upstream: "github", AccessToken: "access-0123456789", RefreshToken: "refresh-0123456789", TokenURL: "https://as/token"}
	if _, err := s.Save(rec, nil); err != nil {
		t.Fatal(err)
	}
	if got, _, err := s.Load("github"); err != nil || got.AccessToken != rec.AccessToken {
		t.Fatalf("Load = %+v, %v", got, err)
	}
	p := s.Path("github")
	tests := []struct {
		name  string
		setup func()
		fix   string
		want  error
	}{
		{name: "a file others can read", setup: func() { os.Chmod(p, 0o644) }, fix: "chmod 600 " + p, want: ErrLoosePermissions},
		{name: "a file its group can write", setup: func() { os.Chmod(p, 0o620) }, fix: "chmod 600 " + p, want: ErrLoosePermissions},
		{name: "a directory others can enter", setup: func() { os.Chmod(filepath.Dir(p), 0o755) }, fix: "chmod 700 " + filepath.Dir(p), want: ErrLoosePermissions},
		{name: "another uid's", setup: func() { s.uid = os.Getuid() + 1 }, want: ErrNotOwned},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os.Chmod(p, 0o600)
			os.Chmod(filepath.Dir(p), 0o700)
			s.uid = os.Getuid()
			tt.setup()
			_, _, err := s.Load("github")
			var pe *PermissionError
			if !errors.Is(err, tt.want) || !errors.As(err, &pe) || pe.Fix != tt.fix {
				t.Fatalf("err = %v, want %v with fix %q", err, tt.want, tt.fix)
			}
			if strings.Contains(err.Error(), "0123456789") {
				t.Errorf("the error shows a token: %v", err)
			}
		})
	}
	if _, _, err := s.Load("../x"); !errors.Is(err, ErrBadUpstreamName) {
		t.Errorf("a name with a path in it: %v", err)
	}
}

func TestACorruptTokenFileIsNotQuoted(t *testing.T) {
	s := NewStore(t.TempDir())
	if _, err := s.Save(&Record{Upstream: "github", AccessToken: "access-0123456789"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.Path("github"), []byte(`{"version":1,"access_token":12,"x":"access-0123456789"`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := s.Load("github")
	if err == nil || strings.Contains(err.Error(), "0123456789") {
		t.Errorf("err = %v", err)
	}
}
