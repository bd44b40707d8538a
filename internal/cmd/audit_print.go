package cmd

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sharedos/sharedos-mcp/internal/cli"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
)

// How the audit command shows the record on a terminal: the log itself,
// and how it is read, are kernel/audit's.

// auditPrinter writes events: with JSON one JSON object per line, as
// each is read; otherwise a table with each call's turn (executionId)
// and its place in the turn (seq), whose columns are as wide as what
// they hold. The table of a log read to its end is written at flush,
// sized to all its rows; a follower writes each row as it happens, in
// widths measured on the events before it started (measure), and a
// longer value later pushes the rest of its row right rather than being
// cut.
//
// With JSON each line is the stored line byte for byte, so it hashes to
// the next line's prev, as long as it is terminal-safe, which every line
// the kernel writes is. A line written otherwise (by hand, by an older
// kernel) has its non-graphic runes (C0 and C1 controls, DEL, bidi
// overrides) rewritten as \u escapes: the same JSON value, harmless on a
// terminal, no longer the stored bytes.
type auditPrinter struct {
	w      io.Writer
	json   bool
	follow bool

	widths [len(auditHeader)]int
	rows   [][len(auditHeader)]string
	events int
	buf    []byte
}

// auditHeader names the table's columns; SEQ is right-aligned.
var auditHeader = [...]string{"TIME", "EXECUTION", "SEQ", "INTEGRATION", "EVENT", "TOOL", "RESOURCE", "STATUS"}

const seqColumn = 2

// print writes one event, or keeps its row for flush.
func (p *auditPrinter) print(e audit.Event, line []byte) error {
	p.events++
	if p.json {
		p.buf = append(audit.AppendTerminalSafe(p.buf[:0], line), '\n')
		_, err := p.w.Write(p.buf)
		return err
	}
	row := auditRow(e)
	if !p.follow {
		p.rows = append(p.rows, row)
		return nil
	}
	p.buf = p.buf[:0]
	if p.events == 1 {
		p.fit(auditHeader)
		p.buf = p.appendRow(p.buf, auditHeader)
	}
	p.buf = p.appendRow(p.buf, row)
	_, err := p.w.Write(p.buf)
	return err
}

// measure widens the columns for e's row, as audit.Read's callback.
func (p *auditPrinter) measure(e audit.Event, _ []byte) error {
	p.fit(auditRow(e))
	return nil
}

// flush writes the table of the rows print kept, each column as wide as
// its widest cell.
func (p *auditPrinter) flush() error {
	if len(p.rows) == 0 {
		return nil
	}
	p.fit(auditHeader)
	for _, r := range p.rows {
		p.fit(r)
	}
	b := p.appendRow(p.buf[:0], auditHeader)
	for _, r := range p.rows {
		b = p.appendRow(b, r)
	}
	p.rows = nil
	_, err := p.w.Write(b)
	return err
}

// count is how many events print has been given.
func (p *auditPrinter) count() int { return p.events }

// fit widens the columns to row's cells.
func (p *auditPrinter) fit(row [len(auditHeader)]string) {
	for i, c := range row {
		p.widths[i] = max(p.widths[i], utf8.RuneCountInString(c))
	}
}

// auditRow is an event's cells.
func auditRow(e audit.Event) [len(auditHeader)]string {
	seq := "-"
	if e.Seq > 0 {
		seq = strconv.FormatInt(e.Seq, 10)
	}
	return [...]string{cell(shortTime(e.Time)), cell(e.ExecutionID), seq, cell(e.Integration),
		cell(e.Event), cell(e.Tool), cell(e.Resource), cell(statusCell(e))}
}

func (p *auditPrinter) appendRow(b []byte, cells [len(auditHeader)]string) []byte {
	for i, c := range cells {
		if i > 0 {
			b = append(b, "  "...)
		}
		pad := p.widths[i] - utf8.RuneCountInString(c)
		if i == seqColumn {
			for ; pad > 0; pad-- {
				b = append(b, ' ')
			}
			b = append(b, c...)
			continue
		}
		b = append(b, c...)
		if i < len(cells)-1 {
			for ; pad > 0; pad-- {
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
			return cli.Count(*e.Count, "tool", "tools")
		}
	case audit.EventTurnRefused, audit.EventTurnEscalated, audit.EventOperatorRefused:
		return e.Reason
	case audit.EventApprovalRequested, audit.EventApprovalGranted, audit.EventApprovalDeclined:
		return approvalEventStatus(e.Event, e.ApprovalID, e.Ask, e.By, e.Expires, e.Peer.UID)
	case audit.EventTurnClosed:
		if e.Calls != nil {
			return cli.Count(*e.Calls, "call", "calls")
		}
	case audit.EventConfigLoaded:
		return configCell(e)
	case upstream.EventToolPinned:
		if len(e.Changed) > 0 {
			return e.Reason + ": " + strings.Join(e.Changed, ", ")
		}
		return e.Reason
	case upstream.EventToolQuarantined:
		return "changed: " + strings.Join(e.Changed, ", ")
	case audit.EventSegment:
		if e.Reason == audit.SegmentTornTail {
			return e.Reason + ": " + cli.Count(e.TornLines, "line", "lines") + " set aside"
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

// configCell says what a config.loaded changed: "start: 4 added", and
// which file, short.
func configCell(e audit.Event) string {
	var parts []string
	for _, c := range []struct {
		n    int
		what string
	}{{len(e.Added), "added"}, {len(e.Removed), "removed"}, {len(e.Changed), "changed"}} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "no change")
	}
	text := e.Reason + ": " + strings.Join(parts, ", ")
	if e.SHA256 != "" {
		text += " (sha256 " + e.SHA256[:min(12, len(e.SHA256))] + ")"
	}
	return text
}
