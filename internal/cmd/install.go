package cmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/sharedos/sharedos-mcp/install"
	"github.com/sharedos/sharedos-mcp/internal/cli"
	"github.com/sharedos/sharedos-mcp/internal/sockpath"
)

func runInstall(_ context.Context, stdio cli.IO, args []string) error {
	fs := newFlagSet(stdio, "install", "HARNESS [flags]",
		"Add the sharedos server to HARNESS's MCP configuration, running this binary as\n"+
			"'serve --integration NAME'. The rest of the file is kept as it was. The entry is named\n"+
			"sharedos and announces the harness id; with --integration NAME it is a further entry,\n"+
			"sharedos-NAME, for a subagent or profile to be given alone (a child integration: see\n"+
			"docs/install for how each harness does that). When the kernel's\n"+
			"socket is not where a harness started from a GUI or an IDE would look (without\n"+
			"$XDG_RUNTIME_DIR), the entry names it with --socket. For pi it also turns off\n"+
			"pi-mcp-adapter's script mode, which runs model-written JavaScript outside the kernel.\n"+
			"Harnesses: "+harnessList+".")
	scopeFlag := fs.String("scope", string(install.ScopeUser), "which configuration file: user or project (the current directory)")
	integration := fs.String("integration", "", "integration `name` the entry announces to the kernel (default: the harness id); another name writes a further entry, sharedos-NAME")
	socket := fs.String("socket", "", "kernel socket `path` passed to serve, made absolute (default: serve's default, written into the entry when a harness started without the shell's environment would miss it)")
	dryRun := fs.Bool("dry-run", false, "print the change as a diff and write nothing")
	keepScriptMode := fs.Bool("keep-script-mode", false, "pi only: leave pi-mcp-adapter's script mode as it is (on by default: model-written JavaScript, run outside the kernel)")
	h, scope, err := parseHarnessArgs(fs, args, scopeFlag)
	if err != nil {
		return err
	}
	if *keepScriptMode && !h.HasScriptMode() {
		return cli.Usagef("drop --keep-script-mode", "install: --keep-script-mode is for pi only; %s has no script mode", h.ID)
	}
	name := *integration
	if name == "" {
		name = h.ID
	}
	if err := integrationName("install", name); err != nil {
		return err
	}
	// The socket a kernel started from this shell listens on; the entry
	// names it unless every way of starting the harness finds it anyway.
	sockArg := install.SocketArg(sockpath.Default(os.Getenv), os.Getenv)
	if *socket != "" {
		if sockArg, err = filepath.Abs(*socket); err != nil {
			return fmt.Errorf("install: resolve --socket: %w", err)
		}
	}
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return fmt.Errorf("install: locate this binary: %w", err)
	}
	env, err := processEnv()
	if err != nil {
		return err
	}
	if install.InBuildCache(exe, env) {
		cli.Warn(stdio.Err, prog, "this binary is a temporary build ("+exe+"): the entry stops working when Go removes it",
			"install a lasting one from the clone with 'make install' (or 'go install .'), then run that binary's install")
	}
	entry := install.EntryName(h, name)
	h = h.Named(entry)
	if entry != install.ServerName {
		// Two names can make one entry name (a.b and a_b); one must not
		// silently take the other's entry.
		if in, err := install.Inspect(h, scope, env); err == nil && in.Found && in.Integration() != name {
			return cli.Hintf(fmt.Errorf("install: %s already holds a %s entry, for the integration %q", in.Path, entry, in.Integration()),
				"uninstall it first ('%s uninstall %s --integration %s'), or choose a name that differs in more than punctuation", prog, h.ID, in.Integration())
		}
	}
	c, err := install.PlanInstall(h, scope, env, install.NewEntry(exe, name, sockArg), install.Options{KeepScriptMode: *keepScriptMode})
	if err != nil {
		return planError("install", entry, err)
	}
	if err := finish(stdio, "install", entry, c, *dryRun, func() string {
		if entry != install.ServerName {
			return fmt.Sprintf("installed %s in %s, announcing %s; verify with: %s\ngive it alone to the subagent or profile that should act as %s: docs/install/%s.md says how",
				entry, c.Path, name, h.VerifyAt(scope), name, h.ID)
		}
		return fmt.Sprintf("installed %s in %s; verify with: %s", install.ServerName, c.Path, h.VerifyAt(scope))
	}); err != nil {
		return err
	}
	if *socket == "" && sockArg != "" {
		fmt.Fprintf(stdio.Out, "the entry passes --socket %s: a harness started without $XDG_RUNTIME_DIR or $SHAREDOS_SOCKET (from a GUI or an IDE) would look for %s\n",
			sockArg, install.BareSocket(os.Getenv))
	}
	if *socket != "" && !*dryRun {
		warnNoKernel(stdio, sockArg)
	}
	reportScriptMode(stdio, h, env, c, *dryRun)
	return nil
}

