package oauth

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// LoginOptions configure a Login.
type LoginOptions struct {
	Upstream string
	// URL is the upstream's MCP endpoint.
	URL string
	// ClientID is the configured client_id; "" registers a client with
	// the authorization server (RFC 7591) at each login.
	ClientID string
	// ClientSecret goes with a configured ClientID, expanded; optional.
	ClientSecret string
	// Scopes to ask for; none asks for what the server's challenge or
	// metadata names.
	Scopes []string
	// HTTPClient reaches the MCP server and the authorization server: a
	// webclient without an origin, with the upstream's ca_file.
	HTTPClient *http.Client
	Store      *Store
	// Out is told the URL to open.
	Out io.Writer
	// OpenBrowser opens a URL in the user's browser; nil tries xdg-open
	// (open on macOS) when it is on PATH. Its failure is not the login's:
	// the URL was printed.
	OpenBrowser func(url string) error
	// Now is time.Now when nil.
	Now func() time.Time
}

// Errors of Login.
var (
	ErrNoAuthNeeded = errors.New("the server did not ask for authorization")
	ErrDenied       = errors.New("the authorization was refused")
)

// callbackPath is the redirect URI's path on the loopback listener.
const callbackPath = "/callback"

// Login runs the authorization code flow with PKCE for one upstream: it
// asks the MCP server for a request without a token, follows its 401 to
// its protected resource metadata (RFC 9728) and authorization server
// (RFC 8414), registers a client there when no ClientID is configured
// (RFC 7591), prints the URL to open and opens a browser if there is one,
// receives the code on a loopback redirect, exchanges it, and stores the
// tokens. It returns the record stored. The flow itself is the Go SDK's
// auth.AuthorizationCodeHandler; Login gives it its loopback listener and
// keeps what it obtains.
func Login(ctx context.Context, opts LoginOptions) (*Record, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the authorization's redirect: %w", err)
	}
	cb := newCallback(ln)
	defer cb.close()
	redirect := "http://" + ln.Addr().String() + callbackPath

	req, resp, err := challenge(ctx, opts.HTTPClient, opts.URL)
	if err != nil {
		return nil, err
	}

	var mu sync.Mutex
	var cfg *oauth2.Config
	var tok *oauth2.Token
	var resource string
	hcfg := &auth.AuthorizationCodeHandlerConfig{
		RedirectURL:         redirect,
		Client:              opts.HTTPClient,
		RequestRefreshToken: true,
		AuthorizationCodeFetcher: func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			if u, err := url.Parse(args.URL); err == nil {
				mu.Lock()
				resource = u.Query().Get("resource")
				mu.Unlock()
			}
			fmt.Fprintf(opts.Out, "to authorize sharedos-mcp for upstream %s, open this URL in a browser:\n  %s\n", opts.Upstream, args.URL)
			open := opts.OpenBrowser
			if open == nil {
				open = openBrowser
			}
			_ = open(args.URL)
			return cb.wait(ctx)
		},
		NewTokenSource: func(_ context.Context, c *oauth2.Config, t *oauth2.Token) (oauth2.TokenSource, error) {
			mu.Lock()
			cfg, tok = c, t
			mu.Unlock()
			return oauth2.StaticTokenSource(t), nil
		},
	}
	if len(opts.Scopes) > 0 {
		hcfg.ScopeFilter = func([]string) []string { return slices.Clone(opts.Scopes) }
	}
	if opts.ClientID != "" {
		pre := &oauthex.ClientCredentials{ClientID: opts.ClientID}
		if opts.ClientSecret != "" {
			pre.ClientSecretAuth = &oauthex.ClientSecretAuth{ClientSecret: opts.ClientSecret}
		}
		hcfg.PreregisteredClient = pre
	} else {
		hcfg.DynamicClientRegistrationConfig = &auth.DynamicClientRegistrationConfig{
			Metadata: &oauthex.ClientRegistrationMetadata{
				RedirectURIs:            []string{redirect},
				ClientName:              "sharedos-mcp",
				GrantTypes:              []string{"authorization_code", "refresh_token"},
				ResponseTypes:           []string{"code"},
				TokenEndpointAuthMethod: "none",
			},
		}
	}
	h, err := auth.NewAuthorizationCodeHandler(hcfg)
	if err != nil {
		return nil, fmt.Errorf("log in to upstream %s: %w", opts.Upstream, err)
	}
	if err := h.Authorize(ctx, req, resp); err != nil {
		return nil, fmt.Errorf("log in to upstream %s: %w", opts.Upstream, loginError(err))
	}
	mu.Lock()
	defer mu.Unlock()
	if cfg == nil || tok == nil || tok.AccessToken == "" {
		return nil, fmt.Errorf("log in to upstream %s: the authorization server gave no access token", opts.Upstream)
	}
	rec := &Record{
		Upstream: opts.Upstream, Resource: resource, TokenURL: cfg.Endpoint.TokenURL, ClientID: cfg.ClientID,
		AuthMethod: authMethod(cfg), Scopes: cfg.Scopes, AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken,
		Expiry: tok.Expiry.UTC(), Obtained: opts.Now().UTC(),
	}
	if tok.Expiry.IsZero() {
		rec.Expiry = time.Time{}
	}
	if opts.ClientID == "" {
		rec.ClientSecret = cfg.ClientSecret // from the registration
	}
	if _, err := opts.Store.Save(rec, nil); err != nil {
		return nil, fmt.Errorf("log in to upstream %s: store the tokens: %w", opts.Upstream, err)
	}
	return rec, nil
}

