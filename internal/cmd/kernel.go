package cmd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/sharedos/sharedos-mcp/install"
	"github.com/sharedos/sharedos-mcp/internal/cli"
	"github.com/sharedos/sharedos-mcp/internal/service"
	"github.com/sharedos/sharedos-mcp/internal/sockpath"
	"github.com/sharedos/sharedos-mcp/kernel"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
	"github.com/sharedos/sharedos-mcp/kernel/config"
	"github.com/sharedos/sharedos-mcp/kernel/secret"
	"github.com/sharedos/sharedos-mcp/kernel/status"
	"github.com/sharedos/sharedos-mcp/kernel/telemetry"
	"github.com/sharedos/sharedos-mcp/policy"
)

const configHelp = "TOML config `file` with the files root and the grants (default $XDG_CONFIG_HOME/sharedos/kernel.toml, else ~/.config/sharedos/kernel.toml, when it exists; 'kernel init' writes one)"

func runKernel(ctx context.Context, stdio cli.IO, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "check":
			return runKernelCheck(stdio, args[1:])
		case "init":
			return runKernelInit(stdio, args[1:])
		case "service":
			return runKernelService(stdio, args[1:])
		case "approve":
			return runKernelApprove(stdio, args[1:])
		case "explain":
			return runKernelExplain(ctx, stdio, args[1:])
		case "login":
			return runKernelLogin(ctx, stdio, args[1:])
		case "logout":
			return runKernelLogout(stdio, args[1:])
		}
	}
	fs := newFlagSet(stdio, "kernel", "[check|init|approve|explain|login|logout|service] [flags]",
		"Run the reference host kernel on a Unix socket until SIGTERM or SIGINT. It serves file tools\n"+
			"confined to a root directory and brokers the stdio MCP servers its config names ([[upstream]]),\n"+
			"authorizes every call against the grants in its config, and appends every turn and call to an\n"+
			"audit log. It prints what each integration may do when it starts. Without a config file it\n"+
			"serves --root (default: the current directory) read-only (read, list, search) to every\n"+
			"integration.\n\n"+
			"  kernel check [--config FILE]   validate a config and show what it allows, without starting\n"+
			"  kernel init [--config FILE] [--root DIR]   write a commented starter config\n"+
			"  kernel approve UPSTREAM [TOOL] [--config FILE]   pin a brokered tool's changed definition\n"+
			"  kernel explain --integration NAME TOOL [ARGUMENTS-JSON]   how the kernel would decide a call, and why\n"+
			"  kernel login UPSTREAM [--config FILE]   sign in to a remote upstream with auth = \"oauth\"\n"+
			"  kernel logout UPSTREAM [--config FILE]   forget its tokens\n"+
			"  kernel service install|uninstall|status   run the kernel as a service of this user\n\n"+
			"SIGHUP reloads the config and reads its secrets again (an upstream whose secret changed is\n"+
			"restarted; a secret that does not load refuses the reload): new grants, allow_uids and allow_hard_links take effect at once,\n"+
			"in open turns too, and new turns see the [[upstream]] servers as now configured (added ones\n"+
			"started, removed ones stopped, changed ones restarted); an open turn's call of a brokered tool\n"+
			"whose action or resource changed is refused. A config that does not load is refused and the old\n"+
			"one kept. The socket, the audit log, the files root and state_dir change only with a restart.\n\n"+
			"What it reports (that it listens, what it allows, each reload) and its log go to stderr as\n"+
			"lines, or with --log-file to a file as JSON records; --log-format chooses either for both.")
	configFile := fs.String("config", "", configHelp)
	socket := fs.String("socket", "", "socket `path` to listen on (default $SHAREDOS_SOCKET, else $XDG_RUNTIME_DIR/sharedos/kernel.sock, else $TMPDIR/sharedos-$UID/kernel.sock)")
	root := fs.String("root", "", "files root `dir` (overrides the config's; without a config file the default is the current directory)")
	auditFile := fs.String("audit", "", "audit log `file` (default $XDG_STATE_HOME/sharedos/audit.jsonl, else ~/.local/state/sharedos/audit.jsonl)")
	logOpts := logFlags(fs, "what it reports (that it listens, what it allows, warnings) and its log")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("the kernel's subcommands are check, init, approve, explain, login, logout and service; otherwise it takes flags only", "kernel: unexpected argument %q", fs.Arg(0))
	}

	cfg, err := loadKernelConfig(*configFile, *root)
	if err != nil {
		return err
	}
	if *socket != "" {
		cfg.Socket = *socket
	}
	if *auditFile != "" {
		cfg.AuditLog = *auditFile
	}
	if cfg.Socket == "" {
		cfg.Socket = sockpath.Default(os.Getenv)
	}
	if cfg.AuditLog == "" {
		if cfg.AuditLog, err = audit.DefaultPath(os.Getenv); err != nil {
			return cli.Hintf(fmt.Errorf("audit log: %w", err), "pass --audit FILE")
		}
	}

	stateDir, err := cfg.StateDirOrDefault(os.Getenv)
	if err != nil && (len(cfg.Upstreams) > 0 || hasLimits(cfg)) {
		return cli.Hintf(fmt.Errorf("state directory: %w", err), "set state_dir in the config")
	}

	secrets, redactor, err := loadSecrets(ctx, cfg, *configFile)
	if err != nil {
		return err
	}
	logOpts.Filter = redactor.Writer
	lg, err := cli.NewLog(prog, *logOpts, stdio.Err)
	if err != nil {
		return err
	}
	defer lg.Close()
	return lg.Finish(serveKernel(ctx, stdio, lg, cfg, secrets, redactor, stateDir, *configFile, *root, *socket, *auditFile))
}

