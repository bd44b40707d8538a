package cmd

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"time"

	"github.com/sharedos/sharedos-mcp/internal/cli"
	"github.com/sharedos/sharedos-mcp/kernel"
)

func runAudit(_ context.Context, stdio cli.IO, args []string) error {
	fs := newFlagSet(stdio, "audit", "[flags]",
		"Print the reference kernel's audit log as a table, or with --json as the stored JSON lines.")
	file := fs.String("file", "", "audit log `file` (default $XDG_STATE_HOME/sharedos/audit.jsonl, else ~/.local/state/sharedos/audit.jsonl)")
	integration := fs.String("integration", "", "only this integration's events (exact `name`)")
	since := durationFlag(fs, "since", 0, true, "only events from the last `duration`, e.g. 30m, 12h or 7d")
	asJSON := fs.Bool("json", false, "print the stored lines, one JSON object per line")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("audit takes flags only", "audit: unexpected argument %q", fs.Arg(0))
	}
	if *integration != "" {
		if err := integrationName("audit", *integration); err != nil {
			return err
		}
	}
	if *since < 0 {
		return cli.Usagef("count back from now with a positive duration, e.g. --since 1h", "audit: --since must not be negative")
	}
	path := *file
	if path == "" {
		p, err := kernel.DefaultAuditPath(os.Getenv)
		if err != nil {
			return cli.Hintf(fmt.Errorf("audit log: %w", err), "pass --file FILE")
		}
		path = p
	}
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, iofs.ErrNotExist) {
			return cli.Hintf(fmt.Errorf("no audit log at %s", path), "run the kernel first, or pass --file with the kernel's --audit path")
		}
		return fmt.Errorf("open audit log: %w", err)
	}
	defer f.Close()
	filter := kernel.AuditFilter{Integration: *integration}
	if *since > 0 {
		filter.Since = time.Now().Add(-*since)
	}
	skipped, err := kernel.PrintAudit(stdio.Out, f, filter, *asJSON)
	if err != nil {
		return err
	}
	if skipped > 0 {
		fmt.Fprintf(stdio.Err, "%s: skipped %d unreadable line(s) in %s\n", prog, skipped, path)
	}
	return nil
}
