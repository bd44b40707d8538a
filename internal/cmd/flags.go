package cmd

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/sharedos/sharedos-mcp/internal/cli"
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