// serveKernel runs the kernel on cfg until ctx ends, reporting through
// lg: what it serves when it starts, each reload, why it stopped.
func serveKernel(ctx context.Context, stdio cli.IO, lg *cli.Log, cfg config.Config, secrets *secret.Set, redactor *secret.Redactor, stateDir, configFile, rootFlag, socketFlag, auditFlag string) error {
	log, report := lg.Logger, lg.Report
	auditLog, err := audit.Open(cfg.AuditLog, audit.WithLogger(log))
	if err != nil {
		return auditOpenHint(err, cfg.AuditLog, cfg.Socket)
	}
	ln, err := kernel.Listen(cfg.Socket)
	if err != nil {
		return errors.Join(listenHint(err, cfg.Socket), auditLog.Close())
	}
	tel, exporting, err := startTelemetry(ctx, cfg, secrets, stateDir, log)
	if err != nil {
		return errors.Join(err, ln.Close(), auditLog.Close())
	}
	srv := &kernel.Server{
		Telemetry:      tel,
		Root:           cfg.Root,
		Grants:         cfg.Grants,
		Integrations:   cfg.Hierarchy,
		AllowUIDs:      cfg.AllowUIDs,
		OperatorUIDs:   cfg.OperatorUIDs,
		AskTimeout:     cfg.AskTimeout,
		AllowHardLinks: cfg.AllowHardLinks,
		Upstreams:      cfg.Upstreams,
		StateDir:       stateDir,
		Config:         cfg,
		Audit:          auditLog,
		Log:            log,
		Version:        buildStamp().version,
		Secrets:        secrets,
		Redactor:       redactor,
	}
	// The kernel's memory is bounded by its own limits (calls running,
	// long lines held); a soft limit makes the collector give memory
	// back before it would grow past what those allow.
	debug.SetMemoryLimit(memoryLimit)
	stopReload := reloadOnHangup(ctx, report, srv, configFile, rootFlag, socketFlag, auditFlag)
	served := "files root " + cfg.Root
	if cfg.Root == "" {
		served = "no files root"
	}
	fmt.Fprintf(report, "%s: kernel listening on %s (%s, audit log %s)\n", prog, cfg.Socket, served, cfg.AuditLog)
	if cfg.File == "" {
		fmt.Fprintf(report, "%s: no config file: serving %s read-only (read, list, search) to every integration\n", prog, cfg.Root)
	} else {
		fmt.Fprintf(report, "%s: config %s\n", prog, cfg.File)
	}
	exporting.print(report)
	sum := summarize(cfg)
	printAllowances(report, cfg, sum, nil)
	printUpstreams(report, cfg, sum, stateDir)
	printSecrets(report, cfg)
	for _, f := range sum.Problems {
		cli.Warn(report, prog, f.String(), "")
	}
	for _, f := range sum.Warnings {
		cli.Warn(report, prog, f.String(), "")
	}
	if len(sum.Problems) > 0 {
		fmt.Fprintf(report, "hint: '%s kernel check%s' lists these without starting a kernel\n", prog, configArg(configFile))
	}

	serveErr := srv.Serve(ctx, ln)
	stopReload()
	// Every turn has ended: what telemetry holds, and the audit stream's
	// last lines, go out now, within a bound; what does not is sent by
	// the next kernel, from the stream's cursor.
	flushCtx, cancelFlush := context.WithTimeout(context.WithoutCancel(ctx), telemetryFlush)
	if err := tel.Shutdown(flushCtx); err != nil {
		log.Warn().Err(err).Msg("telemetry: not everything was exported before the kernel stopped")
	}
	cancelFlush()
	why := "stopped"
	// A signal's cause says which signal; it also reports itself as
	// context.Canceled to errors.Is, so it is told apart by identity.
	if cause := context.Cause(ctx); cause != nil && cause != context.Canceled {
		why = cause.Error()
	}
	fmt.Fprintf(report, "%s: kernel stopped (%s); the socket %s is removed\n", prog, why, cfg.Socket)
	var be *kernel.BudgetsError
	if errors.As(serveErr, &be) {
		return errors.Join(cli.Hintf(serveErr, "the kernel keeps its grants' limit counts in %s: make it yours and writable by you alone (chmod 600), or move it aside, which forgets the counts", be.Path), auditLog.Close())
	}
	if err := errors.Join(serveErr, auditLog.Close()); err != nil {
		return cli.Hintf(err, "check the audit log's disk; the kernel refused calls while it could not record them")
	}
	return nil
}

