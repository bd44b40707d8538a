package policy

import (
	"testing"
	"time"
)

func res(t *testing.T, s string) Resource {
	t.Helper()
	r, err := ParseResource(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestAuthorize(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	later := now.Add(time.Hour)
	earlier := now.Add(-time.Hour)
	g := func(subject, resource string, descendants bool, expires time.Time, actions ...string) Grant {
		return Grant{Subject: subject, Resource: res(t, resource), Descendants: descendants, Actions: actions, Expires: expires}
	}
	tests := []struct {
		name     string
		grants   []Grant
		who      string
		resource string
		action   string
		want     Decision
	}{
		{"no grants deny everything", nil, "cc", "files:/a", "read", NoMatchingGrant},
		{"an exact grant allows its own path", []Grant{g("integration:cc", "files:/a", false, time.Time{}, "read")}, "cc", "files:/a", "read", Allowed},
		{"an exact grant does not reach a child", []Grant{g("integration:cc", "files:/a", false, time.Time{}, "read")}, "cc", "files:/a/b", "read", NoMatchingGrant},
		{"a descendant grant reaches a child", []Grant{g("integration:cc", "files:/a", true, time.Time{}, "read")}, "cc", "files:/a/b/c", "read", Allowed},
		{"a descendant grant still covers its own path", []Grant{g("integration:cc", "files:/a", true, time.Time{}, "read")}, "cc", "files:/a", "read", Allowed},
		{"a descendant grant does not reach a sibling sharing a prefix", []Grant{g("integration:cc", "files:/a", true, time.Time{}, "read")}, "cc", "files:/ab", "read", NoMatchingGrant},
		{"a descendant grant on the root covers everything", []Grant{g("integration:cc", "files:/", true, time.Time{}, "read")}, "cc", "files:/x/y", "read", Allowed},
		{"an exact grant on the root covers only the root", []Grant{g("integration:cc", "files:/", false, time.Time{}, "list")}, "cc", "files:/x", "list", NoMatchingGrant},
		{"a grant does not cross namespaces", []Grant{g("integration:cc", "files:/", true, time.Time{}, "read")}, "cc", "mail:/x", "read", NoMatchingGrant},
		{"the wildcard subject matches any integration", []Grant{g("integration:*", "files:/a", false, time.Time{}, "read")}, "anyone", "files:/a", "read", Allowed},
		{"a named subject does not match another integration", []Grant{g("integration:cc", "files:/a", false, time.Time{}, "read")}, "codex", "files:/a", "read", NoMatchingGrant},
		{"read does not imply write", []Grant{g("integration:cc", "files:/", true, time.Time{}, "read")}, "cc", "files:/a", "write", NoMatchingGrant},
		{"list does not imply search", []Grant{g("integration:cc", "files:/", true, time.Time{}, "list")}, "cc", "files:/a", "search", NoMatchingGrant},
		{"call allows a call", []Grant{g("integration:cc", "memory:/", true, time.Time{}, "call")}, "cc", "memory:/create_entities", "call", Allowed},
		{"call does not imply write", []Grant{g("integration:cc", "memory:/", true, time.Time{}, "call")}, "cc", "memory:/create_entities", "write", NoMatchingGrant},
		{"call does not imply read", []Grant{g("integration:cc", "memory:/", true, time.Time{}, "call")}, "cc", "memory:/graph", "read", NoMatchingGrant},
		{"write does not imply call", []Grant{g("integration:cc", "memory:/", true, time.Time{}, "write")}, "cc", "memory:/create_entities", "call", NoMatchingGrant},
		{"every action at once still does not reach another namespace", []Grant{g("integration:cc", "files:/", true, time.Time{}, "read", "list", "search", "write", "call")}, "cc", "memory:/graph", "call", NoMatchingGrant},
		{"a grant expiring later is live", []Grant{g("integration:cc", "files:/a", false, later, "read")}, "cc", "files:/a", "read", Allowed},
		{"a grant that expired is reported as expired", []Grant{g("integration:cc", "files:/a", false, earlier, "read")}, "cc", "files:/a", "read", GrantExpired},
		{"a grant expiring exactly now is expired", []Grant{g("integration:cc", "files:/a", false, now, "read")}, "cc", "files:/a", "read", GrantExpired},
		{"an expired grant for another path is not mentioned", []Grant{g("integration:cc", "files:/b", false, earlier, "read")}, "cc", "files:/a", "read", NoMatchingGrant},
		{"a live grant wins over an expired one", []Grant{g("integration:cc", "files:/a", false, earlier, "read"), g("integration:cc", "files:/", true, time.Time{}, "read")}, "cc", "files:/a", "read", Allowed},
		{"no cross-product: resource from one grant and action from another", []Grant{
			g("integration:cc", "files:/a", false, time.Time{}, "read"),
			g("integration:cc", "files:/b", false, time.Time{}, "write"),
		}, "cc", "files:/a", "write", NoMatchingGrant},
		{"no cross-product: subject from one grant and resource from another", []Grant{
			g("integration:cc", "files:/a", false, time.Time{}, "read"),
			g("integration:codex", "files:/b", false, time.Time{}, "read"),
		}, "codex", "files:/a", "read", NoMatchingGrant},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Authorize(tt.grants, Request{Integration: tt.who, Resource: res(t, tt.resource), Action: tt.action, Time: now})
			if got != tt.want {
				t.Errorf("Authorize = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDiscoverable(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	grants := []Grant{
		{Subject: "integration:cc", Resource: res(t, "files:/src"), Descendants: true, Actions: []string{"read", "list"}},
		{Subject: "integration:cc", Resource: res(t, "files:/tmp"), Actions: []string{"write"}, Expires: now.Add(-time.Second)},
		{Subject: "integration:*", Resource: res(t, "sharedos:/escalate"), Actions: []string{"escalate"}},
	}
	tests := []struct {
		name   string
		who    string
		scope  string
		action string
		want   bool
	}{
		{"a grant on a subtree makes the namespace's tool discoverable", "cc", "files:/", "read", true},
		{"an action no grant carries is not discoverable", "cc", "files:/", "search", false},
		{"an expired grant publishes nothing", "cc", "files:/", "write", false},
		{"another integration sees nothing from a named grant", "codex", "files:/", "read", false},
		{"the wildcard grant publishes escalate to everyone", "codex", "sharedos:/escalate", "escalate", true},
		{"a grant in another namespace does not count", "cc", "mail:/", "read", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Discoverable(grants, tt.who, res(t, tt.scope), tt.action, now); got != tt.want {
				t.Errorf("Discoverable = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParseResource(t *testing.T) {
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"a namespaced absolute path", "files:/public", true},
		{"the namespace root", "files:/", true},
		{"no namespace separator", "/public", false},
		{"an empty namespace", ":/x", false},
		{"an uppercase namespace", "Files:/x", false},
		{"a relative path", "files:public", false},
		{"a dot-dot segment", "files:/a/../b", false},
		{"a trailing slash", "files:/a/", false},
		{"a doubled slash", "files://a", false},
		{"a NUL byte", "files:/a\x00", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseResource(tt.in)
			if (err == nil) != tt.ok {
				t.Errorf("ParseResource(%q) error = %v, want ok=%v", tt.in, err, tt.ok)
			}
		})
	}
}

func TestGrantValidate(t *testing.T) {
	tests := []struct {
		name string
		g    Grant
		ok   bool
	}{
		{"a named subject with known actions", Grant{Subject: "integration:claude-code", Actions: []string{"read", "escalate"}}, true},
		{"the wildcard subject", Grant{Subject: "integration:*", Actions: []string{"list"}}, true},
		{"the call action", Grant{Subject: "integration:*", Actions: []string{"call"}}, true},
		{"every action", Grant{Subject: "integration:*", Actions: []string{"read", "list", "search", "write", "escalate", "call"}}, true},
		{"an action spelt in capitals", Grant{Subject: "integration:*", Actions: []string{"Call"}}, false},
		{"a subject without its kind", Grant{Subject: "claude-code", Actions: []string{"read"}}, false},
		{"a subject with a bad name", Grant{Subject: "integration:a/b", Actions: []string{"read"}}, false},
		{"an unknown action", Grant{Subject: "integration:*", Actions: []string{"delete"}}, false},
		{"no actions at all", Grant{Subject: "integration:*"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.g.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate() = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}
