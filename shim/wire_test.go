package shim

import (
	"bytes"
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/txtar"
	"github.com/rs/zerolog"

	"github.com/sharedos/sharedos-mcp/internal/kerneltest"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/kernelclient"
)

var update = flag.Bool("update", false, "rewrite the expected sections of testdata/wire/*.txtar")

// TestWire runs each testdata/wire/*.txtar script: the client's lines
// ("in") go to a shim in front of the fake kernel; what the shim writes
// must equal "out", and what the kernel saw must equal "kernel" when the
// script has that section. Lines in the comment of the form "key: value"
// set options: call-timeout, max-message, kernel (wrong-hash, or
// approvals: the fake's catalogue adds kerneltest.AskTools). A
// 2026-07-28 input-required result's requestState is state-1, state-2,
// and so on.
// The catalogue's hash is written $HASH in the scripts.
//
// An "in" line "# wait N" is not sent: the lines after it are sent once
// the shim has written N lines. Scripts use it where what a line does
// depends on what the shim has done by then (a cancel for a call that
// must have reached the kernel), never to wait for time to pass.
func TestWire(t *testing.T) {
	files, err := filepath.Glob("testdata/wire/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no wire scripts: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			t.Parallel()
			runWireScript(t, file)
		})
	}
}

func runWireScript(t *testing.T, file string) {
	ar, err := txtar.ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	opts := map[string]string{}
	for _, line := range strings.Split(string(ar.Comment), "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok && !strings.Contains(k, " ") {
			opts[k] = v
		}
	}
	sections := map[string]*txtar.File{}
	for i := range ar.Files {
		sections[ar.Files[i].Name] = &ar.Files[i]
	}
	in, ok := sections["in"]
	if !ok {
		t.Fatal("script has no in section")
	}

	k := kerneltest.Start(t, kerneltest.Options{WrongHash: opts["kernel"] == "wrong-hash", Approvals: opts["kernel"] == "approvals"})
	tokens := 0
	cfg := Config{Version: "test", Log: zerolog.Nop(), token: func() string { tokens++; return "state-" + strconv.Itoa(tokens) }}
	if v, ok := opts["call-timeout"]; ok {
		if cfg.CallTimeout, err = time.ParseDuration(v); err != nil {
			t.Fatal(err)
		}
	}
	if v, ok := opts["max-message"]; ok {
		if cfg.MaxLine, err = strconv.Atoi(v); err != nil {
			t.Fatal(err)
		}
	}
	cfg.Kernel, cfg.Hello = dialKernel(t, k.Path)

	out := &lineCounter{grown: make(chan struct{}, 1)}
	inR, inW := io.Pipe()
	go feed(inW, in.Data, out)
	if err := Serve(context.Background(), cfg, inR, out); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	inR.Close()
	k.WaitIdle()
	got := map[string]string{
		"out":    strings.ReplaceAll(out.String(), k.Hash, "$HASH"),
		"kernel": strings.Join(k.Events(), "\n") + "\n",
	}
	changed := false
	for _, name := range []string{"out", "kernel"} {
		f, ok := sections[name]
		if !ok {
			if name == "out" {
				t.Fatal("script has no out section")
			}
			continue
		}
		if string(f.Data) == got[name] {
			continue
		}
		if *update {
			f.Data = []byte(got[name])
			changed = true
			continue
		}
		t.Errorf("%s differs\n--- got\n%s--- want\n%s", name, got[name], f.Data)
	}
	if changed {
		if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// feed writes a script's in section to w, waiting where it says "# wait N".
func feed(w *io.PipeWriter, in []byte, out *lineCounter) {
	for _, line := range bytes.SplitAfter(in, []byte("\n")) {
		if n, ok := strings.CutPrefix(strings.TrimSpace(string(line)), "# wait "); ok {
			want, _ := strconv.Atoi(n)
			if !out.waitFor(want) {
				break // Serve is done: it wrote less than the script expects
			}
			continue
		}
		if _, err := w.Write(line); err != nil {
			break
		}
	}
	w.Close()
}

// lineCounter is a stdout that tells how many lines have been written.
type lineCounter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	grown chan struct{}
}

func (c *lineCounter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.Write(p)
	select {
	case c.grown <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (c *lineCounter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

// waitFor waits until n lines are written, or for 20 s of silence (a shim
// that will not write them), and reports whether they were.
func (c *lineCounter) waitFor(n int) bool {
	for {
		if strings.Count(c.String(), "\n") >= n {
			return true
		}
		select {
		case <-c.grown:
		case <-time.After(20 * time.Second):
			return false
		}
	}
}

func dialKernel(t testing.TB, path string) (*kernelclient.Client, kproto.HelloResult) {
	t.Helper()
	return dialKernelLimit(t, path, 0)
}

// dialKernelLimit is dialKernel with a line limit for the kernel's
// answers, as serve's --max-message sets.
func dialKernelLimit(t testing.TB, path string, maxLine int) (*kernelclient.Client, kproto.HelloResult) {
	t.Helper()
	c, err := kernelclient.Dial(kernelclient.Options{Socket: path, KernelUID: -1, MaxLine: maxLine})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() }) // Serve closes it; a test that fails first must too
	hello, err := c.Hello(context.Background(), kproto.HelloParams{Name: "wire-test", Shim: kproto.Peer{Version: "test"}, Capabilities: Capabilities})
	if err != nil {
		t.Fatal(err)
	}
	return c, hello
}