// hasLimits reports whether a grant of cfg has a limit, whose counts the
// kernel keeps in its state directory.
func hasLimits(cfg config.Config) bool {
	return slices.ContainsFunc(cfg.Grants, func(g policy.Grant) bool { return !g.Limit.IsZero() })
}

// memoryLimit is the kernel's soft memory limit (debug.SetMemoryLimit).
const memoryLimit = 192 << 20

// telemetryFlush bounds how long a stopping kernel waits for its last
// telemetry to be exported.
const telemetryFlush = 5 * time.Second

// startTelemetry starts the export [telemetry] asks for, and says what it
// exports where; nil without the table, or when no endpoint is set, which
// it warns about. The audit stream keeps its cursor in the state
// directory. The headers' {secret:NAME} are filled in from secrets, the
// ones the kernel started with.
func startTelemetry(ctx context.Context, cfg config.Config, secrets *secret.Set, stateDir string, log zerolog.Logger) (*telemetry.Telemetry, telemetryNote, error) {
	if cfg.Telemetry == nil {
		return nil, telemetryNote{}, nil
	}
	if cfg.Telemetry.AuditLogs && stateDir == "" {
		return nil, telemetryNote{}, cli.Hintf(errors.New("[telemetry] audit_logs needs a state directory for its cursor"), "set state_dir in the config")
	}
	if cfg.Telemetry.AuditLogs {
		if _, err := sockpath.MakeDirs(stateDir, func(u uint32) bool { return u == uint32(os.Getuid()) || u == 0 }); err != nil {
			return nil, telemetryNote{}, cli.Hintf(fmt.Errorf("state directory: %w", err), "state_dir must be a directory of yours that others cannot write")
		}
	}
	tel, err := telemetry.Start(ctx, telemetry.Options{
		Config: *cfg.Telemetry, Version: buildStamp().version, AuditLog: cfg.AuditLog, StateDir: stateDir, Log: log, Secrets: secrets,
	})
	switch {
	case errors.Is(err, telemetry.ErrNoEndpoint):
		return nil, telemetryNote{text: err.Error() + "; nothing is exported", hint: "set otlp_endpoint in [telemetry], or OTEL_EXPORTER_OTLP_ENDPOINT"}, nil
	case err != nil:
		return nil, telemetryNote{}, cli.Hintf(fmt.Errorf("telemetry: %w", err), "fix [telemetry] in %s (docs/telemetry.md)", cfg.File)
	case tel == nil:
		return nil, telemetryNote{text: "OTEL_SDK_DISABLED is true; nothing is exported"}, nil
	}
	where := cfg.Telemetry.Endpoint
	if where == "" {
		where = "the endpoint OTEL_EXPORTER_OTLP_* names"
	}
	what := "traces and metrics"
	if cfg.Telemetry.AuditLogs {
		what = "traces, metrics and the audit log"
	}
	return tel, telemetryNote{text: "exporting " + what + " to " + where}, nil
}

// telemetryNote is what the kernel says of its telemetry when it starts:
// a warning when it has a hint.
type telemetryNote struct{ text, hint string }

func (n telemetryNote) print(w io.Writer) {
	switch {
	case n.hint != "":
		cli.Warn(w, prog, "telemetry: "+n.text, n.hint)
	case n.text != "":
		fmt.Fprintf(w, "%s: telemetry: %s\n", prog, n.text)
	}
}

