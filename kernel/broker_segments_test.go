package kernel

import (
	"encoding/json"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/kproto"
)

// TestLookAlikeSegmentsNeverReachTheUpstream: a placeholder value that is
// one segment to the kernel but a path to an upstream that
// percent-decodes, splits on '\', NFKC-normalizes or trims is refused
// invalid_arguments through the kernel (issue 24, finding 6).
func TestLookAlikeSegmentsNeverReachTheUpstream(t *testing.T) {
	h, u := startBrokered(t, brokerGrants(t), brokerTools)
	c := h.dial()
	c.hello("claude-code")
	c.list()
	for _, repo := range []string{`..%2F..%2Fother`, `..\..\other`, "．．", "․․", " ..", ".. ", "x\u0085"} {
		args, _ := json.Marshal(map[string]string{"owner": "sharedos", "repo": repo})
		if r := c.invoke("test.get_repo", json.RawMessage(args)); r.Status != kproto.StatusFailed || r.Code != kproto.CodeInvalidArguments {
			t.Errorf("get_repo %s = %+v, want failed invalid_arguments", args, r)
		}
	}
	h.stop()
	if calls := u.calls(); len(calls) != 0 {
		t.Errorf("the upstream received %v", calls)
	}
}
