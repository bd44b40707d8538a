package cmd

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sharedos/sharedos-mcp/kernel/audit"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
)

// How the audit command shows the record on a terminal: the log itself,
// and how it is read, are kernel/audit's.

// auditPrinter writes events one at a time, as they are read, so that a
// follower shows each event when it happens: with JSON one JSON object
// per line, otherwise a table whose columns have fixed widths (they
// cannot be measured ahead of events that have not happened yet), with
// each call's turn (executionId) and its place in the turn (seq).
//
// With JSON each line is the stored line byte for byte, so it hashes to
// the next line's prev, as long as it is terminal-safe, which every line
// the kernel writes is. A line written otherwise (by hand, by an older
// kernel) has its non-graphic runes (C0 and C1 controls, DEL, bidi
// overrides) rewritten as \u escapes: the same JSON value, harmless on a
// terminal, no longer the stored bytes.
type auditPrinter struct {
	w    io.Writer
	json bool

	events int
	buf    []byte
}

// print writes one event, and before the first row of a table its header.
func (p *auditPrinter) print(e audit.Event, line []byte) error {
	if p.json {
		p.buf = append(audit.AppendTerminalSafe(p.buf[:0], line), '\n')
	} else {
		p.buf = p.buf[:0]
		if p.events == 0 {
			p.buf = appendRow(p.buf, "TIME", "EXECUTION", "SEQ", "INTEGRATION", "EVENT", "TOOL", "RESOURCE", "STATUS")
		}
		seq := "-"
		if e.Seq > 0 {
			seq = strconv.FormatInt(e.Seq, 10)
		}
		p.buf = appendRow(p.buf, cell(shortTime(e.Time)), cell(e.ExecutionID), seq, cell(e.Integration),
			cell(e.Event), cell(e.Tool), cell(e.Resource), cell(statusCell(e)))
	}
	p.events++
	_, err := p.w.Write(p.buf)
	return err
}

// count is how many events print has written.
func (p *auditPrinter) count() int { return p.events }

// auditColumns are the table's column widths; a longer value pushes the
// rest of its row right rather than being cut.
var auditColumns = [...]int{20, 20, 4, 14, 19, 16, 28, 0}

func appendRow(b []byte, cells ...string) []byte {
	for i, c := range cells {
		if i > 0 {
			b = append(b, "  "...)
		}
		if i == 2 { // seq: right-aligned
			for n := utf8.RuneCountInString(c); n < auditColumns[i]; n++ {
				b = append(b, ' ')
			}
			b = append(b, c...)
			continue
		}
		b = append(b, c...)
		if i < len(cells)-1 {
			for n := utf8.RuneCountInString(c); n < auditColumns[i]; n++ {
				b = append(b, ' ')
			}
		}
	}
	return append(b, '\n')
}

func shortTime(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return t.UTC().Format(time.RFC3339)
}

func statusCell(e audit.Event) string {
	switch e.Event {
	case audit.EventToolInvoked:
		return strings.TrimSpace(e.Status + " " + e.Code)
	case audit.EventCatalogListed:
		if e.Count != nil {
			return strconv.Itoa(*e.Count) + " tools"
		}
	case audit.EventTurnRefused, audit.EventTurnEscalated, audit.EventOperatorRefused:
		return e.Reason
	case audit.EventApprovalRequested, audit.EventApprovalGranted, audit.EventApprovalDeclined:
		return approvalEventStatus(e.Event, e.ApprovalID, e.Ask, e.By, e.Expires, e.Peer.UID)
	case upstream.EventToolPinned:
		if len(e.Changed) > 0 {
			return e.Reason + ": " + strings.Join(e.Changed, ", ")
		}
		return e.Reason
	case upstream.EventToolQuarantined:
		return "changed: " + strings.Join(e.Changed, ", ")
	case audit.EventSegment:
		if e.Reason == audit.SegmentTornTail {
			return fmt.Sprintf("%s: %d line(s) set aside", e.Reason, e.TornLines)
		}
		return e.Reason
	}
	return ""
}

// cell makes a value safe for one table cell on a terminal: the log holds
// whatever a client sent (a tool name, a reason), and a tab, newline or
// escape sequence in it must not break the table or drive the terminal.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	for _, r := range s {
		if !unicode.IsGraphic(r) || (unicode.IsSpace(r) && r != ' ') {
			return strconv.Quote(s)
		}
	}
	return s
}
