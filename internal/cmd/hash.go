package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/sharedos/sharedos-mcp/hashing"
	"github.com/sharedos/sharedos-mcp/internal/cli"
)

func runHash(_ context.Context, stdio cli.IO, args []string) error {
	fs := newFlagSet(stdio, "hash", "[FILE|-]",
		"Read a JSON array of kernel-side tool definitions from FILE (or stdin when FILE is - or absent),\n"+
			"project them as the shim publishes them, and print their catalogHash: 64 hex characters.")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return cli.Usagef("give at most one file, or - for stdin", "hash: unexpected argument %q", fs.Arg(1))
	}
	name := fs.Arg(0)
	var data []byte
	var err error
	if name == "" || name == "-" {
		name = "stdin"
		data, err = io.ReadAll(stdio.In)
	} else {
		data, err = os.ReadFile(name)
	}
	if err != nil {
		return cli.Hintf(fmt.Errorf("read catalogue: %w", err), "give a readable file, or - to read stdin")
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(data, &raws); err != nil {
		return cli.Hintf(fmt.Errorf("read catalogue from %s: %w", name, err),
			"the input must be a JSON array of tool definitions, as in the tools of a kernel's tools.list result")
	}
	tools, err := hashing.ProjectRaw(raws)
	if err != nil {
		return cli.Hintf(fmt.Errorf("project catalogue from %s: %w", name, err),
			"fix the definition it names; the rules are in CATALOG-HASH.md")
	}
	_, err = fmt.Fprintln(stdio.Out, hashing.Hash(tools))
	return err
}
