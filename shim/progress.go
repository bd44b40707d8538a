package shim

import (
	"strconv"

	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
)

// onProgress turns the kernel's call.progress into notifications/progress
// for the client, for calls whose client gave a progress token, dropping
// reports that do not increase (MCP requires progress to increase). It
// runs on the kernel client's reading goroutine and never blocks. A call
// whose answer is decided is no longer watched (turnState.decide), and the
// writer drops a note on a call whose answer it has taken before it.
func (s *server) onProgress(r kproto.ProgressParams) {
	s.update(func(st *turnState) {
		p := st.calls[r.CallID]
		if p == nil || len(st.notes) >= maxNotes {
			return
		}
		to := p.progress
		if to.sent && r.Progress <= to.last {
			return
		}
		to.last, to.sent = r.Progress, true
		st.notes = append(st.notes, note{call: p, line: progressLine(to.token, r)})
	})
}

// progressLine is the notifications/progress line for report r.
func progressLine(token []byte, r kproto.ProgressParams) []byte {
	line := make([]byte, 0, 128+len(token)+len(r.Message))
	line = append(line, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":`...)
	line = append(line, token...)
	line = append(line, `,"progress":`...)
	line = strconv.AppendFloat(line, r.Progress, 'f', -1, 64)
	if r.Total != nil {
		line = append(line, `,"total":`...)
		line = strconv.AppendFloat(line, *r.Total, 'f', -1, 64)
	}
	if r.Message != "" {
		line = append(line, `,"message":`...)
		line = jsonrpc.AppendString(line, r.Message)
	}
	return append(line, "}}\n"...)
}
