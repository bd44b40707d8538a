package kernel

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos-mcp/policy"
)

func TestParseConfigRefuses(t *testing.T) {
	const grantHead = "[[grant]]\nsubject = \"integration:*\"\n"
	tests := []struct {
		name string
		doc  string
		want []string // substrings of the error
	}{
		{"an unknown top-level key, by name and line", "socket = \"/s\"\n\nsokcet = \"/t\"\n", []string{"c.toml:3:1", `unknown key "sokcet"`}},
		{"an unknown key inside a grant", grantHead + "resource = \"files:/\"\nactions = [\"read\"]\ndescendant = true\n", []string{"c.toml:5:1", `unknown key "grant.descendant"`}},
		{"every unknown key, not just the first", "a = 1\nb = 2\n", []string{`"a"`, `"b"`, "c.toml:2:1"}},
		{"a syntax error with line and column", "[files]\nroot = = \"x\"\n", []string{"c.toml:2:"}},
		{"a value of the wrong type", grantHead + "resource = \"files:/\"\nactions = \"read\"\n", []string{"c.toml:4:", "actions"}},
		{"a subject without its kind", "[[grant]]\nsubject = \"claude-code\"\nresource = \"files:/\"\nactions = [\"read\"]\n", []string{"grant #1", "subject"}},
		{"a resource without a namespace", grantHead + "resource = \"/public\"\nactions = [\"read\"]\n", []string{"grant #1", "namespace:/path"}},
		{"a resource path that is not clean", grantHead + "resource = \"files:/a/../b\"\nactions = [\"read\"]\n", []string{"not clean"}},
		{"an unknown action", grantHead + "resource = \"files:/\"\nactions = [\"read\", \"delete\"]\n", []string{`"delete"`}},
		{"a grant without actions", grantHead + "resource = \"files:/\"\n", []string{"at least one action"}},
		{"an expiry without an offset", grantHead + "resource = \"files:/\"\nactions = [\"read\"]\nexpires = 2027-01-01T00:00:00\n", []string{"offset"}},
		{"an empty allow_uids", "allow_uids = []\n", []string{"allow_uids is empty"}},
		{"a negative uid", "allow_uids = [-1]\n", []string{"c.toml:1:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig("c.toml", []byte(tt.doc))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestParseConfigAccepts(t *testing.T) {
	doc := `socket = "/run/k.sock"
audit_log = "/var/a.jsonl"
allow_uids = [1000, 1001]
[files]
root = "/srv/share"
allow_hard_links = true
[[grant]]
subject = "integration:claude-code"
resource = "files:/public"
descendants = true
actions = ["read", "list"]
expires = 2027-01-01T01:00:00+01:00
[[grant]]
subject = "integration:*"
resource = "sharedos:/escalate"
actions = ["escalate"]
`
	c, err := ParseConfig("c.toml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Socket: "/run/k.sock", AuditLog: "/var/a.jsonl", AllowUIDs: []uint32{1000, 1001}, Root: "/srv/share", AllowHardLinks: true,
		Grants: []policy.Grant{
			{Subject: "integration:claude-code", Resource: policy.Resource{Namespace: "files", Path: "/public"}, Descendants: true,
				Actions: []string{"read", "list"}, Expires: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)},
			{Subject: "integration:*", Resource: policy.Resource{Namespace: "sharedos", Path: "/escalate"}, Actions: []string{"escalate"}},
		},
	}
	if !c.Grants[0].Expires.Equal(want.Grants[0].Expires) {
		t.Errorf("expires %v, want %v", c.Grants[0].Expires, want.Grants[0].Expires)
	}
	c.Grants[0].Expires = want.Grants[0].Expires
	if !reflect.DeepEqual(c, want) {
		t.Errorf("config\n %+v\nwant\n %+v", c, want)
	}
}

func TestShippedConfigsLoad(t *testing.T) {
	for _, name := range []string{"example.toml", "readonly.toml"} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join("..", "testdata", "kernel", name)
			c, err := LoadConfig(file)
			if err != nil {
				t.Fatal(err)
			}
			// A relative root is relative to the config file.
			if want := filepath.Join("..", "testdata", "kernel", "demo-root"); c.Root != want {
				t.Errorf("root %q, want %q", c.Root, want)
			}
			if _, err := CheckRoot(c.Root); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestCheckRoot(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := CheckRoot(dir); err != nil || got != dir {
		t.Errorf("CheckRoot(dir) = %q, %v", got, err)
	}
	for _, bad := range []string{"", file, filepath.Join(dir, "missing")} {
		if _, err := CheckRoot(bad); err == nil {
			t.Errorf("CheckRoot(%q) accepted", bad)
		}
	}
}
