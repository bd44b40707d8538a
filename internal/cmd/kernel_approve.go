package cmd

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"slices"
	"time"

	"github.com/sharedos/sharedos-mcp/internal/cli"
	"github.com/sharedos/sharedos-mcp/internal/doctor"
	"github.com/sharedos/sharedos-mcp/internal/nearest"
	"github.com/sharedos/sharedos-mcp/kernel/config"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
)

func runKernelApprove(stdio cli.IO, args []string) error {
	fs := newFlagSet(stdio, "kernel approve", "UPSTREAM [TOOL] [--config FILE]",
		"Pin the new definition of a brokered tool that is quarantined because its upstream changed\n"+
			"what the tool says it does (its description, schemas or hints), or of every quarantined tool\n"+
			"of UPSTREAM when no TOOL is named. It prints what changed. The kernel records the approval in\n"+
			"its audit log (upstream.tool.pinned, reason approved) and publishes the tool from its next\n"+
			"turn; a kernel that is not running does so when it starts. 'doctor' shows what is quarantined,\n"+
			"old and new definitions side by side.")
	configFile := fs.String("config", "", configHelp)
	// Flags may come after the names: kernel approve memory --config F.
	var names []string
	rest := args
	for {
		if err := parseFlags(fs, rest); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		names = append(names, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if len(names) == 0 || len(names) > 2 {
		return cli.Usagef("name the upstream, and optionally one of its tools: kernel approve memory read_graph", "kernel approve: want UPSTREAM [TOOL], got %d argument(s)", len(names))
	}
	up, tool := names[0], ""
	if len(names) == 2 {
		tool = names[1]
	}
	cfg, err := loadConfigFile(*configFile)
	if err != nil {
		return err
	}
	configured := make([]string, len(cfg.Upstreams))
	for i, u := range cfg.Upstreams {
		configured[i] = u.Name
	}
	if !slices.Contains(configured, up) {
		hint := "the upstreams are the [[upstream]] tables of the kernel's config"
		if m := nearest.Find(up, nearest.Names(configured...)); m != "" {
			hint = fmt.Sprintf("did you mean %s?", m)
		} else if len(configured) == 0 {
			hint = "the config has no [[upstream]]; pass the kernel's --config"
		}
		return cli.Hintf(fmt.Errorf("kernel approve: the config %s names no upstream %q", configName(cfg), up), "%s", hint)
	}
	stateDir, err := cfg.StateDirOrDefault(os.Getenv)
	if err != nil {
		return cli.Hintf(fmt.Errorf("kernel approve: %w", err), "set state_dir in the config")
	}
	quarantined, err := upstream.Quarantined(stateDir)
	if err != nil {
		return approveError(err, up, tool, stateDir)
	}
	approvals, err := upstream.Approve(stateDir, up, tool, time.Now())
	if err != nil {
		return approveError(err, up, tool, stateDir)
	}
	for _, a := range approvals {
		i := slices.IndexFunc(quarantined, func(q upstream.Quarantine) bool { return q.Upstream == a.Upstream && q.Tool == a.Tool })
		var q *upstream.Quarantine
		if i >= 0 {
			q = &quarantined[i]
		}
		printApproval(stdio.Out, a, q)
	}
	fmt.Fprintf(stdio.Out, "a running kernel records the approval in its audit log and publishes the new definition from its next turn; one that is not running does so when it starts\n")
	return nil
}

// printApproval says what an approval pinned: each changed field, as it
// was and as it is now.
func printApproval(w io.Writer, a upstream.Approval, q *upstream.Quarantine) {
	fmt.Fprintf(w, "approved %s.%s: %s changed\n", a.Upstream, a.Tool, joinWords(a.Changed))
	if q != nil {
		for _, f := range a.Changed {
			fmt.Fprintf(w, "  %s was: %s\n", f, doctor.DefinitionField(q.PinnedDefinition, f))
			fmt.Fprintf(w, "  %s now: %s\n", f, doctor.DefinitionField(q.PendingDefinition, f))
		}
	}
	fmt.Fprintf(w, "  sha256 %s -> %s\n", a.Previous, a.Hash)
}

func joinWords(w []string) string {
	switch len(w) {
	case 0:
		return "nothing"
	case 1:
		return w[0]
	}
	out := ""
	for i, s := range w {
		switch {
		case i == 0:
		case i == len(w)-1:
			out += " and "
		default:
			out += ", "
		}
		out += s
	}
	return out
}

func approveError(err error, up, tool, stateDir string) error {
	what := up
	if tool != "" {
		what += "." + tool
	}
	switch {
	case errors.Is(err, upstream.ErrNothingPending):
		return cli.Hintf(fmt.Errorf("kernel approve: nothing of %s is quarantined", what), "'%s doctor' lists what is", prog)
	case errors.Is(err, upstream.ErrUnknownUpstream):
		return cli.Hintf(fmt.Errorf("kernel approve: no tool of %s has been pinned in %s", up, stateDir),
			"a kernel pins an upstream's tools when it first runs it; start the kernel with this config first")
	case errors.Is(err, upstream.ErrUnknownTool):
		return cli.Hintf(fmt.Errorf("kernel approve: %s has never offered a tool %q", up, tool), "name the tool as the upstream does (without %q); '%s doctor' lists the quarantined ones", up+".", prog)
	case errors.Is(err, upstream.ErrUnsafePins):
		return cli.Hintf(fmt.Errorf("kernel approve: %w", err), "whoever can write the pins can approve anything: chmod go-w %s and the file in it", stateDir)
	}
	return fmt.Errorf("kernel approve: %w", err)
}

// loadConfigFile loads the kernel's config as the kernel would find it
// (--config, else the default file when it exists), without checking the
// files root: for commands that need only its upstreams and state_dir.
func loadConfigFile(configFile string) (config.Config, error) {
	file := configFile
	if file == "" {
		if p, err := config.DefaultPath(os.Getenv); err == nil {
			if _, err := os.Stat(p); err == nil {
				file = p
			}
		}
	}
	if file == "" {
		return config.Config{}, nil
	}
	c, err := config.Load(file)
	switch {
	case errors.Is(err, iofs.ErrNotExist) && configFile != "":
		return c, cli.Hintf(fmt.Errorf("no config file at %s", file), "pass the config the kernel runs with")
	case err != nil:
		return c, cli.Hintf(err, "fix the config; '%s kernel check%s' checks it", prog, configArg(configFile))
	}
	return c, nil
}

// configName names a config for a message.
func configName(c config.Config) string {
	if c.File == "" {
		return "(none: no config file)"
	}
	return c.File
}
