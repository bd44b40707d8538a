package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
)

// The bridge runs `<this program> tap WIREDIR -- sharedos-mcp serve …` as
// its stdio child, so every line between the bridge and each shim process
// is on record: the probe compares them with what crossed HTTP, and the
// run checks that no shim process served more than one session.

// wireRecord is one line of a wire log: who wrote the line and the line,
// as JSON when it is JSON.
type wireRecord struct {
	From string          `json:"from"` // "client" (the bridge, for the HTTP client) or "shim"
	Msg  json.RawMessage `json:"msg,omitempty"`
	Line string          `json:"line,omitempty"` // a line that is not JSON
}

// wireLog appends records to one child's file; both relay directions
// write to it.
type wireLog struct {
	mu sync.Mutex
	f  *os.File
}

func (w *wireLog) record(from string, line []byte) error {
	line = bytes.TrimRight(line, "\r\n")
	r := wireRecord{From: from}
	if json.Valid(line) {
		r.Msg = json.RawMessage(line)
	} else {
		r.Line = string(line)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err = w.f.Write(append(b, '\n'))
	return err
}

// runTap relays stdin to the command and its stdout back, a line at a
// time, recording each line before passing it on (so a record exists
// before the other side can have seen the message). The command sees its
// stdin close when the tap's does; the tap exits with the command's code
// once the command's stdout is drained. Termination signals go to the
// command, whose exit then ends the tap.
func runTap(args []string) int {
	if len(args) < 3 || args[1] != "--" {
		fmt.Fprintln(os.Stderr, "usage: conformance-mcp tap WIREDIR -- COMMAND [ARG...]")
		return 2
	}
	f, err := os.CreateTemp(args[0], "child-*.jsonl")
	if err != nil {
		fmt.Fprintf(os.Stderr, "conformance-mcp tap: error: %v\n", err)
		return 1
	}
	defer f.Close()
	w := &wireLog{f: f}
	cmd := exec.Command(args[2], args[3:]...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		fmt.Fprintf(os.Stderr, "conformance-mcp tap: error: %v\n", err)
		return 1
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintf(os.Stderr, "conformance-mcp tap: error: %v\n", err)
		return 1
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "conformance-mcp tap: error: %v\n", err)
		return 1
	}
	go func() {
		for s := range sigs {
			cmd.Process.Signal(s)
		}
	}()
	go func() {
		relay(os.Stdin, in, w, "client")
		in.Close()
	}()
	relay(out, os.Stdout, w, "shim")
	err = cmd.Wait()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		if code := exit.ExitCode(); code > 0 {
			return code
		}
		return 1
	case err != nil:
		fmt.Fprintf(os.Stderr, "conformance-mcp tap: error: %v\n", err)
		return 1
	}
	return 0
}

// relay copies lines from r to dst, recording each first, until r ends or
// dst refuses a write.
func relay(r io.Reader, dst io.Writer, w *wireLog, from string) {
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			if w.record(from, line) != nil {
				return
			}
			if _, werr := dst.Write(line); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// wireChild is what one shim process's wire log holds.
type wireChild struct {
	File    string
	Records []wireRecord
}

// rpc is the part of a JSON-RPC message the checks look at.
type rpc struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

func readWire(dir string) ([]wireChild, error) {
	files, err := filepath.Glob(filepath.Join(dir, "child-*.jsonl"))
	if err != nil {
		return nil, fmt.Errorf("read wire logs: %w", err)
	}
	sort.Strings(files)
	var out []wireChild
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("read wire logs: %w", err)
		}
		c := wireChild{File: name}
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			if line == "" {
				continue
			}
			var r wireRecord
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				return nil, fmt.Errorf("read wire log %s: %w", name, err)
			}
			c.Records = append(c.Records, r)
		}
		out = append(out, c)
	}
	return out, nil
}

// findWire returns the first message from `from` whose id is id (a JSON
// value) in any child's log, and the child's file.
func findWire(children []wireChild, from, id string) (rpc, string, bool) {
	for _, c := range children {
		for _, r := range c.Records {
			if r.From != from || r.Msg == nil {
				continue
			}
			var m rpc
			if json.Unmarshal(r.Msg, &m) == nil && string(m.ID) == id {
				return m, c.File, true
			}
		}
	}
	return rpc{}, "", false
}

// sessionsPerChild checks the bridge's one-child-per-session promise: no
// shim process saw more than one initialize. It returns how many children
// served a legacy session (one initialize) and how many served modern
// requests only (none).
func sessionsPerChild(children []wireChild) (legacy, modern int, err error) {
	var errs []error
	for _, c := range children {
		n := 0
		for _, r := range c.Records {
			var m rpc
			if r.From == "client" && r.Msg != nil && json.Unmarshal(r.Msg, &m) == nil && m.Method == "initialize" {
				n++
			}
		}
		switch n {
		case 0:
			modern++
		case 1:
			legacy++
		default:
			errs = append(errs, fmt.Errorf("%s: one shim process was sent %d initialize requests", filepath.Base(c.File), n))
		}
	}
	return legacy, modern, errors.Join(errs...)
}
