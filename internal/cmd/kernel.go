package cmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sharedos/sharedos-mcp/internal/cli"
	"github.com/sharedos/sharedos-mcp/internal/sockpath"
	"github.com/sharedos/sharedos-mcp/kernel"
)

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
	audit, err := kernel.OpenAuditLog(cfg.AuditLog, kernel.AuditLogger(log))
	if err != nil {
		return auditOpenHint(err)
	}
	ln, err := kernel.Listen(cfg.Socket)
	if err != nil {
		return errors.Join(listenHint(err, cfg.Socket), audit.Close())
	}
	fmt.Fprintf(stdio.Err, "%s: kernel listening on %s (files root %s, audit log %s)\n", prog, cfg.Socket, rootDir, cfg.AuditLog)
	if *configFile == "" {
		fmt.Fprintf(stdio.Err, "%s: no --config: serving %s read-only (read, list, search) to every integration\n", prog, rootDir)
	}

	srv := &kernel.Server{
		Root:      rootDir,
		Grants:    cfg.Grants,
		AllowUIDs: cfg.AllowUIDs,
		Audit:     audit,
		Log:       log,
		Version:   buildStamp().version,
	}
	serveErr := srv.Serve(ctx, ln)
	if err := errors.Join(serveErr, audit.Close()); err != nil {
		return cli.Hintf(err, "check the audit log's disk; the kernel stops rather than serve unrecorded")
	}
	return nil
}

func auditOpenHint(err error) error {
	switch {
	case errors.Is(err, sockpath.ErrUntrusted):
		return cli.Hintf(err, "the audit log and every directory above it must be yours (or root's) and not writable by others; chmod go-w them, or pass --audit FILE in a directory of mode 0700")
	case errors.Is(err, kernel.ErrAuditLogBusy):
		return cli.Hintf(err, "another kernel writes this audit log: stop it, or pass --audit FILE")
	}
	return cli.Hintf(err, "pass --audit FILE in a directory you can write")
}

func listenHint(err error, socket string) error {
	switch {
	case errors.Is(err, sockpath.ErrTooLong):
		return cli.Hintf(err, "pick a shorter --socket path")
	case errors.Is(err, sockpath.ErrUntrusted):
		return cli.Hintf(err, "use a directory only you can write, e.g. $XDG_RUNTIME_DIR/sharedos (chmod 700 it)")
	case errors.Is(err, kernel.ErrSocketDir):
		return cli.Hintf(err, "pick a --socket in a directory you can create")
	case errors.Is(err, kernel.ErrNotASocket):
		return cli.Hintf(err, "remove it yourself or pick another --socket")
	case errors.Is(err, kernel.ErrAlreadyRunning):
		return cli.Hintf(err, "stop that kernel first, or pass another --socket")
	case errors.Is(err, kernel.ErrSocketUnchecked):
		return cli.Hintf(err, "remove it yourself if no kernel uses it")
	case errors.Is(err, kernel.ErrBind):
		return cli.Hintf(err, "check that %s is writable", filepath.Dir(socket))
	}
	return err
}
