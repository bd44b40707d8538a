package kernelclient

import (
	"bytes"
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kerneltest"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/internal/peercred"
)

func fakeUID(uid uint32) func(*net.UnixConn) (peercred.Cred, error) {
	return func(c *net.UnixConn) (peercred.Cred, error) {
		cred, err := peercred.Get(c)
		cred.UID = uid
		return cred, err
	}
}

// invoke relays one call and waits for its answer.
func invoke(ctx context.Context, c *Client, p kproto.InvokeParams) (kproto.InvokeResult, error) {
	call, err := c.StartInvoke(p)
	if err != nil {
		return kproto.InvokeResult{}, err
	}
	return result(ctx, call)
}

// result waits for the answer to a call to tools.invoke.
func result(ctx context.Context, call *Call) (kproto.InvokeResult, error) {
	select {
	case a := <-call.Answer():
		return a.Invoke()
	case <-ctx.Done():
		call.Abandon()
		return kproto.InvokeResult{}, ctx.Err()
	}
}

// introduced dials a fake kernel and says hello as "a"; the connection
// closes when the test ends.
func introduced(t *testing.T) (*kerneltest.Kernel, *Client) {
	return introducedWith(t, kerneltest.Options{}, Options{})
}

// introducedWith is introduced with options for the kernel and the client
// (whose Socket and KernelUID it sets).
func introducedWith(t *testing.T, kopts kerneltest.Options, opts Options) (*kerneltest.Kernel, *Client) {
	t.Helper()
	k := kerneltest.Start(t, kopts)
	opts.Socket, opts.KernelUID = k.Path, -1
	c, err := Dial(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Hello(context.Background(), kproto.HelloParams{Name: "a"}); err != nil {
		t.Fatal(err)
	}
	return k, c
}

func TestDialRefusesAKernelOfAnotherUIDBeforeWriting(t *testing.T) {
	k := kerneltest.Start(t, kerneltest.Options{})
	_, err := Dial(Options{Socket: k.Path, KernelUID: -1, PeerCred: fakeUID(12345)})
	if err == nil || !strings.Contains(err.Error(), "uid 12345") {
		t.Fatalf("Dial = %v, want a refusal naming uid 12345", err)
	}
	k.WaitIdle()
	for _, ev := range k.Events() {
		if ev != "closed" {
			t.Errorf("the kernel saw %q; it must see no message at all", ev)
		}
	}
}

func TestDialAcceptsTheConfiguredKernelUID(t *testing.T) {
	k := kerneltest.Start(t, kerneltest.Options{})
	c, err := Dial(Options{Socket: k.Path, KernelUID: 12345, PeerCred: fakeUID(12345)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Hello(context.Background(), kproto.HelloParams{Name: "a"}); err != nil {
		t.Errorf("hello: %v", err)
	}
}

func TestHelloRefusalCarriesTheReasonCode(t *testing.T) {
	_, c := introduced(t)
	_, err := c.Hello(context.Background(), kproto.HelloParams{Name: "a"})
	var ke *KernelError
	if !errors.As(err, &ke) || ke.Code != kproto.ErrAlreadyIntroduced {
		t.Errorf("second hello = %v, want a KernelError with code %s", err, kproto.ErrAlreadyIntroduced)
	}
}

func TestPendingCallsFailWhenTheKernelGoes(t *testing.T) {
	k, c := introduced(t)
	ctx := context.Background()
	hang, err := c.StartInvoke(kproto.InvokeParams{CallID: "c1", Tool: "hang", Arguments: []byte("{}"), CatalogHash: k.Hash})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := invoke(ctx, c, kproto.InvokeParams{CallID: "c2", Tool: "die", Arguments: []byte("{}")}); !errors.Is(err, ErrClosed) {
		t.Errorf("the call that kills the kernel = %v, want ErrClosed", err)
	}
	if _, err := result(ctx, hang); !errors.Is(err, ErrClosed) {
		t.Errorf("the pending call = %v, want ErrClosed", err)
	}
	<-c.done
	if _, err := invoke(ctx, c, kproto.InvokeParams{CallID: "c3", Tool: "files.read"}); !errors.Is(err, ErrClosed) {
		t.Errorf("a later call = %v, want ErrClosed", err)
	}
}

// TestQueuedRequestsGoOutInOrder makes two calls and a call.cancel
// without waiting: the kernel sees the three in the order they were made,
// and both calls are answered.
func TestQueuedRequestsGoOutInOrder(t *testing.T) {
	k, c := introduced(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var calls []*Call
	for _, arg := range []string{`{"n":1}`, `{"n":2}`} {
		call, err := c.StartInvoke(kproto.InvokeParams{CallID: "c" + arg[5:6], Tool: "files.read", Arguments: []byte(arg), CatalogHash: k.Hash})
		if err != nil {
			t.Fatal(err)
		}
		calls = append(calls, call)
	}
	if err := c.Cancel("c9"); err != nil {
		t.Fatal(err)
	}
	for i, call := range calls {
		if _, err := result(ctx, call); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	if err := c.call(ctx, kproto.MethodPing, struct{}{}, nil); err != nil { // the kernel has read everything before it
		t.Fatal(err)
	}
	want := []string{"hello a", `invoke files.read args={"n":1}`, `invoke files.read args={"n":2}`, "cancel c9"}
	if got := k.Events(); !slices.Equal(got[:min(len(got), len(want))], want) {
		t.Errorf("the kernel saw %q, want %q first", got, want)
	}
}

func TestLeadingIDReadsTheIDOfAMessageCutShort(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		id     int64
		ok     bool
	}{
		{`{"jsonrpc":"2.0","id":42,"result":{"status":"denied","message":"xxxxx`, 42, true},
		{` { "jsonrpc" : "2.0" , "id" : 7 }`, 7, true},
		{`{"result":{"a":["}",{"b":"\"id\":9"}]},"id":3,"jsonrpc"`, 3, true},
		{`{"jsonrpc":"2.0","result":{"status":"denied","message":"…`, 0, false},
		{`{"jsonrpc":"2.0","id":4`, 0, false}, // 4 may go on: 42, 4e1
		{`{"jsonrpc":"2.0","id":"4",`, 0, false},
		{`{"jsonrpc":"2.0","id":0,`, 0, false},
		{`[{"id":1}]`, 0, false},
		{``, 0, false},
		{`{}`, 0, false},
	} {
		id, ok := leadingID([]byte(tc.prefix))
		if id != tc.id || ok != tc.ok {
			t.Errorf("leadingID(%s) = %d, %v; want %d, %v", tc.prefix, id, ok, tc.id, tc.ok)
		}
	}
}

// TestAnAnswerOverTheLineLimitCostsOneCall: a kernel answer longer than
// the client's line limit fails its own call with ErrAnswerTooLarge, and
// the connection goes on.
func TestAnAnswerOverTheLineLimitCostsOneCall(t *testing.T) {
	k, c := introducedWith(t, kerneltest.Options{}, Options{MaxLine: 4096})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	big := `{"text":"` + strings.Repeat("x", 3000) + `"}` // echoed twice
	if _, err := invoke(ctx, c, kproto.InvokeParams{CallID: "c1", Tool: "echo", Arguments: []byte(big), CatalogHash: k.Hash}); !errors.Is(err, ErrAnswerTooLarge) {
		t.Fatalf("the call whose answer is too long = %v, want ErrAnswerTooLarge", err)
	}
	res, err := invoke(ctx, c, kproto.InvokeParams{CallID: "c2", Tool: "files.read", Arguments: []byte(`{"path":"/next"}`), CatalogHash: k.Hash})
	if err != nil || res.Status != kproto.StatusSucceeded {
		t.Fatalf("the next call = %+v, %v; the connection must survive", res, err)
	}
}

// TestARequestOverTheKernelsLimitIsNotSent: the kernel's line limit comes
// with hello, and a request line longer than it fails before a byte of it
// is written; the request queued before it still goes.
func TestARequestOverTheKernelsLimitIsNotSent(t *testing.T) {
	const limit = 2048
	k, c := introducedWith(t, kerneltest.Options{MaxLine: limit}, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	held, err := c.StartInvoke(kproto.InvokeParams{CallID: "c1", Tool: "files.read", Arguments: []byte(`{"path":"/held"}`), CatalogHash: k.Hash})
	if err != nil {
		t.Fatal(err)
	}
	// The largest arguments that fit, then one byte more.
	fits := kproto.InvokeParams{CallID: "c2", Tool: "echo", CatalogHash: k.Hash}
	line := func(args string) int {
		fits.Arguments = []byte(args)
		return len(`{"jsonrpc":"2.0","id":3,"method":"tools.invoke","params":`) + len(encodeInvoke(fits)) + len("}")
	}
	pad := strings.Repeat("x", limit-line(`{"p":""}`))
	if n := line(`{"p":"` + pad + `"}`); n != limit {
		t.Fatalf("test arithmetic: the line is %d bytes, want %d", n, limit)
	}
	tooBig := fits
	tooBig.CallID, tooBig.Arguments = "c3", []byte(`{"p":"`+pad+`x"}`)
	if _, err := c.StartInvoke(tooBig); !errors.Is(err, ErrRequestTooLarge) {
		t.Fatalf("a request one byte over the kernel's limit = %v, want ErrRequestTooLarge", err)
	}
	if _, err := result(ctx, held); err != nil {
		t.Fatalf("the request queued before it: %v", err)
	}
	if _, err := invoke(ctx, c, fits); err != nil {
		t.Fatalf("a request exactly at the kernel's limit: %v", err)
	}
	for _, ev := range k.Events() {
		if ev == "line too long" {
			t.Errorf("the kernel received a line over its limit")
		}
	}
}

// TestProgressReachesTheHandler: call.progress notifications are routed
// to OnProgress, in the order the kernel sent them, before the answer.
func TestProgressReachesTheHandler(t *testing.T) {
	k, c := introduced(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []kproto.ProgressParams
	c.OnProgress(func(p kproto.ProgressParams) { got = append(got, p) })
	if _, err := invoke(ctx, c, kproto.InvokeParams{CallID: "c9", Tool: "progress", Arguments: []byte(`{"steps":3}`), CatalogHash: k.Hash}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("got %d progress reports before the answer, want 3: %+v", len(got), got)
	}
	for i, p := range got {
		if p.CallID != "c9" || p.Progress != float64(i+1) || p.Total == nil || *p.Total != 3 || p.Message == "" {
			t.Errorf("report %d = %+v", i, p)
		}
	}
}

// TestWaitRoomBoundsWhatWaitsForAStalledKernel: requests to a kernel that
// has stopped reading are queued without waiting, and once more than
// maxQueued bytes wait, WaitRoom waits: until its context ends, or until
// the kernel reads again.
func TestWaitRoomBoundsWhatWaitsForAStalledKernel(t *testing.T) {
	stopped, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	k, c := introducedWith(t, kerneltest.Options{Handler: func(_ *kerneltest.Conn, m *jsonrpc.Message) bool {
		if m.Method == kproto.MethodInvoke && bytes.Contains(m.Params, []byte(`"/stop"`)) {
			once.Do(func() { close(stopped) })
			<-release // the kernel reads nothing more until the test says
		}
		return false
	}}, Options{})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	// The fake kernel decodes each 12 MiB line with encoding/json, which
	// under the race detector on a loaded machine takes seconds.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.StartInvoke(kproto.InvokeParams{CallID: "c0", Tool: "files.read", Arguments: []byte(`{"path":"/stop"}`), CatalogHash: k.Hash}); err != nil {
		t.Fatal(err)
	}
	<-stopped
	pad := strings.Repeat("x", 12<<20)
	for i := range 3 { // 36 MiB, more than maxQueued
		_, err := c.StartInvoke(kproto.InvokeParams{CallID: "c" + strconv.Itoa(i+1), Tool: "files.read", Arguments: []byte(`{"path":"/big","pad":"` + pad + `"}`), CatalogHash: k.Hash})
		if err != nil {
			t.Fatalf("call %d, queued for a stalled kernel: %v", i+1, err)
		}
	}
	// With its context already done, WaitRoom says whether it would
	// wait: nil only when there is room.
	done, stop := context.WithCancel(ctx)
	stop()
	if err := c.WaitRoom(done); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitRoom with 36 MiB queued for a kernel that reads nothing = %v, want it to wait (context.Canceled)", err)
	}
	// A wait is ended by its context.
	waiting, stop := context.WithCancel(ctx)
	waited := make(chan error, 1)
	go func() { waited <- c.WaitRoom(waiting) }()
	stop()
	if err := <-waited; !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitRoom after its context ended = %v, want context.Canceled", err)
	}
	close(release)
	if err := c.WaitRoom(ctx); err != nil {
		t.Fatalf("WaitRoom once the kernel reads again = %v", err)
	}
}
