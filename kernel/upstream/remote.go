package upstream

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharedos/sharedos-mcp/kernel/webclient"
)

// CodeUpstreamAuthRequired is a remote upstream refusing the kernel's
// credentials: a 401 or 403 after one refresh of an OAuth token, or at
// once for a configured header. Not retryable: a person has to log in
// again or renew the secret.
const CodeUpstreamAuthRequired = "upstream_auth_required"

// RemoteOptions say how to reach a remote upstream over Streamable HTTP.
type RemoteOptions struct {
	// URL is the MCP endpoint: https, or http to a loopback address.
	URL string
	// Headers are sent with every request, already expanded: the kernel
	// replaced their {secret:NAME} before.
	Headers map[string]string
	// CAFile holds PEM certificates trusted besides the system roots.
	CAFile string
	// Tokens, when set, gives each request's bearer token (auth = "oauth").
	Tokens webclient.TokenSource
	// MaxResultBytes is the kernel's bound on a result. An answer whose
	// body (or, streamed, one of its events) is longer by more than
	// envelopeSlack is refused while it is read, and the call fails
	// too_large; 0 is DefaultMaxResultBytes.
	MaxResultBytes int
}

// envelopeSlack is what a JSON-RPC answer may hold beyond its result:
// the envelope and a stream's event fields. A result under the bound but
// in the slack is still refused too_large, by the size check of call.
const envelopeSlack = 64 << 10

// maxErrorBody bounds the body of an answer that is not a message (an
// HTTP error page), which the SDK reads whole.
const maxErrorBody = 64 << 10

// errAnswerTooLarge is a server's answer over the bound.
var errAnswerTooLarge = errors.New("the answer is larger than a result may be")

// remoteTransport returns the SDK's Streamable HTTP client transport for
// o, on a client that holds the kernel's rules (webclient: https only or
// loopback http, TLS with the CA file, no redirect to another origin,
// headers and token for that origin only, one refresh on 401) and bounds
// every answer as it is read.
func remoteTransport(o RemoteOptions) (*mcp.StreamableClientTransport, error) {
	u, err := webclient.CheckURL(o.URL)
	if err != nil {
		return nil, err
	}
	client, err := webclient.New(webclient.Options{CAFile: o.CAFile, Origin: u, Headers: o.Headers, Tokens: o.Tokens})
	if err != nil {
		return nil, err
	}
	bound := o.MaxResultBytes
	if bound <= 0 {
		bound = DefaultMaxResultBytes
	}
	bound += envelopeSlack
	client.Transport = &boundedAnswers{base: client.Transport, max: bound}
	return &mcp.StreamableClientTransport{
		Endpoint:   u.String(),
		HTTPClient: client,
		// The transport's own bound must be above boundedAnswers', which
		// fails only the call; the SDK's ends the whole connection.
		MaxEventSize: 2 * bound,
	}, nil
}

// delivery is what became of the POST that carried one call, as the
// HTTP client saw it. A call's context carries one (withDelivery); the
// first POST made under it is the call's own (a cancellation sent later
// under the same context is not).
type delivery struct {
	mu          sync.Mutex
	attempted   bool // the POST was handed to the HTTP client
	status      int  // its answer's status; 0 when there was none
	withSession bool // it carried an Mcp-Session-Id
	tooLarge    bool // its answer was refused for its size
	redirected  bool // its answer redirected it: the next POST is the call's own again
}

type deliveryKey struct{}

func withDelivery(ctx context.Context) (context.Context, *delivery) {
	d := &delivery{}
	return context.WithValue(ctx, deliveryKey{}, d), d
}

// first marks the call's POST as attempted, and reports whether req is
// it.
func (d *delivery) first(req *http.Request) bool {
	if d == nil || req.Method != http.MethodPost {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.attempted && !d.redirected {
		return false
	}
	d.attempted, d.redirected, d.withSession = true, false, req.Header.Get("Mcp-Session-Id") != ""
	return true
}

// answered notes the status of the call's POST. A 307 or 308 sends the
// same POST on (webclient follows it within the origin only), so the
// request that follows is the call's own, and its answer is the one that
// says whether the server took the call.
func (d *delivery) answered(status int) {
	d.mu.Lock()
	d.status = status
	d.redirected = status == http.StatusTemporaryRedirect || status == http.StatusPermanentRedirect
	d.mu.Unlock()
}

func (d *delivery) refusedForSize() {
	if d != nil {
		d.mu.Lock()
		d.tooLarge = true
		d.mu.Unlock()
	}
}

// sessionForgotten reports whether the server never took the call
// because it no longer knew the session (404 to a request carrying one);
// only such a call may be sent again.
func (d *delivery) sessionForgotten() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.attempted && d.withSession && d.status == http.StatusNotFound
}

