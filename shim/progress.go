package shim

import (
	"encoding/json"
	"strconv"

	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
)

// maxNotes bounds progress notifications waiting to be written. Beyond it
// a report is dropped rather than wait: progress is advice, a later
// report supersedes it, and the goroutine that reports it also reads
// every answer from the kernel.
const maxNotes = 64

// note is one notifications/progress line, for call.
type note struct {
	call *slot
	line []byte
}

// progressCall is a call whose client asked for progress.
type progressCall struct {
	sl    *slot
	token json.RawMessage
	last  float64
	sent  bool
}

// unwatchProgress stops the reports on callID: its answer has come (or
// will never be written). Reports the writer has already been handed are
// dropped by the writer once it has written or dropped the answer.
func (s *server) unwatchProgress(callID string) {
	s.mu.Lock()
	delete(s.progress, callID)
	s.mu.Unlock()
}

// onProgress turns the kernel's call.progress into notifications/progress
// for the client, for calls whose client gave a progress token, dropping
// reports that do not increase (MCP requires progress to increase). It
// runs on the kernel client's reading goroutine and never blocks.
func (s *server) onProgress(p kproto.ProgressParams) {
	s.mu.Lock()
	pc := s.progress[p.CallID]
	if pc == nil || (pc.sent && p.Progress <= pc.last) {
		// Not asked for, or not an increase. A call the kernel has
		// answered is no longer watched: its answer is read on this
		// goroutine, which unwatches it (relayCall), and the reports
		// come in order with the answers.
		s.mu.Unlock()
		return
	}
	pc.last, pc.sent = p.Progress, true
	s.mu.Unlock()
	line := make([]byte, 0, 128+len(pc.token)+len(p.Message))
	line = append(line, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":`...)
	line = append(line, pc.token...)
	line = append(line, `,"progress":`...)
	line = strconv.AppendFloat(line, p.Progress, 'f', -1, 64)
	if p.Total != nil {
		line = append(line, `,"total":`...)
		line = strconv.AppendFloat(line, *p.Total, 'f', -1, 64)
	}
	if p.Message != "" {
		line = append(line, `,"message":`...)
		line = jsonrpc.AppendString(line, p.Message)
	}
	line = append(line, "}}\n"...)
	s.out.note(note{call: pc.sl, line: line})
}
