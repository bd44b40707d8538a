package testoauth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

// AuthServer is an OAuth 2.1 authorization server on loopback TLS: RFC
// 8414 metadata, dynamic client registration (RFC 7591), the
// authorization code flow with PKCE (S256 only), which it approves
// without asking anyone, and refresh tokens, rotated at each refresh. It
// binds every token to the resource (RFC 8707) it was asked for, and
// refuses a refresh that names another one.
type AuthServer struct {
	// Issuer is its base URL, the issuer of its metadata.
	Issuer string

	mu        sync.Mutex
	lifetime  time.Duration
	clients   map[string]*client
	codes     map[string]*grant
	access    map[string]*token
	refresh   map[string]*grant
	refreshes int
	resources []string // the resource parameter of each refresh, in order
	registers int
	now       func() time.Time
}

type client struct {
	secret       string
	redirectURIs []string
}

// grant is what an authorization code or a refresh token stands for.
type grant struct {
	client, resource, scope string
	redirectURI, challenge  string // codes only
	revoked                 bool   // refresh tokens only
}

type token struct {
	resource, scope string
	expiry          time.Time
}

// NewAuthServer starts an authorization server over TLS with a
// certificate of ca, issuing access tokens that live lifetime.
func NewAuthServer(t testing.TB, ca *CA, lifetime time.Duration) *AuthServer {
	t.Helper()
	as := &AuthServer{
		lifetime: lifetime, clients: map[string]*client{}, codes: map[string]*grant{},
		access: map[string]*token{}, refresh: map[string]*grant{}, now: time.Now,
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", as.metadata)
	mux.HandleFunc("POST /register", as.register)
	mux.HandleFunc("GET /authorize", as.authorize)
	mux.HandleFunc("POST /token", as.token)
	as.Issuer = Serve(t, ca, mux)
	return as
}

// Register registers a client ahead of time, as an operator would (for a
// configured client_id), with a redirect URI; a loopback one matches
// whatever port the client listens on (RFC 8252 §7.3).
func (as *AuthServer) Register(clientID, secret, redirectURI string) {
	as.mu.Lock()
	defer as.mu.Unlock()
	as.clients[clientID] = &client{secret: secret, redirectURIs: []string{redirectURI}}
}

// ExpireAll makes every access token issued so far expired.
func (as *AuthServer) ExpireAll() {
	as.mu.Lock()
	defer as.mu.Unlock()
	for _, tok := range as.access {
		tok.expiry = as.now().Add(-time.Second)
	}
}

// RevokeRefreshTokens revokes every refresh token issued so far.
func (as *AuthServer) RevokeRefreshTokens() {
	as.mu.Lock()
	defer as.mu.Unlock()
	for _, g := range as.refresh {
		g.revoked = true
	}
}

// Refreshes is how many refresh grants it was asked for, granted or not,
// and the resource parameter of each.
func (as *AuthServer) Refreshes() (int, []string) {
	as.mu.Lock()
	defer as.mu.Unlock()
	return as.refreshes, slices.Clone(as.resources)
}

// Registrations is how many clients registered themselves.
func (as *AuthServer) Registrations() int {
	as.mu.Lock()
	defer as.mu.Unlock()
	return as.registers
}

// Verify is the resource server's check of a bearer token for resource:
// an auth.TokenVerifier's core.
func (as *AuthServer) Verify(tok, resource string) (*auth.TokenInfo, error) {
	as.mu.Lock()
	defer as.mu.Unlock()
	t := as.access[tok]
	switch {
	case t == nil:
		return nil, fmt.Errorf("%w: unknown token", auth.ErrInvalidToken)
	case t.resource != resource:
		return nil, fmt.Errorf("%w: the token is for another resource", auth.ErrInvalidToken)
	case !as.now().Before(t.expiry):
		return nil, fmt.Errorf("%w: expired", auth.ErrInvalidToken)
	}
	return &auth.TokenInfo{Scopes: strings.Fields(t.scope), Expiration: t.expiry}, nil
}

func (as *AuthServer) metadata(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                         as.Issuer,
		"authorization_endpoint":                         as.Issuer + "/authorize",
		"token_endpoint":                                 as.Issuer + "/token",
		"registration_endpoint":                          as.Issuer + "/register",
		"response_types_supported":                       []string{"code"},
		"grant_types_supported":                          []string{"authorization_code", "refresh_token"},
		"code_challenge_methods_supported":               []string{"S256"},
		"token_endpoint_auth_methods_supported":          []string{"client_secret_basic", "client_secret_post", "none"},
		"scopes_supported":                               []string{"mcp", "offline_access"},
		"authorization_response_iss_parameter_supported": true,
	})
}

