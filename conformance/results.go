package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Results is results.json.
type Results struct {
	Generated  string     `json:"generated"`
	Cases      []CaseInfo `json:"cases"`
	Columns    []Column   `json:"columns"`
	Comparable bool       `json:"comparable"` // every available column was given the same catalogHash
	Note       string     `json:"note,omitempty"`
}

// CaseInfo names a row; Kernel says how its kernel differs from the
// plain reference kernel, when it does.
type CaseInfo struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	Kernel string `json:"kernel,omitempty"`
}

// Column is one harness.
type Column struct {
	Manifest Manifest     `json:"manifest"`
	Results  []CaseResult `json:"results"`
}

// Manifest says what a column measured.
type Manifest struct {
	Harness   string `json:"harness"`
	Title     string `json:"title"`
	Package   string `json:"package"`
	Available bool   `json:"available"`
	Version   string `json:"version,omitempty"`
	// Runtime is the node a harness that needs its own was run on.
	Runtime   string `json:"runtime,omitempty"`
	MCPClient string `json:"mcpClient"`
	Model     string `json:"model"`
	// CatalogHash is the hash every case's turn was given; more than one
	// (comma-separated) means the column's cases are not comparable.
	CatalogHash string     `json:"catalogHash,omitempty"`
	ToolPolicy  ToolPolicy `json:"toolPolicy"`
	// Offered is every tool name the harness offered its model, and
	// PolicyViolations those that are neither managed nor declared
	// harness-local.
	Offered []string `json:"offeredTools,omitempty"`
	// ProxyTools are the harness's MCP client's own tools that reach the
	// managed servers (Pi's adapter gateway); they count as managed.
	ProxyTools       []string `json:"proxyTools,omitempty"`
	PolicyViolations []string `json:"policyViolations,omitempty"`
}

func (m *Manifest) summarize(rs []CaseResult) {
	var hashes []string
	for _, r := range rs {
		for _, h := range strings.Split(r.CatalogHash, ",") {
			if h != "" && !slices.Contains(hashes, h) {
				hashes = append(hashes, h)
			}
		}
		for _, t := range r.Offered {
			if !slices.Contains(m.Offered, t) {
				m.Offered = append(m.Offered, t)
			}
		}
	}
	slices.Sort(hashes)
	m.CatalogHash = strings.Join(hashes, ",")
	slices.Sort(m.Offered)
	for _, t := range m.Offered {
		if _, managed := managedSuffix(t); !managed && !slices.Contains(m.ProxyTools, t) && !slices.Contains(m.ToolPolicy.HarnessLocal, t) {
			m.PolicyViolations = append(m.PolicyViolations, t)
		}
	}
}

// compare decides whether the columns can be read side by side.
func (r *Results) compare() {
	r.Generated = time.Now().UTC().Format(time.RFC3339)
	var hashes []string
	for _, c := range r.Columns {
		if c.Manifest.CatalogHash != "" && !slices.Contains(hashes, c.Manifest.CatalogHash) {
			hashes = append(hashes, c.Manifest.CatalogHash)
		}
	}
	r.Comparable = len(hashes) == 1 && !strings.Contains(hashes[0], ",")
	switch {
	case len(hashes) == 0:
		r.Note = "no column reached the kernel"
	case !r.Comparable:
		r.Note = "the columns were given different catalogues (catalogHash " + strings.Join(hashes, " vs ") + "): they are not comparable"
	default:
		r.Note = "every column that reached the kernel was given catalogHash " + hashes[0]
	}
}

func writeResults(dir string, r *Results) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "RESULTS.md"), []byte(renderMarkdown(r)), 0o644); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	return nil
}

// renderTable is the terminal summary: case × harness grades.
func renderTable(r *Results) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-18s", "case")
	for _, c := range r.Columns {
		fmt.Fprintf(&b, " %-15s", c.Manifest.Harness)
	}
	b.WriteString("\n")
	for i, ci := range r.Cases {
		fmt.Fprintf(&b, "%-18s", ci.ID)
		for _, c := range r.Columns {
			fmt.Fprintf(&b, " %-15s", c.Results[i].Grade)
		}
		b.WriteString("\n")
	}
	b.WriteString(r.Note + "\n")
	return b.String()
}

func renderMarkdown(r *Results) string {
	var b strings.Builder
	b.WriteString("# Harness conformance results\n\n")
	fmt.Fprintf(&b, "Generated %s by `go run ./conformance` (see README.md). %s.\n\n", r.Generated, capitalize(r.Note))
	b.WriteString("| case |")
	for _, c := range r.Columns {
		fmt.Fprintf(&b, " %s |", c.Manifest.Title)
	}
	b.WriteString("\n|---|")
	for range r.Columns {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for i, ci := range r.Cases {
		fmt.Fprintf(&b, "| %s (`%s`) |", ci.Title, ci.ID)
		for _, c := range r.Columns {
			fmt.Fprintf(&b, " %s |", c.Results[i].Grade)
		}
		b.WriteString("\n")
	}
	for _, ci := range r.Cases {
		if ci.Kernel != "" {
			fmt.Fprintf(&b, "\n`%s`: %s.\n", ci.ID, ci.Kernel)
		}
	}
	b.WriteString("\n## Columns\n")
	for _, c := range r.Columns {
		m := c.Manifest
		fmt.Fprintf(&b, "\n### %s\n\n", m.Title)
		if !m.Available {
			fmt.Fprintf(&b, "Not available: `%s` (%s) is not installed on this machine.\n", m.Harness, m.Package)
			continue
		}
		fmt.Fprintf(&b, "- version: `%s` (%s)\n", m.Version, m.Package)
		if m.Runtime != "" {
			fmt.Fprintf(&b, "- runtime: %s\n", m.Runtime)
		}
		fmt.Fprintf(&b, "- MCP client: %s\n", m.MCPClient)
		fmt.Fprintf(&b, "- declared model: `%s`\n", m.Model)
		fmt.Fprintf(&b, "- catalogHash: `%s`\n", orDash(m.CatalogHash))
		p := m.ToolPolicy
		fmt.Fprintf(&b, "- tool policy: %s; managed MCP: %s; harness-local: %s; external direct: %s\n",
			p.Mode, list(p.ManagedMCP), list(p.HarnessLocal), list(p.ExternalDirect))
		fmt.Fprintf(&b, "- tools offered to the model: %s\n", list(m.Offered))
		if len(m.ProxyTools) > 0 {
			fmt.Fprintf(&b, "- MCP client tools counted as managed (they reach only the configured MCP servers): %s\n", list(m.ProxyTools))
		}
		if len(m.PolicyViolations) > 0 {
			fmt.Fprintf(&b, "- **outside the declared policy**: %s\n", list(m.PolicyViolations))
		}
		b.WriteString("\n| case | grade | seconds | evidence |\n|---|---|---|---|\n")
		for _, cr := range c.Results {
			fmt.Fprintf(&b, "| `%s` | %s | %.1f | %s |\n", cr.Case, cr.Grade, cr.Seconds, strings.ReplaceAll(cr.Detail, "|", `\|`))
		}
	}
	return b.String()
}

func list(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = "`" + x + "`"
	}
	return strings.Join(q, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
