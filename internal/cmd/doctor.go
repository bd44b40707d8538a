package cmd

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/sharedos/sharedos-mcp/internal/cli"
	"github.com/sharedos/sharedos-mcp/internal/doctor"
	"github.com/sharedos/sharedos-mcp/kernel/config"
	"github.com/sharedos/sharedos-mcp/kernel/status"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
	"github.com/sharedos/sharedos-mcp/policy"
)

func runDoctor(ctx context.Context, stdio cli.IO, args []string) error {
	fs := newFlagSet(stdio, "doctor", "[flags]",
		"Check, one line each, what serve needs: this binary, the kernel socket and the directories\n"+
			"above it, the kernel's peer credentials, then integration.hello and the catalogue for each\n"+
			"integration an installed harness entry names (one turn at the kernel each; an empty\n"+
			"catalogue is a problem), then every harness's user and project configuration: the binary\n"+
			"it runs, the socket it will look for, and pi-mcp-adapter's script mode; and, when the kernel's\n"+
			"config brokers upstream MCP servers, each one's state as the kernel last reported it and every\n"+
			"tool of theirs that is not published (quarantined with what changed, misconfigured). A line starts with\n"+
			"'ok', 'problem' (followed by a 'fix:' line) or '-' (not installed, not applicable).\n"+
			"Exits 1 when there is any problem.")
	socket := fs.String("socket", "", "kernel socket `path` to check (default as serve: $SHAREDOS_SOCKET, else $XDG_RUNTIME_DIR/sharedos/kernel.sock, else $TMPDIR/sharedos-$UID/kernel.sock)")
	integration := fs.String("integration", "", "check only this integration `name`'s hello and catalogue (default: each one an installed harness entry names)")
	kernelUID := fs.Int("kernel-uid", -1, "one more `uid` the kernel may run as, as given to serve")
	configFile := fs.String("config", "", "the kernel's TOML config `file`, for its upstreams (default as the kernel's)")
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
	cfg, err := loadConfigFile(*configFile)
	if err != nil {
		return err
	}
	ups, err := doctorUpstreams(cfg, *configFile)
	if err != nil {
		return err
	}
	problems := doctor.Run(ctx, stdio.Out, doctor.Options{
		Socket: path, From: from, Integration: *integration, KernelUID: *kernelUID,
		Version: shimVersion(), Env: env, Upstreams: ups, Grants: doctorGrants(cfg),
		Start: startKernel(*configFile, path),
	})
	if problems > 0 {
		hint := "fix them in order: the first often causes the ones after it"
		if problems == 1 {
			hint = "the fix: line under it says what to do"
		}
		return cli.Hintf(fmt.Errorf("doctor found %s", cli.Count(problems, "problem", "problems")), "%s", hint)
	}
	return nil
}

// doctorGrants is what doctor checks installed entries against: the
// grants of the config file, when there is one (the built-in default
// serves every integration alike).
func doctorGrants(cfg config.Config) *doctor.Grants {
	if cfg.File == "" {
		return nil
	}
	g := &doctor.Grants{Config: cfg.File}
	for _, gr := range cfg.Grants {
		switch name, ok := strings.CutPrefix(gr.Subject, "integration:"); {
		case gr.Subject == policy.SubjectWildcard:
			g.Wildcard = true
		case ok && !slices.Contains(g.Named, name):
			g.Named = append(g.Named, name)
		}
	}
	return g
}

// doctorUpstreams gathers what doctor checks of the config's upstreams;
// nil when it names none.
func doctorUpstreams(cfg config.Config, configFile string) (*doctor.Upstreams, error) {
	if len(cfg.Upstreams) == 0 {
		return nil, nil
	}
	stateDir, err := cfg.StateDirOrDefault(os.Getenv)
	if err != nil {
		return nil, cli.Hintf(fmt.Errorf("doctor: state directory: %w", err), "set state_dir in the config")
	}
	u := &doctor.Upstreams{Config: cfg.File, StateDir: stateDir, ConfigArg: configArg(configFile)}
	for _, sp := range cfg.Upstreams {
		u.Names = append(u.Names, sp.Name)
		if sp.Remote != nil && sp.Remote.Auth == upstream.AuthOAuth {
			u.OAuth = append(u.OAuth, sp.Name)
		}
	}
	u.Report, u.ReportErr = status.Read(stateDir)
	u.Quarantined, u.QuarantineErr = upstream.Quarantined(stateDir)
	return u, nil
}
