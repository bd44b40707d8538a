package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/cli"
	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kerneltest"
	"github.com/sharedos/sharedos-mcp/internal/testupstream"
)

// lineSignal is an io.Writer that reports each complete line it is given.
type lineSignal struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	lines chan string
}

func (w *lineSignal) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil {
			w.buf.WriteString(line)
			return len(p), nil
		}
		select {
		case w.lines <- line:
		default: // a reader that stopped listening must not block the kernel
		}
	}
}

func TestKernelCommandServesAndShutsDownCleanly(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "hello.txt"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "sk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "k.sock")
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")

	stderr := &lineSignal{lines: make(chan string, 16)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	code := make(chan int, 1)
	go func() {
		code <- Run(ctx, cli.IO{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: stderr},
			[]string{"kernel", "--root", root, "--socket", sock, "--audit", auditPath, "--log-level", "error"})
	}()
	if l := <-stderr.lines; !strings.Contains(l, "kernel listening on "+sock) {
		t.Fatalf("first stderr line %q", l)
	}
	if l := <-stderr.lines; !strings.Contains(l, "read-only") || !strings.Contains(l, root) {
		t.Fatalf("second stderr line %q: want the read-only default stated", l)
	}

	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := jsonrpc.NewReader(conn, 0)
	roundTrip := func(line string) string {
		t.Helper()
		if _, err := conn.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
		b, err := r.ReadLine()
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	roundTrip(`{"jsonrpc":"2.0","id":1,"method":"integration.hello","params":{"name":"any-harness","shim":{"version":"t"}}}`)
	var list struct {
		Result struct{ CatalogHash string } `json:"result"`
	}
	if err := json.Unmarshal([]byte(roundTrip(`{"jsonrpc":"2.0","id":2,"method":"tools.list","params":{}}`)), &list); err != nil {
		t.Fatal(err)
	}
	got := roundTrip(`{"jsonrpc":"2.0","id":3,"method":"tools.invoke","params":{"callId":"1","tool":"files.read","arguments":{"path":"/hello.txt"},"catalogHash":"` + list.Result.CatalogHash + `"}}`)
	if !strings.Contains(got, `"text":"hi"`) {
		t.Errorf("files.read under the default config: %s", got)
	}
	got = roundTrip(`{"jsonrpc":"2.0","id":4,"method":"tools.invoke","params":{"callId":"2","tool":"files.write","arguments":{"path":"/x","content":"x"},"catalogHash":"` + list.Result.CatalogHash + `"}}`)
	if !strings.Contains(got, `"tool_unavailable"`) {
		t.Errorf("files.write under the read-only default: %s", got)
	}

	cancel() // what SIGTERM does through main's context
	if c := <-code; c != 0 {
		t.Fatalf("kernel exited %d", c)
	}
	if _, err := r.ReadLine(); err == nil {
		t.Error("the turn's connection is still open after shutdown")
	}
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left behind: %v", err)
	}
	data, err := os.ReadFile(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"event":"turn.closed"`) {
		t.Errorf("audit log has no turn.closed:\n%s", data)
	}
}

func TestKernelCommandRefusesABadConfig(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "k.toml")
	if err := os.WriteFile(cfg, []byte("[files]\nroot = \"/\"\n\n[[grant]]\nsubjet = \"integration:*\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "kernel", "--config", cfg)
	if code != 1 || !strings.Contains(stderr, cfg+`:5:1: unknown key "grant.subjet"`) || !strings.Contains(stderr, "hint: ") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
}

func TestKernelCommandRefusesASecondKernel(t *testing.T) {
	sock := kerneltest.Start(t, kerneltest.Options{}).Path
	code, _, stderr := runCLI(t, "kernel", "--root", t.TempDir(), "--socket", sock, "--audit", filepath.Join(t.TempDir(), "a.jsonl"))
	if code != 1 || !strings.Contains(stderr, "a kernel is already running on "+sock) {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
}

// runningKernel is "sharedos-mcp kernel" run by Run in this process,
// its stderr read a line at a time, for tests that signal it.
type runningKernel struct {
	t      *testing.T
	sock   string
	stderr *lineSignal
	code   chan int
	cancel context.CancelFunc
}

// startKernelCommand runs the kernel with config file cfg at logLevel, on a socket
// of its own, and waits until it listens.
func startKernelCommand(t *testing.T, cfg, logLevel string) *runningKernel {
	t.Helper()
	dir, err := os.MkdirTemp("", "sk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	k := &runningKernel{t: t, sock: filepath.Join(dir, "k.sock"), stderr: &lineSignal{lines: make(chan string, 1024)}, code: make(chan int, 1), cancel: cancel}
	go func() {
		k.code <- Run(ctx, cli.IO{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: k.stderr},
			[]string{"kernel", "--config", cfg, "--socket", k.sock, "--audit", filepath.Join(t.TempDir(), "a.jsonl"), "--log-level", logLevel})
	}()
	k.waitLine("kernel listening on " + k.sock)
	return k
}

// waitLine waits for a line of the kernel's stderr that contains want.
func (k *runningKernel) waitLine(want string) {
	k.t.Helper()
	for {
		select {
		case l := <-k.stderr.lines:
			if strings.Contains(l, want) {
				return
			}
		case c := <-k.code:
			k.t.Fatalf("kernel exited %d before printing %q", c, want)
		}
	}
}

// reload sends SIGHUP, as an operator does, and waits for want.
func (k *runningKernel) reload(want string) {
	k.t.Helper()
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		k.t.Fatal(err)
	}
	k.waitLine(want)
}

// toolNames is the catalogue a new turn of the integration cc is given.
func (k *runningKernel) toolNames() string {
	k.t.Helper()
	conn, err := net.Dial("unix", k.sock)
	if err != nil {
		k.t.Fatal(err)
	}
	defer conn.Close()
	r := jsonrpc.NewReader(conn, 0)
	var names []string
	for i, line := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"integration.hello","params":{"name":"cc","shim":{"version":"t"}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools.list","params":{}}`,
	} {
		if _, err := conn.Write([]byte(line + "\n")); err != nil {
			k.t.Fatal(err)
		}
		b, err := r.ReadLine()
		if err != nil {
			k.t.Fatal(err)
		}
		var list struct {
			Result struct{ Tools []struct{ Name string } } `json:"result"`
		}
		if i == 1 && json.Unmarshal(b, &list) == nil {
			for _, tl := range list.Result.Tools {
				names = append(names, tl.Name)
			}
		}
	}
	return strings.Join(names, ",")
}

// stop ends the kernel as a signal would, and checks it exits 0.
func (k *runningKernel) stop() {
	k.t.Helper()
	k.cancel()
	k.waitLine("kernel stopped")
	if c := <-k.code; c != 0 {
		k.t.Fatalf("kernel exited %d", c)
	}
}

// TestKernelReloadsItsConfigOnSIGHUP: a new config's grants apply to the
// next turn; a config that does not load is refused and the running one
// kept; the kernel says why it stops.
func TestKernelReloadsItsConfigOnSIGHUP(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "hello.txt"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "k.toml")
	writeCfg := func(actions string) {
		t.Helper()
		body := "[files]\nroot = " + strconv.Quote(root) + "\n\n[[grant]]\nsubject = \"integration:cc\"\nresource = \"files:/\"\ndescendants = true\nactions = [" + actions + "]\n"
		if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeCfg(`"read", "list"`)
	k := startKernelCommand(t, cfg, "error")
	if got := k.toolNames(); got != "files.list,files.read" {
		t.Fatalf("before the reload the catalogue is %q, want files.list and files.read", got)
	}

	writeCfg(`"read", "list", "search"`)
	k.reload("config reloaded")
	if got := k.toolNames(); got != "files.list,files.read,files.search" {
		t.Errorf("after the reload the catalogue is %q, want files.search too", got)
	}

	if err := os.WriteFile(cfg, []byte("[files]\nroot = 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	k.reload("reload refused, the running config is kept")
	if got := k.toolNames(); got != "files.list,files.read,files.search" {
		t.Errorf("after a refused reload the catalogue is %q, want the 3 tools it had", got)
	}

	// A config with several problems: each is said, in one reload.
	body := "[files]\nroot = " + strconv.Quote(root) + "\nroots = \"x\"\n\n[[grant]]\nsubject = \"integration:cc\"\nresource = \"files:/\"\nactions = [\"raed\"]\n"
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	k.reload("reload refused, the running config is kept: the config has 2 problems")
	k.waitLine(`sharedos-mcp: warning: ` + cfg + `:3:1: unknown key "files.roots" (did you mean root?)`)
	k.waitLine(`sharedos-mcp: warning: ` + cfg + `:5: grant #1: action "raed": want one of read, list, search, write, escalate, call; did you mean read?`)
	k.stop()
}

// TestKernelReloadStartsAndStopsUpstreams: a SIGHUP that adds an
// [[upstream]] starts it and new turns list its tools; one that removes
// it stops it and they do not.
func TestKernelReloadStartsAndStopsUpstreams(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "k.toml")
	state := filepath.Join(t.TempDir(), "state")
	grant := "\n[[grant]]\nsubject = \"integration:cc\"\nresource = \"sharedos:/escalate\"\nactions = [\"escalate\"]\n"
	up := fmt.Sprintf("\n[[upstream]]\nname = \"test\"\ncommand = [%q, %q]\nenv = { GORACE = \"atexit_sleep_ms=0\" }\n"+
		"\n[[grant]]\nsubject = \"integration:cc\"\nresource = \"test:/echo\"\nactions = [\"call\"]\n", exe, testupstream.Arg)
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(cfg, []byte(fmt.Sprintf("state_dir = %q\n", state)+body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Without upstreams the kernel needs a files root; the files root
	// changes only with a restart, so every version keeps it.
	root := t.TempDir()
	files := "[files]\nroot = " + strconv.Quote(root) + "\n"
	write(files + grant)
	k := startKernelCommand(t, cfg, "info")
	if got := k.toolNames(); got != "sharedos.escalate" {
		t.Fatalf("before the reload: %v", got)
	}

	write(files + grant + up)
	k.reload("sharedos-mcp: upstream ready (")
	if got := k.toolNames(); got != "sharedos.escalate,test.echo" {
		t.Errorf("after adding the upstream: %v", got)
	}

	write(files + grant)
	k.reload("upstream stopped: its [[upstream]] was removed or changed")
	if got := k.toolNames(); got != "sharedos.escalate" {
		t.Errorf("after removing the upstream: %v", got)
	}
	k.stop()
}
