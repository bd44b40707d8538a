package kernelclient

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

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
	k := kerneltest.Start(t, kerneltest.Options{})
	c, err := Dial(Options{Socket: k.Path, KernelUID: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Hello(context.Background(), kproto.HelloParams{Name: "a"}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Hello(context.Background(), kproto.HelloParams{Name: "a"})
	var ke *KernelError
	if !errors.As(err, &ke) || ke.Code != kproto.ErrAlreadyIntroduced {
		t.Errorf("second hello = %v, want a KernelError with code %s", err, kproto.ErrAlreadyIntroduced)
	}
}

func TestPendingCallsFailWhenTheKernelGoes(t *testing.T) {
	k := kerneltest.Start(t, kerneltest.Options{})
	c, err := Dial(Options{Socket: k.Path, KernelUID: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Hello(ctx, kproto.HelloParams{Name: "a"}); err != nil {
		t.Fatal(err)
	}
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
