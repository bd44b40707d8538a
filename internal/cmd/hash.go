package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

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
	raws, err := toolArray(data)
	if err != nil {
		return cli.Hintf(fmt.Errorf("read catalogue from %s: %w", name, err),
			"the input must be a JSON array of tool definitions, as in the tools of a kernel's tools.list result")
	}
	tools, err := hashing.ProjectRaw(raws)
	if err != nil {
		return cli.Hintf(fmt.Errorf("project catalogue from %s: %w", name, err),
			"fix the definition it names; the rules are in docs/catalog-hash.md")
	}
	_, err = fmt.Fprintln(stdio.Out, hashing.Hash(tools))
	return err
}

// toolArray splits a JSON array into its elements, saying in the user's
// terms (a line and column, the kind of value) what is wrong otherwise.
func toolArray(data []byte) ([]json.RawMessage, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("the input is empty")
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := lineCol(data, se.Offset)
			return nil, fmt.Errorf("not JSON: line %d, column %d: %s", line, col, strings.TrimPrefix(se.Error(), "json: "))
		}
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if _, ok := v.([]any); !ok {
		return nil, fmt.Errorf("want a JSON array of tool definitions, have %s", jsonKind(v))
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(data, &raws); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err) // cannot happen: it parsed as an array above
	}
	return raws, nil
}

// jsonKind names the kind of a decoded JSON value.
func jsonKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return "another value"
}

// lineCol returns the 1-based line and column of the byte before offset,
// where encoding/json's SyntaxError points.
func lineCol(data []byte, offset int64) (line, col int) {
	before := data[:max(0, min(int(offset)-1, len(data)))]
	line = 1 + bytes.Count(before, []byte("\n"))
	return line, len(before) - bytes.LastIndexByte(before, '\n')
}