// reloadOnHangup reads the config again on each SIGHUP until ctx ends or
// the returned function is called, puts the kernel's flags over it as at
// start, and asks the kernel to apply it (kernel.Server.Reload); a config
// that does not load is refused and the running one kept. It says what
// it did on report.
func reloadOnHangup(ctx context.Context, report io.Writer, srv *kernel.Server, configFile, rootFlag, socketFlag, auditFlag string) func() {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-hup:
			case <-done:
				return
			case <-ctx.Done():
				return
			}
			next, err := loadKernelConfig(configFile, rootFlag)
			if err != nil {
				if ps := cli.Problems(err); len(ps) > 1 {
					cli.Warn(report, prog, fmt.Sprintf("reload refused, the running config is kept: the config has %d problems", len(ps)), "")
					for _, p := range ps {
						cli.Warn(report, prog, p, "")
					}
					continue
				}
				cli.Warn(report, prog, "reload refused, the running config is kept: "+err.Error(), "")
				continue
			}
			next.Socket = cmp.Or(socketFlag, next.Socket)
			next.AuditLog = cmp.Or(auditFlag, next.AuditLog)
			// A command secret is run again here, once, not per call.
			set, err := secret.Load(ctx, next.Secrets, secret.Options{})
			if err != nil {
				cli.Warn(report, prog, "reload refused, the running config and secrets are kept: "+secretsError(err).Error(), "")
				continue
			}
			srv.SetSecrets(set)
			r, err := srv.Reload(next)
			if err != nil {
				cli.Warn(report, prog, "reload: "+err.Error(), "")
			}
			if !r.Applied {
				continue
			}
			fmt.Fprintf(report, "%s: config reloaded\n", prog)
			printAllowances(report, next, summarize(next), nil)
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
		<-stopped
	}
}

func auditOpenHint(err error, path, socket string) error {
	switch {
	case errors.Is(err, sockpath.ErrUntrusted):
		return cli.Hintf(err, "the audit log and every directory above it must be yours (or root's) and not writable by others; chmod go-w them, or pass --audit FILE in a directory of mode 0700")
	case errors.Is(err, audit.ErrBusy):
		if pid, ok := holderPID(path, socket); ok {
			return cli.Hintf(fmt.Errorf("a kernel is already running (pid %d): it holds the audit log %s", pid, path),
				"stop it first (kill %d), or give this one another --audit FILE and --socket PATH", pid)
		}
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
		if pid, ok := holderPID(socket+".lock", socket); ok {
			return cli.Hintf(fmt.Errorf("%w on %s (pid %d)", kernel.ErrAlreadyRunning, socket, pid), "stop it first (kill %d), or pass another --socket", pid)
		}
		return cli.Hintf(err, "stop that kernel first, or pass another --socket")
	case errors.Is(err, kernel.ErrSocketUnchecked):
		return cli.Hintf(err, "remove it yourself if no kernel uses it")
	case errors.Is(err, kernel.ErrBind):
		return cli.Hintf(err, "check that %s is writable", filepath.Dir(socket))
	}
	return err
}

