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
	"github.com/sharedos/sharedos-mcp/internal/doctor"
	"github.com/sharedos/sharedos-mcp/kernel"
	"github.com/sharedos/sharedos-mcp/kernel/config"
	"github.com/sharedos/sharedos-mcp/kernel/status"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
	"github.com/sharedos/sharedos-mcp/policy"
)

// addBrokered fills the view's brokered part from what the kernel
// packages derive: for each tool an upstream offers, the action and
// resource its calls need and the config's grants that publish it; then
// the upstreams' tools the kernel withholds, from the status it writes in
// the state directory.
func addBrokered(v *catalog.View, tools []hashing.Tool, defs map[string]json.RawMessage, configFile string) {
	cfg, cfgErr := loadConfigFile(configFile)
	now := time.Now()
	var grantsOf *config.Config
	if cfgErr == nil && cfg.File != "" {
		grantsOf = &cfg
	}
	for _, bt := range kernel.DescribeBrokered(tools, defs, v.Integration, grantsOf, now) {
		b := catalog.Brokered{Name: bt.Name, Upstream: bt.Upstream, Action: bt.Action, Resource: bt.Resource, Grants: []string{}}
		for _, i := range bt.Grants {
			b.Grants = append(b.Grants, grantText(cfg, i))
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
	r, err := status.Read(stateDir)
	if err != nil {
		if !errors.Is(err, status.ErrNoReport) {
			v.Note = "the upstreams' withheld tools are not shown: " + strings.ReplaceAll(err.Error(), "\n", " ")
		}
		return
	}
	v.Upstreams = remoteUpstreams(r, configFile)
	// The pending definitions' hashes, for the approve command; without
	// the pins file the command says HASH, and doctor shows it.
	pending, _ := upstream.Quarantined(stateDir)
	for _, w := range kernel.DescribeWithheld(cfg, r, v.Integration, tools, now) {
		h := catalog.Withheld{Name: w.Name, Reason: w.Reason, Detail: w.Detail, Changed: w.Changed}
		if w.Reason == upstream.ReasonQuarantined {
			hash := "HASH"
			if i := slices.IndexFunc(pending, func(q upstream.Quarantine) bool { return q.Upstream == w.Upstream && q.Tool == w.Tool }); i >= 0 {
				hash = pending[i].Pending
			}
			h.Fix = fmt.Sprintf("review it ('%s doctor' shows the old and new definitions), then: %s kernel approve %s %s --sha256 %s%s", prog, prog, w.Upstream, w.Tool, hash, configArg(configFile))
		}
		v.Withheld = append(v.Withheld, h)
	}
}

// grantText names grant i and what it gives, for the catalog's table.
func grantText(cfg config.Config, i int) string {
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

// remoteUpstreams are the remote upstreams of the kernel's report, with
// their credentials' state and what a person has to do about it.
func remoteUpstreams(r status.Report, configFile string) []catalog.Upstream {
	var out []catalog.Upstream
	for _, st := range r.Upstreams {
		if st.Transport != upstream.TransportHTTP {
			continue
		}
		u := catalog.Upstream{Name: st.Name, State: st.State, Transport: st.Transport, URL: st.URL, Auth: "-"}
		if a := st.Auth; a != nil {
			u.Auth = a.Method
			switch {
			case a.Required != "":
				u.Auth += ": " + a.Required
				u.Fix = doctor.AuthFix(st.Name, a.Method, configArg(configFile))
			case a.Method == upstream.AuthMethodOAuth && !a.Expiry.IsZero():
				u.Auth += ", token until " + a.Expiry.UTC().Format(time.RFC3339)
			}
		}
		out = append(out, u)
	}
	return out
}
