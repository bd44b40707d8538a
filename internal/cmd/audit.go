package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sharedos/sharedos-mcp/internal/cli"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
)

// followPoll is how often audit --follow looks for new events.
const followPoll = 200 * time.Millisecond

const auditFileHelp = "audit log `file` (default $XDG_STATE_HOME/sharedos/audit.jsonl, else ~/.local/state/sharedos/audit.jsonl)"

func runAudit(ctx context.Context, stdio cli.IO, args []string) error {
	if len(args) > 0 && args[0] == "verify" {
		return runAuditVerify(stdio, args[1:])
	}
	fs := newFlagSet(stdio, "audit", "[verify] [flags]",
		"Print the reference kernel's audit log as a table (each event with its turn, the executionId,\n"+
			"and each call's place in its turn; a turn's calls in the order they arrived), or with --json\n"+
			"as the stored JSON lines, in the file's order.\n\n"+
			"  audit verify [--file F] [--head H] [--against EXPORT]   check the log's hash chain and print its head")
	file := fs.String("file", "", auditFileHelp)
	integration := fs.String("integration", "", "only this integration's events (exact `name`)")
	since := durationFlag(fs, "since", 0, true, "only events from the last `duration`, e.g. 30m, 12h or 7d")
	asJSON := fs.Bool("json", false, "print the stored lines, one JSON object per line")
	follow := fs.Bool("follow", false, "after the events so far, keep printing new ones as the kernel writes them, until interrupted")
	calls := fs.Bool("calls", false, "only turns that made a call: hide those that only looked (claude mcp list, doctor, catalog)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("the audit command's subcommand is verify; otherwise it takes flags only", "audit: unexpected argument %q", fs.Arg(0))
	}
	if *integration != "" {
		if err := integrationName("audit", *integration); err != nil {
			return err
		}
	}
	if *since < 0 {
		return cli.Usagef("count back from now with a positive duration, e.g. --since 1h", "audit: --since must not be negative")
	}
	path, err := auditPath(*file)
	if err != nil {
		return err
	}
	var r io.ReadCloser
	if *follow {
		r, err = audit.Follow(ctx, path, followPoll)
	} else {
		r, err = os.Open(path)
	}
	if err != nil {
		return auditOpenError(path, err)
	}
	defer r.Close()
	filter := audit.Filter{Integration: *integration}
	if *since > 0 {
		filter.Since = time.Now().Add(-*since)
	}
	p := &auditPrinter{w: stdio.Out, json: *asJSON, follow: *follow}
	if *follow && !*asJSON {
		// The table's columns are sized on the events so far; the
		// follower then writes each row as it comes.
		if f, err := os.Open(path); err == nil {
			_, _ = audit.Read(f, filter, p.measure)
			f.Close()
		}
	}
	print := p.print
	var order *audit.CallOrder
	if !*asJSON {
		// The table lists each turn's calls in arrival order; --json
		// prints the stored lines in the file's order, which the chain
		// follows.
		order = audit.NewCallOrder(p.print)
		print = order.Event
	}
	if *calls {
		print = audit.NewCallsOnly(print).Event
	}
	skipped, err := audit.Read(r, filter, print)
	if err == nil && order != nil {
		err = order.Flush()
	}
	if err == nil {
		err = p.flush()
	}
	var pe *iofs.PathError
	if errors.As(err, &pe) {
		return cli.Hintf(err, "pass --file the kernel's --audit path, a file you can read")
	}
	if err != nil {
		return err
	}
	if skipped > 0 {
		if skipped == 1 {
			fmt.Fprintf(stdio.Err, "%s: skipped 1 line of %s that is not an event (a crash cut it short; the kernel set it aside)\n", prog, path)
		} else {
			fmt.Fprintf(stdio.Err, "%s: skipped %d lines of %s that are not events (a crash cut them short; the kernel set them aside)\n", prog, skipped, path)
		}
	}
	if p.count() == 0 && !*follow {
		// On stderr, so that --json's stdout stays nothing but events.
		fmt.Fprintf(stdio.Err, "%s: no events%s in %s\n", prog, filterWords(*integration, *since, *calls), path)
	}
	return nil
}

