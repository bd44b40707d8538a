package testoauth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// MCPOptions configure an MCPServer. At most one of Auth and Token is set;
// with neither, the server asks for no credentials.
type MCPOptions struct {
	// CA serves it over TLS with a certificate of CA; nil is plain http
	// on loopback.
	CA *CA
	// Auth protects it with tokens of that authorization server, bound to
	// its URL, and serves its protected resource metadata (RFC 9728).
	Auth *AuthServer
	// Token protects it with this one bearer token (a token configured in
	// a header).
	Token string
	// JSONResponse answers calls with one JSON body instead of an event
	// stream.
	JSONResponse bool
}

// MCPServer is a Streamable HTTP MCP server at /mcp. Its tools:
//
//	echo {text}            returns text
//	slow {}                answers only when its request is cancelled, or after a minute
//	huge {bytes}           returns a text of that many bytes
//	whoami {}              returns the request's Authorization header: a server quoting a credential back
//	fail {}                fails (isError), its text quoting the Authorization header
//	get_repo {owner, repo} returns "owner/repo": a tool whose arguments name a resource
type MCPServer struct {
	// URL is the MCP endpoint: the upstream's url.
	URL string

	srv        *httptest.Server
	opts       MCPOptions
	handler    atomic.Pointer[mcp.StreamableHTTPHandler]
	refuseAll  atomic.Bool
	redirectTo atomic.Pointer[string]

	initializes atomic.Int64
	slowStarted chan struct{}
	mu          sync.Mutex
	echoDesc    string         // echo's description from the next Restart on
	statuses    map[int]int    // answers to /mcp by status
	calls       map[string]int // tool calls by tool
	authHeaders []string       // the Authorization of each request to /mcp
	requests    []string       // "METHOD Status text" of each request to /mcp
}

// NewMCPServer starts an MCP server on loopback until the test ends.
func NewMCPServer(t testing.TB, opts MCPOptions) *MCPServer {
	t.Helper()
	s := &MCPServer{opts: opts, statuses: map[int]int{}, calls: map[string]int{}, slowStarted: make(chan struct{}, 64), echoDesc: "Echo the text back."}
	s.Forget()
	mux := http.NewServeMux()
	var mcpHandler http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.handler.Load().ServeHTTP(w, r)
	})
	switch {
	case opts.Auth != nil:
		mcpHandler = auth.RequireBearerToken(func(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
			return opts.Auth.Verify(tok, s.URL)
		}, &auth.RequireBearerTokenOptions{ResourceMetadataURL: "/.well-known/oauth-protected-resource/mcp"})(mcpHandler)
		mux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
			auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
				Resource: s.URL, AuthorizationServers: []string{opts.Auth.Issuer}, ScopesSupported: []string{"mcp"},
			}).ServeHTTP(w, r)
		})
	case opts.Token != "":
		mcpHandler = auth.RequireBearerToken(func(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
			if tok != opts.Token {
				return nil, auth.ErrInvalidToken
			}
			return &auth.TokenInfo{Expiration: time.Now().Add(time.Hour)}, nil
		}, nil)(mcpHandler)
	}
	mux.Handle("/mcp", s.misbehave(mcpHandler))
	// The same endpoint under another path, for a redirect within the
	// origin (RedirectTo(URL + "/moved")).
	mux.Handle("/mcp/moved", mcpHandler)
	s.srv = start(t, opts.CA, mux)
	s.URL = s.srv.URL + "/mcp"
	return s
}

// misbehave applies what the test turned on, and counts.
func (s *MCPServer) misbehave(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.authHeaders = append(s.authHeaders, r.Header.Get("Authorization"))
		s.mu.Unlock()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		switch {
		case s.refuseAll.Load():
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			rec.WriteHeader(http.StatusUnauthorized)
		case s.redirectTo.Load() != nil:
			http.Redirect(rec, r, *s.redirectTo.Load(), http.StatusTemporaryRedirect)
		default:
			next.ServeHTTP(rec, r)
		}
		s.mu.Lock()
		s.statuses[rec.status]++
		s.requests = append(s.requests, r.Method+" "+http.StatusText(rec.status))
		s.mu.Unlock()
	})
}

