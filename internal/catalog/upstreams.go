package catalog

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// Upstream is a remote upstream as the kernel's status reports it: how
// the kernel reaches it and whether its credentials work. The catalog
// shows them when any upstream is remote.
type Upstream struct {
	Name      string `json:"name"`
	State     string `json:"state"`
	Transport string `json:"transport"`
	URL       string `json:"url"` // without its query
	Auth      string `json:"auth"`
	Fix       string `json:"fix,omitempty"` // what a person has to do for its credentials
}

// printUpstreams writes the remote upstreams' table.
func (v *View) printUpstreams(out io.Writer) error {
	if len(v.Upstreams) == 0 {
		return nil
	}
	fmt.Fprintln(out)
	w := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(w, "REMOTE UPSTREAM\tSTATE\tTRANSPORT\tURL\tAUTH")
	for _, u := range v.Upstreams {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", u.Name, u.State, u.Transport, u.URL, u.Auth)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, u := range v.Upstreams {
		if u.Fix != "" {
			fmt.Fprintf(out, "  %s: fix: %s\n", u.Name, u.Fix)
		}
	}
	return nil
}