// filterWords says what the filters asked for, for "no events …".
func filterWords(integration string, since time.Duration, calls bool) string {
	var w []string
	if calls {
		w = append(w, "of turns that made a call")
	}
	if integration != "" {
		w = append(w, fmt.Sprintf("of integration %q", integration))
	}
	if since > 0 {
		w = append(w, "in the last "+since.String())
	}
	if len(w) == 0 {
		return ""
	}
	return " " + strings.Join(w, " ")
}

func runAuditVerify(stdio cli.IO, args []string) error {
	fs := newFlagSet(stdio, "audit verify", "[--file F] [--head H]... [--against EXPORT]",
		"Check the audit log's hash chain: each line carries the SHA-256 of the line before it, so an\n"+
			"edited, inserted or removed line breaks it. Prints the chain's head, the hash of the last\n"+
			"event: keep it somewhere the kernel's uid cannot write, and pass it back with --head later\n"+
			"to detect a rewrite of the whole log. Exits 1 and names the first line where the chain\n"+
			"breaks, or a kept head the log no longer holds.\n\n"+
			"With --against, also check the log against a copy of it exported with [telemetry] audit_logs:\n"+
			"the JSON lines an OpenTelemetry Collector's file exporter wrote. Every line of this log the\n"+
			"copy holds must be this log's, in its place; exits 1 and names the first line where the log\n"+
			"stops holding what was exported (an edit, a rewrite from that line, lines cut from the end).")
	file := fs.String("file", "", auditFileHelp)
	var heads stringsFlag
	fs.Var(&heads, "head", "a `hash` printed by an earlier verify, which the log must still hold (repeatable)")
	against := fs.String("against", "", "an exported copy of the audit stream (`file`: OTLP JSON lines, as a collector's file exporter writes them)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("audit verify takes flags only", "audit verify: unexpected argument %q", fs.Arg(0))
	}
	path, err := auditPath(*file)
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return auditOpenError(path, err)
	}
	defer f.Close()
	v, err := audit.Verify(f, heads...)
	var br *audit.ChainBreak
	switch {
	case errors.As(err, &br) && br.Line > 0:
		return cli.Hintf(fmt.Errorf("audit verify: %s:%d: the chain breaks: %s", path, br.Line, br.Reason),
			"the log was changed after the kernel wrote it; compare it with a copy or a head you kept, and keep this file as evidence")
	case errors.As(err, &br):
		return cli.Hintf(fmt.Errorf("audit verify: %s: %s", path, br.Reason),
			"the log no longer holds an event it held when that head was printed: it was cut or rewritten")
	case err != nil:
		return fmt.Errorf("audit verify: %w", err)
	}
	fmt.Fprintf(stdio.Out, "ok %s: %s in an unbroken chain", path, cli.Count(v.Events, "event", "events"))
	if v.Segments > 0 {
		fmt.Fprintf(stdio.Out, " (%s: repairs or rotations, each recorded)", cli.Count(v.Segments, "segment", "segments"))
	}
	fmt.Fprintln(stdio.Out)
	if v.Unchained > 0 {
		if v.Unchained == 1 {
			fmt.Fprintln(stdio.Out, "note: the first event was written before the chain existed and is not covered by it")
		} else {
			fmt.Fprintf(stdio.Out, "note: the first %d events were written before the chain existed and are not covered by it\n", v.Unchained)
		}
	}
	if v.TornTail > 0 {
		fmt.Fprintf(stdio.Out, "note: the last %s a line a crash cut short; the kernel sets it aside when it next opens the log\n", cli.Count(int(v.TornTail), "byte is", "bytes are"))
	}
	if v.Continues != "" {
		fmt.Fprintf(stdio.Out, "continues %s (the head of the file it was rotated from)\n", v.Continues)
	}
	if v.Head == "" || v.HeadLine == 0 {
		fmt.Fprintln(stdio.Out, "head: none (no events yet)")
		return nil
	}
	fmt.Fprintf(stdio.Out, "head %s (line %d)\n", v.Head, v.HeadLine)
	if *against != "" {
		return verifyAgainst(stdio, path, *against)
	}
	return nil
}

