// Package catalog is the catalog command's view of a turn's catalogue:
// every tool as the kernel publishes it, with the name each harness shows
// its model for it, flagging names a harness rewrites, truncates, hashes or
// gives two tools alike.
package catalog

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/sharedos/sharedos-mcp/hashing"
	"github.com/sharedos/sharedos-mcp/install"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
)

// View is the catalog command's output; its JSON form is the documented
// --json document.
type View struct {
	Integration string      `json:"integration"`
	Kernel      kproto.Peer `json:"kernel"`
	CatalogHash string      `json:"catalogHash"`
	ExecutionID string      `json:"executionId"`
	Harnesses   []string    `json:"harnesses"`
	Tools       []Tool      `json:"tools"`
	// Brokered are the catalogue's tools that upstream MCP servers offer,
	// with what a call needs and the grants that publish them; Withheld
	// are tools of those upstreams that are not published, and why. The
	// command fills both from the kernel's kernel-internal fields, its
	// config and the status it reports.
	Brokered []Brokered `json:"brokered,omitempty"`
	Withheld []Withheld `json:"withheld,omitempty"`
	// Upstreams are the remote upstreams, from the status the kernel
	// reports.
	Upstreams []Upstream `json:"upstreams,omitempty"`
	// Note says what the brokered view could not learn (no config, no
	// status from the kernel).
	Note string `json:"note,omitempty"`
}

// Brokered is one published tool of an upstream.
type Brokered struct {
	Name     string   `json:"name"`
	Upstream string   `json:"upstream"`
	Action   string   `json:"action"`
	Resource string   `json:"resource"` // "memory:/graph", "github:/repos/{owner}/{repo}"
	Grants   []string `json:"grants"`   // each grant that publishes it: "#3, line 40: memory:/ and below"
}

// Withheld is a tool of an upstream the kernel does not publish.
type Withheld struct {
	Name    string   `json:"name"`
	Reason  string   `json:"reason"` // one of the upstream package's Reason values, e.g. "quarantined"
	Detail  string   `json:"detail"`
	Changed []string `json:"changed,omitempty"`
	Fix     string   `json:"fix,omitempty"`
}

// Tool is one tool of the catalogue with each harness's name for it. Its
// JSON holds the tool as serve publishes it (name, description, schemas,
// annotations), so that 'hash' recomputes the catalogHash from the --json
// document.
type Tool struct {
	Name         string           `json:"name"`
	Description  string           `json:"description"`
	InputSchema  json.RawMessage  `json:"inputSchema"`
	OutputSchema json.RawMessage  `json:"outputSchema,omitempty"`
	Annotations  Annotations      `json:"annotations"`
	Namespace    string           `json:"namespace"`
	Source       string           `json:"source"`
	ReadOnly     bool             `json:"readOnly"`
	Aliases      map[string]Alias `json:"aliases"`
}

// Annotations are a tool's behavioural hints as serve publishes them.
type Annotations struct {
	ReadOnlyHint    bool  `json:"readOnlyHint"`
	DestructiveHint *bool `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool `json:"idempotentHint,omitempty"`
}

// Alias is the name one harness shows its model for a tool, and what it
// did to the canonical name to get it.
type Alias struct {
	Alias     string   `json:"alias"`
	Rewritten bool     `json:"rewritten"`
	Truncated bool     `json:"truncated"`
	Hashed    bool     `json:"hashed"`
	TooLong   bool     `json:"tooLong"`
	Collides  bool     `json:"collides"`
	Notes     []string `json:"notes,omitempty"`
}

// New builds the view of a catalogue fetched as integration.
func New(integration string, hello kproto.HelloResult, hash string, tools []hashing.Tool, harnesses []string) *View {
	v := &View{
		Integration: integration, Kernel: hello.Kernel, CatalogHash: hash, ExecutionID: hello.ExecutionID,
		Harnesses: harnesses, Tools: make([]Tool, len(tools)),
	}
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
		v.Tools[i] = Tool{
			Name: t.Name, Description: t.Description, InputSchema: t.InputSchema, OutputSchema: t.OutputSchema,
			Annotations: Annotations{ReadOnlyHint: t.ReadOnlyHint, DestructiveHint: t.DestructiveHint, IdempotentHint: t.IdempotentHint},
			Namespace:   t.Namespace, Source: t.Source, ReadOnly: t.ReadOnlyHint, Aliases: map[string]Alias{},
		}
	}
	for _, h := range harnesses {
		for i, r := range install.Aliases(h, names) {
			v.Tools[i].Aliases[h] = Alias{
				Alias: r.Alias, Rewritten: r.Rewritten, Truncated: r.Truncated, Hashed: r.Hashed,
				TooLong: r.TooLong, Collides: r.Collides, Notes: r.Notes,
			}
		}
	}
	return v
}

// flags names what a harness did to a tool's name, "-" for nothing.
func (a Alias) flags() string {
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
func (a Alias) serious() bool { return a.Truncated || a.TooLong || a.Collides }

// Print writes the view as tables.
func (v *View) Print(out io.Writer) error {
	w := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintf(w, "integration\t%s\n", v.Integration)
	fmt.Fprintf(w, "kernel\t%s %s\n", v.Kernel.Name, v.Kernel.Version)
	fmt.Fprintf(w, "executionId\t%s\n", v.ExecutionID)
	fmt.Fprintf(w, "catalogHash\t%s (matches the published projection)\n", v.CatalogHash)
	fmt.Fprintf(w, "tools\t%d\n", len(v.Tools))
	if err := w.Flush(); err != nil {
		return err
	}
	if len(v.Tools) == 0 {
		fmt.Fprintln(out, "\nthe kernel grants this integration no tools")
		return v.printBrokered(out)
	}
	fmt.Fprintln(out)
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
	fmt.Fprintln(out)
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
		if len(notes) == 1 {
			fmt.Fprintln(out, "\n1 alias needs a look:")
		} else {
			fmt.Fprintf(out, "\n%d aliases need a look:\n", len(notes))
		}
		for _, n := range notes {
			fmt.Fprintf(out, "  %s\n", n)
		}
	}
	return v.printBrokered(out)
}

// printBrokered writes the brokered tools' table and the withheld ones.
func (v *View) printBrokered(out io.Writer) error {
	if err := v.printUpstreams(out); err != nil {
		return err
	}
	if len(v.Brokered) > 0 {
		fmt.Fprintln(out)
		w := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
		fmt.Fprintln(w, "BROKERED TOOL\tACTION\tRESOURCE\tGRANTS")
		for _, b := range v.Brokered {
			grants := "-"
			if len(b.Grants) > 0 {
				grants = strings.Join(b.Grants, "; ")
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", b.Name, b.Action, b.Resource, grants)
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	if len(v.Withheld) > 0 {
		fmt.Fprintf(out, "\nnot published (%d):\n", len(v.Withheld))
		for _, h := range v.Withheld {
			fmt.Fprintf(out, "  %s: %s: %s\n", h.Name, h.Reason, h.Detail)
			if h.Fix != "" {
				fmt.Fprintf(out, "    fix: %s\n", h.Fix)
			}
		}
	}
	if v.Note != "" {
		fmt.Fprintf(out, "\n%s\n", v.Note)
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
