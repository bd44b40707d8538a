package webclient

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/testoauth"
)

func TestCheckURL(t *testing.T) {
	tests := []struct {
		raw     string
		ok      bool
		wantErr error
	}{
		{raw: "https://api.githubcopilot.com/mcp/", ok: true},
		{raw: "https://example.com:8443/mcp?key=abc", ok: true},
		{raw: "http://127.0.0.1:8080/mcp", ok: true},
		{raw: "http://127.10.0.1/mcp", ok: true},
		{raw: "http://[::1]:3000/mcp", ok: true},
		{raw: "http://localhost:3000/mcp", ok: true},
		{raw: "http://LOCALHOST/mcp", ok: true},
		{raw: "http://example.com/mcp", wantErr: ErrInsecureURL},
		{raw: "http://10.0.0.1/mcp", wantErr: ErrInsecureURL},
		{raw: "http://localhost.example.com/mcp", wantErr: ErrInsecureURL},
		{raw: "http://[::ffff:10.0.0.1]/mcp", wantErr: ErrInsecureURL},
		{raw: "ws://127.0.0.1/mcp", wantErr: ErrInsecureURL},
		{raw: "file:///etc/passwd"},
		{raw: "https://user:hunter2hunter2@example.com/mcp"},
		{raw: "https:///mcp"},
		{raw: "https://example.com/mcp#frag"},
		{raw: "https://example.com/%zz?token=hunter2hunter2"},
	}
	for _, tt := range tests {
		_, err := CheckURL(tt.raw)
		if tt.ok {
			if err != nil {
				t.Errorf("CheckURL(%q) = %v", tt.raw, err)
			}
			continue
		}
		if err == nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
			t.Errorf("CheckURL(%q) = %v, want %v", tt.raw, err, tt.wantErr)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("CheckURL(%q): the error shows a credential: %v", tt.raw, err)
		}
	}
	insecure, _ := url.Parse("http://example.com/mcp?token=hunter2hunter2")
	if err := checkScheme(insecure); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("checkScheme = %v", err)
	}
}

func TestPlainHTTPToANonLoopbackHostIsRefusedBeforeAnythingIsSent(t *testing.T) {
	c, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	// 192.0.2.0/24 is for documentation: nothing answers there, so a
	// client that tried would hang until its dial timeout rather than
	// fail at once.
	for _, raw := range []string{"http://192.0.2.1/mcp?token=hunter2hunter2", "http://example.com/"} {
		_, err := c.Get(raw)
		if !errors.Is(err, ErrInsecureURL) {
			t.Errorf("GET %s: err = %v, want ErrInsecureURL", raw, err)
		}
	}
}

func TestTLSIsVerifiedAgainstTheCAFile(t *testing.T) {
	ca := testoauth.NewCA(t)
	base := testoauth.Serve(t, ca, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	tests := []struct {
		name   string
		caFile string
		ok     bool
	}{
		{name: "the server's CA in ca_file", caFile: ca.WriteFile(t), ok: true},
		{name: "another CA in ca_file", caFile: testoauth.NewCA(t).WriteFile(t)},
		{name: "the system roots only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(Options{CAFile: tt.caFile})
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.Get(base)
			if tt.ok {
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return
			}
			var unknown x509.UnknownAuthorityError
			if !errors.As(err, &unknown) {
				t.Fatalf("err = %v, want an unknown authority", err)
			}
		})
	}
	if _, err := New(Options{CAFile: "/nonexistent/ca.pem"}); err == nil {
		t.Error("a missing ca_file was accepted")
	}
	notPEM := testoauth.NewCA(t).WriteFile(t) + ".txt"
	if err := writeFile(notPEM, "not a certificate"); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{CAFile: notPEM}); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("a ca_file without a certificate: %v", err)
	}
}