func (d *delivery) wasAttempted() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.attempted
}

func (d *delivery) wasTooLarge() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.tooLarge
}

// boundedAnswers bounds what a server's answers can make the kernel read:
// a JSON answer is read whole, up to max, before the SDK sees it; a
// stream's events are each bounded by max; any other body (an error page)
// is cut at maxErrorBody. It also records the call's delivery.
type boundedAnswers struct {
	base http.RoundTripper
	max  int
}

func (b *boundedAnswers) RoundTrip(req *http.Request) (*http.Response, error) {
	d, _ := req.Context().Value(deliveryKey{}).(*delivery)
	mine := d.first(req)
	req, x := detach(req)
	resp, err := b.base.RoundTrip(req)
	if err != nil {
		x.release()
		return nil, err
	}
	if mine {
		d.answered(resp.StatusCode)
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case mt == "text/event-stream" && resp.StatusCode/100 == 2:
		body := x.body(resp.Body, req.Method == http.MethodPost)
		resp.Body = &eventBound{r: bufio.NewReader(body), c: body, max: b.max, d: d}
	case mt == "application/json" && resp.StatusCode/100 == 2:
		// Read here, where an error fails only this request: the SDK
		// would end the whole connection on a body it could not read.
		body, err := io.ReadAll(io.LimitReader(resp.Body, int64(b.max)+1))
		resp.Body.Close()
		x.release()
		if err != nil {
			return nil, err
		}
		if len(body) > b.max {
			d.refusedForSize()
			return nil, errAnswerTooLarge
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
	default:
		body := x.body(resp.Body, false)
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.LimitReader(body, maxErrorBody), body}
	}
	return resp, nil
}

// answerDrain is how long the rest of the event stream that answered a
// call may still be read once the call has ended. The SDK hands a call its
// answer as soon as the answer's event is read, and reads what follows
// (the stream's end, as a rule already on its way) on a goroutine of its
// own; the caller then ends the call's context. An HTTP/1.1 request cut
// before its body has ended loses its connection, so cutting it at once
// would cost most calls a new connection to the server.
const answerDrain = time.Second

// exchange ties one HTTP request to the context of whoever made it.
type exchange struct {
	parent context.Context
	cancel context.CancelCauseFunc
	mu     sync.Mutex
	stop   func() bool // unregisters what the parent's end does now
	done   bool        // the answer was read or closed: nothing is left to cut
}

// detach returns req under a context of its own, which the end of req's
// context cuts at once (until body says otherwise) and release lets go
// of.
func detach(req *http.Request) (*http.Request, *exchange) {
	x := &exchange{parent: req.Context()}
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(x.parent))
	x.cancel = cancel
	x.stop = context.AfterFunc(x.parent, x.cut)
	return req.WithContext(ctx), x
}

func (x *exchange) cut() { x.cancel(context.Cause(x.parent)) }

// release ends the exchange once its answer is read or abandoned, and
// unregisters it from the parent, which may live as long as the session.
func (x *exchange) release() {
	x.mu.Lock()
	x.done = true
	x.stop()
	x.mu.Unlock()
	x.cancel(nil)
}

// body returns b, the answer's body, such that closing it releases the
// exchange. With drain, b is the event stream answering a call, and from
// now on the end of the call's context cuts the request only answerDrain
// later, unless the body is closed before: a stream that ends by itself
// keeps its connection, and one that does not is still cut, a little
// later. Nobody waits on it: the SDK reads the stream on its own
// goroutine, and the call has its answer, or its cancellation, already.
func (x *exchange) body(b io.ReadCloser, drain bool) io.ReadCloser {
	x.mu.Lock()
	defer x.mu.Unlock()
	if drain && x.stop() {
		x.stop = context.AfterFunc(x.parent, func() {
			x.mu.Lock()
			defer x.mu.Unlock()
			if !x.done {
				x.stop = time.AfterFunc(answerDrain, x.cut).Stop
			}
		})
	}
	return &exchangeBody{ReadCloser: b, x: x}
}

