package shim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kerneltest"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/kernelclient"
)

// TestAKernelThatStopsReadingDoesNotStopTheReader: a call larger than the
// socket holds, sent while the kernel has stopped reading, must not keep
// the reader from reading on: a ping behind it is answered at once,
// while the kernel still reads nothing, and once it reads again both
// calls are answered, in order.
func TestAKernelThatStopsReadingDoesNotStopTheReader(t *testing.T) {
	stopped, release := make(chan struct{}), make(chan struct{})
	k := kerneltest.Start(t, kerneltest.Options{Handler: func(_ *kerneltest.Conn, m *jsonrpc.Message) bool {
		if m.Method == kproto.MethodInvoke && bytes.Contains(m.Params, []byte(`"/stop"`)) {
			close(stopped)
			<-release // the kernel reads nothing more until the test says
		}
		return false
	}})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	c, err := kernelclient.Dial(kernelclient.Options{Socket: k.Path, KernelUID: -1, WriteTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	hello, err := c.Hello(context.Background(), kproto.HelloParams{Name: "stall-test", Shim: kproto.Peer{Version: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Serve(context.Background(), Config{Kernel: c, Hello: hello, Version: "test", CallTimeout: time.Minute, Log: zerolog.Nop()}, inR, outW)
		outW.Close()
	}()
	answers := make(chan []byte, 8)
	go func() {
		r := bufio.NewReaderSize(outR, 1<<20)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				close(answers)
				return
			}
			answers <- line
		}
	}()
	next := func(what string) []byte {
		select {
		case line, ok := <-answers:
			if !ok {
				t.Fatalf("stdout closed before %s", what)
			}
			return line
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s within 10s", what)
			return nil
		}
	}
	// One goroutine writes every line, in order: a large one may wait for
	// the reader.
	lines := make(chan string, 8)
	go func() {
		for l := range lines {
			inW.Write([]byte(l + "\n"))
		}
		inW.Close()
	}()
	write := func(line string) { lines <- line }
	var eof sync.Once
	end := func() { eof.Do(func() { close(lines) }) }
	defer end() // a test that fails ends the turn too

	write(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	next("tools/list answer")
	write(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"/stop"}}}`)
	<-stopped
	// Far more than a socket's buffers hold: this write cannot finish
	// until the kernel reads again.
	big := strings.Repeat("x", 8<<20)
	write(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"/big","pad":"` + big + `"}}}`)
	write(`{"jsonrpc":"2.0","id":4,"method":"ping"}`)
	if got := next("ping answer while the kernel reads nothing"); !bytes.HasPrefix(got, []byte(`{"jsonrpc":"2.0","id":4,"result":{}`)) {
		t.Fatalf("first answer %.200s, want the ping's", got)
	}
	close(release)
	for _, id := range []string{"2", "3"} {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result struct {
				IsError bool `json:"isError"`
			} `json:"result"`
		}
		line := next("answer to call " + id)
		if err := json.Unmarshal(line, &m); err != nil || string(m.ID) != id || m.Result.IsError {
			t.Fatalf("answer %.200s, want call %s succeeded", line, id)
		}
	}
	end()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}
