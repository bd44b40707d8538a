package kernel

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/sharedos/sharedos-mcp/hashing"
	"github.com/sharedos/sharedos-mcp/kernel/config"
	"github.com/sharedos/sharedos-mcp/kernel/status"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
)

// What the catalog command shows of a turn's brokered tools, derived here
// where their kernel-side definitions are made (newBrokeredTool): the
// command renders it.

// BrokeredTool is a brokered tool of a turn's catalogue: what a call of
// it needs (its definition's requiredCapability, which the shim never
// publishes) and which of the config's grants publish it.
type BrokeredTool struct {
	Name     string
	Upstream string
	Action   string
	Resource string // "memory:/graph", "github:/repos/{owner}/{repo}"
	// Grants are the indexes, in the config's Grants, of each grant that
	// on its own publishes the tool to the turn's integration.
	Grants []int
}

// DescribeBrokered describes the brokered tools of a catalogue a turn of
// integration was given: tools, with each one's kernel-side definition
// in defs by name. With cfg nil, Grants are left empty.
func DescribeBrokered(tools []hashing.Tool, defs map[string]json.RawMessage, integration string, cfg *config.Config, now time.Time) []BrokeredTool {
	var out []BrokeredTool
	for _, t := range tools {
		up, ok := strings.CutPrefix(t.Source, upstream.SourcePrefix)
		if !ok {
			continue
		}
		var d struct {
			RequiredCapability capability `json:"requiredCapability"`
		}
		_ = json.Unmarshal(defs[t.Name], &d)
		rc := d.RequiredCapability
		b := BrokeredTool{Name: t.Name, Upstream: up, Action: rc.Action, Resource: rc.Resource.Namespace + ":" + rc.Resource.Path}
		if cfg != nil {
			b.Grants, _ = toolGrants(*cfg, integration, rc.Resource.Namespace, rc.Resource.Path, rc.Action, now)
		}
		out = append(out, b)
	}
	return out
}

// WithheldTool is a tool of an upstream that the kernel does not
// publish, as its status report says.
type WithheldTool struct {
	Upstream string // the upstream's name
	Tool     string // the upstream's own name for the tool
	status.Withheld
}

// DescribeWithheld lists the tools r says are withheld that a turn of
// integration would see: each one not in the catalogue the turn was given
// (published; when it is there, the report is older than the turn, an
// approval since), and that cfg's grants would publish to integration
// were it not withheld, or whose resource cfg cannot tell.
func DescribeWithheld(cfg config.Config, r status.Report, integration string, published []hashing.Tool, now time.Time) []WithheldTool {
	listed := map[string]bool{}
	for _, t := range published {
		listed[t.Name] = true
	}
	var out []WithheldTool
	for _, st := range r.Upstreams {
		for _, w := range st.Withheld {
			if listed[w.Name] {
				continue
			}
			tool := strings.TrimPrefix(w.Name, st.Name+".")
			if action, tmpl, ok := cfg.UpstreamTool(st.Name, tool); ok {
				idx, err := toolGrants(cfg, integration, st.Name, tmpl, action, now)
				if err == nil && len(idx) == 0 {
					continue
				}
			}
			out = append(out, WithheldTool{Upstream: st.Name, Tool: tool, Withheld: w})
		}
	}
	return out
}
