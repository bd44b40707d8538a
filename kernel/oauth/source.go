package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sharedos/sharedos-mcp/kernel/secret"
	"github.com/sharedos/sharedos-mcp/kernel/webclient"
)

// Defaults of a Source.
const (
	// DefaultRefreshBefore is how long before its expiry a token is
	// refreshed, so a call does not leave with a token that expires on
	// its way.
	DefaultRefreshBefore = time.Minute
	// refreshTimeout bounds one refresh, whoever waits for it.
	refreshTimeout = 30 * time.Second
	// retryAfter is the least time between two refreshes that failed for
	// a passing reason (the authorization server down): callers meanwhile
	// get the failure, not a new attempt each.
	retryAfter = 5 * time.Second
	// maxTokenResponse bounds a token endpoint's answer.
	maxTokenResponse = 64 << 10
)

// AuthRequiredError is an upstream whose tokens cannot be used or renewed
// without a person: not logged in, the refresh token refused, or a freshly
// refreshed token refused by the server. It wraps webclient.ErrAuthRequired
// (the kernel answers upstream_auth_required) and, where there is one, the
// cause.
type AuthRequiredError struct {
	Upstream string
	Reason   string
	Err      error // ErrNotLoggedIn, or nil
}

func (e *AuthRequiredError) Error() string {
	return fmt.Sprintf("upstream %s: %s; run: sharedos-mcp kernel login %s", e.Upstream, e.Reason, e.Upstream)
}

func (e *AuthRequiredError) Unwrap() []error {
	if e.Err != nil {
		return []error{webclient.ErrAuthRequired, e.Err}
	}
	return []error{webclient.ErrAuthRequired}
}

// SourceOptions configure a Source.
type SourceOptions struct {
	Store    *Store
	Upstream string
	// HTTPClient reaches the token endpoint: a webclient without an
	// origin, with the upstream's ca_file.
	HTTPClient *http.Client
	// ClientSecret is the configured client_secret (expanded), used when
	// the record holds none.
	ClientSecret string
	// Redactor is given every token the Source holds; nil gives none.
	Redactor *secret.Redactor
	// RefreshBefore is DefaultRefreshBefore when 0.
	RefreshBefore time.Duration
	// Now is time.Now when nil.
	Now func() time.Time
}

// Source is the token source of one upstream (a webclient.TokenSource):
// the record of the Store, reread when a login replaced it. Safe for
// concurrent use; at most one refresh runs at a time, and callers that
// need one while it runs wait for it.
type Source struct {
	opts SourceOptions

	mu       sync.Mutex
	rec      *Record
	info     fs.FileInfo // of the file rec came from
	loadErr  error       // why there is no record
	required *AuthRequiredError
	// refusedOnce is the token a refresh obtained because the server
	// refused the one before: if the server refuses it too, a person has
	// to log in.
	refusedOnce string
	flight      *flight
	failedAt    time.Time // the last refresh that failed for a passing reason
	failure     error
}

type flight struct {
	done  chan struct{}
	token string
	err   error
}

// NewSource returns the Source of opts.Upstream. It reads nothing yet.
func NewSource(opts SourceOptions) *Source {
	if opts.RefreshBefore <= 0 {
		opts.RefreshBefore = DefaultRefreshBefore
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Source{opts: opts}
}

// Token returns the access token to send, refreshed first when it expires
// within RefreshBefore. When that refresh fails for a passing reason and
// the token has not expired yet, the token is returned anyway.
func (s *Source) Token(ctx context.Context) (string, error) {
	s.mu.Lock()
	s.reload()
	if err := s.unusable(); err != nil {
		s.mu.Unlock()
		return "", err
	}
	rec := s.rec
	s.mu.Unlock()
	if rec.Expiry.IsZero() || s.opts.Now().Add(s.opts.RefreshBefore).Before(rec.Expiry) {
		return rec.AccessToken, nil
	}
	tok, err := s.refresh(ctx, rec.AccessToken)
	if err != nil && !errors.Is(err, webclient.ErrAuthRequired) && s.opts.Now().Before(rec.Expiry) {
		return rec.AccessToken, nil
	}
	return tok, err
}

// Refresh is called when the server refused the token refused. A token
// newer than refused is returned as it is; otherwise the token is
// refreshed, once: if the server refuses the refreshed token too, the
// Source is auth-required until a new login.
func (s *Source) Refresh(ctx context.Context, refused string) (string, error) {
	s.mu.Lock()
	s.reload()
	if err := s.unusable(); err != nil {
		s.mu.Unlock()
		return "", err
	}
	switch {
	case s.rec.AccessToken != refused:
		tok := s.rec.AccessToken
		s.mu.Unlock()
		return tok, nil
	case refused == s.refusedOnce:
		s.required = &AuthRequiredError{Upstream: s.opts.Upstream, Reason: "the server refused a freshly refreshed token"}
		s.mu.Unlock()
		return "", s.required
	}
	s.mu.Unlock()
	tok, err := s.refresh(ctx, refused)
	if err == nil {
		s.mu.Lock()
		s.refusedOnce = tok
		s.mu.Unlock()
	}
	return tok, err
}

// Status is what doctor shows of a Source: whether it can give a token and
// until when, never the tokens.
type Status struct {
	LoggedIn   bool
	Expiry     time.Time // zero: unknown
	CanRefresh bool
	// AuthRequired says why a person has to log in, or is "".
	AuthRequired string
}

// Status returns the Source's status as of now.
func (s *Source) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reload()
	if err := s.unusable(); err != nil {
		var ar *AuthRequiredError
		if errors.As(err, &ar) {
			return Status{AuthRequired: ar.Reason}
		}
		return Status{AuthRequired: err.Error()}
	}
	return Status{LoggedIn: true, Expiry: s.rec.Expiry, CanRefresh: s.rec.RefreshToken != ""}
}

