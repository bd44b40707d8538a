package cmd

import (
	"bytes"
	"cmp"
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
		"Read a catalogue from FILE (or stdin when FILE is - or absent), project its tools as the shim\n"+
			"publishes them, and print their catalogHash: 64 hex characters. The catalogue is a JSON array\n"+
			"of kernel-side tool definitions, or a document with a tools array: a tools/list result as serve\n"+
			"publishes it, or 'catalog --json'. A document that states a catalogHash must hash to it.")
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
	raws, stated, err := catalogueTools(data)
	if err != nil {
		return cli.Hintf(fmt.Errorf("read catalogue from %s: %w", name, err),
			"the input must be a JSON array of tool definitions, as in the tools of a kernel's tools.list result, or a document with a tools array, as serve's tools/list result or 'catalog --json'")
	}
	tools, err := hashing.ProjectRaw(raws)
	if err != nil {
		return cli.Hintf(fmt.Errorf("project catalogue from %s: %w", name, err),
			"fix the definition it names; the rules are in docs/catalog-hash.md")
	}
	h := hashing.Hash(tools)
	if _, err := fmt.Fprintln(stdio.Out, h); err != nil {
		return err
	}
	if stated != "" && stated != h {
		return cli.Hintf(fmt.Errorf("hash: the tools of %s hash to %s, not to the catalogHash it states, %s", name, h, stated),
			"the document was changed after it was written: fetch it again")
	}
	return nil
}

// catalogueTools reads what hash takes, saying in the user's terms (a
// line and column, the kind of value) what is wrong otherwise: a JSON
// array of kernel-side tool definitions; or a document with a tools
// array, whose tools are as serve publishes them, given as kernel-side
// definitions, and the catalogHash the document states ("" for none).
func catalogueTools(data []byte) (raws []json.RawMessage, stated string, err error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, "", errors.New("the input is empty")
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := lineCol(data, se.Offset)
			return nil, "", fmt.Errorf("not JSON: line %d, column %d: %s", line, col, strings.TrimPrefix(se.Error(), "json: "))
		}
		return nil, "", fmt.Errorf("not JSON: %w", err)
	}
	switch v := v.(type) {
	case []any:
		if err := json.Unmarshal(data, &raws); err != nil {
			return nil, "", fmt.Errorf("not JSON: %w", err) // cannot happen: it parsed as an array above
		}
		return raws, "", nil
	case map[string]any:
		if _, ok := v["tools"].([]any); !ok {
			return nil, "", errors.New("want a JSON array of tool definitions, or a document with a tools array; have an object without one")
		}
	default:
		return nil, "", fmt.Errorf("want a JSON array of tool definitions, have %s", jsonKind(v))
	}
	var doc struct {
		Tools       []json.RawMessage `json:"tools"`
		CatalogHash string            `json:"catalogHash"`
		Meta        struct {
			CatalogHash string `json:"sharedos/catalogHash"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, "", fmt.Errorf("read the document: %w", err)
	}
	for i, t := range doc.Tools {
		d, err := definition(t)
		if err != nil {
			return nil, "", fmt.Errorf("tool #%d: %w", i, err)
		}
		raws = append(raws, d)
	}
	return raws, cmp.Or(doc.CatalogHash, doc.Meta.CatalogHash), nil
}

// definition is a published tool as the kernel-side definition it was
// projected from: readWrite from its readOnlyHint, namespace and source
// from its _meta (serve) or its own fields (catalog --json). Strings are
// passed on as written, escapes and all, so they hash as published. A
// kernel-side definition (one with readWrite) is passed on as it is.
func definition(raw json.RawMessage) (json.RawMessage, error) {
	var p struct {
		ReadWrite    json.RawMessage `json:"readWrite"`
		Name         json.RawMessage `json:"name"`
		Description  json.RawMessage `json:"description"`
		InputSchema  json.RawMessage `json:"inputSchema"`
		OutputSchema json.RawMessage `json:"outputSchema"`
		Namespace    json.RawMessage `json:"namespace"`
		Source       json.RawMessage `json:"source"`
		Annotations  struct {
			ReadOnly    *bool           `json:"readOnlyHint"`
			Destructive json.RawMessage `json:"destructiveHint"`
			Idempotent  json.RawMessage `json:"idempotentHint"`
		} `json:"annotations"`
		Meta struct {
			Namespace json.RawMessage `json:"sharedos/namespace"`
			Source    json.RawMessage `json:"sharedos/source"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, fmt.Errorf("%s: want %s", te.Field, te.Type)
		}
		return nil, err
	}
	if p.ReadWrite != nil {
		return raw, nil
	}
	readWrite := json.RawMessage(`"write"`)
	if p.Annotations.ReadOnly != nil && *p.Annotations.ReadOnly {
		readWrite = json.RawMessage(`"read"`)
	}
	d := map[string]json.RawMessage{"readWrite": readWrite}
	for k, v := range map[string]json.RawMessage{
		"name": p.Name, "description": p.Description, "inputSchema": p.InputSchema, "outputSchema": p.OutputSchema,
		"namespace": firstOf(p.Meta.Namespace, p.Namespace), "source": firstOf(p.Meta.Source, p.Source),
	} {
		if v != nil {
			d[k] = v
		}
	}
	a := map[string]json.RawMessage{}
	if p.Annotations.Destructive != nil {
		a["destructive"] = p.Annotations.Destructive
	}
	if p.Annotations.Idempotent != nil {
		a["idempotent"] = p.Annotations.Idempotent
	}
	if len(a) > 0 {
		b, err := json.Marshal(a)
		if err != nil {
			return nil, err
		}
		d["annotations"] = b
	}
	return json.Marshal(d)
}

// firstOf is the first of vs that is set.
func firstOf(vs ...json.RawMessage) json.RawMessage {
	for _, v := range vs {
		if v != nil {
			return v
		}
	}
	return nil
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
