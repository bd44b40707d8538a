package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"

	"github.com/sharedos/sharedos-mcp/internal/cli"
	"github.com/sharedos/sharedos-mcp/internal/sockpath"
	"github.com/sharedos/sharedos-mcp/kernel"
)

func init() {
	register(command{name: "kernel", summary: "run the reference host kernel: file tools under a root, grants from a config, an audit log", run: runKernel})
}

func runKernel(ctx context.Context, stdio cli.IO, args []string) error {
	fs := newFlagSet(stdio, "kernel", "[flags]",
		"Run the reference host kernel on a Unix socket until SIGTERM or SIGINT. It serves file tools\nconfined to a root directory, authorizes every call against the grants in --config, and\nappends every turn and call to an audit log. Without --config it serves --root read-only\n(read, list, search) to every integration.")
	configFile := fs.String("config", "", "TOML config `file` with the files root and the grants (see testdata/kernel/example.toml)")
	socket := fs.String("socket", "", "socket `path` to listen on (default $SHAREDOS_SOCKET, else $XDG_RUNTIME_DIR/sharedos/kernel.sock, else $TMPDIR/sharedos-$UID/kernel.sock)")
	root := fs.String("root", "", "files root `dir` (overrides the config's; without --config the default is the current directory)")
	auditFile := fs.String("audit", "", "audit log `file` (default $XDG_STATE_HOME/sharedos/audit.jsonl, else ~/.local/state/sharedos/audit.jsonl)")
	var logOpts cli.LogOptions
	fs.StringVar(&logOpts.Level, "log-level", "info", "log `level`: trace, debug, info, warn, error, disabled")
	fs.StringVar(&logOpts.File, "log-file", "", "write logs to this `file` (mode 0600) instead of stderr")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("kernel takes flags only", "kernel: unexpected argument %q", fs.Arg(0))
	}

	var cfg kernel.Config
	if *configFile != "" {
		c, err := kernel.LoadConfig(*configFile)
		if err != nil {
			return cli.Hintf(err, "fix the config file; testdata/kernel/example.toml shows every key")
		}
		cfg = c
	} else {
		cfg = kernel.DefaultConfig(".")
	}
	if *socket != "" {
		cfg.Socket = *socket
	}
	if *root != "" {
		cfg.Root = *root
	}
	if *auditFile != "" {
		cfg.AuditLog = *auditFile
	}
	rootDir, err := kernel.CheckRoot(cfg.Root)
	if err != nil {
		return cli.Hintf(err, "pass --root DIR, an existing directory to share")
	}
	if cfg.Socket == "" {
		cfg.Socket = sockpath.Default(os.Getenv)
	}
	if cfg.AuditLog == "" {
		if cfg.AuditLog, err = kernel.DefaultAuditPath(os.Getenv); err != nil {
			return cli.Hintf(fmt.Errorf("audit log: %w", err), "pass --audit FILE")
		}
	}

	log, closeLog, err := cli.NewLogger(logOpts, stdio.Err)
	if err != nil {
		return err
	}
	defer closeLog()
	audit, err := kernel.OpenAuditLog(cfg.AuditLog)
	if err != nil {
		return cli.Hintf(err, "pass --audit FILE in a directory you can write")
	}
	ln, err := kernel.Listen(cfg.Socket)
	if err != nil {
		return errors.Join(err, audit.Close())
	}
	fmt.Fprintf(stdio.Err, "%s: kernel listening on %s (files root %s, audit log %s)\n", prog, cfg.Socket, rootDir, cfg.AuditLog)
	if *configFile == "" {
		fmt.Fprintf(stdio.Err, "%s: no --config: serving %s read-only (read, list, search) to every integration\n", prog, rootDir)
	}

	bi, _ := debug.ReadBuildInfo()
	srv := &kernel.Server{
		Root:           rootDir,
		Grants:         cfg.Grants,
		AllowUIDs:      cfg.AllowUIDs,
		AllowHardLinks: cfg.AllowHardLinks,
		Audit:          audit,
		Log:            log,
		Version:        resolveStamp(stamp{version, commit, date}, bi).version,
	}
	serveErr := srv.Serve(ctx, ln)
	if err := errors.Join(serveErr, audit.Close()); err != nil {
		return cli.Hintf(err, "check the audit log's disk; the kernel refused calls while it could not record them")
	}
	return nil
}