// reload rereads the record when its file is not the one last read (a
// login replaced it, or Logout removed it); a new record clears an
// auth-required state. s.mu is held.
func (s *Source) reload() {
	fi, err := s.opts.Store.Stat(s.opts.Upstream)
	if err == nil && s.info != nil && fi != nil && os.SameFile(s.info, fi) && fi.ModTime().Equal(s.info.ModTime()) && fi.Size() == s.info.Size() {
		return
	}
	if err == nil && fi == nil && s.info == nil && s.loadErr != nil {
		return // still none
	}
	rec, info, err := s.opts.Store.Load(s.opts.Upstream)
	s.rec, s.info, s.loadErr = rec, info, err
	s.required, s.refusedOnce, s.failure, s.failedAt = nil, "", nil, time.Time{}
	if rec != nil {
		s.opts.Redactor.Add("oauth:"+s.opts.Upstream, rec.AccessToken)
		s.opts.Redactor.Add("oauth:"+s.opts.Upstream, rec.RefreshToken)
	}
}

// unusable says why no token can be given now. s.mu is held.
func (s *Source) unusable() error {
	switch {
	case s.required != nil:
		return s.required
	case errors.Is(s.loadErr, ErrNotLoggedIn):
		return &AuthRequiredError{Upstream: s.opts.Upstream, Reason: "it has not been logged in to", Err: ErrNotLoggedIn}
	case s.loadErr != nil:
		return fmt.Errorf("upstream %s tokens: %w", s.opts.Upstream, s.loadErr)
	}
	return nil
}

// refresh renews the tokens that hold stale, or joins the renewal under
// way. The renewal runs on its own deadline: a caller that gives up does
// not cancel it for the others.
func (s *Source) refresh(ctx context.Context, stale string) (string, error) {
	s.mu.Lock()
	if err := s.unusable(); err != nil {
		s.mu.Unlock()
		return "", err
	}
	if s.rec.AccessToken != stale {
		tok := s.rec.AccessToken
		s.mu.Unlock()
		return tok, nil
	}
	if s.failure != nil && s.opts.Now().Sub(s.failedAt) < retryAfter {
		err := s.failure
		s.mu.Unlock()
		return "", err
	}
	f := s.flight
	if f == nil {
		f = &flight{done: make(chan struct{})}
		s.flight = f
		go s.run(f, *s.rec)
	}
	s.mu.Unlock()
	select {
	case <-f.done:
		return f.token, f.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// run is one refresh.
func (s *Source) run(f *flight, rec Record) {
	ctx, cancel := context.WithTimeout(context.Background(), refreshTimeout)
	defer cancel()
	fresh, err := s.exchange(ctx, &rec)
	s.mu.Lock()
	defer func() {
		s.flight = nil
		s.mu.Unlock()
		close(f.done)
	}()
	var ar *AuthRequiredError
	switch {
	case errors.As(err, &ar):
		s.required, f.err = ar, ar
		return
	case err != nil:
		s.failure, s.failedAt = err, s.opts.Now()
		f.err = err
		return
	}
	s.opts.Redactor.Add("oauth:"+s.opts.Upstream, fresh.AccessToken)
	s.opts.Redactor.Add("oauth:"+s.opts.Upstream, fresh.RefreshToken)
	// Keep the refreshed tokens unless a login replaced the record
	// meanwhile: a rotated refresh token lost here would be lost for good.
	written, serr := s.opts.Store.Save(fresh, func(onDisk *Record) bool {
		return onDisk != nil && onDisk.RefreshToken == rec.RefreshToken
	})
	switch {
	case serr != nil:
		// The refreshed tokens are used, but a kernel started later
		// would hold the spent refresh token.
		s.rec, s.failure = fresh, nil
		f.token, f.err = fresh.AccessToken, nil
	case written:
		s.rec, s.failure = fresh, nil
		s.info, _ = s.opts.Store.Stat(s.opts.Upstream)
		f.token = fresh.AccessToken
	default:
		// A login replaced the record: take that one.
		s.info = nil
		s.reload()
		if err := s.unusable(); err != nil {
			f.err = err
		} else {
			f.token = s.rec.AccessToken
		}
	}
}

// tokenResponse is a token endpoint's answer (RFC 6749 §5.1, §5.2).
type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	RefreshToken string `json:"refresh_token"`
	Scope        string `json:"scope"`
	Error        string `json:"error"`
}

// isErrorCode reports whether s is an error code worth showing: RFC 6749
// §5.2 allows printable ASCII without quote and backslash; shown here are
// only 1 to 64 lowercase letters and '_'.
func isErrorCode(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 'a' || c > 'z') && c != '_' {
			return false
		}
	}
	return true
}

