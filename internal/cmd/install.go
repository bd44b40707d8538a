package cmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sharedos/sharedos-mcp/install"
	"github.com/sharedos/sharedos-mcp/internal/cli"
	"github.com/sharedos/sharedos-mcp/policy"
)

var harnessList = strings.Join(install.Harnesses(), ", ")

func runInstall(_ context.Context, stdio cli.IO, args []string) error {
	fs := newFlagSet(stdio, "install", "HARNESS [flags]",
		"Add the sharedos server to HARNESS's MCP configuration, running this binary as\n"+
			"'serve --integration NAME'. The rest of the file is kept as it was.\n"+
			"Harnesses: "+harnessList+".")
	scopeFlag := fs.String("scope", string(install.ScopeUser), "which configuration file: user or project (the current directory)")
	integration := fs.String("integration", "", "integration name the server announces to the kernel (default: the harness id)")
	socket := fs.String("socket", "", "kernel socket path passed to serve, made absolute (default: serve's own default)")
	dryRun := fs.Bool("dry-run", false, "print the change as a diff and write nothing")
	h, scope, err := parseHarnessArgs(fs, args, scopeFlag)
	if err != nil {
		return err
	}
	name := *integration
	if name == "" {
		name = h.ID
	}
	if !policy.ValidIntegrationName(name) {
		return cli.Usagef("use 1-64 letters, digits, spaces, '-', '_' or '.'", "install: bad integration name %q", name)
	}
	sock := *socket
	if sock != "" {
		if sock, err = filepath.Abs(sock); err != nil {
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
	c, err := install.PlanInstall(h, scope, env, install.NewEntry(exe, name, sock))
	if err != nil {
		return planError("install", err)
	}
	return finish(stdio, "install", c, *dryRun, func() string {
		return fmt.Sprintf("installed %s in %s; verify with: %s", install.ServerName, c.Path, h.Verify)
	})
}

func runUninstall(_ context.Context, stdio cli.IO, args []string) error {
	fs := newFlagSet(stdio, "uninstall", "HARNESS [flags]",
		"Remove the sharedos server from HARNESS's MCP configuration, leaving the\n"+
			"rest of the file as it was.\n"+
			"Harnesses: "+harnessList+".")
	scopeFlag := fs.String("scope", string(install.ScopeUser), "which configuration file: user or project (the current directory)")
	dryRun := fs.Bool("dry-run", false, "print the change as a diff and write nothing")
	h, scope, err := parseHarnessArgs(fs, args, scopeFlag)
	if err != nil {
		return err
	}
	env, err := processEnv()
	if err != nil {
		return err
	}
	c, err := install.PlanUninstall(h, scope, env)
	if err != nil {
		return planError("uninstall", err)
	}
	return finish(stdio, "uninstall", c, *dryRun, func() string {
		return fmt.Sprintf("removed %s from %s", install.ServerName, c.Path)
	})
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
	h, ok := install.Lookup(id)
	if !ok {
		return install.Harness{}, "", cli.Usagef("name one of: "+harnessList, "%s: %v", fs.Name(), &install.UnknownHarnessError{ID: id})
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

func planError(verb string, err error) error {
	var pe *install.ParseError
	switch {
	case errors.As(err, &pe):
		return cli.Hintf(fmt.Errorf("%s: parse %w", verb, err), "fix the file or move it aside; it was left untouched")
	case errors.Is(err, install.ErrUnsupportedLayout):
		return cli.Hintf(fmt.Errorf("%s: %w", verb, err), "edit the %s entry by hand; the file was left untouched", install.ServerName)
	}
	return fmt.Errorf("%s: %w", verb, err)
}

// finish prints the diff for a dry run, or applies the change, and says
// what happened in one line.
func finish(stdio cli.IO, verb string, c install.Change, dryRun bool, done func() string) error {
	if !c.Changed() {
		if verb == "install" {
			fmt.Fprintf(stdio.Out, "%s already holds this %s entry; nothing changed\n", c.Path, install.ServerName)
		} else {
			fmt.Fprintf(stdio.Out, "%s holds no %s entry; nothing changed\n", c.Path, install.ServerName)
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
