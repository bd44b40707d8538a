// Command demo runs the quickstart: the reference kernel under the
// example config's grants, and one more that asks a person, serving a
// copy of the demo tree; one scripted MCP session through the shim that
// shows what the grants allow and refuse; a second whose write waits for
// a person's approval, which the operator gives out of band while it
// waits; then the audit record, each call in its place, and its hash
// chain.
//
//	go run ./scripts/demo [-bin ./sharedos-mcp]
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	bin := flag.String("bin", "", "the sharedos-mcp binary (default: build one)")
	flag.Parse()
	if err := run(*bin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "demo: error: %v\n", err)
		os.Exit(1)
	}
}

const (
	config   = "testdata/kernel/example.toml"
	demoTree = "testdata/kernel/demo-root"
)

// session is what the scripted harness sends, as claude-code: the
// handshake and the catalogue; a read and a write the grants allow; a
// write they refuse; a link that leads out of the root; the written file
// read back (calls take effect in the order they arrive); an escalation,
// and a call after it.
var session = []string{
	`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"demo","version":"1"}}}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
	`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"/docs/README.md"}}}`,
	`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"files.write","arguments":{"path":"/docs/drafts/plan.md","content":"step 1: ask before touching /docs\n"}}}`,
	`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"files.write","arguments":{"path":"/docs/README.md","content":"overwritten"}}}`,
	`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"/docs/outside"}}}`,
	`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"/docs/drafts/plan.md"}}}`,
	`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"sharedos.escalate","arguments":{"reason":"The README needs a change I may not make."}}}`,
	`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"/docs/README.md"}}}`,
}

// asking is the grant the demo adds to the example's: writing the
// changelog waits for a person's yes, call by call.
const asking = `
# Added by the demo: Claude Code may write /docs/CHANGELOG.md only once a
# person approves each call: the person at the harness (MCP elicitation),
# or the operator (sharedos-mcp approve).
[[grant]]
subject = "integration:claude-code"
resource = "files:/docs/CHANGELOG.md"
actions = ["write"]
ask = "harness"
`

// askedTurn is the second turn: a client that declares no elicitation
// (so only the operator can be asked) writes the changelog.
var askedTurn = []string{
	`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"demo","version":"1"}}}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"files.write","arguments":{"path":"/docs/CHANGELOG.md","content":"v2: the README is left as it was\n"}}}`,
}

// what says, per request id, what the demo shows with it.
var what = map[int]string{
	3:  "read a file under /docs (granted)",
	4:  "write under /docs/drafts (granted until 2027)",
	5:  "write /docs/README.md (only read is granted there)",
	6:  "read /docs/outside, a link to a file outside the root",
	7:  "read back what #4 wrote (calls take effect in arrival order)",
	8:  "escalate to a person",
	9:  "any call after the escalation",
	10: "write /docs/CHANGELOG.md, held until a person approves it",
}

func run(bin string, out io.Writer) error {
	tmp, err := os.MkdirTemp("", "smcp-demo")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if bin == "" {
		bin = filepath.Join(tmp, "sharedos-mcp")
		if err := build(bin, out); err != nil {
			return err
		}
	}
	root := filepath.Join(tmp, "demo-root")
	if err := copyTree(demoTree, root); err != nil {
		return fmt.Errorf("copy the demo tree: %w", err)
	}
	secret := filepath.Join(tmp, "outside-the-root.txt")
	if err := os.WriteFile(secret, []byte("nobody granted this\n"), 0o644); err != nil {
		return err
	}
	if err := os.Symlink(secret, filepath.Join(root, "docs", "outside")); err != nil {
		return err
	}
	sock := filepath.Join(tmp, "kernel.sock")
	audit := filepath.Join(tmp, "audit.jsonl")
	example, err := os.ReadFile(config)
	if err != nil {
		return err
	}
	config := filepath.Join(tmp, "kernel.toml")
	if err := os.WriteFile(config, append(example, asking...), 0o600); err != nil {
		return err
	}
	fmt.Fprintf(out, "$ cp testdata/kernel/example.toml %s; cat >> %s   # the example's grants, and one that asks\n%s\n\n", config, config, strings.TrimSpace(asking))

	check := []string{"kernel", "check", "--config", config, "--root", root}
	fmt.Fprintf(out, "$ sharedos-mcp %s   # what each integration may do\n", strings.Join(check, " "))
	b, err := exec.Command(bin, check...).CombinedOutput()
	out.Write(b)
	if err != nil {
		return fmt.Errorf("kernel check: %w", err)
	}

	args := []string{"kernel", "--config", config, "--root", root, "--socket", sock, "--audit", audit, "--log-level", "warn"}
	fmt.Fprintln(out)
	fmt.Fprintf(out, "$ sharedos-mcp %s\n", strings.Join(args, " "))
	kernel := exec.Command(bin, args...)
	kstderr, err := kernel.StderrPipe()
	if err != nil {
		return err
	}
	if err := kernel.Start(); err != nil {
		return err
	}
	defer func() {
		kernel.Process.Signal(syscall.SIGTERM)
		kernel.Wait()
	}()
	if err := waitListening(kstderr, out); err != nil {
		return err
	}

	fmt.Fprintf(out, "\n$ sharedos-mcp serve --integration claude-code --socket %s   # a scripted harness on stdin\n", sock)
	serve := exec.Command(bin, "serve", "--integration", "claude-code", "--socket", sock)
	serve.Stdin = strings.NewReader(strings.Join(session, "\n") + "\n")
	serve.Stderr = os.Stderr
	answers, err := serve.Output()
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(answers)), "\n") {
		if err := describe(out, line); err != nil {
			return err
		}
	}

	if err := approvedOutOfBand(bin, sock, out); err != nil {
		return err
	}

	fmt.Fprintf(out, "\n$ sharedos-mcp audit --file %s   # the turns, each call in its place\n", audit)
	table, err := exec.Command(bin, "audit", "--file", audit).CombinedOutput()
	out.Write(table)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\n$ sharedos-mcp audit verify --file %s\n", audit)
	verify, err := exec.Command(bin, "audit", "verify", "--file", audit).CombinedOutput()
	out.Write(verify)
	return err
}

// approvedOutOfBand plays the second turn: its write is held while a
// person is asked; the operator lists what waits and approves it, and the
// held call runs.
func approvedOutOfBand(bin, sock string, out io.Writer) error {
	fmt.Fprintf(out, "\n$ sharedos-mcp serve --integration claude-code --socket %s &   # a second turn, whose client cannot be asked\n", sock)
	serve := exec.Command(bin, "serve", "--integration", "claude-code", "--socket", sock)
	serve.Stdin = strings.NewReader(strings.Join(askedTurn, "\n") + "\n")
	serve.Stderr = os.Stderr
	var answers strings.Builder
	serve.Stdout = &answers
	if err := serve.Start(); err != nil {
		return err
	}
	defer serve.Process.Kill()
	var id string
	for deadline := time.Now().Add(20 * time.Second); id == ""; time.Sleep(20 * time.Millisecond) {
		listed, err := exec.Command(bin, "approvals", "--json", "--socket", sock).Output()
		if err != nil {
			return fmt.Errorf("approvals: %w", err)
		}
		var l struct{ Approvals []struct{ ID string } }
		if err := json.Unmarshal(listed, &l); err != nil {
			return err
		}
		if len(l.Approvals) > 0 {
			id = l.Approvals[0].ID
		} else if time.Now().After(deadline) {
			return errors.New("the changelog write never waited for approval")
		}
	}
	for _, cmd := range [][]string{{"approvals", "--socket", sock}, {"approve", id, "--socket", sock}} {
		fmt.Fprintf(out, "\n$ sharedos-mcp %s   # the operator, out of band\n", strings.Join(cmd, " "))
		b, err := exec.Command(bin, cmd...).CombinedOutput()
		out.Write(b)
		if err != nil {
			return fmt.Errorf("%s: %w", cmd[0], err)
		}
	}
	if err := serve.Wait(); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	fmt.Fprintln(out, "\n# the second turn's answers")
	for _, line := range strings.Split(strings.TrimSpace(answers.String()), "\n") {
		if err := describe(out, line); err != nil {
			return err
		}
	}
	return nil
}

// build builds the binary, saying every few seconds that it still is:
// the first build of a fresh checkout fetches and compiles every module.
func build(bin string, out io.Writer) error {
	fmt.Fprintln(out, "# building sharedos-mcp (the first build also downloads and compiles its modules)")
	start := time.Now()
	cmd := exec.Command("go", "build", "-o", bin, ".")
	var b strings.Builder
	cmd.Stdout, cmd.Stderr = &b, &b
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("go build: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("go build: %v\n%s", err, b.String())
			}
			fmt.Fprintf(out, "# built in %.1fs\n\n", time.Since(start).Seconds())
			return nil
		case <-tick.C:
			fmt.Fprintf(out, "#   still building (%.0fs)\n", time.Since(start).Seconds())
		}
	}
}

// copyTree copies the regular files and directories of src to dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, data, 0o644)
	})
}

// waitListening echoes the kernel's start-up lines until it says it
// listens; the kernel writes that line only once the socket accepts.
func waitListening(stderr io.Reader, out io.Writer) error {
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				return errors.New("the kernel exited before listening")
			}
			fmt.Fprintln(out, "  "+line)
			if strings.Contains(line, "listening on") {
				go func() {
					for range lines {
					}
				}()
				return nil
			}
		case <-deadline:
			return errors.New("the kernel did not start listening within 10s")
		}
	}
}

// describe prints one MCP answer the way a person wants to read it.
func describe(out io.Writer, line string) error {
	var m struct {
		ID     int             `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		return fmt.Errorf("serve wrote a line that is not JSON-RPC: %q", line)
	}
	if m.Error != nil {
		fmt.Fprintf(out, "  #%d error %d: %s\n", m.ID, m.Error.Code, m.Error.Message)
		return nil
	}
	var r struct {
		ProtocolVersion string `json:"protocolVersion"`
		Tools           []struct {
			Name string `json:"name"`
		} `json:"tools"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool              `json:"isError"`
		Meta    map[string]string `json:"_meta"`
	}
	json.Unmarshal(m.Result, &r)
	switch {
	case r.ProtocolVersion != "":
		fmt.Fprintf(out, "  #%d initialize: protocol %s\n", m.ID, r.ProtocolVersion)
	case r.Tools != nil:
		var names []string
		for _, t := range r.Tools {
			names = append(names, t.Name)
		}
		fmt.Fprintf(out, "  #%d tools/list: %s (catalogHash %.16s…)\n", m.ID, strings.Join(names, ", "), r.Meta["sharedos/catalogHash"])
	case r.IsError:
		var refusal struct{ Message string }
		if len(r.Content) > 0 {
			json.Unmarshal([]byte(r.Content[0].Text), &refusal)
		}
		fmt.Fprintf(out, "  #%d %s\n     tools/call: %s (%s): %s\n", m.ID, what[m.ID], r.Meta["sharedos/status"], r.Meta["sharedos/code"], refusal.Message)
	default:
		text := ""
		if len(r.Content) > 0 {
			text, _, _ = strings.Cut(r.Content[0].Text, "\n")
		}
		fmt.Fprintf(out, "  #%d %s\n     tools/call: allowed: %q\n", m.ID, what[m.ID], text)
	}
	return nil
}
