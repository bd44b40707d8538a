package cmd

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/mattn/go-isatty"

	"github.com/sharedos/sharedos-mcp/internal/cli"
	"github.com/sharedos/sharedos-mcp/internal/doctor"
	"github.com/sharedos/sharedos-mcp/internal/nearest"
	"github.com/sharedos/sharedos-mcp/kernel/config"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
)

func runKernelApprove(stdio cli.IO, args []string) error {
	fs := newFlagSet(stdio, "kernel approve", "UPSTREAM [TOOL] [--sha256 HEX] [--config FILE]",
		"Pin the new definition of a brokered tool that is quarantined because its upstream changed\n"+
			"what the tool says it does (its description, schemas or hints). With --sha256 (the first 12\n"+
			"or more hex digits of the definition's hash, as 'doctor' shows it) it pins TOOL's definition\n"+
			"only if that is still the one pending, and otherwise says what is pending now. Without it,\n"+
			"it shows each pending definition of UPSTREAM (or of TOOL) with its hash and asks on a\n"+
			"terminal. The kernel records the approval in its audit log (upstream.tool.pinned, reason\n"+
			"approved) and publishes the tool from its next turn; a kernel that is not running does so\n"+
			"when it starts.")
	configFile := fs.String("config", "", configHelp)
	sha := fs.String("sha256", "", "approve only the definition whose SHA-256 begins with these hex digits (12 or more)")
	// Flags may come after the names: kernel approve memory --config F.
	names, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(names) == 0 || len(names) > 2 {
		return cli.Usagef("name the upstream, and optionally one of its tools: kernel approve memory read_graph", "kernel approve: want UPSTREAM [TOOL], got %s", cli.Count(len(names), "argument", "arguments"))
	}
	up, tool := names[0], ""
	if len(names) == 2 {
		tool = names[1]
	}
	want := strings.ToLower(*sha)
	if want != "" {
		if tool == "" {
			return cli.Usagef("name the tool too: kernel approve "+up+" TOOL --sha256 "+*sha, "kernel approve: --sha256 names one tool's definition")
		}
		if len(want) < upstream.MinHashPrefix || len(want) > 64 || strings.Trim(want, "0123456789abcdef") != "" {
			return cli.Usagef("give the hash 'doctor' shows, or its first 12 or more hex digits", "kernel approve: --sha256 %q: want %d to 64 hex digits", *sha, upstream.MinHashPrefix)
		}
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
		return approveError(err, up, tool, stateDir, *configFile)
	}
	var pending []upstream.Quarantine
	for _, q := range quarantined {
		if q.Upstream == up && (tool == "" || q.Tool == tool) {
			pending = append(pending, q)
		}
	}
	if want == "" {
		if len(pending) == 0 {
			// Nothing to show: Approve says why (never pinned, or nothing
			// pending), and pins nothing.
			_, err := upstream.Approve(stateDir, up, tool, "", time.Now())
			return approveError(err, up, tool, stateDir, *configFile)
		}
		for _, q := range pending {
			printPending(stdio.Out, q)
		}
		if !stdinIsTerminal(stdio.In) {
			hint := fmt.Sprintf("review the definitions above, then approve each by its hash: %s kernel approve %s TOOL --sha256 HASH%s", prog, up, configArg(*configFile))
			if len(pending) == 1 {
				hint = fmt.Sprintf("review the definition above, then: %s", approveCommand(pending[0], *configFile))
			}
			return cli.Hintf(errors.New("kernel approve: not on a terminal, so nothing is asked; name the definition you reviewed with --sha256"), "%s", hint)
		}
		fmt.Fprint(stdio.Out, "approve? [y/N] ")
		answer, _ := bufio.NewReader(stdio.In).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
			return cli.Hintf(errors.New("kernel approve: not approved; nothing was pinned"), "the tools stay unpublished; approve when you trust them")
		}
	}
	var approvals []upstream.Approval
	if want != "" {
		approvals, err = upstream.Approve(stateDir, up, tool, want, time.Now())
	} else {
		// Each exactly as shown: a definition that changed since is
		// refused, as with --sha256.
		for _, q := range pending {
			var a []upstream.Approval
			if a, err = upstream.Approve(stateDir, q.Upstream, q.Tool, q.Pending, time.Now()); err != nil {
				break
			}
			approvals = append(approvals, a...)
		}
	}
	for _, a := range approvals {
		i := slices.IndexFunc(quarantined, func(q upstream.Quarantine) bool { return q.Upstream == a.Upstream && q.Tool == a.Tool })
		var q *upstream.Quarantine
		if i >= 0 {
			q = &quarantined[i]
		}
		printApproval(stdio.Out, a, q)
	}
	if len(approvals) > 0 {
		fmt.Fprintf(stdio.Out, "a running kernel records the approval in its audit log and publishes the new definition from its next turn; one that is not running does so when it starts\n")
	}
	if err != nil {
		return approveError(err, up, tool, stateDir, *configFile)
	}
	return nil
}

// stdinIsTerminal reports whether r is a terminal, where a person can be
// asked. Tests replace it.
var stdinIsTerminal = func(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// printPending shows a quarantined definition for review: each changed
// field as pinned and as offered, and the hash that approves it.
func printPending(w io.Writer, q upstream.Quarantine) {
	fmt.Fprintf(w, "%s.%s is quarantined: its %s changed since it was pinned (seen %s)\n", q.Upstream, q.Tool, joinWords(q.Changed), q.Since.UTC().Format(time.RFC3339))
	for _, f := range q.Changed {
		fmt.Fprintf(w, "  %s pinned:  %s\n", f, doctor.DefinitionField(q.PinnedDefinition, f))
		fmt.Fprintf(w, "  %s offered: %s\n", f, doctor.DefinitionField(q.PendingDefinition, f))
	}
	fmt.Fprintf(w, "  sha256 %s (pinned: %s)\n", q.Pending, q.Pinned)
}

// approveCommand is the command that approves q's pending definition
// and nothing else.
func approveCommand(q upstream.Quarantine, configFile string) string {
	return fmt.Sprintf("%s kernel approve %s %s --sha256 %s%s", prog, q.Upstream, q.Tool, q.Pending, configArg(configFile))
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

func approveError(err error, up, tool, stateDir, configFile string) error {
	what := up
	if tool != "" {
		what += "." + tool
	}
	var nr *upstream.NotReviewedError
	switch {
	case errors.As(err, &nr):
		q := upstream.Quarantine{Upstream: nr.Upstream, Tool: nr.Tool, Pending: nr.Pending}
		return cli.Hintf(fmt.Errorf("kernel approve: %s.%s: the definition pending now is sha256 %s, not the one you named (%s): the upstream changed it again; it differs from the pinned one in %s; nothing was pinned",
			nr.Upstream, nr.Tool, nr.Pending, nr.Named, joinWords(nr.Changed)),
			"review it again ('%s doctor' shows it), and if you trust it: %s", prog, approveCommand(q, configFile))
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
