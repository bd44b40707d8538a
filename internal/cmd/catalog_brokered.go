package cmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/sharedos/sharedos-mcp/hashing"
	"github.com/sharedos/sharedos-mcp/internal/catalog"
	"github.com/sharedos/sharedos-mcp/kernel"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
	"github.com/sharedos/sharedos-mcp/policy"
)

// addBrokered fills the view's brokered part: for each tool an upstream
// offers, the action and resource its calls need (the kernel-side
// definition's requiredCapability, which the shim never publishes), and
// the config's grants that publish it; then the upstreams' tools the
// kernel withholds, from the status it writes in the state directory.
func addBrokered(v *catalog.View, tools []hashing.Tool, defs map[string]json.RawMessage, configFile string) {
	cfg, cfgErr := loadConfigFile(configFile)
	now := time.Now()
	for _, t := range tools {
		up, ok := strings.CutPrefix(t.Source, upstream.SourcePrefix)
		if !ok {
			continue
		}
		var d struct {
			RequiredCapability struct {
				Resource struct{ Namespace, Path string } `json:"resource"`
				Action   string                           `json:"action"`
			} `json:"requiredCapability"`
		}
		_ = json.Unmarshal(defs[t.Name], &d)
		rc := d.RequiredCapability
		b := catalog.Brokered{Name: t.Name, Upstream: up, Action: rc.Action, Resource: rc.Resource.Namespace + ":" + rc.Resource.Path, Grants: []string{}}
		if cfgErr == nil && cfg.File != "" {
			idx, _ := kernel.ToolGrants(cfg, v.Integration, rc.Resource.Namespace, rc.Resource.Path, rc.Action, now)
			for _, i := range idx {
				b.Grants = append(b.Grants, grantText(cfg, i))
			}
		}
		v.Brokered = append(v.Brokered, b)
	}
	switch {
	case cfgErr != nil:
		v.Note = "the grants behind brokered tools are not shown: the kernel's config does not load (" + strings.ReplaceAll(cfgErr.Error(), "\n", " ") + ")"
		return
	case cfg.File == "" && len(v.Brokered) > 0:
		v.Note = "the grants behind brokered tools are not shown: no config file found; pass the kernel's --config"
		return
	case len(cfg.Upstreams) == 0:
		return
	}
	stateDir, err := cfg.StateDirOrDefault(os.Getenv)
	if err != nil {
		return
	}
	r, err := kernel.ReadUpstreamReport(stateDir)
	if err != nil {
		if !errors.Is(err, kernel.ErrNoUpstreamReport) {
			v.Note = "the upstreams' withheld tools are not shown: " + strings.ReplaceAll(err.Error(), "\n", " ")
		}
		return
	}
	// The pending definitions' hashes, for the approve command; without
	// the pins file the command says HASH, and doctor shows it.
	pending, _ := upstream.Quarantined(stateDir)
	published := map[string]bool{}
	for _, t := range tools {
		published[t.Name] = true
	}
	for _, st := range r.Upstreams {
		for _, w := range st.Withheld {
			if published[w.Name] {
				continue // the report is older than this turn (an approval since)
			}
			tool := strings.TrimPrefix(w.Name, st.Name+".")
			// Only what this integration would see: a tool its grants
			// would publish were it not withheld (or whose resource
			// cannot be known).
			if action, tmpl, ok := cfg.UpstreamTool(st.Name, tool); ok {
				idx, err := kernel.ToolGrants(cfg, v.Integration, st.Name, tmpl, action, now)
				if err == nil && len(idx) == 0 {
					continue
				}
			}
			h := catalog.Withheld{Name: w.Name, Reason: w.Reason, Detail: w.Detail, Changed: w.Changed}
			if w.Reason == upstream.ReasonQuarantined {
				hash := "HASH"
				if i := slices.IndexFunc(pending, func(q upstream.Quarantine) bool { return q.Upstream == st.Name && q.Tool == tool }); i >= 0 {
					hash = pending[i].Pending
				}
				h.Fix = fmt.Sprintf("review it ('%s doctor' shows the old and new definitions), then: %s kernel approve %s %s --sha256 %s%s", prog, prog, st.Name, tool, hash, configArg(configFile))
			}
			v.Withheld = append(v.Withheld, h)
		}
	}
}

// grantText names grant i and what it gives, for the catalog's table.
func grantText(cfg kernel.Config, i int) string {
	g := cfg.Grants[i]
	on := g.Resource.String()
	if g.Descendants {
		on += " and below"
	}
	s := fmt.Sprintf("%s: %s %s", grantLabel(cfg, i), strings.Join(g.Actions, ","), on)
	if g.Subject == policy.SubjectWildcard {
		s += " (every integration)"
	}
	return s
}
