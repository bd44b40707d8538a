package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/sharedos/sharedos-mcp/internal/cli"
	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/internal/sockpath"
	"github.com/sharedos/sharedos-mcp/kernelclient"
	"github.com/sharedos/sharedos-mcp/policy"
	"github.com/sharedos/sharedos-mcp/shim"
)

func init() {
	register(command{name: "serve", summary: "serve MCP on stdin/stdout for one turn, relaying to the kernel (harnesses run this)", run: runServe})
}

// helloTimeout bounds the wait for the kernel's answer to hello; a kernel
// that accepts but never answers must not leave the harness hanging.
const helloTimeout = 10 * time.Second

func runServe(ctx context.Context, stdio cli.IO, args []string) error {
	fs := newFlagSet(stdio, "serve", "--integration NAME [flags]",
		"Serve MCP over stdin/stdout for one turn. Before reading stdin it connects to the kernel,\nchecks the kernel's peer credentials and introduces itself as the integration.\nstdout carries MCP messages only; logs go to stderr or --log-file.")
	integration := fs.String("integration", "", "the integration `name` the kernel knows this harness by (required; 1-64 of letters, digits, space, - _ .)")
	socket := fs.String("socket", "", "kernel socket `path` (default $SHAREDOS_SOCKET, else $XDG_RUNTIME_DIR/sharedos/kernel.sock, else $TMPDIR/sharedos-$UID/kernel.sock)")
	kernelUID := fs.Int("kernel-uid", -1, "one more `uid` the kernel may run as, besides yours and root")
	callTimeout := fs.Duration("call-timeout", 2*time.Minute, "answer a call failed/kernel_timeout after this `duration` (0: no limit)")
	maxMessage := fs.Int("max-message", jsonrpc.DefaultMaxLine, "largest message line in `bytes`, on stdin and from the kernel")
	var logOpts cli.LogOptions
	fs.StringVar(&logOpts.Level, "log-level", "info", "log `level`: trace, debug, info, warn, error, disabled")
	fs.StringVar(&logOpts.File, "log-file", "", "write logs to this `file` (mode 0600) instead of stderr")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("serve takes flags only", "serve: unexpected argument %q", fs.Arg(0))
	}
	if *integration == "" {
		return cli.Usagef("say which harness this is, e.g. --integration claude-code", "serve: --integration is required")
	}
	if !policy.ValidIntegrationName(*integration) {
		return cli.Hintf(fmt.Errorf("invalid integration name %q", *integration), "use 1-64 characters of letters, digits, space, '-', '_' and '.'; names are never rewritten")
	}
	if *maxMessage < 1024 {
		return cli.Usagef("use at least 1024", "serve: --max-message %d is too small", *maxMessage)
	}
	if *callTimeout < 0 {
		return cli.Usagef("use a positive duration such as 30s, or 0 for no limit", "serve: --call-timeout must not be negative")
	}
	log, closeLog, err := cli.NewLogger(logOpts, stdio.Err)
	if err != nil {
		return err
	}
	defer closeLog()

	path := *socket
	if path == "" {
		path = sockpath.Default(os.Getenv)
	}
	connect := func(ctx context.Context) (shim.Config, error) {
		k, err := kernelclient.Dial(kernelclient.Options{Socket: path, KernelUID: *kernelUID, MaxLine: *maxMessage, WriteTimeout: *callTimeout})
		if err != nil {
			return shim.Config{}, cli.Hintf(fmt.Errorf("cannot reach the kernel at %s: %w", path, err), "%s", dialHint(err))
		}
		hctx, cancel := context.WithTimeout(ctx, helloTimeout)
		ver := shimVersion()
		hello, err := k.Hello(hctx, kproto.HelloParams{Name: *integration, Shim: kproto.Peer{Name: "sharedos-mcp", Version: ver}})
		cancel()
		if err != nil {
			k.Close()
			return shim.Config{}, helloError(path, err)
		}
		log.Debug().Str("integration", *integration).Str("executionId", hello.ExecutionID).Str("kernel", hello.Kernel.Name).Msg("turn opened")
		return shim.Config{
			Kernel: k, Hello: hello, Version: ver,
			CallTimeout: *callTimeout, MaxLine: *maxMessage, Log: log,
		}, nil
	}
	var connectErr error
	err = shim.ServeStdio(ctx, func(ctx context.Context) (shim.Config, error) {
		cfg, err := connect(ctx)
		connectErr = err
		return cfg, err
	}, stdio.In, stdio.Out)
	switch {
	case err == nil:
		return nil
	case connectErr != nil:
		return err
	default:
		log.Error().Err(err).Msg("turn ended")
		return fmt.Errorf("serve: %w", err)
	}
}

func dialHint(err error) string {
	switch {
	case errors.Is(err, os.ErrNotExist), errors.Is(err, syscall.ECONNREFUSED):
		return "start a kernel with 'sharedos-mcp kernel', or point --socket (or $SHAREDOS_SOCKET) at the one you run"
	case errors.Is(err, sockpath.ErrTooLong):
		return "use a shorter socket path, e.g. under $XDG_RUNTIME_DIR"
	default:
		return "run 'sharedos-mcp doctor' to check the socket and the kernel"
	}
}

func helloError(path string, err error) error {
	var ke *kernelclient.KernelError
	if errors.As(err, &ke) {
		switch ke.Code {
		case kproto.ErrUnsupportedProtocol:
			return cli.Hintf(fmt.Errorf("the kernel at %s does not speak kernel protocol %d", path, kproto.Version), "upgrade the kernel or use a sharedos-mcp release that matches it")
		case kproto.ErrInvalidIntegrationName:
			return cli.Hintf(fmt.Errorf("the kernel at %s refused the integration name: %w", path, err), "use a name the kernel accepts")
		}
	}
	return cli.Hintf(fmt.Errorf("the kernel at %s did not accept integration.hello: %w", path, err), "check the kernel's log; run 'sharedos-mcp doctor'")
}

// shimVersion is this binary's version as serverInfo and hello report it.
func shimVersion() string {
	bi, _ := debug.ReadBuildInfo()
	return resolveStamp(stamp{version, commit, date}, bi).version
}
