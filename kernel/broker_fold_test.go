package kernel

import (
	"encoding/json"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
	"strings"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/policy"
)

// TestArgumentNamesADecoderFoldsAreRefusedBeforeTheUpstream is issue 24's
// first finding, through the kernel: read is granted on
// test:/users/alice, get_user's resource is /users/{user}, and the
// upstream reads its arguments as Go servers do (encoding/json into a
// struct: names matched case-insensitively under Unicode folding, the
// last one kept). {"user":"alice","uſer":"bob"} was authorized as alice
// and answered with bob's data. Every such call is refused
// invalid_arguments, naming the two members, and never reaches the
// upstream; the call named once is served as authorized.
func TestArgumentNamesADecoderFoldsAreRefusedBeforeTheUpstream(t *testing.T) {
	grants := []policy.Grant{grant(t, "integration:claude-code", "test:/users/alice", false, "read")}
	h, u := startBrokered(t, grants, `
[[upstream.tool]]
name = "get_user"
action = "read"
resource = "/users/{user}"
`)
	c := h.dial()
	c.hello("claude-code")
	c.list()
	for _, tt := range []struct{ args, first, second string }{
		{`{"user":"alice","uſer":"bob"}`, "user", "uſer"},
		{`{"user":"alice","u\u017fer":"bob"}`, "user", "uſer"},
		{`{"user":"alice","USER":"bob"}`, "user", "USER"},
		{`{"user":"alice","user":"bob"}`, "user", "user"},
		{`{"user":"alice","tags":{"\u212aind":"a","kind":"b"}}`, "\u212aind", "kind"},
		{`{"user":"alice","q":{"f":[{"x":{"a":1,"A":2}}]}}`, "a", "A"},
	} {
		r := c.invoke("test.get_user", json.RawMessage(tt.args))
		if r.Status != kproto.StatusFailed || r.Code != kproto.CodeInvalidArguments {
			t.Errorf("get_user %s = %+v, want failed invalid_arguments", tt.args, r)
			continue
		}
		if !strings.Contains(r.Message, `"`+tt.first+`"`) || !strings.Contains(r.Message, `"`+tt.second+`"`) {
			t.Errorf("get_user %s: message %q does not name %q and %q", tt.args, r.Message, tt.first, tt.second)
		}
	}
	r := c.invoke("test.get_user", json.RawMessage(`{"user":"alice"}`))
	if r.Status != kproto.StatusSucceeded || contentText(t, r.Content) != "data of alice" {
		t.Errorf("get_user alice = %+v", r)
	}
	h.stop()
	got := u.arguments("get_user")
	if len(got) != 1 || got[0] != `{"user":"alice"}` {
		t.Errorf("get_user reached the upstream with %q, want only {\"user\":\"alice\"}", got)
	}
	for _, e := range eventsNamed(h.events(), audit.EventToolInvoked) {
		if e.Tool == "test.get_user" && e.Status == kproto.StatusSucceeded && e.Resource != "test:/users/alice" {
			t.Errorf("recorded %+v", e)
		}
	}
}
