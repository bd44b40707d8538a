package cmd

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/sharedos/sharedos-mcp/internal/cli"
	"github.com/sharedos/sharedos-mcp/internal/doctor"
	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/internal/sockpath"
	"github.com/sharedos/sharedos-mcp/kernelclient"
	"github.com/sharedos/sharedos-mcp/shim"
)

func runServe(ctx context.Context, stdio cli.IO, args []string) error {
	fs := newFlagSet(stdio, "serve", "--integration NAME [flags]",
		"Serve MCP over stdin/stdout for one turn. Before reading stdin it connects to the kernel,\nchecks the kernel's peer credentials and introduces itself as the integration.\nstdout carries MCP messages only; logs go to stderr or --log-file. A harness starts it;\nstarted on a terminal, it says so and how to try it by hand.")
	integration := fs.String("integration", "", "the integration `name` the kernel knows this harness by (required; 1-64 of letters, digits, space, - _ .)")
	socket := fs.String("socket", "", "kernel socket `path` (default $SHAREDOS_SOCKET, else $XDG_RUNTIME_DIR/sharedos/kernel.sock, else $TMPDIR/sharedos-$UID/kernel.sock)")
	kernelUID := fs.Int("kernel-uid", -1, "one more `uid` the kernel may run as, besides yours and root")
	callTimeout := durationFlag(fs, "call-timeout", 2*time.Minute, false, "answer a call failed/kernel_timeout after this `duration`, e.g. 30s or 5m (0: no limit)")
	maxMessage := fs.Int("max-message", jsonrpc.DefaultMaxLine, "largest message line in `bytes`, on stdin and from the kernel")
	logOpts := logFlags(fs, "its log")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("serve takes flags only", "serve: unexpected argument %q", fs.Arg(0))
	}
	if *integration == "" {
		return cli.Usagef("say which harness this is, e.g. --integration claude-code", "serve: --integration is required")
	}
	if err := integrationName("serve", *integration); err != nil {
		return err
	}
	if *maxMessage < 1024 {
		return cli.Usagef("use at least 1024", "serve: --max-message %d is too small", *maxMessage)
	}
	if *callTimeout < 0 {
		return cli.Usagef("use a positive duration such as 30s, or 0 for no limit", "serve: --call-timeout must not be negative")
	}
	lg, err := cli.NewLog(prog, *logOpts, stdio.Err)
	if err != nil {
		return err
	}
	defer lg.Close()
	log := lg.Logger
	if stdinIsTerminal(stdio.In) {
		// Typed into a shell: say what it is for, and how to try it.
		fmt.Fprintf(lg.Report, "%s: serve is meant to be started by a harness, which speaks MCP to it on stdin and stdout ('%s install HARNESS' adds it to one)\n"+
			"hint: to try it by hand, type one JSON-RPC message per line, e.g. {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}, and end with Ctrl-D; '%s catalog --integration %s' shows the same tools\n",
			prog, prog, prog, *integration)
	}

	path := *socket
	if path == "" {
		path = sockpath.Default(os.Getenv)
	}
	connect := func(ctx context.Context) (shim.Config, error) {
		k, err := kernelclient.Dial(kernelclient.Options{Socket: path, KernelUID: *kernelUID, MaxLine: *maxMessage, WriteTimeout: *callTimeout})
		if err != nil {
			return shim.Config{}, doctor.DialError(path, startKernel("", path),
				"restart the harness or reconnect its sharedos server: until then the harness has no sharedos tools", err)
		}
		hctx, cancel := context.WithTimeout(ctx, doctor.HelloTimeout)
		ver := shimVersion()
		hello, err := k.Hello(hctx, kproto.HelloParams{Name: *integration, Shim: kproto.Peer{Name: "sharedos-mcp", Version: ver}, Capabilities: shim.Capabilities})
		cancel()
		if err != nil {
			k.Close()
			return shim.Config{}, doctor.HelloError(path, err)
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
		return lg.Finish(err)
	default:
		return lg.Finish(fmt.Errorf("serve: %w", err))
	}
}

// shimVersion is this binary's version as serverInfo and hello report it.
func shimVersion() string {
	return buildStamp().version
}
