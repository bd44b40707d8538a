package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
)

// answerTooLarge is the JSON-RPC error code of the answer put in place of
// one over the line bound (see boundedLines). The call it answers fails
// too_large.
const answerTooLarge = -32099

// idPrefix is how much of an over-long line is looked at for its id: a
// JSON-RPC library writes the id before the result.
const idPrefix = 64 << 10

// chunkSize is how much of an upstream's stdout is read at once.
const chunkSize = 32 << 10

// errLineTooLong is an over-long line whose id cannot be read from its
// beginning: nothing can be answered in its place, so the connection
// ends.
var errLineTooLong = errors.New("the upstream sent a line over the bound whose id is not in its beginning")

// processTransport starts the upstream's supervisor and speaks MCP over
// its stdio, as the SDK's CommandTransport does, with the upstream's
// stdout read through boundedLines: a line over the bound is never held
// whole.
type processTransport struct {
	cmd       *exec.Cmd
	grace     time.Duration
	lineBound int
	started   func(error)
}

func (t *processTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		t.started(err)
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		t.started(err)
		return nil, err
	}
	err = t.cmd.Start()
	t.started(err)
	if err != nil {
		return nil, err
	}
	lines := &boundedLines{r: stdout, limit: t.lineBound}
	return (&mcp.IOTransport{Reader: lines, Writer: &supervisorStdin{WriteCloser: stdin, cmd: t.cmd, grace: t.grace}, MaxLineLength: -1}).Connect(ctx)
}

// supervisorStdin is the supervisor's stdin. Closing it ends the
// connection the way the MCP stdio transport says: stdin closed, then the
// process given the grace period to exit, then SIGTERM, then SIGKILL.
type supervisorStdin struct {
	io.WriteCloser
	cmd   *exec.Cmd
	grace time.Duration
}

func (s *supervisorStdin) Close() error {
	err := s.WriteCloser.Close()
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()
	for _, sig := range []syscall.Signal{0, syscall.SIGTERM, syscall.SIGKILL} {
		if sig != 0 {
			_ = s.cmd.Process.Signal(sig)
		}
		t := time.NewTimer(s.grace)
		select {
		case werr := <-exited:
			t.Stop()
			return errors.Join(err, werr)
		case <-t.C:
		}
	}
	return errors.Join(err, errors.New("the supervisor does not exit"))
}

// boundedLines reads an upstream's stdout line by line and passes on each
// line of at most limit bytes as it is. A longer line is never held
// whole: once it passes the bound, the id is read from its first bytes,
// the rest is read and dropped, and in its place comes an error answer
// for that id (answerTooLarge), so the call it answers fails too_large
// while the connection goes on. A line over the bound with no id in its
// beginning, or that is a request (a "method" before the cut), cannot be
// answered for: the reader fails and the connection ends.
//
// What it holds is at most one line under the bound and the lines
// completed but not yet read (at most one chunk's worth besides), which
// the SDK reads one message at a time.
type boundedLines struct {
	r     io.Reader
	limit int

	line  []byte // the current line, while within the bound
	out   []byte // complete lines, ready to be read from off on
	off   int
	chunk []byte

	skipping bool   // dropping the rest of an over-long line
	skipped  int    // its length so far
	id       []byte // its id
	err      error
}

func (b *boundedLines) Read(p []byte) (int, error) {
	for b.off == len(b.out) {
		b.out, b.off = b.out[:0], 0
		if b.err != nil {
			return 0, b.err
		}
		if b.chunk == nil {
			b.chunk = make([]byte, chunkSize)
		}
		n, err := b.r.Read(b.chunk)
		if ferr := b.feed(b.chunk[:n]); ferr != nil {
			b.err = ferr
			continue
		}
		if err != nil {
			// A last line without its newline is passed on: the reader
			// after this one says whether it is a message.
			if !b.skipping {
				b.out = append(b.out, b.line...)
			}
			b.line = nil
			b.err = err
		}
	}
	n := copy(p, b.out[b.off:])
	b.off += n
	return n, nil
}

// Close does nothing: the connection ends by closing the upstream's
// stdin, and the pipe is closed once the supervisor has exited.
func (b *boundedLines) Close() error { return nil }

func (b *boundedLines) feed(c []byte) error {
	for len(c) > 0 {
		end, newline := len(c), false
		if i := bytes.IndexByte(c, '\n'); i >= 0 {
			end, newline = i+1, true
		}
		part := c[:end]
		c = c[end:]
		switch {
		case b.skipping:
			b.skipped += len(part)
		case len(b.line)+len(part) > b.limit:
			head := append(b.line, part[:min(len(part), max(0, idPrefix-len(b.line)))]...)
			id, ok := jsonrpc.LeadingMember(head, "id")
			if _, isRequest := jsonrpc.LeadingMember(head, "method"); !ok || isRequest || string(id) == "null" {
				return errLineTooLong
			}
			b.id = append(b.id[:0], id...)
			b.skipping, b.skipped = true, len(b.line)+len(part)
			b.line = b.line[:0]
			if cap(b.line) > 4*chunkSize {
				b.line = nil // give back what the long line grew it to
			}
		default:
			b.line = append(b.line, part...)
		}
		if !newline {
			continue
		}
		if b.skipping {
			b.out = append(b.out, tooLargeAnswer(b.id, b.skipped, b.limit)...)
			b.skipping = false
			continue
		}
		if len(b.out) == 0 {
			b.out, b.line = b.line, b.out[:0]
		} else {
			b.out = append(b.out, b.line...)
			b.line = b.line[:0]
		}
	}
	return nil
}

// tooLargeAnswer is the line put in place of an answer of size bytes.
func tooLargeAnswer(id []byte, size, limit int) []byte {
	msg := fmt.Sprintf("the answer is %d bytes, more than the %d a result may have (and %d for its envelope)", size, limit-lineEnvelope, lineEnvelope)
	line := append([]byte(`{"jsonrpc":"2.0","id":`), id...)
	line = append(line, `,"error":{"code":`+strconv.Itoa(answerTooLarge)+`,"message":`...)
	line = jsonrpc.AppendString(line, msg)
	return append(line, "}}\n"...)
}
