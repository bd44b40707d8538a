package cmd

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/sharedos/sharedos-mcp/install"
	"github.com/sharedos/sharedos-mcp/internal/cli"
	"github.com/sharedos/sharedos-mcp/internal/nearest"
	"github.com/sharedos/sharedos-mcp/policy"
)

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

// parseInterleaved is parseFlags for a command whose flags may come
// before, between or after its arguments (kernel approve memory --config
// F): it returns the arguments, in order.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
}

// parseFlags parses args. -h prints the whole usage and returns
// flag.ErrHelp. A bad flag returns a usage error (exit 2) that says what
// was wrong in the command line's own terms (--name), and nothing else:
// the flag package's message and full flag list would bury it.
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
	msg, hint := flagError(err.Error()), "run '"+prog+" help "+fs.Name()+"' for its flags"
	if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		if s := nearest.Find(name, nearest.Names(names...)); s != "" {
			hint = "did you mean --" + s + "? " + hint
		}
	}
	return cli.Usagef(hint, "%s: %s", fs.Name(), msg)
}

// flagError rewrites the flag package's message (whose texts are
// stable) with flags written as --name, as the help shows them.
func flagError(msg string) string {
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return "unknown flag --" + name
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return "--" + name + " needs a value"
	}
	var value, name string
	if n, _ := fmt.Sscanf(msg, "invalid value %q for flag -%s", &value, &name); n == 2 {
		name = strings.TrimSuffix(name, ":")
		why := strings.TrimPrefix(msg, fmt.Sprintf("invalid value %q for flag -%s: ", value, name))
		return fmt.Sprintf("--%s %q: %s", name, value, why)
	}
	if n, _ := fmt.Sscanf(msg, "invalid boolean value %q for -%s", &value, &name); n == 2 {
		return fmt.Sprintf("--%s %q: want true or false", strings.TrimSuffix(name, ":"), value)
	}
	return msg
}

// durationValue is a flag.Value for a duration whose errors show what a
// good value looks like, which flag.Duration's bare "parse error" does
// not. With days, "7d" and "1d12h" are accepted too (--since).
type durationValue struct {
	d    *time.Duration
	days bool
}

func durationFlag(fs *flag.FlagSet, name string, value time.Duration, days bool, usage string) *time.Duration {
	d := value
	fs.Var(durationValue{&d, days}, name, usage)
	return &d
}

func (v durationValue) String() string {
	if v.d == nil {
		return time.Duration(0).String() // the zero value flag compares defaults with
	}
	return v.d.String()
}

func (v durationValue) Set(s string) error {
	d, err := parseDuration(s, v.days)
	if err != nil {
		return err
	}
	*v.d = d
	return nil
}

// parseDuration is time.ParseDuration, plus a leading whole number of
// days when days is set.
func parseDuration(s string, days bool) (time.Duration, error) {
	examples := "e.g. 30s, 5m or 1h30m"
	if days {
		examples = "e.g. 30m, 12h, 7d or 1d12h"
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil && s != "0" {
		return 0, fmt.Errorf("a duration needs a unit, e.g. %ss or %sm", s, s)
	}
	rest, total := s, time.Duration(0)
	if days {
		if n, after, ok := strings.Cut(s, "d"); ok && n != "" && strings.Trim(n, "0123456789") == "" {
			count, err := strconv.Atoi(n)
			if err != nil || count > 100000 {
				return 0, fmt.Errorf("want at most 100000 days")
			}
			total, rest = time.Duration(count)*24*time.Hour, after
		}
	}
	if rest != "" {
		d, err := time.ParseDuration(rest)
		if err != nil || (rest != s && d < 0) {
			return 0, fmt.Errorf("want a duration, %s", examples)
		}
		total += d
	}
	return total, nil
}

// integrationName refuses a name the kernel would refuse, with the one
// wording every command uses.
func integrationName(cmdName, name string) error {
	if policy.ValidIntegrationName(name) {
		return nil
	}
	return cli.Usagef("an integration name is 1-64 letters, digits, spaces, '-', '_' or '.', and is never rewritten",
		"%s: invalid integration name %q", cmdName, name)
}

// harnessList is every harness id, for hints.
var harnessList = strings.Join(install.Harnesses(), ", ")

// lookupHarness finds a harness by id, or says which one was meant.
func lookupHarness(cmdName, id string) (install.Harness, error) {
	h, err := install.LookupOrSuggest(id)
	var ue *install.UnknownHarnessError
	if errors.As(err, &ue) {
		hint := "the harnesses are " + harnessList
		switch {
		case ue.Unsupported != "":
			hint = "the harnesses " + prog + " configures are " + harnessList + "; any other MCP client can run '" + prog + " serve --integration NAME' from a stdio entry you write in its config"
		case ue.Suggestion != "":
			hint = "did you mean " + ue.Suggestion + "? " + hint
		}
		return h, cli.Usagef(hint, "%s: %v", cmdName, err)
	}
	return h, err
}

// logFlags adds the logging flags serve and kernel share: what goes to
// stderr or --log-file is what, one format throughout.
func logFlags(fs *flag.FlagSet, what string) *cli.LogOptions {
	var o cli.LogOptions
	fs.StringVar(&o.Level, "log-level", "info", "log `level`: trace, debug, info, warn, error, disabled")
	fs.StringVar(&o.File, "log-file", "", "write "+what+" to this `file` (mode 0600) instead of stderr")
	fs.StringVar(&o.Format, "log-format", "", "`human` lines or json records, for all of it (default: human on stderr, json in a --log-file)")
	return &o
}
