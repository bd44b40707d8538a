package cmd

import (
	"context"
	"fmt"
	"os"

	"github.com/sharedos/sharedos-mcp/internal/cli"
	"github.com/sharedos/sharedos-mcp/internal/doctor"
	"github.com/sharedos/sharedos-mcp/policy"
)

func runDoctor(ctx context.Context, stdio cli.IO, args []string) error {
	fs := newFlagSet(stdio, "doctor", "[flags]",
		"Check, one line each, what serve needs: this binary, the kernel socket and the directories\n"+
			"above it, the kernel's peer credentials, integration.hello and the catalogue (one turn at\n"+
			"the kernel), then every harness's user and project configuration. A line starts with\n"+
			"'ok', 'problem' (followed by a 'fix:' line) or '-' (not installed, not applicable).\n"+
			"Exits 1 when there is any problem.")
	socket := fs.String("socket", "", "kernel socket `path` to check (default as serve: $SHAREDOS_SOCKET, else $XDG_RUNTIME_DIR/sharedos/kernel.sock, else $TMPDIR/sharedos-$UID/kernel.sock)")
	integration := fs.String("integration", "doctor", "integration `name` to say hello as and fetch the catalogue for")
	kernelUID := fs.Int("kernel-uid", -1, "one more `uid` the kernel may run as, as given to serve")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("doctor takes flags only", "doctor: unexpected argument %q", fs.Arg(0))
	}
	if !policy.ValidIntegrationName(*integration) {
		return cli.Usagef("use 1-64 letters, digits, spaces, '-', '_' or '.'", "doctor: bad integration name %q", *integration)
	}
	env, err := processEnv()
	if err != nil {
		return err
	}
	path, from := doctor.SocketChoice(*socket, os.Getenv)
	problems := doctor.Run(ctx, stdio.Out, doctor.Options{
		Socket: path, From: from, Integration: *integration, KernelUID: *kernelUID,
		Version: shimVersion(), Env: env,
	})
	if problems > 0 {
		return cli.Hintf(fmt.Errorf("doctor found %d problem(s)", problems), "fix them in order: the first often causes the ones after it")
	}
	return nil
}