func runKernelCheck(stdio cli.IO, args []string) error {
	fs := newFlagSet(stdio, "kernel check", "[--config FILE] [--root DIR]",
		"Load the kernel's config as 'kernel' would, without starting a kernel, and print what each\n"+
			"integration may do: each tool, on which resources, with which action, until when. Exits 1\n"+
			"when the config does not load, when a grant can never match (expired, or reaching no tool)\n"+
			"and when it grants nothing. Warns, without failing, about a subject no installed harness\n"+
			"entry announces, an installed integration no grant names and, once a kernel has run the\n"+
			"upstreams, a placeholder {name} whose argument takes a path or a URL ({name:path}, {name:url}).")
	configFile := fs.String("config", "", configHelp)
	root := fs.String("root", "", "files root `dir`, as you would pass it to the kernel")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("kernel check takes flags only", "kernel check: unexpected argument %q", fs.Arg(0))
	}
	cfg, err := loadKernelConfig(*configFile, *root)
	if err != nil {
		return err
	}
	switch {
	case cfg.File == "":
		path, _ := config.DefaultPath(os.Getenv)
		fmt.Fprintf(stdio.Out, "no config file (none at %s): the kernel serves %s read-only (read, list, search) to every integration\n", path, cfg.Root)
	case cfg.Root == "":
		fmt.Fprintf(stdio.Out, "config %s, no files root (no file tools)\n", cfg.File)
	default:
		fmt.Fprintf(stdio.Out, "config %s, files root %s\n", cfg.File, cfg.Root)
	}
	sum := summarize(cfg)
	stateDir, _ := cfg.StateDirOrDefault(os.Getenv)
	reporter := 0 // the kernel that reported on the upstreams
	if len(cfg.Upstreams) > 0 && stateDir != "" {
		// What a kernel found once the upstreams ran: tools they do not
		// offer, placeholders their schemas lack, quarantines.
		if r, err := status.Read(stateDir); err == nil {
			sum.CheckUpstreamReport(cfg, r)
			reporter = r.PID
		}
	}
	// The limits' counts, as the running kernel saves them at each
	// charge (or as the last one left them).
	var counts *budgetCounts
	if stateDir != "" && hasLimits(cfg) {
		if bc, err := kernel.ReadBudgets(stateDir, time.Now()); err == nil {
			counts = &budgetCounts{counts: bc, file: filepath.Join(stateDir, kernel.BudgetsFile)}
		}
	}
	printAllowances(stdio.Out, cfg, sum, counts)
	printUpstreams(stdio.Out, cfg, sum, stateDir)
	printSecrets(stdio.Out, cfg)
	for _, f := range sum.Problems {
		fmt.Fprintf(stdio.Out, "problem %s\n", f)
	}
	secretFaults := secretProblems(cfg)
	for _, p := range secretFaults {
		fmt.Fprintf(stdio.Out, "problem %s\n", p)
	}
	for _, f := range sum.Warnings {
		fmt.Fprintf(stdio.Out, "warning %s\n", f)
	}
	if n := len(sum.Problems) + len(secretFaults); n > 0 {
		hint := checkHint(cfg, sum, reporter, *configFile)
		if len(secretFaults) > 0 {
			hint = fmt.Sprintf("fix each problem named above, then run '%s kernel check%s' again", prog, configArg(*configFile))
		}
		return cli.Hintf(fmt.Errorf("kernel check: %s in %s", cli.Count(n, "problem", "problems"), cfg.File), "%s", hint)
	}
	return nil
}

// checkHint says how to fix what kernel check found: grants are fixed in
// the config alone; what a running kernel found of an [[upstream.tool]]
// is seen again only once that kernel reloads and reports anew.
func checkHint(cfg config.Config, sum config.Summary, reporter int, configFile string) string {
	upstreams, grants := 0, 0
	for _, f := range sum.Problems {
		for i := range cfg.Upstreams {
			if f.Where == cfg.UpstreamRef(i) {
				upstreams++
			}
		}
		for i := range cfg.Grants {
			if f.Where == cfg.GrantRef(i) {
				grants++
			}
		}
	}
	again := fmt.Sprintf("run '%s kernel check%s' again", prog, configArg(configFile))
	switch {
	case grants == len(sum.Problems):
		return "fix each grant named above, then " + again
	case upstreams == 0:
		return fmt.Sprintf("fix each problem above in %s, then %s", cfg.File, again)
	}
	what := "each [[upstream.tool]] named above"
	if upstreams < len(sum.Problems) {
		what = "each grant and [[upstream.tool]] named above"
	}
	reload := "reload the kernel (SIGHUP)"
	if p, err := servicePlatform(); err == nil && p.OS == "linux" {
		if path, err := p.UnitPath(); err == nil && lexists(path) {
			reload = "reload the kernel (systemctl --user reload " + service.SystemdUnit + ")"
		}
	}
	if reload == "reload the kernel (SIGHUP)" && reporter > 0 {
		reload = fmt.Sprintf("reload the kernel (kill -HUP %d)", reporter)
	}
	return fmt.Sprintf("fix %s; what a running kernel found of its upstreams is seen again once it reloads and reports anew: %s, then %s", what, reload, again)
}