// warnNoKernel warns when nothing listens on the socket an entry names:
// a --socket with a typo looks installed, and the harness then has no
// sharedos tools.
func warnNoKernel(stdio cli.IO, socket string) {
	c, err := net.Dial("unix", socket)
	if err == nil {
		c.Close()
		return
	}
	cli.Warn(stdio.Err, prog, "no kernel listens on "+socket+" yet: the harness has no sharedos tools until one does",
		"start one there ("+startKernel("", socket)+"), or install again with the --socket your kernel listens on")
}

// reportScriptMode says what install did about pi-mcp-adapter's script
// mode, and warns when it is still on where the harness runs.
func reportScriptMode(stdio cli.IO, h install.Harness, env install.Env, c install.Change, dryRun bool) {
	switch c.ScriptMode {
	case install.ScriptModeNone:
		return
	case install.ScriptModeTurnedOff:
		verb := "turned off"
		if dryRun {
			verb = "would turn off"
		}
		fmt.Fprintf(stdio.Out, "%s pi-mcp-adapter's script mode (\"settings\": {\"scriptMode\": false} in %s): its mcpScript tool runs model-written JavaScript in node:vm, outside the kernel; --keep-script-mode leaves it on\n", verb, c.Path)
	case install.ScriptModeKept:
		cli.Warn(stdio.Err, prog, "pi-mcp-adapter's script mode was left as it is (--keep-script-mode): when on, its mcpScript tool runs model-written JavaScript in node:vm, which can act outside the kernel with no grant and no audit record",
			"run install pi without --keep-script-mode to turn it off")
	}
	if dryRun {
		return
	}
	st, err := h.ScriptMode(env)
	if err == nil && st.On && c.ScriptMode != install.ScriptModeKept {
		where := "by default"
		if st.File != "" {
			where = "by " + st.File
		}
		cli.Warn(stdio.Err, prog, "pi-mcp-adapter's script mode is still on in "+env.Dir+", turned on "+where,
			"set \"settings\": {\"scriptMode\": false} there, or remove its scriptMode setting")
	}
}

func runUninstall(_ context.Context, stdio cli.IO, args []string) error {
	fs := newFlagSet(stdio, "uninstall", "HARNESS [flags]",
		"Remove the sharedos server from HARNESS's MCP configuration, leaving the\n"+
			"rest of the file as it was; with --integration NAME, the further entry install\n"+
			"--integration NAME wrote.\n"+
			"Harnesses: "+harnessList+".")
	scopeFlag := fs.String("scope", string(install.ScopeUser), "which configuration file: user or project (the current directory)")
	integration := fs.String("integration", "", "remove the entry for this integration `name` (default: the harness id's, sharedos)")
	dryRun := fs.Bool("dry-run", false, "print the change as a diff and write nothing")
	h, scope, err := parseHarnessArgs(fs, args, scopeFlag)
	if err != nil {
		return err
	}
	if *integration != "" {
		if err := integrationName("uninstall", *integration); err != nil {
			return err
		}
		h = h.Named(install.EntryName(h, *integration))
	}
	entry := h.EntryName()
	env, err := processEnv()
	if err != nil {
		return err
	}
	c, err := install.PlanUninstall(h, scope, env)
	if err != nil {
		return planError("uninstall", entry, err)
	}
	if err := finish(stdio, "uninstall", entry, c, *dryRun, func() string {
		if c.Removes() {
			return fmt.Sprintf("removed %s from %s, and the file with it: install created it, and nothing else is in it", entry, c.Path)
		}
		return fmt.Sprintf("removed %s from %s", entry, c.Path)
	}); err != nil {
		return err
	}
	if c.Changed() && h.ScriptModeOff(c.After) {
		fmt.Fprintf(stdio.Out, "left \"settings\": {\"scriptMode\": false} in %s: it keeps pi-mcp-adapter's mcpScript away from your other servers too; remove it to have script mode back\n", c.Path)
	}
	return nil
}