// verifyAgainst checks the log at path against an exported copy.
func verifyAgainst(stdio cli.IO, path, exported string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return cli.Hintf(fmt.Errorf("audit verify: %w", err), "run it from a directory that exists, or pass --file as an absolute path")
	}
	host, err := os.Hostname()
	if err != nil {
		return cli.Hintf(fmt.Errorf("audit verify: host name: %w", err), "the copy's lines are found by this host's name: check that 'hostname' prints it")
	}
	id := audit.LogID{Host: host, Path: abs}
	local, err := os.Open(path)
	if err != nil {
		return auditOpenError(path, err)
	}
	defer local.Close()
	exp, err := os.Open(exported)
	if errors.Is(err, iofs.ErrNotExist) {
		return cli.Hintf(fmt.Errorf("audit verify: no exported copy at %s", exported), "pass the file the collector's file exporter writes (docs/telemetry.md)")
	}
	if err != nil {
		return cli.Hintf(fmt.Errorf("audit verify: %w", err), "pass --against a file you can read")
	}
	defer exp.Close()
	a, err := audit.VerifyAgainst(local, exp, id)
	var br *audit.ChainBreak
	var ee *audit.ExportError
	switch {
	case errors.As(err, &br):
		return cli.Hintf(fmt.Errorf("audit verify: %s:%d: the log differs from the exported copy %s: %s", path, br.Line, exported, br.Reason),
			"the copy is out of this uid's reach, so the local log was changed after it was exported; keep both files as evidence")
	case errors.Is(err, audit.ErrNoExport):
		others := ""
		for i, o := range a.Others {
			if i == 3 {
				others += fmt.Sprintf(" and %d more", len(a.Others)-i)
				break
			}
			others += " " + o.String()
		}
		if others != "" {
			others = "; it holds lines of" + others
		}
		return cli.Hintf(fmt.Errorf("audit verify: %s holds no line of %s%s", exported, id, others),
			"check that the kernel writing %s runs with [telemetry] audit_logs = true and that this is its collector's copy", path)
	case errors.As(err, &ee):
		return cli.Hintf(fmt.Errorf("audit verify: %s: %v", exported, ee),
			"pass the JSON lines a collector's file exporter writes (format json), unchanged")
	case err != nil:
		return cli.Hintf(fmt.Errorf("audit verify: %w", err), "check that %s and %s are files you can read", path, exported)
	}
	fmt.Fprintf(stdio.Out, "ok against %s: %d of %d line(s) exported, each as it is here", exported, a.Exported, a.Lines)
	if a.Duplicates > 0 {
		fmt.Fprintf(stdio.Out, " (%d delivered more than once)", a.Duplicates)
	}
	fmt.Fprintln(stdio.Out)
	if a.NotYet > 0 {
		fmt.Fprintf(stdio.Out, "note: the last %d line(s) are not in the copy yet: written after the last export that reached it\n", a.NotYet)
	}
	return nil
}

func auditPath(file string) (string, error) {
	if file != "" {
		return file, nil
	}
	p, err := audit.DefaultPath(os.Getenv)
	if err != nil {
		return "", cli.Hintf(fmt.Errorf("audit log: %w", err), "pass --file FILE")
	}
	return p, nil
}

func auditOpenError(path string, err error) error {
	if errors.Is(err, iofs.ErrNotExist) {
		return cli.Hintf(fmt.Errorf("no audit log at %s", path), "run the kernel first, or pass --file with the kernel's --audit path")
	}
	return cli.Hintf(fmt.Errorf("open audit log: %w", err), "pass --file the kernel's --audit path, a file you can read")
}

// stringsFlag collects a repeatable flag.
type stringsFlag []string

func (s *stringsFlag) String() string     { return strings.Join(*s, ",") }
func (s *stringsFlag) Set(v string) error { *s = append(*s, v); return nil }