func runKernelInit(stdio cli.IO, args []string) error {
	fs := newFlagSet(stdio, "kernel init", "[--config FILE] [--root DIR]",
		"Write a commented starter config, every key shown, to the default config path (or --config).\n"+
			"It never replaces a file. Without --root its [files] root is left empty: set it to the\n"+
			"directory to share before the kernel will start on it. A --root that does not exist yet is\n"+
			"created, and said so; one that exists but is not a directory is refused.")
	configFile := fs.String("config", "", "write the config to this `file` (default $XDG_CONFIG_HOME/sharedos/kernel.toml, else ~/.config/sharedos/kernel.toml)")
	root := fs.String("root", "", "the directory to share, written into the config as an absolute path (created when missing)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("kernel init takes flags only", "kernel init: unexpected argument %q", fs.Arg(0))
	}
	path := *configFile
	if path == "" {
		p, err := config.DefaultPath(os.Getenv)
		if err != nil {
			return cli.Hintf(fmt.Errorf("kernel init: %w", err), "pass --config FILE")
		}
		path = p
	}
	exists := func() error {
		return cli.Hintf(fmt.Errorf("kernel init: %s already exists; nothing was written", path),
			"'%s kernel check%s' shows what it allows; pass --config FILE to write a starter elsewhere", prog, configArg(*configFile))
	}
	rootDir, missing := "", false
	if *root != "" {
		if !utf8.ValidString(*root) {
			return cli.Usagef("a config file is UTF-8; rename the directory or share one above it", "kernel init: --root %q is not valid UTF-8", *root)
		}
		dir, err := config.CheckRoot(*root)
		var re *config.RootError
		switch {
		case errors.As(err, &re) && errors.Is(re.Err, iofs.ErrNotExist) && !lexists(re.Path):
			// The README's line names a directory a new user may not
			// have yet: it is made, and said so, once nothing else can
			// stop the config being written.
			rootDir, missing = re.Path, true
		case errors.As(err, &re) && errors.Is(re.Err, iofs.ErrNotExist):
			return cli.Hintf(fmt.Errorf("kernel init: files root %s is a symbolic link to something that does not exist", re.Path), "pass --root a directory to share, or the directory the link should lead to")
		case err != nil:
			return cli.Hintf(fmt.Errorf("kernel init: %w", err), "pass --root a directory to share (one that does not exist yet is created)")
		default:
			rootDir = dir
		}
	}
	if lexists(path) {
		return exists()
	}
	var made []string
	if missing {
		var err error
		if made, err = mkdirs(rootDir); err != nil {
			return cli.Hintf(fmt.Errorf("kernel init: create the files root: %w", err), "create it yourself (mkdir -p %s), or pass --root a directory that exists", rootDir)
		}
	}
	if err := config.WriteStarter(path, rootDir); err != nil {
		for _, d := range slices.Backward(made) {
			os.Remove(d) // just made and still empty: nothing is half-done
		}
		if errors.Is(err, iofs.ErrExist) {
			return exists()
		}
		return fmt.Errorf("kernel init: %w", err)
	}
	if rootDir == "" {
		fmt.Fprintf(stdio.Out, "wrote %s with an empty [files] root\nnext: set root in it to the directory to share, adjust its grants, then run '%s kernel check%s'\n", path, prog, configArg(*configFile))
		return nil
	}
	if missing {
		fmt.Fprintf(stdio.Out, "created %s: the files root did not exist\n", rootDir)
	}
	fmt.Fprintf(stdio.Out, "wrote %s (files root %s)\nnext: adjust its grants, then run '%s kernel check%s' to see what each integration may do\n", path, rootDir, prog, configArg(*configFile))
	return nil
}

// lexists reports whether anything, a dangling symbolic link included,
// is at path.
func lexists(path string) bool {
	_, err := os.Lstat(path)
	return !errors.Is(err, iofs.ErrNotExist)
}

// mkdirs creates dir and its missing parents (0755, as mkdir -p would
// with the usual umask) and returns those it made, outermost first.
func mkdirs(dir string) ([]string, error) {
	var made []string
	for d := dir; !lexists(d); d = filepath.Dir(d) {
		made = append([]string{d}, made...)
	}
	for _, d := range made {
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, err
		}
	}
	return made, nil
}

// configArg is " --config FILE" for a hint when the user named a file.
func configArg(file string) string {
	if file == "" {
		return ""
	}
	return " --config " + file
}

