// Package webclient is how the reference kernel speaks HTTP to servers it
// does not run: remote MCP upstreams and their OAuth authorization
// servers. Every client it makes speaks https only (plain http only to a
// loopback address), verifies TLS against the system roots plus an
// optional CA file, follows no redirect to another origin, and, for a
// client bound to one origin, sends that origin's configured headers and
// bearer token to it and to nothing else.
//
// Its errors never hold a header value, a token or a URL's query: a URL is
// shown as Display shows it. (The *url.Error net/http wraps a
// RoundTripper's error in does hold the whole URL; whoever shows such an
// error must not show its text.)
package webclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"
)

// Errors of this package.
var (
	ErrInsecureURL = errors.New("only https is allowed, or http to a loopback address (127.0.0.0/8, ::1, localhost)")
	ErrRedirect    = errors.New("the server redirected to another origin, which is not followed")
	ErrOtherOrigin = errors.New("this client carries credentials for one origin and sends nothing elsewhere")
	// ErrAuthRequired is a server refusing the credentials: it answered 401
	// or 403, after one refresh of the token when there is a token source.
	ErrAuthRequired = errors.New("the server refused the credentials")
	ErrBadHeader    = errors.New("a header must have a name of token characters and a value without control characters")
	ErrOwnedHeader  = errors.New("this header is set by the transport, not by configuration")
)

// maxRedirects bounds the same-origin redirects followed for one request.
const maxRedirects = 5

// CheckURL parses raw as a server's URL and refuses what the kernel does
// not reach: a scheme other than https (or http to a loopback address),
// credentials in the URL (they belong in headers, where secrets can
// fill them), a missing host, a fragment.
func CheckURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse quotes the whole URL, query included.
		return nil, errors.New("not a URL")
	}
	switch {
	case u.User != nil:
		return nil, errors.New("a URL cannot hold credentials; put them in headers, from a [[secret]]")
	case u.Host == "" || u.Hostname() == "":
		return nil, errors.New("the URL names no host")
	case u.Fragment != "":
		return nil, errors.New("a server's URL has no fragment")
	}
	if err := checkScheme(u); err != nil {
		return nil, err
	}
	return u, nil
}

func checkScheme(u *url.URL) error {
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if IsLoopback(u.Hostname()) {
			return nil
		}
	}
	return fmt.Errorf("%s: %w", Display(u), ErrInsecureURL)
}

// IsLoopback reports whether host (a URL's host name, without port or
// brackets) names the machine itself: localhost, 127.0.0.0/8 or ::1.
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Display shows a URL without what it may hide credentials in: scheme,
// host and path only.
func Display(u *url.URL) string {
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

// SameOrigin reports whether a and b have one scheme, host and port.
func SameOrigin(a, b *url.URL) bool {
	return a.Scheme == b.Scheme && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}

// TokenSource gives the bearer token of a client's requests. Both methods
// are called concurrently; an error that wraps ErrAuthRequired means the
// user has to log in again (the kernel answers upstream_auth_required),
// any other is passing (upstream_unavailable).
type TokenSource interface {
	// Token returns the token to send now.
	Token(ctx context.Context) (string, error)
	// Refresh is called once the server refused refused: it returns the
	// token to try once more (a newer one another request already got,
	// or a refreshed one), or an error wrapping ErrAuthRequired when
	// there is none.
	Refresh(ctx context.Context, refused string) (string, error)
}

// Options configure a client.
type Options struct {
	// CAFile holds PEM certificates trusted besides the system's roots.
	CAFile string
	// Origin, when set, is the one origin the client reaches (an MCP
	// server's URL; only its scheme, host and port count). Headers and
	// Tokens are sent to it, a request anywhere else is refused, and a
	// 401 or 403 from it is ErrAuthRequired (once Tokens has been asked
	// to refresh). A client without an Origin (for authorization servers)
	// sends neither and passes every answer on.
	Origin *url.URL
	// Headers are sent with every request, already expanded. A name the
	// transport sets (Content-Type, Accept, Mcp-Session-Id, …, and
	// Authorization when Tokens is set) is refused.
	Headers map[string]string
	// Tokens, when set, gives each request's Authorization: Bearer.
	Tokens TokenSource
	// DialTimeout bounds a TCP connect and, again, a TLS handshake; 0 is
	// 10s. Nothing bounds a whole request: a call's context does.
	DialTimeout time.Duration
}

// ownedHeaders are set by net/http or by the MCP transport; configuration
// replacing one would break the protocol or smuggle a second meaning.
var ownedHeaders = []string{
	"Accept", "Connection", "Content-Length", "Content-Type", "Host", "Last-Event-Id",
	"Mcp-Protocol-Version", "Mcp-Session-Id", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// CheckHeader says what is wrong with a configured header, if anything:
// a name that is not a token or a value with a control character
// (ErrBadHeader), or a header the transport sets (ErrOwnedHeader;
// Authorization too when withToken, a token source giving it). The error
// names the header, never its value.
func CheckHeader(name, value string, withToken bool) error {
	canon := http.CanonicalHeaderKey(name)
	switch {
	case !validHeaderName(name) || !validHeaderValue(value):
		return fmt.Errorf("header %s: %w", safeName(name), ErrBadHeader)
	case slices.Contains(ownedHeaders, canon) || withToken && canon == "Authorization":
		return fmt.Errorf("header %s: %w", canon, ErrOwnedHeader)
	}
	return nil
}

// New returns a client as the package doc says, or an error naming what is
// wrong with opts (a header by its name, never its value; the CA file by
// its path).
func New(opts Options) (*http.Client, error) {
	headers := http.Header{}
	for name, v := range opts.Headers {
		if err := CheckHeader(name, v, opts.Tokens != nil); err != nil {
			return nil, err
		}
		headers.Set(name, v)
	}
	if (len(headers) > 0 || opts.Tokens != nil) && opts.Origin == nil {
		return nil, errors.New("headers and tokens need the one origin they are for")
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	if opts.CAFile != "" {
		pem, err := os.ReadFile(opts.CAFile)
		if err != nil {
			return nil, fmt.Errorf("ca_file: %w", err)
		}
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_file %s: no PEM certificate in it", opts.CAFile)
		}
	}
	dialTimeout := opts.DialTimeout
	if dialTimeout <= 0 {
		dialTimeout = 10 * time.Second
	}
	dialer := &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
	base := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           loopbackNamesStayLocal(dialer),
		TLSClientConfig:       &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:   dialTimeout,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          64,
		MaxIdleConnsPerHost:   32,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	t := &transport{base: base, origin: opts.Origin, headers: headers, tokens: opts.Tokens}
	return &http.Client{Transport: t, CheckRedirect: checkRedirect}, nil
}

// checkRedirect follows a redirect only within the origin of the first
// request: a server cannot send the kernel, its headers or a request body
// elsewhere.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	if !SameOrigin(req.URL, via[0].URL) {
		return ErrRedirect
	}
	return nil
}

