package kernel

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
)

// AuditFilter selects events from the audit log.
type AuditFilter struct {
	Integration string    // "" means every integration; otherwise exactly this name
	Since       time.Time // zero means from the start
}

func (f AuditFilter) match(e Event) bool {
	if f.Integration != "" && e.Integration != f.Integration {
		return false
	}
	if !f.Since.IsZero() {
		t, err := time.Parse(time.RFC3339Nano, e.Time)
		if err != nil || t.Before(f.Since) {
			return false
		}
	}
	return true
}

// PrintAudit copies the events of r that pass f to w: with asJSON the
// stored lines byte for byte, otherwise an aligned table. It returns how
// many lines it could not parse and skipped (a crash can leave a last line
// cut short).
func PrintAudit(w io.Writer, r io.Reader, f AuditFilter, asJSON bool) (skipped int, err error) {
	lr := jsonrpc.NewReader(r, 0)
	var tw *tabwriter.Writer
	if !asJSON {
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "TIME\tINTEGRATION\tEVENT\tTOOL\tRESOURCE\tSTATUS")
	}
	for {
		line, err := lr.ReadLine()
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, jsonrpc.ErrLineTooLong) {
			skipped++
			continue
		}
		if err != nil {
			return skipped, fmt.Errorf("read audit log: %w", err)
		}
		if len(line) == 0 {
			continue
		}
		var e Event
		if json.Unmarshal(line, &e) != nil || e.Event == "" {
			skipped++
			continue
		}
		if !f.match(e) {
			continue
		}
		if asJSON {
			if _, err := w.Write(append(line, '\n')); err != nil {
				return skipped, err
			}
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n",
			cell(shortTime(e.Time)), cell(e.Integration), cell(e.Event), cell(e.Tool), cell(e.Resource), cell(statusCell(e)))
	}
	if tw != nil {
		return skipped, tw.Flush()
	}
	return skipped, nil
}

func shortTime(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return t.UTC().Format(time.RFC3339)
}

func statusCell(e Event) string {
	switch e.Event {
	case EventToolInvoked:
		return strings.TrimSpace(e.Status + " " + e.Code)
	case EventCatalogListed:
		if e.Count != nil {
			return strconv.Itoa(*e.Count) + " tools"
		}
	case EventTurnRefused, EventTurnEscalated:
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
