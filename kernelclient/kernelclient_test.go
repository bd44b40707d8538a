package kernelclient

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

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

// introduced dials a fake kernel and says hello as "a"; the connection
// closes when the test ends.
func introduced(t *testing.T) (*kerneltest.Kernel, *Client) {
	t.Helper()
	k := kerneltest.Start(t, kerneltest.Options{})
	c, err := Dial(Options{Socket: k.Path, KernelUID: -1})
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
	if err := c.Ping(context.Background()); err != nil {
		t.Errorf("ping: %v", err)
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
	if _, err := c.Invoke(ctx, kproto.InvokeParams{CallID: "c2", Tool: "die", Arguments: []byte("{}")}); !errors.Is(err, ErrClosed) {
		t.Errorf("the call that kills the kernel = %v, want ErrClosed", err)
	}
	if _, err := hang.InvokeResult(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("the pending call = %v, want ErrClosed", err)
	}
	<-c.Done()
	if _, err := c.Invoke(ctx, kproto.InvokeParams{CallID: "c3", Tool: "files.read"}); !errors.Is(err, ErrClosed) {
		t.Errorf("a later call = %v, want ErrClosed", err)
	}
}

// TestDeferredInvokesGoOutInOrder holds two calls back and sends
// call.cancel, which must write them first: the kernel sees the three in
// the order they were made, and both calls are answered.
func TestDeferredInvokesGoOutInOrder(t *testing.T) {
	k, c := introduced(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var calls []*Call
	for _, arg := range []string{`{"n":1}`, `{"n":2}`} {
		call, err := c.StartInvokeDeferred(kproto.InvokeParams{CallID: "c" + arg[5:6], Tool: "files.read", Arguments: []byte(arg), CatalogHash: k.Hash})
		if err != nil {
			t.Fatal(err)
		}
		calls = append(calls, call)
	}
	if err := c.Cancel("c9"); err != nil {
		t.Fatal(err)
	}
	for i, call := range calls {
		if _, err := call.InvokeResult(ctx); err != nil {
			t.Fatalf("call %d: %v (held back and never written?)", i+1, err)
		}
	}
	if err := c.Ping(ctx); err != nil { // the kernel has read everything before it
		t.Fatal(err)
	}
	want := []string{"hello a", `invoke files.read args={"n":1}`, `invoke files.read args={"n":2}`, "cancel c9"}
	if got := k.Events(); !slices.Equal(got[:min(len(got), len(want))], want) {
		t.Errorf("the kernel saw %q, want %q first", got, want)
	}
}

// TestFlushWritesDeferredInvokes: a call held back is written by Flush.
func TestFlushWritesDeferredInvokes(t *testing.T) {
	k, c := introduced(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	call, err := c.StartInvokeDeferred(kproto.InvokeParams{CallID: "c1", Tool: "files.read", Arguments: []byte(`{}`), CatalogHash: k.Hash})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := call.InvokeResult(ctx); err != nil {
		t.Fatalf("the flushed call: %v", err)
	}
}