type exchangeBody struct {
	io.ReadCloser
	x *exchange
}

func (b *exchangeBody) Close() error {
	err := b.ReadCloser.Close()
	b.x.release()
	return err
}

// eventBound reads a server-sent event stream and fails it, with
// errAnswerTooLarge, at an event longer than max bytes. The SDK takes a
// stream that fails this way as ended: the call it answers fails, and the
// session goes on.
type eventBound struct {
	r       *bufio.Reader
	c       io.Closer
	max     int
	inEvent int  // bytes of the event read so far
	lineEnd bool // the last byte read ended a line
	cr      bool // the last byte read was CR, whose LF does not end another line
	d       *delivery
	err     error
}

func (e *eventBound) Read(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.r.Read(p)
	for _, c := range p[:n] {
		// Lines end in CR, LF or CR LF; a blank line ends the event.
		switch {
		case c == '\n' && e.cr:
			e.cr = false
		case c == '\r' || c == '\n':
			if e.lineEnd {
				e.inEvent, e.lineEnd = 0, false
			} else {
				e.lineEnd = true
				e.inEvent++
			}
			e.cr = c == '\r'
		default:
			e.lineEnd, e.cr = false, false
			e.inEvent++
		}
		if e.inEvent > e.max {
			e.d.refusedForSize()
			e.err = errAnswerTooLarge
			return 0, e.err
		}
	}
	return n, err
}

func (e *eventBound) Close() error { return e.c.Close() }

// remoteFailure says what a failed call to a remote upstream is, for the
// errors call.go does not already tell (cancellation, call_timeout, a
// JSON-RPC error from the server). Its Message names no URL query,
// header, token or secret; its Err is the cause with every URL in it cut
// to what webclient.Display shows. NotSent is set only where the server
// cannot have acted on the call: it refused the credentials, it sent the
// request elsewhere, its certificate was refused, or the call's POST was
// never handed to the HTTP client.
func remoteFailure(tool, upstreamName string, err error, d *delivery) *CallError {
	cause := scrubbedError(err)
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var record tls.RecordHeaderError
	switch {
	case errors.Is(err, webclient.ErrAuthRequired):
		return &CallError{Code: CodeUpstreamAuthRequired, Message: fmt.Sprintf("upstream %s needs a person to renew the kernel's credentials for it: they are missing, or the server refused them", upstreamName), NotSent: true, Err: cause}
	case errors.Is(err, errAnswerTooLarge) || d != nil && d.wasTooLarge():
		return &CallError{Code: CodeTooLarge, Message: fmt.Sprintf("%s answered with more than a result may hold", tool), Err: cause}
	case errors.Is(err, webclient.ErrRedirect):
		return &CallError{Code: CodeUpstreamUnavailable, Message: fmt.Sprintf("upstream %s redirected the call to another origin, which is not followed", upstreamName), Retryable: true, NotSent: true, Err: cause}
	case errors.As(err, &unknownCA) || errors.As(err, &hostname) || errors.As(err, &invalid) || errors.As(err, &record):
		return &CallError{Code: CodeUpstreamUnavailable, Message: fmt.Sprintf("upstream %s: its TLS certificate could not be verified", upstreamName), Retryable: true, NotSent: true, Err: cause}
	}
	return &CallError{Code: CodeUpstreamUnavailable, Message: fmt.Sprintf("upstream %s could not be reached or did not answer the call", upstreamName), Retryable: true,
		NotSent: d != nil && !d.wasAttempted(), Err: cause}
}

// scrubbedError is err's text with every URL in it cut to scheme, host and
// path: net/http puts the whole URL of a failed request, query included,
// into its errors.
func scrubbedError(err error) error {
	if err == nil {
		return nil
	}
	return errors.New(scrubURLs(err.Error()))
}

func scrubURLs(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "://")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		start := i
		for start > 0 && isSchemeByte(s[start-1]) {
			start--
		}
		end := i + 3
		for end < len(s) && !strings.ContainsRune(" \"'<>\t\n", rune(s[end])) {
			end++
		}
		b.WriteString(s[:start])
		if u, err := url.Parse(s[start:end]); err == nil && u.Host != "" {
			b.WriteString(webclient.Display(u))
		} else {
			b.WriteString(s[start:i] + "://…")
		}
		s = s[end:]
	}
}

func isSchemeByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'
}

// remoteSession is the MCP session with a remote upstream, which a server
// that restarted forgets: it answers 404 to the session's requests, or
// its stream of server messages breaks. The session is then initialized
// again, once, and a call sent again, but only a call the server never
// took (404 to its own POST, or never sent because the session had
// already ended); a call the server may have acted on is never sent
// twice. A session that ends while idle is initialized again at once,
// so the next call does not wait for it (unless it ends again within
// reinitWindow of its last re-initialization: then the next call does
// it). One whose re-initialization fails is lost, and its upstream is
// restarted with its backoff.
type remoteSession struct {
	// connect starts a new MCP session: the SDK client's Connect on a
	// new remoteTransport.
	connect func(ctx context.Context) (*mcp.ClientSession, error)
	// relist is run on a new session before any call uses it: the
	// upstream's tools listed again and judged against their pins, so a
	// definition that changed across the restart is quarantined, not
	// called. An error fails the re-initialization.
	relist func(ctx context.Context, cs *mcp.ClientSession) error
	// timeout bounds a re-initialization: the upstream's startup_timeout.
	timeout time.Duration
	// reinitialized, when set, is told of each re-initialization that
	// succeeded and why the session it replaced ended; it must not block.
	reinitialized func(why error)

	mu         sync.Mutex
	live       *liveSession
	gen        int         // counts sessions; a re-initialization is for one generation
	pending    *reinitCall // the re-initialization under way
	lastReinit time.Time   // when the last one began
	closed     bool        // Close was called: an ending session is the kernel's doing
	lost       chan struct{}
	lostErr    error // why the session is lost for good
}

// reinitWindow is how long after a re-initialization a session that
// ends again, with no call having asked, is left ended until a call needs
// it: a server that keeps dropping sessions is not reconnected without
// end.
const reinitWindow = 10 * time.Second

// sessionEndWait bounds how long a call that was never sent waits for
// its session to be known ended before it fails as it is.
const sessionEndWait = time.Second

// liveSession is one MCP session and, once it has ended, why.
type liveSession struct {
	cs    *mcp.ClientSession
	ended chan struct{}
	why   error // set before ended is closed
}

func watch(cs *mcp.ClientSession) *liveSession {
	l := &liveSession{cs: cs, ended: make(chan struct{})}
	go func() {
		l.why = cs.Wait()
		close(l.ended)
	}()
	return l
}

type reinitCall struct {
	done chan struct{}
	err  error
}

// errSessionLost is a remote session that could not be initialized again:
// the owner ends it (the upstream restarts with backoff).
var errSessionLost = errors.New("the remote session was lost and could not be initialized again")

func newRemoteSession(cs *mcp.ClientSession, connect func(context.Context) (*mcp.ClientSession, error),
	relist func(context.Context, *mcp.ClientSession) error, timeout time.Duration) *remoteSession {
	r := &remoteSession{live: watch(cs), connect: connect, relist: relist, timeout: timeout, lost: make(chan struct{})}
	go r.watchLive(r.live, 0)
	return r
}

// Lost is closed once the session cannot be used any more (a
// re-initialization failed, or the session kept ending); err says why.
func (r *remoteSession) Lost() (<-chan struct{}, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lost, r.lostErr
}

// lose ends the session for good with why, unless it already is.
func (r *remoteSession) lose(why error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loseLocked(why)
}

func (r *remoteSession) loseLocked(why error) {
	if r.lostErr == nil {
		r.lostErr = fmt.Errorf("%w: %w", errSessionLost, why)
		close(r.lost)
	}
}

func (r *remoteSession) current() (*liveSession, int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lostErr != nil {
		return nil, 0, r.lostErr
	}
	return r.live, r.gen, nil
}

// client is the session calls go to now; nil once it is lost.
func (r *remoteSession) client() *mcp.ClientSession {
	if live, _, err := r.current(); err == nil {
		return live.cs
	}
	return nil
}

