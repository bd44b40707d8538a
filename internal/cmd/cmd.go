// Package cmd is sharedos-mcp's command line. Each command has a file of
// its own that parses flags, calls the package that does the work, and
// turns that package's typed errors into one message and a hint; the
// table below lists them in the order a user needs them.
package cmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/sharedos/sharedos-mcp/internal/cli"
	"github.com/sharedos/sharedos-mcp/internal/nearest"
)

const prog = "sharedos-mcp"

// Build identifies the binary: what release builds stamp with -ldflags
// into package main. Empty fields are filled from the build information
// the Go toolchain embeds.
type Build struct {
	Version, Commit, Date string
}

// stamped is the Build that Main was given.
var stamped Build

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, stdio cli.IO, args []string) error
}

// commands is every command, in the order help lists them: what a
// harness runs, then what a user runs to set it up, check it and look at
// what happened.
var commands = []command{
	{"serve", "serve MCP on stdin/stdout for one turn, relaying to the kernel (harnesses run this)", runServe},
	{"kernel", "run the reference host kernel: file tools under a root, grants from a config, an audit log", runKernel},
	{"install", "add the sharedos server to a harness's MCP configuration", runInstall},
	{"uninstall", "remove the sharedos server from a harness's MCP configuration", runUninstall},
	{"doctor", "check this binary, the kernel socket, the kernel and every harness's sharedos entry", runDoctor},
	{"catalog", "show the kernel's catalogue for an integration and each harness's name for every tool", runCatalog},
	{"audit", "show the reference kernel's audit log", runAudit},
	{"approvals", "list the calls the running kernel holds until a person approves them", runApprovals},
	{"approve", "approve one held call, as the kernel's operator", runApprove},
	{"deny", "decline one held call, as the kernel's operator", runDeny},
	{"hash", "print the catalogHash of a catalogue: kernel tool definitions, a tools/list result, catalog --json", runHash},
	{"version", "print the version and how this binary was built", runVersion},
}

// Main runs the process's command line and returns its exit code: 0, 1
// for a failure, 2 for a mistake in the command line. SIGTERM and SIGINT
// cancel the command's context.
func Main(b Build) int {
	stamped = b
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return Run(ctx, cli.IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}, os.Args[1:])
}

// Run runs one command line (without the program name) on stdio.
func Run(ctx context.Context, stdio cli.IO, args []string) int {
	if len(args) == 0 {
		usage(stdio.Err)
		return 2
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help":
		usage(stdio.Out)
		return 0
	case "help":
		return help(stdio, args[1:])
	case "-v", "-version", "--version":
		name = "version"
	}
	c, ok := lookup(name)
	if !ok {
		return cli.Report(stdio.Err, prog, unknownCommand(name))
	}
	if err := c.run(ctx, stdio, args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return cli.Report(stdio.Err, prog, err)
	}
	return 0
}

func lookup(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func unknownCommand(name string) error {
	hint := "run '" + prog + " help' to list the commands"
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	if s := nearest.Find(name, nearest.Names(names...)); s != "" {
		hint = "did you mean " + s + "? " + hint
	}
	return cli.Usagef(hint, "unknown command %q", name)
}

// help prints the list of commands, or one command's usage (with its
// subcommand's, as in 'help kernel check'), on stdout.
func help(stdio cli.IO, args []string) int {
	if len(args) == 0 {
		usage(stdio.Out)
		return 0
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		fmt.Fprintf(stdio.Out, "Usage: %s help [COMMAND [SUBCOMMAND]]\n\nList the commands, or print what one command does and its flags.\n", prog)
		return 0
	}
	c, ok := lookup(args[0])
	if !ok {
		return cli.Report(stdio.Err, prog, unknownCommand(args[0]))
	}
	err := c.run(context.Background(), cli.IO{In: stdio.In, Out: stdio.Out, Err: stdio.Out}, append(slices.Clone(args[1:]), "-h"))
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return cli.Report(stdio.Err, prog, err)
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "%s: a host-authorized MCP tool catalogue for AI coding harnesses\n\nUsage:\n  %s <command> [flags]\n\nCommands:\n", prog, prog)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun '%s help <command>' for a command's flags.\n", prog)
}
