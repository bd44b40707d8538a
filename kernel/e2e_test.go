package kernel

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/testupstream"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
)

// The end-to-end tests run the real binary twice over: `kernel` as the
// host and `serve` as the harness would spawn it, and speak MCP to the
// shim's stdin. The binary is built once, on first use, so the unit tests
// in this package do not wait for (or depend on) the whole command.

var e2e struct {
	dir  string
	once sync.Once
	bin  string
	err  error
}

func TestMain(m *testing.M) {
	// The brokering tests run this binary as each upstream's supervisor
	// and as the test upstream itself.
	upstream.MaybeSupervise()
	testupstream.MaybeRun()
	dir, err := os.MkdirTemp("", "smcp-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	e2e.dir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func binary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: builds and runs the binary")
	}
	e2e.once.Do(func() {
		e2e.bin = filepath.Join(e2e.dir, "sharedos-mcp")
		out, err := exec.Command("go", "build", "-o", e2e.bin, "..").CombinedOutput()
		if err != nil {
			e2e.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if e2e.err != nil {
		t.Fatal(e2e.err)
	}
	return e2e.bin
}

// kernelProcess is a running `sharedos-mcp kernel`.
type kernelProcess struct {
	cmd    *exec.Cmd
	sock   string
	audit  string
	stderr *bytes.Buffer
	done   chan error
	once   sync.Once
}

// startKernelProcess runs the kernel with config (a TOML document whose
// files root is root) and returns once it says it is listening.
func startKernelProcess(t *testing.T, config, root string) *kernelProcess {
	t.Helper()
	bin := binary(t)
	sockDir, err := os.MkdirTemp("", "sk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	cfgFile := filepath.Join(t.TempDir(), "kernel.toml")
	if err := os.WriteFile(cfgFile, []byte("[files]\nroot = "+fmt.Sprintf("%q", root)+"\n"+config), 0o600); err != nil {
		t.Fatal(err)
	}
	k := &kernelProcess{sock: filepath.Join(sockDir, "k.sock"), audit: filepath.Join(t.TempDir(), "audit.jsonl"), stderr: &bytes.Buffer{}, done: make(chan error, 1)}
	k.cmd = exec.Command(bin, "kernel", "--config", cfgFile, "--socket", k.sock, "--audit", k.audit)
	pipe, err := k.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := k.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(pipe)
	first, err := br.ReadString('\n')
	if err != nil || !strings.Contains(first, "kernel listening on "+k.sock) {
		_ = k.cmd.Process.Kill()
		rest, _ := readAllString(br)
		t.Fatalf("kernel did not start: %q %v\n%s", first, err, rest)
	}
	go func() {
		rest, _ := readAllString(br)
		k.stderr.WriteString(rest)
		k.done <- k.cmd.Wait()
	}()
	t.Cleanup(func() { k.stop(t) })
	return k
}

func readAllString(br *bufio.Reader) (string, error) {
	var sb strings.Builder
	_, err := br.WriteTo(&sb)
	return sb.String(), err
}

// stop sends SIGTERM and checks the kernel exits 0 and removes its socket.
func (k *kernelProcess) stop(t *testing.T) {
	t.Helper()
	k.once.Do(func() {
		if err := k.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Error(err)
		}
		if err := <-k.done; err != nil {
			t.Errorf("kernel exit: %v\n%s", err, k.stderr)
		}
		if _, err := os.Lstat(k.sock); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("kernel left its socket behind: %v", err)
		}
	})
}

// mcpSession runs `serve` with lines on its stdin and returns its stdout
// answers by id, after the shim exits (it exits 0 at stdin EOF once every
// request is answered).
func mcpSession(t *testing.T, k *kernelProcess, integration string, lines ...string) map[string]map[string]any {
	t.Helper()
	cmd := exec.Command(binary(t), "serve", "--integration", integration, "--socket", k.sock)
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("serve: %v\nstderr:\n%s", err, stderr.String())
	}
	answers := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("serve wrote %q: %v", line, err)
		}
		answers[fmt.Sprint(m["id"])] = m
	}
	return answers
}

func mcpCall(id int, tool string, args map[string]string) string {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args}})
	return string(b)
}

const mcpInit = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}`

// dig walks a decoded JSON value by object keys and array indexes.
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

func TestEndToEndThroughTheShim(t *testing.T) {
	root, _ := writeTree(t)
	k := startKernelProcess(t, `
