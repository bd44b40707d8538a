// Command demo runs the quickstart: the reference kernel on its embedded
// default (a directory served read-only to every integration) and one
// scripted MCP session through the shim, then prints the audit record.
//
//	go run ./scripts/demo [-bin ./sharedos-mcp] [-root testdata/kernel/demo-root]
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	bin := flag.String("bin", "", "the sharedos-mcp binary (default: build one)")
	root := flag.String("root", "testdata/kernel/demo-root", "the directory the kernel serves")
	flag.Parse()
	if err := run(*bin, *root, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "demo: error: %v\n", err)
		os.Exit(1)
	}
}

// session is what the scripted harness sends: the handshake, the
// catalogue, one call the default grant allows and two it does not.
var session = []string{
	`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"demo","version":"1"}}}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
	`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"/docs/README.md"}}}`,
	`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"files.write","arguments":{"path":"/docs/README.md","content":"overwritten"}}}`,
	`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"/../../etc/passwd"}}}`,
}

func run(bin, root string, out io.Writer) error {
	tmp, err := os.MkdirTemp("", "smcp-demo")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if bin == "" {
		bin = filepath.Join(tmp, "sharedos-mcp")
		fmt.Fprintln(out, "# building sharedos-mcp")
		if b, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
			return fmt.Errorf("go build: %v\n%s", err, b)
		}
	}
	sock := filepath.Join(tmp, "kernel.sock")
	audit := filepath.Join(tmp, "audit.jsonl")

	args := []string{"kernel", "--root", root, "--socket", sock, "--audit", audit}
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

	fmt.Fprintf(out, "\n$ sharedos-mcp serve --integration demo --socket %s   # a scripted harness on stdin\n", sock)
	serve := exec.Command(bin, "serve", "--integration", "demo", "--socket", sock)
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

	fmt.Fprintf(out, "\n$ sharedos-mcp audit --file %s\n", audit)
	table, err := exec.Command(bin, "audit", "--file", audit).CombinedOutput()
	out.Write(table)
	return err
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
		fmt.Fprintf(out, "  #%d tools/call: %s (%s): %s\n", m.ID, r.Meta["sharedos/status"], r.Meta["sharedos/code"], refusal.Message)
	default:
		text := ""
		if len(r.Content) > 0 {
			text, _, _ = strings.Cut(r.Content[0].Text, "\n")
		}
		fmt.Fprintf(out, "  #%d tools/call: allowed: %q…\n", m.ID, text)
	}
	return nil
}