// watchLive initializes the session again as soon as generation gen ends
// by itself, so that the next call finds a session ready, unless a
// re-initialization is already under way, the kernel closed it, or it
// ends again within reinitWindow of the last one: then the next call
// initializes it (reinitialize), so a server that keeps dropping
// sessions costs one initialization per call, never a loop.
func (r *remoteSession) watchLive(l *liveSession, gen int) {
	<-l.ended
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.closed || r.gen != gen || r.lostErr != nil || r.pending != nil:
		return
	case !r.lastReinit.IsZero() && time.Since(r.lastReinit) < reinitWindow:
		return
	}
	p := &reinitCall{done: make(chan struct{})}
	r.pending = p
	go r.runReinit(p, l.why)
}

// callTool calls a tool, re-initializing the session once if the server
// forgot it. stillOffered, when set, is asked after a re-initialization
// whether the tool's definition is still the one the caller's snapshot
// published; its error is returned instead of calling.
func (r *remoteSession) callTool(ctx context.Context, params *mcp.CallToolParams, stillOffered func() error) (*mcp.CallToolResult, *delivery, error) {
	live, gen, err := r.current()
	if err != nil {
		return nil, nil, err
	}
	callCtx, d := withDelivery(ctx)
	res, err := live.cs.CallTool(callCtx, params)
	if err == nil || ctx.Err() != nil || !forgotten(ctx, live, err, d) {
		return res, d, err
	}
	if err := r.reinitialize(ctx, gen); err != nil {
		return nil, d, err
	}
	if stillOffered != nil {
		if err := stillOffered(); err != nil {
			return nil, d, err
		}
	}
	if live, _, err = r.current(); err != nil {
		return nil, d, err
	}
	callCtx, d = withDelivery(ctx)
	res, err = live.cs.CallTool(callCtx, params)
	return res, d, err
}

// forgotten reports whether a call failed without the server taking it,
// so that it may be sent on a new session: its own POST was answered 404
// (the server no longer knew the session), or it was never sent because
// the session had already ended (a concurrent call's 404, the stream of
// server messages broken).
func forgotten(ctx context.Context, live *liveSession, err error, d *delivery) bool {
	if d.wasAttempted() {
		return d.sessionForgotten()
	}
	// A closing session is sure to end; after any other error the call
	// waits a little for the end, which may follow the error it caused.
	var timeout <-chan time.Time
	if !errors.Is(err, mcp.ErrConnectionClosed) && !errors.Is(err, mcp.ErrSessionMissing) {
		t := time.NewTimer(sessionEndWait)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-live.ended:
		return true
	case <-ctx.Done():
		return false
	case <-timeout:
		return false
	}
}

// reinitialize replaces the session of generation gen with a new one;
// concurrent callers share one attempt, and a caller whose generation was
// already replaced uses the new session.
func (r *remoteSession) reinitialize(ctx context.Context, gen int) error {
	r.mu.Lock()
	switch {
	case r.lostErr != nil:
		r.mu.Unlock()
		return r.lostErr
	case r.gen != gen:
		r.mu.Unlock()
		return nil
	}
	p := r.pending
	if p == nil {
		p = &reinitCall{done: make(chan struct{})}
		r.pending = p
		go r.runReinit(p, mcp.ErrSessionMissing)
	}
	r.mu.Unlock()
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// runReinit connects a new session and lists its tools again; why is
// what ended the one it replaces. r.pending is p.
func (r *remoteSession) runReinit(p *reinitCall, why error) {
	r.mu.Lock()
	r.lastReinit = time.Now()
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	cs, err := r.connect(ctx)
	if err == nil && r.relist != nil {
		if err = r.relist(ctx, cs); err != nil {
			cs.Close()
		}
	}
	r.mu.Lock()
	old := r.live
	switch {
	case err == nil && r.closed:
		err = errors.New("the session was closed")
		cs.Close()
	case err == nil:
		r.live = watch(cs)
		r.gen++
		go r.watchLive(r.live, r.gen)
	default:
		r.loseLocked(err)
		err = r.lostErr
	}
	r.pending = nil
	p.err = err
	r.mu.Unlock()
	close(p.done)
	if err == nil {
		// The server forgot it or dropped it: Close sends no DELETE for
		// a session known missing, and a failed one is closing already.
		_ = old.cs.Close()
		if r.reinitialized != nil {
			r.reinitialized(why)
		}
	}
}

// Close ends the current session; a re-initialization under way ends
// without replacing it.
func (r *remoteSession) Close() error {
	r.mu.Lock()
	r.closed = true
	live := r.live
	r.mu.Unlock()
	return live.cs.Close()
}
