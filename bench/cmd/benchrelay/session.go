package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sharedos/sharedos-mcp/bench/internal/synth"
	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
)

// sessionTimeout bounds one spawned peer's life, so a peer that stops
// answering fails the run instead of hanging it.
const sessionTimeout = 2 * time.Minute

// conn is one line-oriented JSON-RPC conversation: an MCP peer's stdio,
// or the kernel socket itself for the direct client.
type conn struct {
	w *bufio.Writer
	r *synth.LineReader
}

// newConn reads into a buffer that holds a whole 512-tool catalogue, so
// the harness's own reading does not grow a buffer inside a timed list,
// and that keeps the size a payload grows it to, so the harness copies
// and allocates nothing for the payloads after the first.
func newConn(w io.Writer, r io.Reader) *conn {
	return &conn{w: bufio.NewWriterSize(w, 64<<10), r: synth.NewLineReader(r, 1<<20)}
}

// answer is the part of a response the harness checks.
type answer struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *jsonrpc.Error  `json:"error"`
}

// send writes one request and flushes it.
func (c *conn) send(line []byte) error {
	c.w.Write(line)
	return c.w.Flush()
}

// next reads the next response, skipping notifications, and says when
// its line had been read, before the harness spent time decoding it. The
// returned line is valid until the next read.
func (c *conn) next() ([]byte, answer, time.Time, error) {
	for {
		line, err := c.r.ReadLine()
		at := time.Now()
		if err != nil {
			return nil, answer{}, at, err
		}
		var a answer
		if err := json.Unmarshal(line, &a); err != nil {
			return nil, a, at, fmt.Errorf("unreadable answer %.200q: %w", line, err)
		}
		if a.ID == nil {
			continue // a notification
		}
		return line, a, at, nil
	}
}

// roundTrip sends one request and returns its answer, which must be the
// next one and must not be a JSON-RPC error.
func (c *conn) roundTrip(id int, line []byte) (answer, time.Duration, error) {
	start := time.Now()
	if err := c.send(line); err != nil {
		return answer{}, 0, err
	}
	_, a, at, err := c.next()
	d := at.Sub(start)
	if err != nil {
		return a, d, err
	}
	if string(a.ID) != strconv.Itoa(id) {
		return a, d, fmt.Errorf("answer to id %s arrived while waiting for %d", a.ID, id)
	}
	if a.Error != nil {
		return a, d, fmt.Errorf("request %d answered with an error: %s", id, a.Error.Message)
	}
	return a, d, nil
}

// session is one spawned MCP peer speaking over its stdin and stdout.
type session struct {
	*conn
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *bytes.Buffer
	timer  *time.Timer
	start  time.Time
}

// spawn starts cmd with pipes on stdin and stdout; the clock for cold
// start runs from just before the fork.
func spawn(cmd *exec.Cmd) (*session, error) {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	s := &session{cmd: cmd, stdin: stdin, stderr: new(bytes.Buffer)}
	cmd.Stderr = &limitedWriter{buf: s.stderr, max: 8 << 10}
	s.start = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s.conn = newConn(stdin, stdout)
	s.timer = time.AfterFunc(sessionTimeout, func() { cmd.Process.Kill() })
	return s, nil
}

// usage is what the kernel accounted to a peer process.
type usage struct {
	rss    int64 // peak resident set size, bytes
	faults int64 // minor page faults
}

// close ends the session by closing stdin, the way a harness does, and
// returns the peer's usage. The peak RSS is read from /proc before stdin
// closes: wait4's ru_maxrss would not do, because Linux carries the
// pre-exec address space's peak into it, and os/exec starts the child
// sharing the harness's own.
func (s *session) close() (usage, error) {
	hwm, herr := vmHWM(s.cmd.Process.Pid)
	s.stdin.Close()
	err := s.cmd.Wait()
	s.timer.Stop()
	if err != nil {
		return usage{}, fmt.Errorf("%s exited: %w; stderr: %s", s.cmd.Path, err, s.stderr)
	}
	if herr != nil {
		return usage{}, herr
	}
	ru, ok := s.cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return usage{}, errors.New("no rusage")
	}
	return usage{rss: hwm, faults: ru.Minflt}, nil
}

// vmHWM is a live process's peak resident set size in bytes.
func vmHWM(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read peak RSS: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("read peak RSS: %q: %w", line, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("read peak RSS: no VmHWM in /proc/%d/status", pid)
}

// kill ends a session that failed.
func (s *session) kill() {
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.timer.Stop()
}

func (s *session) fail(err error) error {
	s.kill()
	return fmt.Errorf("%w; stderr: %s", err, s.stderr)
}

// dialKernel opens the direct client's connection, with a deadline for
// the same reason as sessionTimeout.
func dialKernel(path string) (*conn, net.Conn, error) {
	c, err := net.Dial("unix", path)
	if err != nil {
		return nil, nil, err
	}
	c.SetDeadline(time.Now().Add(sessionTimeout))
	return newConn(c, c), c, nil
}

type limitedWriter struct {
	mu  sync.Mutex
	buf *bytes.Buffer
	max int
}

func (w *limitedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if room := w.max - w.buf.Len(); room > 0 {
		w.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