// Logout forgets upstream's tokens; it reports whether there were any. A
// running kernel's Source finds them gone at its next token.
func Logout(store *Store, upstream string) (bool, error) {
	return store.Delete(upstream)
}

// challenge sends the MCP server an initialize without a token and
// returns the request and its answer, a 401 whose WWW-Authenticate leads
// to the server's metadata.
func challenge(ctx context.Context, c *http.Client, endpoint string) (*http.Request, *http.Response, error) {
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"sharedos-mcp","version":"login"}}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(body))
	if err != nil {
		return nil, nil, errors.New("the upstream's url is not a URL")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := c.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its text holds the whole URL
		}
		return nil, nil, fmt.Errorf("reach the upstream: %w", err)
	}
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		resp.Body.Close()
		if resp.StatusCode/100 == 2 {
			return nil, nil, ErrNoAuthNeeded
		}
		return nil, nil, fmt.Errorf("the upstream answered %s, not 401 with where to authorize", resp.Status)
	}
	return req, resp, nil
}

// loginError keeps what the SDK's error says but not a token endpoint's
// answer, which oauth2.RetrieveError quotes whole.
func loginError(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		code := re.ErrorCode
		if !isErrorCode(code) {
			code = "no error code"
		}
		status := ""
		if re.Response != nil {
			status = re.Response.Status
		}
		return fmt.Errorf("the authorization server refused the code: %s (%s)", status, code)
	}
	return err
}

func authMethod(c *oauth2.Config) string {
	switch {
	case c.ClientSecret == "":
		return "none"
	case c.Endpoint.AuthStyle == oauth2.AuthStyleInParams:
		return "client_secret_post"
	}
	return "client_secret_basic"
}

// callback receives the authorization's redirect on the loopback
// listener: one result, then nothing.
type callback struct {
	srv    *http.Server
	result chan *auth.AuthorizationResult
	failed chan error
	once   sync.Once
}

func newCallback(ln net.Listener) *callback {
	cb := &callback{result: make(chan *auth.AuthorizationResult, 1), failed: make(chan error, 1)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+callbackPath, cb.serve)
	cb.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go cb.srv.Serve(ln)
	return cb
}

func (cb *callback) serve(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if e := q.Get("error"); e != "" {
		code := e
		if !isErrorCode(code) {
			code = "no error code"
		}
		fmt.Fprintf(w, "<p>sharedos-mcp: the authorization was refused (%s). You can close this tab.</p>", html.EscapeString(code))
		cb.once.Do(func() { cb.failed <- fmt.Errorf("%w (%s)", ErrDenied, code) })
		return
	}
	if q.Get("code") == "" {
		http.Error(w, "no code", http.StatusBadRequest)
		return
	}
	fmt.Fprint(w, "<p>sharedos-mcp: authorized. You can close this tab.</p>")
	cb.once.Do(func() {
		cb.result <- &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}
	})
}

func (cb *callback) wait(ctx context.Context) (*auth.AuthorizationResult, error) {
	select {
	case r := <-cb.result:
		return r, nil
	case err := <-cb.failed:
		return nil, err
	case <-ctx.Done():
		return nil, fmt.Errorf("no authorization came back: %w", ctx.Err())
	}
}

func (cb *callback) close() { _ = cb.srv.Close() }

// openBrowser opens u with the browser $BROWSER names (the first of its
// colon-separated commands; "%s" in it stands for the URL, else the URL
// is its argument), else the desktop's opener when there is one. It does
// not wait for the browser.
func openBrowser(u string) error {
	opener, args := "xdg-open", []string{u}
	if runtime.GOOS == "darwin" {
		opener = "open"
	}
	if b, _, _ := strings.Cut(os.Getenv("BROWSER"), ":"); strings.TrimSpace(b) != "" {
		fields := strings.Fields(b)
		opener, args = fields[0], nil
		for _, f := range fields[1:] {
			args = append(args, strings.ReplaceAll(f, "%s", u))
		}
		if !strings.Contains(b, "%s") {
			args = append(args, u)
		}
	}
	path, err := exec.LookPath(opener)
	if err != nil {
		return err
	}
	cmd := exec.Command(path, args...)
	if err := cmd.Start(); err != nil {
		return err
	}
	go cmd.Wait() // reap it
	return nil
}
