package cmd

import (
	"context"
	"fmt"
	"os"

	"github.com/sharedos/sharedos-mcp/internal/cli"
	"github.com/sharedos/sharedos-mcp/internal/doctor"
)

func runDoctor(ctx context.Context, stdio cli.IO, args []string) error {
	fs := newFlagSet(stdio, "doctor", "[flags]",
		"Check, one line each, what serve needs: this binary, the kernel socket and the directories\n"+
			"above it, the kernel's peer credentials, then integration.hello and the catalogue for each\n"+
			"integration an installed harness entry names (one turn at the kernel each; an empty\n"+
			"catalogue is a problem), then every harness's user and project configuration: the binary\n"+
			"it runs, the socket it will look for, and pi-mcp-adapter's script mode. A line starts with\n"+
			"'ok', 'problem' (followed by a 'fix:' line) or '-' (not installed, not applicable).\n"+
			"Exits 1 when there is any problem.")
	socket := fs.String("socket", "", "kernel socket `path` to check (default as serve: $SHAREDOS_SOCKET, else $XDG_RUNTIME_DIR/sharedos/kernel.sock, else $TMPDIR/sharedos-$UID/kernel.sock)")
	integration := fs.String("integration", "", "check only this integration `name`'s hello and catalogue (default: each one an installed harness entry names)")
	kernelUID := fs.Int("kernel-uid", -1, "one more `uid` the kernel may run as, as given to serve")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("doctor takes flags only", "doctor: unexpected argument %q", fs.Arg(0))
	}
	if *integration != "" {
		if err := integrationName("doctor", *integration); err != nil {
			return err
		}
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