func (as *AuthServer) register(w http.ResponseWriter, r *http.Request) {
	var md struct {
		RedirectURIs []string `json:"redirect_uris"`
		AuthMethod   string   `json:"token_endpoint_auth_method"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&md); err != nil || len(md.RedirectURIs) == 0 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_client_metadata"})
		return
	}
	id := "client-" + randomText()
	c := &client{redirectURIs: md.RedirectURIs}
	resp := map[string]any{"client_id": id, "redirect_uris": md.RedirectURIs, "token_endpoint_auth_method": "none"}
	if md.AuthMethod != "none" {
		c.secret = "client-secret-" + randomText()
		resp["client_secret"] = c.secret
		resp["token_endpoint_auth_method"] = "client_secret_basic"
	}
	as.mu.Lock()
	as.clients[id] = c
	as.registers++
	as.mu.Unlock()
	writeJSON(w, http.StatusCreated, resp)
}

// authorize approves at once: it redirects to the client's redirect URI
// with a code (or an error, for a request it cannot accept).
func (as *AuthServer) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	as.mu.Lock()
	c := as.clients[q.Get("client_id")]
	as.mu.Unlock()
	redirect := q.Get("redirect_uri")
	if c == nil || !redirectAllowed(c.redirectURIs, redirect) {
		http.Error(w, "unknown client or redirect_uri", http.StatusBadRequest)
		return
	}
	back, err := url.Parse(redirect)
	if err != nil {
		http.Error(w, "bad redirect_uri", http.StatusBadRequest)
		return
	}
	params := url.Values{"state": {q.Get("state")}, "iss": {as.Issuer}}
	switch {
	case q.Get("response_type") != "code":
		params.Set("error", "unsupported_response_type")
	case q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "":
		params.Set("error", "invalid_request")
	case q.Get("resource") == "":
		params.Set("error", "invalid_target")
	default:
		code := "code-" + randomText()
		as.mu.Lock()
		as.codes[code] = &grant{
			client: q.Get("client_id"), resource: q.Get("resource"), scope: q.Get("scope"),
			redirectURI: redirect, challenge: q.Get("code_challenge"),
		}
		as.mu.Unlock()
		params.Set("code", code)
	}
	back.RawQuery = params.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

// redirectAllowed matches a redirect URI against the registered ones; a
// loopback one matches on any port.
func redirectAllowed(registered []string, uri string) bool {
	u, err := url.Parse(uri)
	if err != nil {
		return false
	}
	for _, reg := range registered {
		if reg == uri {
			return true
		}
		ru, err := url.Parse(reg)
		if err == nil && ru.Scheme == "http" && ru.Hostname() == "127.0.0.1" && u.Scheme == "http" &&
			u.Hostname() == "127.0.0.1" && ru.Path == u.Path {
			return true
		}
	}
	return false
}

func (as *AuthServer) token(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request"})
		return
	}
	clientID, err := as.authenticate(r)
	if err != nil {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
		return
	}
	as.mu.Lock()
	defer as.mu.Unlock()
	var g *grant
	switch r.PostForm.Get("grant_type") {
	case "authorization_code":
		code := r.PostForm.Get("code")
		g = as.codes[code]
		delete(as.codes, code) // a code is used once
		if g == nil || g.client != clientID || g.redirectURI != r.PostForm.Get("redirect_uri") || !pkceMatches(g.challenge, r.PostForm.Get("code_verifier")) {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant"})
			return
		}
		if res := r.PostForm.Get("resource"); res != "" && res != g.resource {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_target"})
			return
		}
	case "refresh_token":
		old, res := r.PostForm.Get("refresh_token"), r.PostForm.Get("resource")
		as.refreshes++
		as.resources = append(as.resources, res)
		g = as.refresh[old]
		if g == nil || g.revoked || g.client != clientID {
			// The description echoes the token, as careless servers do:
			// the kernel must never show it.
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant", "error_description": "the refresh token " + old + " is not valid"})
			return
		}
		if res != "" && res != g.resource {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_target"})
			return
		}
		delete(as.refresh, old) // rotated: the old one is spent
	default:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type"})
		return
	}
	access, refresh := "access-"+randomText(), "refresh-"+randomText()
	as.access[access] = &token{resource: g.resource, scope: g.scope, expiry: as.now().Add(as.lifetime)}
	as.refresh[refresh] = &grant{client: g.client, resource: g.resource, scope: g.scope}
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token": access, "token_type": "Bearer", "expires_in": int(as.lifetime / time.Second),
		"refresh_token": refresh, "scope": g.scope,
	})
}

// authenticate returns the client a token request is from: HTTP Basic,
// or client_id (and client_secret) in the form; a client registered with
// a secret must give it.
func (as *AuthServer) authenticate(r *http.Request) (string, error) {
	id, secret, basic := r.BasicAuth()
	if basic {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	as.mu.Lock()
	c := as.clients[id]
	as.mu.Unlock()
	if c == nil || c.secret != secret {
		return "", errors.New("invalid client")
	}
	return id, nil
}

func pkceMatches(challenge, verifier string) bool {
	sum := sha256.Sum256([]byte(verifier))
	return verifier != "" && base64.RawURLEncoding.EncodeToString(sum[:]) == challenge
}

func randomText() string { return rand.Text() }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
