package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sharedos/sharedos-mcp/kernel/upstream"
)

func TestACallReturnsContentAndStructuredContent(t *testing.T) {
	f := newFixture(t, "", []upstream.Spec{spec(t, "test", "")}, nil)
	f.readyFrom(0, "test")
	r, err := f.call("test.echo", `{"text":"hello <&> \u2028"}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, r); got != "hello <&> \u2028" {
		t.Errorf("text %q", got)
	}
	var sc struct{ Text string }
	if err := json.Unmarshal(r.StructuredContent, &sc); err != nil || sc.Text != "hello <&> \u2028" {
		t.Errorf("structuredContent %s: %v", r.StructuredContent, err)
	}
	echo := f.tool(f.m.Snapshot(), "test.echo")
	if string(echo.OutputSchema) == "" || echo.Annotations == nil || !*echo.Annotations.ReadOnly {
		t.Errorf("echo's published definition lost its outputSchema or hints: %+v", echo)
	}
}

func TestASlowCallTimesOutAndTheUpstreamIsToldToStop(t *testing.T) {
	f := newFixture(t, "", []upstream.Spec{spec(t, "test", `call_timeout = "300ms"`)}, nil)
	f.readyFrom(0, "test")
	_, err := f.call("test.slow", `{"id":"t1"}`)
	ce := callError(t, err, upstream.CodeUpstreamTimeout)
	if !ce.Retryable || !strings.Contains(ce.Message, "300ms") {
		t.Errorf("%+v", ce)
	}
	// The handler only returns once notifications/cancelled reached it.
	f.logs.waitFrom(t, 0, "the upstream seeing the cancel", stderrLine("cancelled t1"))
	if st := f.m.Status()[0]; st.State != upstream.StateReady || st.Restarts != 0 {
		t.Errorf("a timeout restarted the upstream: %+v", st)
	}
}

func TestACancelledCallIsCancelledUpstreamToo(t *testing.T) {
	f := newFixture(t, "", []upstream.Spec{spec(t, "test", "")}, nil)
	f.readyFrom(0, "test")
	ctx, cancel := context.WithCancel(context.Background())
	tool := f.tool(f.m.Snapshot(), "test.hold")
	done := make(chan error, 1)
	progressed := make(chan struct{}, 3)
	go func() {
		_, err := f.m.Call(ctx, tool, forward(t, tool, `{"id":"c1"}`), func(float64, float64, string) { progressed <- struct{}{} })
		done <- err
	}()
	// Progress means the call is at the upstream; then cancel it.
	<-progressed
	cancel()
	callError(t, <-done, upstream.CodeCancelled)
	f.logs.waitFrom(t, 0, "the upstream seeing the cancel", stderrLine("cancelled c1"))
	// The upstream answers the cancelled call with an error nobody
	// waits for any more, and goes on serving.
	if r, err := f.call("test.echo", `{"text":"next"}`); err != nil || text(t, r) != "next" {
		t.Errorf("after a cancel: %v, %v", r, err)
	}
}

func TestProgressIsRelayedToTheCaller(t *testing.T) {
	f := newFixture(t, "", []upstream.Spec{spec(t, "test", "")}, nil)
	f.readyFrom(0, "test")
	type report struct {
		progress, total float64
		message         string
	}
	reports := make(chan report, 8)
	hold := f.tool(f.m.Snapshot(), "test.hold")
	done := make(chan *upstream.Result, 1)
	go func() {
		r, err := f.m.Call(context.Background(), hold, forward(t, hold, `{"id":"p1"}`), func(p, total float64, msg string) {
			reports <- report{p, total, msg}
		})
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	for i := 1; i <= 3; i++ {
		r := <-reports
		if r.progress != float64(i) || r.total != 3 || r.message != "step "+string(rune('0'+i)) {
			t.Errorf("report %d = %+v", i, r)
		}
	}
	if _, err := f.call("test.release", `{"id":"p1"}`); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r == nil || text(t, r) != "released p1" {
		t.Errorf("hold answered %v", r)
	}
}

func TestUpstreamErrorsAreUpstreamError(t *testing.T) {
	f := newFixture(t, "", []upstream.Spec{spec(t, "test", "")}, nil)
	f.readyFrom(0, "test")
	_, err := f.call("test.fail", `{}`)
	if ce := callError(t, err, upstream.CodeUpstreamError); !strings.Contains(ce.Message, "it went wrong") || ce.Retryable {
		t.Errorf("isError: %+v", ce)
	}
	_, err = f.call("test.rpcerror", `{}`)
	if ce := callError(t, err, upstream.CodeUpstreamError); !strings.Contains(ce.Message, "no such thing") {
		t.Errorf("JSON-RPC error: %+v", ce)
	}
	if st := f.m.Status()[0]; st.Restarts != 0 || st.State != upstream.StateReady {
		t.Errorf("an error answer restarted the upstream: %+v", st)
	}
}

func TestAResultOverTheBoundIsTooLargeAndTheUpstreamGoesOn(t *testing.T) {
	f := newFixture(t, "", []upstream.Spec{spec(t, "test", "")}, func(o *upstream.Options) { o.MaxResultBytes = 64 << 10 })
	f.readyFrom(0, "test")
	if _, err := f.call("test.huge", `{"bytes":60000}`); err != nil {
		t.Errorf("a result under the bound: %v", err)
	}
	_, err := f.call("test.huge", `{"bytes":2000000}`)
	if ce := callError(t, err, upstream.CodeTooLarge); !strings.Contains(ce.Message, "65536") {
		t.Errorf("%+v", ce)
	}
	// Between the result bound and the line bound (64 KiB more): read,
	// then refused.
	_, err = f.call("test.huge", `{"bytes":100000}`)
	callError(t, err, upstream.CodeTooLarge)
	if r, err := f.call("test.echo", `{"text":"next"}`); err != nil || text(t, r) != "next" {
		t.Errorf("after too_large: %v, %v", r, err)
	}
	if st := f.m.Status()[0]; st.Restarts != 0 {
		t.Errorf("too_large restarted the upstream: %+v", st)
	}
}

// TestAResultOverTheSDKsFrameBoundIsTooLargeToo: a 20 MB answer, more
// than the SDK's client would read at all (16 MiB, which ended the
// connection), is refused while it is read; its call fails too_large,
// the calls beside it are answered, and the upstream goes on.
func TestAResultOverTheSDKsFrameBoundIsTooLargeToo(t *testing.T) {
	f := newFixture(t, "", []upstream.Spec{spec(t, "test", "")}, nil)
	f.readyFrom(0, "test")
	echo, huge := f.tool(f.m.Snapshot(), "test.echo"), f.tool(f.m.Snapshot(), "test.huge")
	errs := make(chan error, 2)
	go func() {
		_, err := f.m.Call(context.Background(), huge, forward(t, huge, `{"bytes":20000000}`), nil)
		errs <- err
	}()
	go func() {
		r, err := f.m.Call(context.Background(), echo, forward(t, echo, `{"text":"beside"}`), nil)
		if err == nil && text(t, r) != "beside" {
			err = errors.New("echo answered " + text(t, r))
		}
		errs <- err
	}()
	var got []string
	for range 2 {
		if err := <-errs; err != nil {
			got = append(got, err.Error())
		}
	}
	if len(got) != 1 || !strings.HasPrefix(got[0], "too_large: test.huge: the answer is 200000") {
		t.Errorf("errors %q, want huge's too_large only", got)
	}
	if st := f.m.Status()[0]; st.Restarts != 0 || st.State != upstream.StateReady {
		t.Errorf("the upstream after a 20 MB answer: %+v", st)
	}
}

func TestStderrReachesTheLogBounded(t *testing.T) {
	f := newFixture(t, "", []upstream.Spec{spec(t, "test", "")}, nil)
	f.readyFrom(0, "test")
	if _, err := f.call("test.stderr", `{"lines":1000,"width":10000}`); err != nil {
		t.Fatal(err)
	}
	// The last line is kept for Status even when the log drops it; the
	// status is the only place to look, so this waits with a bound.
	end := time.Now().Add(deadline)
	for st := f.m.Status()[0]; len(st.Stderr) == 0 || st.Stderr[len(st.Stderr)-1] != "stderr done"; st = f.m.Status()[0] {
		if time.Now().After(end) {
			t.Fatalf("stderr never ended: %q", st.Stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	n := 0
	for _, l := range f.logs.all() {
		if l["message"] != "upstream stderr" {
			continue
		}
		n++
		if line, _ := l["line"].(string); len(line) > 5000 {
			t.Fatalf("a stderr line of %d bytes reached the log", len(line))
		}
	}
	if n > 400 {
		t.Errorf("%d stderr lines reached the log out of 1001", n)
	}
}

func TestPlaceholdersNameTheResourceAndAreForwardedAsAuthorized(t *testing.T) {
	f := newFixture(t, "", []upstream.Spec{spec(t, "gh", `
[[upstream.tool]]
name = "get_repo"
action = "read"
resource = "/repos/{owner}/{repo}"
[[upstream.tool]]
name = "get_issue"
resource = "/issues/{n}"
`)}, nil)
	f.readyFrom(0, "gh")
	snap := f.m.Snapshot()
	repo, issue := f.tool(snap, "gh.get_repo"), f.tool(snap, "gh.get_issue")
	if repo.Action != "read" || repo.Resource.Prefix() != "/repos" {
		t.Errorf("get_repo %+v", repo)
	}
	r, _, err := repo.Resolve(json.RawMessage(`{"owner":"acme","repo":"widget"}`))
	if err != nil || r.String() != "gh:/repos/acme/widget" {
		t.Errorf("Resolve = %v, %v", r, err)
	}
	res, err := f.m.Call(context.Background(), repo, forward(t, repo, `{"owner":"acme","repo":"widget"}`), nil)
	if err != nil || text(t, res) != "acme/widget" {
		t.Errorf("get_repo: %v, %v", res, err)
	}
	res, err = f.m.Call(context.Background(), issue, forward(t, issue, `{"n":7.0}`), nil)
	if err != nil || text(t, res) != `{"n":7}` {
		t.Errorf("the upstream got %v (%v), want the integer the resource names", res, err)
	}
	for _, args := range []string{
		`{"owner":"..","repo":"x"}`,
		`{"owner":"acme/../..","repo":"x"}`,
		`{"owner":"acme","owner":"..","repo":"x"}`,
		`{"owner":"\u002e\u002e","repo":"x"}`,
		`{"owner":"","repo":"x"}`,
		`{"owner":"a\u0000","repo":"x"}`,
		`{"owner":["acme"],"repo":"x"}`,
		`{"repo":"x"}`,
	} {
		if _, _, err := repo.Resolve(json.RawMessage(args)); !errors.Is(err, upstream.ErrInvalidArguments) {
			t.Errorf("Resolve(%s) = %v, want ErrInvalidArguments", args, err)
		}
	}
	// Arguments nobody resolved are never sent.
	_, err = f.m.Call(context.Background(), repo, upstream.Forward{}, nil)
	callError(t, err, upstream.CodeInvalidArguments)
}

// TestTheUpstreamReadsTheArgumentsTheDecisionWasMadeOn: get_user decodes
// its arguments as a Go server does (encoding/json into a struct, names
// matched case-insensitively, the last kept). Names it would take for
// "user" are refused by Resolve; what Resolve accepts, the upstream reads
// as the resource says.
func TestTheUpstreamReadsTheArgumentsTheDecisionWasMadeOn(t *testing.T) {
	f := newFixture(t, "", []upstream.Spec{spec(t, "gh", `
[[upstream.tool]]
name = "get_user"
action = "read"
resource = "/users/{user}"
`)}, nil)
	f.readyFrom(0, "gh")
	user := f.tool(f.m.Snapshot(), "gh.get_user")
	for _, args := range []string{
		`{"user":"alice","uſer":"bob"}`,
		`{"user":"alice","USER":"bob"}`,
		`{"user":"alice","Uſer":"bob"}`,
		`{"user":"alice","user":"bob"}`,
	} {
		if r, _, err := user.Resolve(json.RawMessage(args)); !errors.Is(err, upstream.ErrInvalidArguments) {
			t.Errorf("Resolve(%s) = %v, %v; want ErrInvalidArguments", args, r, err)
		}
	}
	for _, args := range []string{`{"user":"alice"}`, `{"user":"\u0061lice"}`, `{"user":"alice","other":{"user":"bob"}}`} {
		r, fw, err := user.Resolve(json.RawMessage(args))
		if err != nil || r.String() != "gh:/users/alice" {
			t.Fatalf("Resolve(%s) = %v, %v", args, r, err)
		}
		res, err := f.m.Call(context.Background(), user, fw, nil)
		if err != nil || text(t, res) != "data of alice" {
			t.Errorf("get_user %s: %v, %v; want alice's data", args, res, err)
		}
	}
}

func TestConcurrentCallsAreAnsweredEachToItsCaller(t *testing.T) {
	f := newFixture(t, "", []upstream.Spec{spec(t, "test", "")}, nil)
	f.readyFrom(0, "test")
	echo := f.tool(f.m.Snapshot(), "test.echo")
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := strings.Repeat("x", i)
			r, err := f.m.Call(context.Background(), echo, forward(t, echo, `{"text":"`+want+`"}`), nil)
			if err != nil || text(t, r) != want {
				t.Errorf("call %d: %v, %v", i, r, err)
			}
		}()
	}
	wg.Wait()
}
