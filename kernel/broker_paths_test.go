package kernel

import (
	"fmt"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/policy"
)

// pathTree is a directory with work/docs/a.md, outside/secret, and a
// link work/out that leads to outside; its path is the one the host
// resolves to (a temporary directory may be behind a link itself).
func pathTree(t *testing.T) string {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"work/docs", "outside"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for f, text := range map[string]string{"work/docs/a.md": "the doc", "outside/secret": "the secret"} {
		if err := os.WriteFile(filepath.Join(root, f), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(root, "outside"), filepath.Join(root, "work", "out")); err != nil {
		t.Fatal(err)
	}
	return root
}

// TestAHostPathIsDecidedWhereItLeads: with host_paths, a {path:path}
// placeholder names where the path really leads on this host. A grant on
// work/ allows a file in it, and refuses the same file named through a
// link in work/ that leads out, or through '..'; the upstream receives
// the resolved path only for the call that was allowed, and the audit
// records that path (issue 24, finding 8).
func TestAHostPathIsDecidedWhereItLeads(t *testing.T) {
	root := pathTree(t)
	grants := []policy.Grant{grant(t, "integration:claude-code", "test:"+root+"/work", true, "read")}
	h, u := startBrokered(t, grants, `host_paths = true
[[upstream.tool]]
name = "read_text"
action = "read"
resource = "/{path:path}"
`)
	c := h.dial()
	c.hello("claude-code")
	if defs, _ := c.list(); !hasName(defs, "test.read_text") {
		t.Fatalf("test.read_text is not published: %v", names(defs))
	}
	r := c.invoke("test.read_text", map[string]any{"path": root + "/work/./docs/a.md"})
	if r.Status != kproto.StatusSucceeded || contentText(t, r.Content) != "the doc" {
		t.Errorf("read_text work/docs/a.md = %+v", r)
	}
	for _, p := range []string{root + "/work/out/secret", root + "/work/docs/../../outside/secret"} {
		r := c.invoke("test.read_text", map[string]any{"path": p})
		if r.Status != kproto.StatusDenied || r.Code != kproto.CodeNoMatchingGrant || !strings.Contains(r.Message, "test:"+root+"/outside/secret") {
			t.Errorf("read_text %s = %+v, want no_matching_grant on where it leads", p, r)
		}
	}
	for _, p := range []string{root + strings.Repeat("/..", 64) + "/etc/passwd", "/../etc/passwd", root + "/work/．．/outside/secret"} {
		if r := c.invoke("test.read_text", map[string]any{"path": p}); r.Code != kproto.CodeInvalidArguments {
			t.Errorf("read_text %s = %+v, want invalid_arguments", p, r)
		}
	}
	h.stop()
	want := fmt.Sprintf(`{"path":%q}`, root+"/work/docs/a.md")
	if got := u.arguments("read_text"); len(got) != 1 || got[0] != want {
		t.Errorf("the upstream received %q, want only %s", got, want)
	}
	var recorded []string
	for _, e := range eventsNamed(h.events(), audit.EventToolInvoked) {
		if e.Tool == "test.read_text" {
			recorded = append(recorded, e.Resource+" "+e.Status)
		}
	}
	if len(recorded) < 3 || recorded[0] != "test:"+root+"/work/docs/a.md succeeded" || recorded[1] != "test:"+root+"/outside/secret denied" {
		t.Errorf("recorded %q", recorded)
	}
}

// TestAPathPlaceholderWithoutTheHostIsCleanedAndForwardedAsDecided: an
// upstream that does not read this host's files gets the path cleaned
// lexically, the form the resource was decided on.
func TestAPathPlaceholderWithoutTheHostIsCleanedAndForwardedAsDecided(t *testing.T) {
	grants := []policy.Grant{grant(t, "integration:claude-code", "test:/repo/docs", true, "read")}
	h, u := startBrokered(t, grants, `
[[upstream.tool]]
name = "read_text"
action = "read"
resource = "/repo/{path:path}"
`)
	c := h.dial()
	c.hello("claude-code")
	c.list()
	if r := c.invoke("test.read_text", map[string]any{"path": "docs/./x//../a.md"}); r.Status != kproto.StatusSucceeded && r.Code != "upstream_error" {
		t.Errorf("read_text docs/a.md = %+v, want it forwarded", r)
	}
	if r := c.invoke("test.read_text", map[string]any{"path": "docs/../src/a.go"}); r.Code != kproto.CodeNoMatchingGrant {
		t.Errorf("read_text src/a.go = %+v, want no_matching_grant", r)
	}
	if r := c.invoke("test.read_text", map[string]any{"path": "../etc/passwd"}); r.Code != kproto.CodeInvalidArguments {
		t.Errorf("read_text ../etc/passwd = %+v, want invalid_arguments", r)
	}
	h.stop()
	if got := u.arguments("read_text"); len(got) != 1 || got[0] != `{"path":"docs/a.md"}` {
		t.Errorf("the upstream received %q", got)
	}
	var recorded []string
	for _, e := range eventsNamed(h.events(), audit.EventToolInvoked) {
		if e.Tool == "test.read_text" {
			recorded = append(recorded, e.Resource)
		}
	}
	if len(recorded) < 2 || recorded[0] != "test:/repo/docs/a.md" || recorded[1] != "test:/repo/src/a.go" {
		t.Errorf("recorded %q", recorded)
	}
}

// TestAURLPlaceholderNamesTheSite: a grant on one host allows that site's
// URLs only, however they are written.
func TestAURLPlaceholderNamesTheSite(t *testing.T) {
	grants := []policy.Grant{grant(t, "integration:claude-code", "test:/docs.example.com", true, "read")}
	h, u := startBrokered(t, grants, `
[[upstream.tool]]
name = "echo"
action = "read"
resource = "/{text:url}"
`)
	c := h.dial()
	c.hello("claude-code")
	c.list()
	r := c.invoke("test.echo", map[string]any{"text": "HTTPS://Docs.Example.com:443/guide/./intro?x=1#top"})
	if r.Status != kproto.StatusSucceeded || contentText(t, r.Content) != "https://docs.example.com/guide/intro?x=1" {
		t.Errorf("echo = %+v, want the normalized URL forwarded", r)
	}
	for _, url := range []string{"https://docs.example.com.evil.example/", "https://evil.example/docs.example.com", "https://docs.example.com@evil.example/"} {
		if r := c.invoke("test.echo", map[string]any{"text": url}); r.Status == kproto.StatusSucceeded {
			t.Errorf("echo %s = %+v, want refused", url, r)
		}
	}
	for _, url := range []string{"file:///etc/passwd", "https://127.0.0.1/", "https://docs.example.com/%2e%2e/x"} {
		if r := c.invoke("test.echo", map[string]any{"text": url}); r.Code != kproto.CodeInvalidArguments {
			t.Errorf("echo %s = %+v, want invalid_arguments", url, r)
		}
	}
	h.stop()
	if got := u.arguments("echo"); len(got) != 1 {
		t.Errorf("the upstream received %q, want only the granted call", got)
	}
}
