package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/sharedos/sharedos-mcp/hashing"
	"github.com/sharedos/sharedos-mcp/install"
	"github.com/sharedos/sharedos-mcp/internal/cli"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/internal/sockpath"
	"github.com/sharedos/sharedos-mcp/kernelclient"
	"github.com/sharedos/sharedos-mcp/policy"
)

func runCatalog(ctx context.Context, stdio cli.IO, args []string) error {
	fs := newFlagSet(stdio, "catalog", "[--harness H|all] [--integration NAME] [flags]",
		"Connect to the kernel as an integration, fetch its catalogue (checking the catalogHash as\n"+
			"serve does) and print every tool with the name each harness shows its model for it,\n"+
			"flagging names a harness rewrites, truncates, hashes or gives two tools alike.\n"+
			"The catalogue is per integration: --integration defaults to the harness id when --harness\n"+
			"names one harness (what 'install' announces), and must be given with --harness all.\n"+
			"Each run is one turn at the kernel, recorded in its audit log.\n"+
			"Harnesses: "+harnessList+".")
	harness := fs.String("harness", "all", "show aliases for this `harness`, or all of them")
	integration := fs.String("integration", "", "integration `name` to fetch the catalogue for (default: the harness id)")
	socket := fs.String("socket", "", "kernel socket `path` (default $SHAREDOS_SOCKET, else $XDG_RUNTIME_DIR/sharedos/kernel.sock, else $TMPDIR/sharedos-$UID/kernel.sock)")
	asJSON := fs.Bool("json", false, "print one JSON document instead of tables")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("catalog takes flags only", "catalog: unexpected argument %q", fs.Arg(0))
	}
	harnesses := install.Harnesses()
	if *harness != "all" {
		if _, ok := install.Lookup(*harness); !ok {
			return cli.Usagef("use --harness all or one of: "+harnessList, "catalog: %v", &install.UnknownHarnessError{ID: *harness})
		}
		harnesses = []string{*harness}
	}
	name := *integration
	if name == "" {
		if *harness == "all" {
			return cli.Usagef("name the integration, e.g. --integration claude-code, or one harness with --harness", "catalog: --integration is required with --harness all")
		}
		name = *harness
	}
	if !policy.ValidIntegrationName(name) {
		return cli.Usagef("use 1-64 letters, digits, spaces, '-', '_' or '.'", "catalog: bad integration name %q", name)
	}
	path := *socket
	if path == "" {
		path = sockpath.Default(os.Getenv)
	}

	k, err := kernelclient.Dial(kernelclient.Options{Socket: path, KernelUID: -1})
	if err != nil {
		return cli.Hintf(fmt.Errorf("catalog: cannot reach the kernel at %s: %w", path, err), "%s", dialHint(err))
	}
	defer k.Close()
	cctx, cancel := context.WithTimeout(ctx, helloTimeout)
	defer cancel()
	hello, err := k.Hello(cctx, kproto.HelloParams{Name: name, Shim: kproto.Peer{Name: prog + " catalog", Version: shimVersion()}})
	if err != nil {
		return helloError(path, err)
	}
	tools, hash, err := k.Catalogue(cctx)
	if err != nil {
		return cli.Hintf(fmt.Errorf("catalog: %w", err), "serve refuses this catalogue too; check the kernel's tool definitions and its log")
	}
	view := newCatalogView(name, hello, hash, tools, harnesses)
	if *asJSON {
		enc := json.NewEncoder(stdio.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(view)
	}
	return view.print(stdio)
}

// catalogView is the catalog command's output; its JSON form is the
// documented --json document.
type catalogView struct {
	Integration string        `json:"integration"`
	Kernel      kproto.Peer   `json:"kernel"`
	CatalogHash string        `json:"catalogHash"`
	ExecutionID string        `json:"executionId"`
	Harnesses   []string      `json:"harnesses"`
	Tools       []catalogTool `json:"tools"`
}

type catalogTool struct {
	Name        string               `json:"name"`
	Description string               `json:"description"`
	Namespace   string               `json:"namespace"`
	Source      string               `json:"source"`
	ReadOnly    bool                 `json:"readOnly"`
	Aliases     map[string]aliasView `json:"aliases"`
}