[[grant]]
subject = "integration:claude-code"
resource = "files:/public"
descendants = true
actions = ["read", "list"]
`, root)
	answers := mcpSession(t, k, "claude-code",
		mcpInit,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		mcpCall(2, "files.read", map[string]string{"path": "/public/a.txt"}),
		mcpCall(3, "files_read", map[string]string{"path": "/private/secret.txt"}),
		mcpCall(4, "files.list", map[string]string{"path": "/public/sub"}),
		mcpCall(5, "files.write", map[string]string{"path": "/public/x", "content": "x"}),
	)

	var names []string
	for _, tl := range dig(answers["1"], "result", "tools").([]any) {
		names = append(names, dig(tl, "name").(string))
		if dig(tl, "requiredCapability") != nil || dig(tl, "readWrite") != nil {
			t.Errorf("the shim published kernel-internal fields: %v", tl)
		}
	}
	if strings.Join(names, ",") != "files.list,files.read" {
		t.Errorf("tools/list published %v", names)
	}
	published, _ := dig(answers["1"], "result", "_meta", "sharedos/catalogHash").(string)
	if len(published) != 64 {
		t.Fatalf("tools/list _meta: %v", dig(answers["1"], "result", "_meta"))
	}

	if got := dig(answers["2"], "result", "content", 0, "text"); got != "hello world\nsecond line\n" || dig(answers["2"], "result", "isError") == true {
		t.Errorf("granted files.read: %v", answers["2"])
	}
	if dig(answers["3"], "result", "isError") != true || dig(answers["3"], "result", "_meta", "sharedos/status") != "denied" ||
		dig(answers["3"], "result", "_meta", "sharedos/code") != "no_matching_grant" {
		t.Errorf("denied files.read: %v", answers["3"])
	}
	if strings.Contains(fmt.Sprint(answers["3"]), "private needle") {
		t.Errorf("the denied call leaked content: %v", answers["3"])
	}
	if got := dig(answers["4"], "result", "structuredContent", "entries", 0, "name"); got != "b.txt" {
		t.Errorf("files.list structuredContent: %v", answers["4"])
	}
	if dig(answers["5"], "result", "_meta", "sharedos/code") != "tool_unavailable" {
		t.Errorf("unpublished files.write: %v", answers["5"])
	}
	if _, err := os.Lstat(filepath.Join(root, "public", "x")); !errors.Is(err, os.ErrNotExist) {
		t.Error("a refused write created the file")
	}

	k.stop(t)
	data, err := os.ReadFile(k.audit)
	if err != nil {
		t.Fatal(err)
	}
	evs := parseEvents(t, data)
	var invoked int
	for _, e := range evs {
		if e.Integration != "claude-code" {
			t.Errorf("event for %q, want claude-code: %+v", e.Integration, e)
		}
		if e.Event == audit.EventToolInvoked {
			invoked++
			if e.CatalogHash != published {
				t.Errorf("tool.invoked catalogHash %s, the shim published %s", e.CatalogHash, published)
			}
		}
	}
	if invoked != 4 || evs[len(evs)-1].Event != audit.EventTurnClosed {
		t.Errorf("%d tool.invoked, last event %q; want 4 and turn.closed", invoked, evs[len(evs)-1].Event)
	}
}

func TestEndToEndEscalation(t *testing.T) {
	root, _ := writeTree(t)
	k := startKernelProcess(t, `
[[grant]]
subject = "integration:*"
resource = "files:/public"
descendants = true
actions = ["read"]
[[grant]]
subject = "integration:*"
resource = "sharedos:/escalate"
actions = ["escalate"]
`, root)
	answers := mcpSession(t, k, "codex",
		mcpInit,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		mcpCall(2, "sharedos.escalate", map[string]string{"reason": "need write access to /public"}),
		mcpCall(3, "files.read", map[string]string{"path": "/public/a.txt"}),
	)
	if dig(answers["2"], "result", "isError") == true {
		t.Errorf("sharedos.escalate: %v", answers["2"])
	}
	if dig(answers["3"], "result", "_meta", "sharedos/code") != "escalation_pending" {
		t.Errorf("call after escalation: %v", answers["3"])
	}
	k.stop(t)
	data, err := os.ReadFile(k.audit)
	if err != nil {
		t.Fatal(err)
	}
	esc := eventsNamed(parseEvents(t, data), audit.EventTurnEscalated)
	if len(esc) != 1 || esc[0].Reason != "need write access to /public" || esc[0].Integration != "codex" {
		t.Errorf("turn.escalated events %+v", esc)
	}
}