// loadKernelConfig is the config the kernel runs on: --config, else the
// default config file when it exists, else the built-in read-only
// default; then --root over its root, which must be a directory. Errors
// say where a bad value came from.
func loadKernelConfig(configFile, rootFlag string) (config.Config, error) {
	file := configFile
	if file == "" {
		if p, err := config.DefaultPath(os.Getenv); err == nil {
			if _, err := os.Stat(p); err == nil {
				file = p
			}
		}
	}
	var cfg config.Config
	if file != "" {
		c, err := config.Load(file)
		switch {
		case errors.Is(err, iofs.ErrNotExist) && configFile != "":
			return cfg, cli.Hintf(fmt.Errorf("no config file at %s", file), "'%s kernel init --config %s' writes a commented starter there", prog, file)
		case err != nil:
			return cfg, cli.Hintf(err, "fix the config; '%s kernel init --config NEW.toml' writes a starter that shows every key, and '%s kernel check%s' checks it", prog, prog, configArg(configFile))
		}
		cfg = c
	} else {
		cfg = config.Default(".")
	}
	from := "the current directory"
	if ref := cfg.RootRef(); ref != "" {
		from = ref
	}
	if rootFlag != "" {
		cfg.Root, from = rootFlag, "--root"
	}
	dir, err := config.CheckRoot(cfg.Root)
	var re *config.RootError
	switch {
	case errors.Is(err, config.ErrNoRoot) && len(cfg.Upstreams) > 0:
		// A kernel that brokers upstreams needs no files root.
		return cfg, nil
	case errors.Is(err, config.ErrNoRoot):
		where := cfg.RootRef()
		if where == "" {
			where = "[files] root in " + cfg.File
		}
		return cfg, cli.Hintf(fmt.Errorf("no files root: %s is empty", where),
			"set root in %s to the directory to share, or pass --root DIR", cfg.File)
	case errors.As(err, &re) && from == "--root":
		return cfg, cli.Hintf(fmt.Errorf("files root %s (from --root): %v", re.Path, re.Err), "pass --root an existing directory to share")
	case errors.As(err, &re) && cfg.File != "" && from != "--root":
		return cfg, cli.Hintf(fmt.Errorf("files root %s (from %s): %v", re.Path, from, re.Err),
			"fix root in %s (~ is your home; a relative path is relative to the config's directory), or pass --root DIR", cfg.File)
	case err != nil:
		return cfg, cli.Hintf(fmt.Errorf("files root (%s): %w", from, err), "pass --root DIR, an existing directory to share")
	}
	cfg.Root = dir
	return cfg, nil
}

// summarize is the config's summary, with warnings about the harness
// entries installed for this user and directory.
func summarize(cfg config.Config) config.Summary {
	sum := kernel.Summarize(cfg, time.Now())
	if env, err := processEnv(); err == nil {
		sum.CheckInstalled(cfg, install.Integrations(env))
	}
	return sum
}

// budgetCounts are the limits' counts a kernel saved, for kernel check
// to say what is left.
type budgetCounts struct {
	counts []kernel.BudgetCount
	file   string
}

// left says what is left of grant g's limit for integration: "37 left
// until 13:00Z".
func (b *budgetCounts) left(g policy.Grant, integration string) string {
	for _, c := range b.counts {
		if c.Grant == g.Key() && c.Integration == integration {
			return fmt.Sprintf("%d left until %s", max(g.Limit.N-c.Count, 0), c.Ends.UTC().Format(time.RFC3339))
		}
	}
	return fmt.Sprintf("%d left", g.Limit.N)
}

// budgeted reports whether any grant of cfg asks or has a limit: then the
// tables show an ASK and a LIMIT column.
func budgeted(cfg config.Config) bool {
	return slices.ContainsFunc(cfg.Grants, func(g policy.Grant) bool {
		return g.Ask != "" || !g.Limit.IsZero() || g.TurnLimit > 0
	})
}

// limitText is a grant's limits as a table shows them, with what is left
// for integration when counts are known.
func limitText(g policy.Grant, integration string, counts *budgetCounts) string {
	var parts []string
	if !g.Limit.IsZero() {
		l := g.Limit.String()
		if counts != nil && integration != "*" {
			l += " (" + counts.left(g, integration) + ")"
		}
		parts = append(parts, l)
	}
	if g.TurnLimit > 0 {
		parts = append(parts, fmt.Sprintf("%d/turn", g.TurnLimit))
	}
	return orDash(strings.Join(parts, ", "))
}

