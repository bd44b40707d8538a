package cmd

import (
	"bytes"
	"runtime"
	"strings"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/cli"
)

// runCLI runs the command line args as main would, with empty stdin.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Run(t.Context(), cli.IO{In: strings.NewReader(""), Out: &out, Err: &errOut}, args)
	return code, out.String(), errOut.String()
}

func lines(s string) []string { return strings.Split(strings.TrimSuffix(s, "\n"), "\n") }

func TestNoArgumentsPrintsUsageToStderr(t *testing.T) {
	code, stdout, stderr := runCLI(t)
	if code != 2 {
		t.Errorf("exit code = %d, want 2", code)
	}
	if stdout != "" {
		t.Errorf("stdout = %q, want nothing", stdout)
	}
	if !strings.Contains(stderr, "Usage:\n  sharedos-mcp <command> [flags]") {
		t.Errorf("stderr has no usage:\n%s", stderr)
	}
}

func TestHelpListsEveryCommand(t *testing.T) {
	if len(commands) == 0 {
		t.Fatal("no command is registered")
	}
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, stdout, stderr := runCLI(t, args...)
			if code != 0 || stderr != "" {
				t.Fatalf("exit code %d, stderr %q; want 0 and nothing", code, stderr)
			}
			for _, c := range commands {
				if c.summary == "" || strings.Contains(c.summary, "\n") {
					t.Errorf("command %s: summary %q is not one line", c.name, c.summary)
				}
				if !strings.Contains(stdout, "  "+c.name+" ") || !strings.Contains(stdout, c.summary+"\n") {
					t.Errorf("help does not list %s with its summary %q:\n%s", c.name, c.summary, stdout)
				}
			}
		})
	}
}

func TestHelpCommandPrintsItsUsage(t *testing.T) {
	for _, c := range commands {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "help", c.name)
			if code != 0 || stderr != "" {
				t.Fatalf("exit code %d, stderr %q; want 0 and nothing", code, stderr)
			}
			if !strings.HasPrefix(stdout, "Usage: sharedos-mcp "+c.name) {
				t.Errorf("help %s does not start with its synopsis:\n%s", c.name, stdout)
			}
			// -h prints the same text, to stderr, so help and -h
			// cannot drift apart.
			code, hOut, hErr := runCLI(t, c.name, "-h")
			if code != 0 || hOut != "" || hErr != stdout {
				t.Errorf("%s -h: exit code %d, stdout %q, stderr %q; want 0, nothing, and the help text", c.name, code, hOut, hErr)
			}
		})
	}
}

func TestHelpShowsFlags(t *testing.T) {
	var out bytes.Buffer
	fs := newFlagSet(cli.IO{Err: &out}, "demo", "[flags] <path>", "Do the demo.")
	fs.String("socket", "", "kernel socket `path`")
	fs.Bool("dry-run", false, "print the change instead of making it")
	if err := parseFlags(fs, []string{"-h"}); err == nil {
		t.Fatal("parseFlags(-h) returned no error")
	}
	for _, want := range []string{"Usage: sharedos-mcp demo [flags] <path>\n", "Do the demo.", "Flags:", "-socket path", "kernel socket path", "-dry-run", "print the change instead of making it"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("usage lacks %q:\n%s", want, out.String())
		}
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		lines []string
	}{
		{
			"an unknown command",
			[]string{"frobnicate"},
			[]string{`sharedos-mcp: error: unknown command "frobnicate"`, "hint: run 'sharedos-mcp help' to list the commands"},
		},
		{
			"help for an unknown command",
			[]string{"help", "frobnicate"},
			[]string{`sharedos-mcp: error: unknown command "frobnicate"`, "hint: run 'sharedos-mcp help' to list the commands"},
		},
		{
			"an unknown flag, and nothing else",
			[]string{"version", "--frobnicate"},
			[]string{"sharedos-mcp: error: version: unknown flag --frobnicate", "hint: run 'sharedos-mcp help version' for its flags"},
		},
		{
			"a flag one edit away from one the command has",
			[]string{"install", "codex", "--dryrun"},
			[]string{"sharedos-mcp: error: install: unknown flag --dryrun", "hint: did you mean --dry-run? run 'sharedos-mcp help install' for its flags"},
		},
		{
			"a flag without its value",
			[]string{"serve", "--integration"},
			[]string{"sharedos-mcp: error: serve: --integration needs a value", "hint: run 'sharedos-mcp help serve' for its flags"},
		},
		{
			"a boolean flag given something else",
			[]string{"install", "codex", "--dry-run=maybe"},
			[]string{`sharedos-mcp: error: install: --dry-run "maybe": want true or false`, "hint: run 'sharedos-mcp help install' for its flags"},
		},
		{
			"version takes no arguments",
			[]string{"version", "extra"},
			[]string{`sharedos-mcp: error: version: unexpected argument "extra"`, "hint: run 'sharedos-mcp version' without arguments"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tt.args...)
			if code != 2 {
				t.Errorf("exit code = %d, want 2", code)
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
			if got := lines(stderr); strings.Join(got, "\n") != strings.Join(tt.lines, "\n") {
				t.Errorf("stderr =\n%s\nwant\n%s", stderr, strings.Join(tt.lines, "\n"))
			}
		})
	}
}

// Every command, whatever it does, treats a flag it does not know as a
// usage error and says so on stderr only.
func TestEveryCommandRefusesAnUnknownFlag(t *testing.T) {
	for _, c := range commands {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, c.name, "--no-such-flag")
			if code != 2 {
				t.Errorf("exit code = %d, want 2", code)
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
			got := lines(stderr)
			if len(got) != 2 || got[0] != "sharedos-mcp: error: "+c.name+": unknown flag --no-such-flag" || !strings.HasPrefix(got[1], "hint: ") {
				t.Errorf("stderr is not the error and its hint:\n%s", stderr)
			}
		})
	}
}

func TestVersionPrintsOneLine(t *testing.T) {
	for _, arg := range []string{"version", "--version", "-version", "-v"} {
		t.Run(arg, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, arg)
			if code != 0 || stderr != "" {
				t.Fatalf("exit code %d, stderr %q; want 0 and nothing", code, stderr)
			}
			if strings.Count(stdout, "\n") != 1 || !strings.HasSuffix(stdout, "\n") {
				t.Errorf("stdout is not one line: %q", stdout)
			}
			platform := runtime.GOOS + "/" + runtime.GOARCH
			if !strings.HasPrefix(stdout, "sharedos-mcp ") || !strings.Contains(stdout, runtime.Version()) || !strings.HasSuffix(stdout, platform+")\n") {
				t.Errorf("stdout = %q, want the program, version, Go version and %s", stdout, platform)
			}
		})
	}
}