type aliasView struct {
	Alias     string   `json:"alias"`
	Rewritten bool     `json:"rewritten"`
	Truncated bool     `json:"truncated"`
	Hashed    bool     `json:"hashed"`
	TooLong   bool     `json:"tooLong"`
	Collides  bool     `json:"collides"`
	Notes     []string `json:"notes,omitempty"`
}

func newCatalogView(integration string, hello kproto.HelloResult, hash string, tools []hashing.Tool, harnesses []string) *catalogView {
	v := &catalogView{
		Integration: integration, Kernel: hello.Kernel, CatalogHash: hash, ExecutionID: hello.ExecutionID,
		Harnesses: harnesses, Tools: make([]catalogTool, len(tools)),
	}
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
		v.Tools[i] = catalogTool{
			Name: t.Name, Description: t.Description, Namespace: t.Namespace, Source: t.Source,
			ReadOnly: t.ReadOnlyHint, Aliases: map[string]aliasView{},
		}
	}
	for _, h := range harnesses {
		for i, r := range install.Aliases(h, names) {
			v.Tools[i].Aliases[h] = aliasView{
				Alias: r.Alias, Rewritten: r.Rewritten, Truncated: r.Truncated, Hashed: r.Hashed,
				TooLong: r.TooLong, Collides: r.Collides, Notes: r.Notes,
			}
		}
	}
	return v
}

// flags names what a harness did to a tool's name, "-" for nothing.
func (a aliasView) flags() string {
	var f []string
	for _, x := range []struct {
		set  bool
		name string
	}{{a.Rewritten, "rewritten"}, {a.Truncated, "truncated"}, {a.Hashed, "hashed"}, {a.TooLong, "too-long"}, {a.Collides, "collides"}} {
		if x.set {
			f = append(f, x.name)
		}
	}
	if len(f) == 0 {
		return "-"
	}
	return strings.Join(f, ",")
}

// serious reports whether the model sees a name that no longer tells
// the tool apart, is cut, or that its API refuses. A replaced "." and the
// hash suffix some harnesses add for it are routine.
func (a aliasView) serious() bool { return a.Truncated || a.TooLong || a.Collides }

func (v *catalogView) print(stdio cli.IO) error {
	w := tabwriter.NewWriter(stdio.Out, 0, 8, 2, ' ', 0)
	fmt.Fprintf(w, "integration\t%s\n", v.Integration)
	fmt.Fprintf(w, "kernel\t%s %s\n", v.Kernel.Name, v.Kernel.Version)
	fmt.Fprintf(w, "executionId\t%s\n", v.ExecutionID)
	fmt.Fprintf(w, "catalogHash\t%s (matches the published projection)\n", v.CatalogHash)
	fmt.Fprintf(w, "tools\t%d\n", len(v.Tools))
	if err := w.Flush(); err != nil {
		return err
	}
	if len(v.Tools) == 0 {
		fmt.Fprintln(stdio.Out, "\nthe kernel grants this integration no tools")
		return nil
	}
	fmt.Fprintln(stdio.Out)
	fmt.Fprintln(w, "TOOL\tMODE\tDESCRIPTION")
	for _, t := range v.Tools {
		mode := "write"
		if t.ReadOnly {
			mode = "read"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", t.Name, mode, firstLine(t.Description))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(stdio.Out)
	fmt.Fprintln(w, "HARNESS\tTOOL\tALIAS\tFLAGS")
	var notes []string
	for _, h := range v.Harnesses {
		for _, t := range v.Tools {
			a := t.Aliases[h]
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", h, t.Name, a.Alias, a.flags())
			if a.serious() {
				notes = append(notes, fmt.Sprintf("%s %s: %s", h, t.Name, strings.Join(a.Notes, "; ")))
			}
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(notes) > 0 {
		fmt.Fprintf(stdio.Out, "\n%d aliases need a look:\n", len(notes))
		for _, n := range notes {
			fmt.Fprintf(stdio.Out, "  %s\n", n)
		}
	}
	return nil
}

// firstLine is a description's first line, cut to keep the table one
// line per tool.
func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	s = strings.ReplaceAll(s, "\t", " ")
	const max = 72
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
}
