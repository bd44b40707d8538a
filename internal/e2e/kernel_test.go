package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/internal/testbin"
	"github.com/sharedos/sharedos-mcp/internal/testfs"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
	"github.com/sharedos/sharedos-mcp/kernel/files"
)

// The reference kernel run as a user starts it, and serve as a harness
// spawns it, speaking MCP to the shim's stdin: the kernel's black-box
// tests.

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
	return startKernelProcessWith(t, "", config, root)
}

// startKernelProcessWith is startKernelProcess with top, keys of the
// config's top level, before its [files] table.
func startKernelProcessWith(t *testing.T, top, config, root string) *kernelProcess {
	t.Helper()
	bin := testbin.Path(t)
	sockDir, err := os.MkdirTemp("", "sk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	cfgFile := filepath.Join(t.TempDir(), "kernel.toml")
	if err := os.WriteFile(cfgFile, []byte(top+"[files]\nroot = "+fmt.Sprintf("%q", root)+"\n"+config), 0o600); err != nil {
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
	cmd := exec.Command(testbin.Path(t), "serve", "--integration", integration, "--socket", k.sock)
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
	root, _ := testfs.WriteTree(t)
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
	if evs[0].Event != audit.EventConfigLoaded || evs[0].Reason != "start" {
		t.Errorf("first event %+v; want the config the kernel started on", evs[0])
	}
	evs = evs[1:]
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
	root, _ := testfs.WriteTree(t)
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

// TestEndToEndTheIssuesLinkThroughTheShim replays the issue's attack with
// the real binary: the kernel under the grants of example.toml, the
// harness's calls through serve.
func TestEndToEndTheIssuesLinkThroughTheShim(t *testing.T) {
	example, err := os.ReadFile(filepath.Join(repoRoot, "testdata", "kernel", "example.toml"))
	if err != nil {
		t.Fatal(err)
	}
	grants := string(example[strings.Index(string(example), "[[grant]]"):])
	root := filepath.Join(t.TempDir(), "demo-root")
	for name, content := range map[string]string{
		"private.txt":          "Only listed, never read: no grant covers this file.\n",
		"docs/README.md":       "# Demo\n",
		"docs/drafts/NOTE.txt": "a note\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../..", filepath.Join(root, "docs", "drafts", "shared")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(root, "private.txt"), filepath.Join(root, "docs", "alias.txt")); err != nil {
		t.Fatal(err)
	}
	k := startKernelProcess(t, "allow_hard_links = false\n"+grants, root)
	answers := mcpSession(t, k, "claude-code",
		mcpInit,
		mcpCall(1, "files.read", map[string]string{"path": "/docs/drafts/shared/private.txt"}),
		mcpCall(2, "files.write", map[string]string{"path": "/docs/drafts/shared/docs/README.md", "content": "pwned"}),
		mcpCall(3, "files.read", map[string]string{"path": "/docs/alias.txt"}),
		mcpCall(4, "files.read", map[string]string{"path": "/docs/drafts/NOTE.txt"}),
	)
	for id, code := range map[string]string{"1": kproto.CodeNoMatchingGrant, "2": kproto.CodeNoMatchingGrant, "3": files.CodeHardLink} {
		if dig(answers[id], "result", "_meta", "sharedos/status") != "denied" || dig(answers[id], "result", "_meta", "sharedos/code") != code {
			t.Errorf("call %s: %v, want denied %s", id, answers[id], code)
		}
		if strings.Contains(fmt.Sprint(answers[id]), "never read") {
			t.Errorf("call %s leaked /private.txt: %v", id, answers[id])
		}
	}
	if got := dig(answers["4"], "result", "content", 0, "text"); got != "a note\n" {
		t.Errorf("a granted read: %v", answers["4"])
	}
	if got, err := os.ReadFile(filepath.Join(root, "docs", "README.md")); err != nil || string(got) != "# Demo\n" {
		t.Errorf("README.md now holds %q (%v)", got, err)
	}
	k.stop(t)
	data, err := os.ReadFile(k.audit)
	if err != nil {
		t.Fatal(err)
	}
	invoked := eventsNamed(parseEvents(t, data), audit.EventToolInvoked)
	if len(invoked) != 4 {
		t.Fatalf("%d tool.invoked, want 4: %+v", len(invoked), invoked)
	}
	for _, e := range invoked {
		if e.Requested == "files:/docs/drafts/shared/private.txt" && e.Resource != "files:/private.txt" {
			t.Errorf("the read through the link is recorded on %s", e.Resource)
		}
		if e.Code == files.CodeHardLink && e.Resource != "files:/docs/alias.txt" {
			t.Errorf("the hard link's read is recorded on %s", e.Resource)
		}
	}
	if !strings.Contains(string(data), `"requested":"files:/docs/drafts/shared/private.txt"`) {
		t.Error("the audit log does not say which path the call named")
	}
}

// The memory battery of issue 12 item 4, against the real kernel binary:
//
//	SHAREDOS_BATTERY=1 go test -run TestKernelMemoryBattery -v ./internal/e2e
//
// It builds a 300,000-entry directory and 1,000 files of 1 MiB (about
// 1 GiB of disk), so it runs only when asked.
func TestKernelMemoryBattery(t *testing.T) {
	if os.Getenv("SHAREDOS_BATTERY") == "" {
		t.Skip("set SHAREDOS_BATTERY=1 to run the memory battery (300,000 files and 1 GiB of disk)")
	}
	const peakLimit = 256 << 20
	root := t.TempDir()
	wide := filepath.Join(root, "wide")
	big := filepath.Join(root, "big")
	for _, d := range []string{wide, big} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 300_000 {
		f, err := os.Create(filepath.Join(wide, fmt.Sprintf("entry-%06d.txt", i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	content := []byte(strings.Repeat(strings.Repeat("x", 1023)+"\n", 1024))
	for i := range 1000 {
		if err := os.WriteFile(filepath.Join(big, fmt.Sprintf("f%04d.txt", i)), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	config := `
[[grant]]
subject = "integration:*"
resource = "files:/"
descendants = true
actions = ["list", "search", "write"]
`
	huge := map[string]string{"path": "/huge.txt", "content": strings.Repeat("A", 15<<20)}
	for _, tt := range []struct {
		name   string
		turns  int // connections, each pipelining calls
		calls  int // per turn
		tool   string
		args   map[string]string
		answer string // what every call is answered: its status, and its code when it has one
	}{
		{"32 pipelined files.list of 300,000 entries", 1, 32, "files.list", map[string]string{"path": "/wide"}, kproto.StatusSucceeded},
		{"10 parallel calls with a 15 MB argument", 10, 1, "files.write", huge, kproto.StatusFailed + "/" + kproto.CodeTooLarge},
		{"16 pipelined files.search over 1,000 x 1 MiB", 1, 16, "files.search", map[string]string{"path": "/big", "query": "absent"}, kproto.StatusSucceeded},
	} {
		t.Run(tt.name, func(t *testing.T) {
			k := startKernelProcess(t, config, root)
			cpu0 := cpuTicks(t, k.cmd.Process.Pid)
			results := make(chan map[string]int, tt.turns)
			for range tt.turns {
				go func() { results <- pipeline(t, k.sock, tt.calls, tt.tool, tt.args) }()
			}
			statuses := map[string]int{}
			for range tt.turns {
				for s, n := range <-results {
					statuses[s] += n
				}
			}
			peak := statusKB(t, k.cmd.Process.Pid, "VmHWM") << 10
			cpu := cpuTicks(t, k.cmd.Process.Pid) - cpu0
			t.Logf("%s: peak RSS %.1f MiB, CPU %.2f s, answers %v", tt.name, float64(peak)/(1<<20), float64(cpu)/100, statuses)
			if statuses[tt.answer] != tt.turns*tt.calls {
				t.Errorf("answers %v, want %d %s", statuses, tt.turns*tt.calls, tt.answer)
			}
			if peak > peakLimit {
				t.Errorf("peak RSS %d MiB, over %d MiB", peak>>20, peakLimit>>20)
			}
		})
	}
}

// pipeline says hello, lists, sends n calls before reading any answer,
// and counts the answers by status, or "status/code" when they carry a
// code.
func pipeline(t *testing.T, sock string, n int, tool string, args any) map[string]int {
	t.Helper()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := jsonrpc.NewReader(conn, 64<<20)
	send := func(id int, method string, params any) {
		b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Write(append(b, '\n')); err != nil {
			t.Fatal(err)
		}
	}
	recv := func() jsonrpc.Message {
		line, err := r.ReadLine()
		if err != nil {
			t.Fatalf("read answer: %v", err)
		}
		var m jsonrpc.Message
		if err := json.Unmarshal(line, &m); err != nil || m.Error != nil {
			t.Fatalf("answer %q: %v", line, err)
		}
		return m
	}
	send(1, kproto.MethodHello, kproto.HelloParams{Name: "battery", Shim: kproto.Peer{Version: "test"}})
	recv()
	send(2, kproto.MethodList, struct{}{})
	var list kproto.ListResult
	if err := json.Unmarshal(recv().Result, &list); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		send(3+i, kproto.MethodInvoke, kproto.InvokeParams{CallID: "b" + strconv.Itoa(i), Tool: tool, Arguments: raw, CatalogHash: list.CatalogHash})
	}
	statuses := map[string]int{}
	for range n {
		m := recv()
		for m.Method == kproto.MethodProgress {
			m = recv()
		}
		var res kproto.InvokeResult
		if err := json.Unmarshal(m.Result, &res); err != nil {
			t.Fatal(err)
		}
		if res.Code != "" {
			statuses[res.Status+"/"+res.Code]++
		} else {
			statuses[res.Status]++
		}
	}
	return statuses
}

// statusKB reads a "kB" field of /proc/PID/status.
func statusKB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// cpuTicks is the user and system time of a process, in clock ticks
// (100 a second on Linux).
func cpuTicks(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return utime + stime
}

// parseEvents reads an audit log through the kernel's own reader,
// failing on any line that is not a whole event.
func parseEvents(t *testing.T, data []byte) []audit.Event {
	t.Helper()
	var evs []audit.Event
	skipped, err := audit.Read(bytes.NewReader(data), audit.Filter{}, func(e audit.Event, _ []byte) error {
		evs = append(evs, e)
		return nil
	})
	if err != nil || skipped > 0 || (len(data) > 0 && data[len(data)-1] != '\n') {
		t.Fatalf("the audit log is not whole events, each on a line (%d skipped, %v): %q", skipped, err, data[max(0, len(data)-80):])
	}
	return evs
}

func eventsNamed(evs []audit.Event, name string) []audit.Event {
	var out []audit.Event
	for _, e := range evs {
		if e.Event == name {
			out = append(out, e)
		}
	}
	return out
}