// exchange asks the token endpoint for new tokens with rec's refresh
// token and resource. Its errors name the status and the error code, never
// the answer's text, which may echo what was sent.
func (s *Source) exchange(ctx context.Context, rec *Record) (*Record, error) {
	up := s.opts.Upstream
	if rec.RefreshToken == "" {
		return nil, &AuthRequiredError{Upstream: up, Reason: "its access token expired and the authorization server gave no refresh token"}
	}
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rec.RefreshToken}}
	if rec.Resource != "" {
		form.Set("resource", rec.Resource)
	}
	clientSecret := rec.ClientSecret
	if clientSecret == "" {
		clientSecret = s.opts.ClientSecret
	}
	basic := clientSecret != "" && rec.AuthMethod != "client_secret_post"
	if !basic {
		form.Set("client_id", rec.ClientID)
		if clientSecret != "" {
			form.Set("client_secret", clientSecret)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rec.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("refresh the token of upstream %s: the token endpoint is not a URL", up)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if basic {
		req.SetBasicAuth(url.QueryEscape(rec.ClientID), url.QueryEscape(clientSecret))
	}
	resp, err := s.opts.HTTPClient.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its text holds the whole URL
		}
		return nil, fmt.Errorf("refresh the token of upstream %s: %w", up, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenResponse+1))
	if err != nil || len(body) > maxTokenResponse {
		return nil, fmt.Errorf("refresh the token of upstream %s: the authorization server's answer (%s) could not be read whole", up, resp.Status)
	}
	var tr tokenResponse
	jsonErr := json.Unmarshal(body, &tr)
	if resp.StatusCode != http.StatusOK {
		code := "no error code"
		if jsonErr == nil && isErrorCode(tr.Error) {
			code = tr.Error
		}
		switch tr.Error {
		case "invalid_grant", "invalid_client", "unauthorized_client", "invalid_scope", "invalid_target":
			return nil, &AuthRequiredError{Upstream: up, Reason: fmt.Sprintf("the authorization server refused to refresh its token (%s)", code)}
		}
		return nil, fmt.Errorf("refresh the token of upstream %s: the authorization server answered %s (%s)", up, resp.Status, code)
	}
	switch {
	case jsonErr != nil:
		return nil, fmt.Errorf("refresh the token of upstream %s: the authorization server's answer is not a token response", up)
	case tr.AccessToken == "":
		return nil, fmt.Errorf("refresh the token of upstream %s: the authorization server's answer holds no access token", up)
	case tr.TokenType != "" && !strings.EqualFold(tr.TokenType, "bearer"):
		return nil, fmt.Errorf("refresh the token of upstream %s: the authorization server gave a token of type %q, not bearer", up, shortType(tr.TokenType))
	}
	fresh := *rec
	fresh.AccessToken, fresh.Obtained, fresh.Expiry = tr.AccessToken, s.opts.Now().UTC(), time.Time{}
	if tr.ExpiresIn > 0 {
		fresh.Expiry = fresh.Obtained.Add(time.Duration(tr.ExpiresIn) * time.Second)
	}
	if tr.RefreshToken != "" {
		fresh.RefreshToken = tr.RefreshToken // rotated
	}
	if tr.Scope != "" {
		fresh.Scopes = strings.Fields(tr.Scope)
	}
	return &fresh, nil
}

func shortType(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}