// parseHarnessArgs takes HARNESS before or after the flags.
func parseHarnessArgs(fs *flag.FlagSet, args []string, scopeFlag *string) (install.Harness, install.Scope, error) {
	if err := parseFlags(fs, args); err != nil {
		return install.Harness{}, "", err
	}
	if fs.NArg() == 0 {
		return install.Harness{}, "", cli.Usagef("name one of: "+harnessList, "%s: missing HARNESS", fs.Name())
	}
	id := fs.Arg(0)
	if err := parseFlags(fs, fs.Args()[1:]); err != nil {
		return install.Harness{}, "", err
	}
	if fs.NArg() > 0 {
		return install.Harness{}, "", cli.Usagef("name one harness", "%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	h, err := lookupHarness(fs.Name(), id)
	if err != nil {
		return install.Harness{}, "", err
	}
	scope, ok := install.ParseScope(*scopeFlag)
	if !ok {
		return install.Harness{}, "", cli.Usagef("use --scope user or --scope project", "%s: unknown scope %q", fs.Name(), *scopeFlag)
	}
	return h, scope, nil
}

func processEnv() (install.Env, error) {
	dir, err := os.Getwd()
	if err != nil {
		return install.Env{}, fmt.Errorf("find the current directory: %w", err)
	}
	home, _ := os.UserHomeDir() // no home only matters for --scope user, which says so
	return install.Env{Home: home, Dir: dir, Getenv: os.Getenv}, nil
}

func planError(verb, entry string, err error) error {
	var pe *install.ParseError
	switch {
	case errors.As(err, &pe):
		return cli.Hintf(fmt.Errorf("%s: parse %w", verb, err), "fix the file or move it aside; it was left untouched")
	case errors.Is(err, install.ErrUnsupportedLayout):
		return cli.Hintf(fmt.Errorf("%s: %w", verb, err), "edit the %s entry by hand; the file was left untouched", entry)
	}
	return cli.Hintf(fmt.Errorf("%s: %w", verb, err), "the harness's config must be a file you can read and write, in a directory you can write")
}

// finish prints the diff for a dry run, or applies the change, and says
// what happened in one line.
func finish(stdio cli.IO, verb, entry string, c install.Change, dryRun bool, done func() string) error {
	if !c.Changed() {
		if verb == "install" {
			fmt.Fprintf(stdio.Out, "%s already holds this %s entry; nothing changed\n", c.Path, entry)
		} else {
			fmt.Fprintf(stdio.Out, "%s holds no %s entry; nothing changed\n", c.Path, entry)
		}
		return nil
	}
	if dryRun {
		fmt.Fprint(stdio.Out, c.Diff())
		fmt.Fprintf(stdio.Out, "dry run: %s was not written\n", c.Path)
		return nil
	}
	if err := c.Apply(); err != nil {
		if errors.Is(err, install.ErrConcurrentEdit) {
			return cli.Hintf(fmt.Errorf("%s: %w", verb, err), "run the command again")
		}
		return fmt.Errorf("%s: %w", verb, err)
	}
	fmt.Fprintln(stdio.Out, done())
	return nil
}