// Restart drops every connection and forgets every session, as a server
// process that restarted would: a request of an old session is answered
// 404, and a request in flight is cut.
func (s *MCPServer) Restart() {
	s.Forget()
	s.srv.CloseClientConnections()
}

// Forget forgets every session but keeps the connections, as a server
// behind a proxy that restarted would: a request of an old session is
// answered 404.
func (s *MCPServer) Forget() {
	srv := mcp.NewServer(&mcp.Implementation{Name: "testoauth", Version: "1.0.0"}, nil)
	s.addTools(srv)
	s.handler.Store(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: s.opts.JSONResponse}))
}

// SetEchoDescription changes echo's description from the next Restart on:
// a server upgraded while it was down.
func (s *MCPServer) SetEchoDescription(d string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.echoDesc = d
}

// SlowStarted receives once for every call of slow, when it has started.
func (s *MCPServer) SlowStarted() <-chan struct{} { return s.slowStarted }

// Calls is how many calls of tool reached the server.
func (s *MCPServer) Calls(tool string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[tool]
}

// RefuseAll makes every request to /mcp answered 401, whatever its token.
func (s *MCPServer) RefuseAll(on bool) { s.refuseAll.Store(on) }

// RedirectTo makes every request to /mcp answered 307 to url; "" stops it.
func (s *MCPServer) RedirectTo(url string) {
	if url == "" {
		s.redirectTo.Store(nil)
		return
	}
	s.redirectTo.Store(&url)
}

// Statuses returns how many requests to /mcp were answered with status.
func (s *MCPServer) Statuses(status int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statuses[status]
}

// AuthHeaders returns the Authorization header of every request to /mcp
// so far, in order.
func (s *MCPServer) AuthHeaders() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.authHeaders...)
}

// Requests returns each request to /mcp so far as "METHOD Status text"
// ("POST Unauthorized"), in the order they were answered.
func (s *MCPServer) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

// Initializes is how many sessions were initialized, restarts included.
func (s *MCPServer) Initializes() int { return int(s.initializes.Load()) }

type textArgs struct {
	Text string `json:"text"`
}

type hugeArgs struct {
	Bytes int `json:"bytes"`
}

type repoArgs struct {
	Owner string `json:"owner"`
	Repo  string `json:"repo"`
}

func (s *MCPServer) addTools(srv *mcp.Server) {
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case "initialize":
				s.initializes.Add(1)
			case "tools/call":
				s.mu.Lock()
				s.calls[req.GetParams().(*mcp.CallToolParamsRaw).Name]++
				s.mu.Unlock()
			}
			return next(ctx, method, req)
		}
	})
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	s.mu.Lock()
	echoDesc := s.echoDesc
	s.mu.Unlock()
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: echoDesc},
		func(_ context.Context, _ *mcp.CallToolRequest, a textArgs) (*mcp.CallToolResult, any, error) {
			return text(a.Text), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "slow", Description: "Answer when cancelled."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			s.slowStarted <- struct{}{}
			select {
			case <-ctx.Done():
			case <-time.After(time.Minute):
			}
			return text("slow done"), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "huge", Description: "Return that many bytes."},
		func(_ context.Context, _ *mcp.CallToolRequest, a hugeArgs) (*mcp.CallToolResult, any, error) {
			return text(strings.Repeat("x", a.Bytes)), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "whoami", Description: "Say who the caller is."},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return text("you sent Authorization: " + authorization(req)), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "fail", Description: "Fail."},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			r := text("refused the request with Authorization: " + authorization(req))
			r.IsError = true
			return r, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "get_repo", Description: "Read a repository."},
		func(_ context.Context, _ *mcp.CallToolRequest, a repoArgs) (*mcp.CallToolResult, any, error) {
			return text(a.Owner + "/" + a.Repo), nil, nil
		})
}

func authorization(req *mcp.CallToolRequest) string {
	if req.Extra == nil || req.Extra.Header == nil {
		return ""
	}
	return req.Extra.Header.Get("Authorization")
}

type statusRecorder struct {
	http.ResponseWriter
	status int
	once   bool
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.once {
		r.status, r.once = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

// Flush passes on the SSE writer's flushes.
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