// printAllowances prints, per grant subject, a table of what it may do;
// then, per child integration, what it may do in effect. counts, when
// known, say what is left of each limit.
func printAllowances(w io.Writer, cfg config.Config, sum config.Summary, counts *budgetCounts) {
	wildcard := false
	withBudgets := budgeted(cfg)
	var anyTool []string // upstreams with a "NAME.*" row
	for _, sub := range sum.Subjects {
		switch {
		case sub.Subject == policy.SubjectWildcard:
			wildcard = true
			fmt.Fprintf(w, "every integration (%s) may:\n", sub.Subject)
		case wildcard:
			fmt.Fprintf(w, "%s may also:\n", sub.Subject)
		default:
			fmt.Fprintf(w, "%s may:\n", sub.Subject)
		}
		name := strings.TrimPrefix(sub.Subject, "integration:")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		if withBudgets {
			fmt.Fprintln(tw, "  TOOL\tACTION\tON\tUNTIL\tASK\tLIMIT\tGRANT")
		} else {
			fmt.Fprintln(tw, "  TOOL\tACTION\tON\tUNTIL\tGRANT")
		}
		for _, r := range sub.Rows {
			on := r.Resource.String() + " only"
			if r.Descendants {
				on = r.Resource.String() + " and below"
			}
			if withBudgets {
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Tool, r.Action, on, untilText(r.Expires), orDash(r.Ask),
					limitText(cfg.Grants[r.Grant], name, counts), grantLabel(cfg, r.Grant))
			} else {
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", r.Tool, r.Action, on, untilText(r.Expires), grantLabel(cfg, r.Grant))
			}
			if up, ok := strings.CutSuffix(r.Tool, "."+config.AnyTool); ok && !slices.Contains(anyTool, up) {
				anyTool = append(anyTool, up)
			}
		}
		tw.Flush()
	}
	for _, up := range anyTool {
		fmt.Fprintf(w, "%s.%s: every tool of the upstream %s that no [[upstream.tool]] names (action call on %s:/<tool>); which those are is known once it runs\n",
			up, config.AnyTool, up, up)
	}
	for _, ch := range sum.Children {
		printChild(w, cfg, ch)
	}
	if counts != nil {
		fmt.Fprintf(w, "what is left of each limit is as the kernel last saved it (%s)\n", counts.file)
	}
}

// printChild prints what a child may do in effect, and the proof that it
// is within what each ancestor may.
func printChild(w io.Writer, cfg config.Config, ch config.ChildSummary) {
	ancestors := strings.Join(ch.Chain[1:], ", child of ")
	if len(ch.Rows) == 0 {
		fmt.Fprintf(w, "integration:%s (child of %s) may do nothing: none of its grants reaches what %s may do\n", ch.Name, ancestors, ch.Chain[1])
		return
	}
	fmt.Fprintf(w, "integration:%s (child of %s) may, within what %s may:\n", ch.Name, ancestors, strings.Join(ch.Chain[1:], " and "))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  TOOL\tACTION\tON\tUNTIL\tASK\tGRANTS")
	for _, r := range ch.Rows {
		on := r.Scope.Resource.String() + " only"
		if r.Scope.Below {
			on = r.Scope.String()
		}
		labels := make([]string, len(r.Grants))
		for i, g := range r.Grants {
			labels[i] = grantLabel(cfg, g)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", r.Tool, r.Action, on, untilText(r.Expires), orDash(r.Ask), strings.Join(labels, " within "))
	}
	tw.Flush()
	if ch.Proved {
		fmt.Fprintf(w, "subset: everything %s may do, %s may do too: each row lies within the grant of each named beside it, which gives its action\n",
			ch.Name, strings.Join(ch.Chain[1:], " and "))
	}
}

func untilText(t time.Time) string {
	if t.IsZero() {
		return "no expiry"
	}
	return t.UTC().Format(time.RFC3339)
}

// printUpstreams lists the brokered servers and their configured tools.
func printUpstreams(w io.Writer, cfg config.Config, sum config.Summary, stateDir string) {
	if len(sum.Upstreams) == 0 {
		return
	}
	fmt.Fprintf(w, "upstreams (pins and status in %s; '%s doctor' shows each one's state and tools once it runs):\n", stateDir, prog)
	for _, u := range sum.Upstreams {
		fmt.Fprintf(w, "  %s: %s\n", u.Name, upstreamLine(cfg, u.Name, u.Command))
		for _, t := range u.Tools {
			fmt.Fprintf(w, "    %s: %s on %s\n", t.Name, t.Action, t.Resource)
		}
	}
}

// shellWords shows a command line, quoting the words that need it.
func shellWords(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = a
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\$`|&;<>()*?[]{}~#") {
			out[i] = strconv.Quote(a)
		}
	}
	return strings.Join(out, " ")
}

// grantLabel is "#N, line L": the file is named above the tables.
func grantLabel(cfg config.Config, i int) string {
	switch line := cfg.GrantLine(i); {
	case cfg.File == "":
		return fmt.Sprintf("#%d (built in)", i+1)
	case line > 0:
		return fmt.Sprintf("#%d, line %d", i+1, line)
	}
	return fmt.Sprintf("#%d", i+1)
}
