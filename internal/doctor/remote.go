package doctor

import (
	"fmt"
	"slices"
	"time"

	"github.com/sharedos/sharedos-mcp/kernel/oauth"
	"github.com/sharedos/sharedos-mcp/kernel/status"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
)

// where says how the kernel reaches an upstream: its process, or its
// transport, URL (without query) and credentials.
func where(st status.Upstream) string {
	if st.Transport != upstream.TransportHTTP {
		return fmt.Sprintf("pid %d", st.PID)
	}
	w := st.Transport + " " + st.URL
	if a := st.Auth; a != nil {
		w += ", " + authText(a)
	}
	return w
}

// authText says how a remote upstream authenticates, never with a
// credential.
func authText(a *status.Auth) string {
	switch {
	case a.Method != upstream.AuthMethodOAuth:
		return "auth: " + a.Method
	case !a.LoggedIn:
		return "auth: oauth, not logged in"
	case a.Expiry.IsZero():
		return "auth: oauth, logged in"
	case a.CanRefresh:
		return fmt.Sprintf("auth: oauth, token until %s, refreshed by the kernel", a.Expiry.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("auth: oauth, token until %s, no refresh token: log in again then", a.Expiry.UTC().Format(time.RFC3339))
}

// authRequired reports a remote upstream whose credentials a person has
// to renew, and how; it reports whether there was one.
func (d *doctor) authRequired(st status.Upstream, as string, u *Upstreams) bool {
	a := st.Auth
	if a == nil || a.Required == "" {
		return false
	}
	d.problem(fmt.Sprintf("upstream %s (%s): %s: %s (%s)", st.Name, st.URL, st.State, a.Required, as), AuthFix(st.Name, a.Method, u.ConfigArg))
	return true
}

// AuthFix is what a person does when a remote upstream's credentials
// are refused or missing: log in again (auth = "oauth"), or renew the
// secrets its headers use. configArg is " --config FILE" or "".
func AuthFix(name, method, configArg string) string {
	if method == upstream.AuthMethodOAuth {
		return fmt.Sprintf("run: %s kernel login %s%s", prog, name, configArg)
	}
	return fmt.Sprintf("renew the secrets its headers use ('%s kernel check%s' lists them and where each comes from), then send the kernel SIGHUP", prog, configArg)
}

// remoteFix is what to check when a remote upstream does not start.
func remoteFix(st status.Upstream, u *Upstreams) string {
	return fmt.Sprintf("check that %s answers MCP over Streamable HTTP from this machine, and the url, headers and ca_file of upstream %s in %s; the kernel's log says more", st.URL, st.Name, u.Config)
}

// logins reports the OAuth upstreams the kernel's status did not cover
// (no kernel has run them yet) from their token files: a person has to
// log in before the kernel can start them.
func (d *doctor) logins(u *Upstreams, covered []string) {
	for _, name := range u.OAuth {
		if slices.Contains(covered, name) {
			continue
		}
		st := oauth.NewSource(oauth.SourceOptions{Store: oauth.NewStore(u.StateDir), Upstream: name}).Status()
		if st.AuthRequired == "" {
			d.ok("upstream %s: logged in (%s)", name, authText(&status.Auth{Method: upstream.AuthMethodOAuth, LoggedIn: true, Expiry: st.Expiry, CanRefresh: st.CanRefresh}))
			continue
		}
		d.problem(fmt.Sprintf("upstream %s: %s", name, st.AuthRequired), AuthFix(name, upstream.AuthMethodOAuth, u.ConfigArg))
	}
}
