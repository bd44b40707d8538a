package upstream

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sharedos/sharedos-mcp/kernel/secret"
	"github.com/sharedos/sharedos-mcp/kernel/webclient"
)

func TestParseARemoteUpstream(t *testing.T) {
	cfgs := decode(t, `
[[upstream]]
name = "github"
url = "https://api.githubcopilot.com/mcp/?toolsets=repos"
headers = { Authorization = "Bearer {secret:github-token}", X-Api-Version = "2" }
ca_file = "company-ca.pem"
call_timeout = "20s"

[[upstream]]
name = "linear"
url = "http://127.0.0.1:3101/mcp"
auth = "oauth"
client_id = "sharedos"
client_secret = "{secret:linear-client}"
scopes = ["read", "write"]

[[upstream]]
name = "memory"
command = ["server-memory"]
env = { TOKEN = "{secret:memory-token}", PLAIN = "value" }
`)
	base := t.TempDir()
	specs, err := Parse(cfgs, base)
	if err != nil {
		t.Fatal(err)
	}
	g, l, m := specs[0], specs[1], specs[2]
	if g.Command != nil || g.Env != nil || g.Transport() != TransportHTTP || g.CallTimeout.String() != "20s" {
		t.Errorf("github = %+v", g)
	}
	want := &RemoteSpec{
		URL:     "https://api.githubcopilot.com/mcp/?toolsets=repos",
		Headers: map[string]string{"Authorization": "Bearer {secret:github-token}", "X-Api-Version": "2"},
		CAFile:  filepath.Join(base, "company-ca.pem"),
	}
	if !reflect.DeepEqual(g.Remote, want) {
		t.Errorf("github remote = %+v, want %+v", g.Remote, want)
	}
	if got := g.DisplayURL(); got != "https://api.githubcopilot.com/mcp/" {
		t.Errorf("DisplayURL = %q: the query may hold a key", got)
	}
	if l.Remote.Auth != AuthOAuth || l.Remote.ClientID != "sharedos" || strings.Join(l.Remote.Scopes, " ") != "read write" {
		t.Errorf("linear remote = %+v", l.Remote)
	}
	if m.Transport() != TransportStdio || m.Remote != nil || m.DisplayURL() != "" {
		t.Errorf("memory = %+v", m)
	}
	refs := map[string][]SecretRef{}
	for _, s := range specs {
		refs[s.Name] = s.SecretRefs()
	}
	wantRefs := map[string][]SecretRef{
		"github": {{"headers", "github-token"}},
		"linear": {{"client_secret", "linear-client"}},
		"memory": {{"env", "memory-token"}},
	}
	if !reflect.DeepEqual(refs, wantRefs) {
		t.Errorf("SecretRefs = %v, want %v", refs, wantRefs)
	}
}

func TestParseRefusesWhatARemoteUpstreamCannotBe(t *testing.T) {
	const remote = "[[upstream]]\nname = \"r\"\nurl = \"https://mcp.example/mcp\"\n"
	const stdio = "[[upstream]]\nname = \"s\"\ncommand = [\"x\"]\n"
	tests := []struct {
		name string
		doc  string
		key  string
		is   error
		not  string // the error must not hold it
	}{
		{"command and url", stdio + "url = \"https://mcp.example/\"\n", "url", ErrTwoTransports, ""},
		{"plain http to another host", "[[upstream]]\nname = \"r\"\nurl = \"http://mcp.example/mcp?key=hunter2hunter2\"\n", "url", webclient.ErrInsecureURL, "hunter2"},
		{"credentials in the url", "[[upstream]]\nname = \"r\"\nurl = \"https://me:hunter2hunter2@mcp.example/\"\n", "url", nil, "hunter2"},
		{"env on a remote upstream", remote + "env = { A = \"b\" }\n", "env", ErrNotForRemote, ""},
		{"cwd on a remote upstream", remote + "cwd = \"/tmp\"\n", "cwd", ErrNotForRemote, ""},
		{"host_paths on a remote upstream", remote + "host_paths = true\n", "host_paths", ErrNotForRemote, ""},
		{"headers on a command", stdio + "headers = { A = \"b\" }\n", "headers", ErrNotForCommand, ""},
		{"ca_file on a command", stdio + "ca_file = \"ca.pem\"\n", "ca_file", ErrNotForCommand, ""},
		{"auth on a command", stdio + "auth = \"oauth\"\n", "auth", ErrNotForCommand, ""},
		{"an unknown auth", remote + "auth = \"basic\"\n", "auth", ErrInvalidAuth, ""},
		{"client_id without oauth", remote + "client_id = \"c\"\n", "client_id", ErrNotForHeaders, ""},
		{"scopes without oauth", remote + "scopes = [\"a\"]\n", "scopes", ErrNotForHeaders, ""},
		{"a client secret written out", remote + "auth = \"oauth\"\nclient_id = \"c\"\nclient_secret = \"hunter2hunter2\"\n", "client_secret", ErrClientSecret, "hunter2"},
		{"a client secret with more than a reference", remote + "auth = \"oauth\"\nclient_id = \"c\"\nclient_secret = \"x{secret:a}\"\n", "client_secret", ErrClientSecret, ""},
		{"a client secret without its client", remote + "auth = \"oauth\"\nclient_secret = \"{secret:a}\"\n", "client_secret", nil, ""},
		{"a scope with a space", remote + "auth = \"oauth\"\nscopes = [\"a b\"]\n", "scopes", nil, ""},
		{"a header the transport sets", remote + "headers = { Mcp-Session-Id = \"x\" }\n", "headers", webclient.ErrOwnedHeader, ""},
		{"Authorization beside oauth", remote + "auth = \"oauth\"\nheaders = { Authorization = \"Bearer {secret:a}\" }\n", "headers", webclient.ErrOwnedHeader, ""},
		{"a header value that injects another", remote + "headers = { X-A = \"hunter2hunter2\\r\\nX-B: c\" }\n", "headers", webclient.ErrBadHeader, "hunter2"},
		{"a header name that is not a token", remote + "headers = { \"X A\" = \"b\" }\n", "headers", webclient.ErrBadHeader, ""},
		{"a malformed reference in a header", remote + "headers = { X-A = \"{secret:no such}\" }\n", "headers", secret.ErrMalformedRef, ""},
		{"a malformed reference in env", stdio + "env = { A = \"{secret:}\" }\n", "env", secret.ErrMalformedRef, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(decode(t, tt.doc), "")
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("Parse error = %v, want a *ConfigError", err)
			}
			if ce.Key != tt.key {
				t.Errorf("error at key %q, want %q (%v)", ce.Key, tt.key, err)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v is not %v", err, tt.is)
			}
			if tt.not != "" && strings.Contains(err.Error(), tt.not) {
				t.Errorf("error %q shows %q", err, tt.not)
			}
		})
	}
}
