// Command sharedos-mcp gives AI coding harnesses a tool catalogue that a
// host kernel decides and authorizes, call by call. This file only
// dispatches; each subcommand lives in its own file and its logic in the
// package it belongs to.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/sharedos/sharedos-mcp/internal/cli"
)

const prog = "sharedos-mcp"

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, stdio cli.IO, args []string) error
}

// commands is filled by each subcommand's file in init, in the order the
// help lists them.
var commands []command

func register(c command) { commands = append(commands, c) }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, cli.IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}, os.Args[1:])
	stop()
	os.Exit(code)
}

func run(ctx context.Context, stdio cli.IO, args []string) int {
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
	case "-version", "--version":
		name = "version"
	}
	for _, c := range commands {
		if c.name == name {
			if err := c.run(ctx, stdio, args[1:]); err != nil {
				if errors.Is(err, flag.ErrHelp) {
					return 0
				}
				return cli.Report(stdio.Err, prog, err)
			}
			return 0
		}
	}
	return cli.Report(stdio.Err, prog, cli.Usagef("run '"+prog+" help' to list the commands", "unknown command %q", name))
}

func help(stdio cli.IO, args []string) int {
	if len(args) == 0 {
		usage(stdio.Out)
		return 0
	}
	for _, c := range commands {
		if c.name == args[0] {
			_ = c.run(context.Background(), cli.IO{In: stdio.In, Out: stdio.Out, Err: stdio.Out}, []string{"-h"})
			return 0
		}
	}
	return cli.Report(stdio.Err, prog, cli.Usagef("run '"+prog+" help' to list the commands", "unknown command %q", args[0]))
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "%s: a host-authorized MCP tool catalogue for AI coding harnesses\n\nUsage:\n  %s <command> [flags]\n\nCommands:\n", prog, prog)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun '%s help <command>' for a command's flags.\n", prog)
}

// newFlagSet returns a FlagSet whose usage goes to stdio.Err and names
// the command. The first line of its usage is the synopsis.
func newFlagSet(stdio cli.IO, name, argsSyntax, summary string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stdio.Err)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "%s\n\n%s\n", strings.TrimSpace("Usage: "+prog+" "+name+" "+argsSyntax), summary)
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprintf(w, "\nFlags:\n")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parseFlags parses args. -h prints the whole usage and returns
// flag.ErrHelp. A bad flag prints only the synopsis line and returns a
// usage error (exit 2) whose report says what was wrong: the flag
// package's own message and full flag list would bury it.
func parseFlags(fs *flag.FlagSet, args []string) error {
	out := fs.Output()
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(out)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		fs.Usage()
		return err
	}
	fs.SetOutput(&firstLineWriter{w: out})
	fs.Usage()
	fs.SetOutput(out)
	return cli.Usagef("run '"+prog+" help "+fs.Name()+"' for its flags", "%s: %v", fs.Name(), err)
}

// firstLineWriter passes on the first line written to it and drops the
// rest.
type firstLineWriter struct {
	w    io.Writer
	done bool
}

func (f *firstLineWriter) Write(p []byte) (int, error) {
	if f.done {
		return len(p), nil
	}
	line := p
	if i := bytes.IndexByte(p, '\n'); i >= 0 {
		line, f.done = p[:i+1], true
	}
	if _, err := f.w.Write(line); err != nil {
		return 0, err
	}
	return len(p), nil
}