// loopbackNamesStayLocal dials as d does, and refuses a connection to a
// name IsLoopback accepts (localhost) that reached another machine: plain
// http is allowed there because it never leaves the machine.
func loopbackNamesStayLocal(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		host, _, _ := net.SplitHostPort(addr)
		if IsLoopback(host) {
			if ta, ok := conn.RemoteAddr().(*net.TCPAddr); !ok || !ta.IP.IsLoopback() {
				conn.Close()
				return nil, fmt.Errorf("%s resolved to a non-loopback address: %w", host, ErrInsecureURL)
			}
		}
		return conn, nil
	}
}

// transport applies the rules of one client to each request.
type transport struct {
	base    http.RoundTripper
	origin  *url.URL
	headers http.Header
	tokens  TokenSource
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := checkScheme(req.URL); err != nil {
		closeBody(req)
		return nil, err
	}
	if t.origin == nil {
		return t.base.RoundTrip(req)
	}
	if !SameOrigin(req.URL, t.origin) {
		closeBody(req)
		return nil, ErrOtherOrigin
	}
	ctx := req.Context()
	token, err := t.token(ctx)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	resp, err := t.base.RoundTrip(t.prepare(req, token))
	if err != nil || !refused(resp) {
		return resp, err
	}
	drain(resp)
	if t.tokens == nil {
		return nil, fmt.Errorf("%w: it answered %s", ErrAuthRequired, resp.Status)
	}
	if req.Body != nil && req.GetBody == nil {
		return nil, fmt.Errorf("%w: it answered %s, and the request cannot be sent again", ErrAuthRequired, resp.Status)
	}
	fresh, err := t.tokens.Refresh(ctx, token)
	if err != nil {
		return nil, err
	}
	retry := t.prepare(req, fresh)
	if req.GetBody != nil {
		if retry.Body, err = req.GetBody(); err != nil {
			return nil, err
		}
	}
	resp, err = t.base.RoundTrip(retry)
	if err != nil || !refused(resp) {
		return resp, err
	}
	drain(resp)
	return nil, fmt.Errorf("%w: it answered %s with a refreshed token too", ErrAuthRequired, resp.Status)
}

func (t *transport) token(ctx context.Context) (string, error) {
	if t.tokens == nil {
		return "", nil
	}
	return t.tokens.Token(ctx)
}

// prepare returns a copy of req (a RoundTripper must not change the one it
// is given) with the client's headers and token.
func (t *transport) prepare(req *http.Request, token string) *http.Request {
	r := req.Clone(req.Context())
	for k, v := range t.headers {
		r.Header[k] = v
	}
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return r
}

func refused(resp *http.Response) bool {
	return resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden
}

// drain reads a little of an answer that is not used, so its connection
// can be kept, and closes it.
func drain(resp *http.Response) {
	_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
	resp.Body.Close()
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// validHeaderName reports whether s is an HTTP token (RFC 9110).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// validHeaderValue refuses control characters but tab: a CR or LF would
// end the header and start another (a secret holding one would inject
// it).
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// safeName shows a header name that may not be one, bounded and quoted.
func safeName(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return fmt.Sprintf("%q", s)
}