func TestARedirectIsFollowedOnlyWithinTheOrigin(t *testing.T) {
	ca := testoauth.NewCA(t)
	var elsewhere atomic.Int64
	other := testoauth.Serve(t, ca, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		elsewhere.Add(1)
	}))
	mux := http.NewServeMux()
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other+"/stolen", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/mcp", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		io.WriteString(w, r.Header.Get("X-Api-Key")+" "+string(body))
	})
	base := testoauth.Serve(t, ca, mux)
	origin, _ := url.Parse(base)
	c, err := New(Options{CAFile: ca.WriteFile(t), Origin: origin, Headers: map[string]string{"X-Api-Key": "key-1234567890"}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Post(base+"/moved", "application/json", strings.NewReader(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(got) != `key-1234567890 {"a":1}` {
		t.Errorf("after a same-origin redirect: %q", got)
	}
	_, err = c.Post(base+"/away", "application/json", strings.NewReader(`{"a":1}`))
	if !errors.Is(err, ErrRedirect) {
		t.Errorf("err = %v, want ErrRedirect", err)
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the other origin got %d requests", n)
	}
}

func TestCredentialsGoOnlyToTheirOrigin(t *testing.T) {
	var seen sync.Map
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen.Store(r.Host, r.Header.Get("X-Api-Key")) })
	a := testoauth.Serve(t, nil, h)
	b := testoauth.Serve(t, nil, h)
	origin, _ := url.Parse(a)
	c, err := New(Options{Origin: origin, Headers: map[string]string{"X-Api-Key": "key-1234567890"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(b + "/mcp"); !errors.Is(err, ErrOtherOrigin) {
		t.Errorf("GET another origin: err = %v", err)
	}
	resp, err := c.Get(a + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	bu, _ := url.Parse(b)
	if _, ok := seen.Load(bu.Host); ok {
		t.Error("the other origin was reached")
	}
	if v, _ := seen.Load(origin.Host); v != "key-1234567890" {
		t.Errorf("the origin got X-Api-Key %q", v)
	}
}

func TestHeadersThatWouldInjectOrOverrideAreRefused(t *testing.T) {
	origin, _ := url.Parse("https://example.com/mcp")
	secretValue := "hunter2hunter2"
	tests := []struct {
		name    string
		headers map[string]string
		tokens  TokenSource
		wantErr error
	}{
		{name: "CR LF in a value", headers: map[string]string{"X-Key": secretValue + "\r\nX-Injected: 1"}, wantErr: ErrBadHeader},
		{name: "LF in a value", headers: map[string]string{"X-Key": secretValue + "\nX"}, wantErr: ErrBadHeader},
		{name: "NUL in a value", headers: map[string]string{"X-Key": secretValue + "\x00"}, wantErr: ErrBadHeader},
		{name: "a space in a name", headers: map[string]string{"X Key": "v"}, wantErr: ErrBadHeader},
		{name: "the session id", headers: map[string]string{"mcp-session-id": "s"}, wantErr: ErrOwnedHeader},
		{name: "the content type", headers: map[string]string{"Content-Type": "text/plain"}, wantErr: ErrOwnedHeader},
		{name: "Authorization beside a token source", headers: map[string]string{"authorization": "Bearer x"}, tokens: &fakeTokens{}, wantErr: ErrOwnedHeader},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(Options{Origin: origin, Headers: tt.headers, Tokens: tt.tokens})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), secretValue) {
				t.Errorf("the error shows the value: %v", err)
			}
		})
	}
	if _, err := New(Options{Origin: origin, Headers: map[string]string{"Authorization": "Bearer x", "X-Tab": "a\tb"}}); err != nil {
		t.Errorf("a static Authorization header and a tab: %v", err)
	}
}

// fakeTokens hands out "token-N", N counting refreshes; it reports auth
// required once it has refreshed max times.
type fakeTokens struct {
	mu        sync.Mutex
	current   string
	refreshes int
	max       int
}

func (f *fakeTokens) Token(context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.current == "" {
		f.current = "token-0"
	}
	return f.current, nil
}

func (f *fakeTokens) Refresh(_ context.Context, refused string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if refused != f.current {
		return f.current, nil
	}
	if f.refreshes >= f.max {
		return "", ErrAuthRequired
	}
	f.refreshes++
	f.current = "token-" + string(rune('0'+f.refreshes))
	return f.current, nil
}

func TestARefusedTokenIsRefreshedOnceAndTheRequestSentAgain(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	accept := ""
	srv := testoauth.Serve(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization")+" "+string(body))
		ok := accept != "" && r.Header.Get("Authorization") == "Bearer "+accept
		mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		io.WriteString(w, "ok")
	}))
	origin, _ := url.Parse(srv)
	post := func(tokens *fakeTokens) error {
		c, err := New(Options{Origin: origin, Tokens: tokens})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Post(srv+"/mcp", "application/json", strings.NewReader("body"))
		if err == nil {
			resp.Body.Close()
		}
		return err
	}

	mu.Lock()
	accept = "token-1"
	mu.Unlock()
	tokens := &fakeTokens{max: 5}
	if err := post(tokens); err != nil {
		t.Fatalf("a refresh that works: %v", err)
	}
	if tokens.refreshes != 1 || strings.Join(seen, "|") != "Bearer token-0 body|Bearer token-1 body" {
		t.Errorf("refreshes %d, requests %q", tokens.refreshes, seen)
	}

	// A server that refuses every token: one refresh, two requests, then
	// auth required; never a loop.
	mu.Lock()
	accept, seen = "", nil
	mu.Unlock()
	tokens = &fakeTokens{max: 100}
	err := post(tokens)
	if !errors.Is(err, ErrAuthRequired) {
		t.Fatalf("err = %v, want ErrAuthRequired", err)
	}
	if tokens.refreshes != 1 || len(seen) != 2 {
		t.Errorf("refreshes %d, requests %q; want one refresh and two requests", tokens.refreshes, seen)
	}
	if strings.Contains(err.Error(), "token-") {
		t.Errorf("the error shows a token: %v", err)
	}
}

func TestAStaticCredentialRefusedIsAuthRequired(t *testing.T) {
	var requests atomic.Int64
	srv := testoauth.Serve(t, nil, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusForbidden)
	}))
	origin, _ := url.Parse(srv)
	c, err := New(Options{Origin: origin, Headers: map[string]string{"Authorization": "Bearer static-token-123"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Get(srv + "/mcp")
	if !errors.Is(err, ErrAuthRequired) || requests.Load() != 1 {
		t.Errorf("err = %v after %d requests; want ErrAuthRequired after 1", err, requests.Load())
	}
}
