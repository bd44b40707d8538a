package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/internal/testfs"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
	"github.com/sharedos/sharedos-mcp/policy"
)

func publicWriter(t *testing.T) []policy.Grant {
	return []policy.Grant{grant(t, "integration:cc", "files:/public", true, "read", "list", "search", "write")}
}

// answers reads n answers and returns them by id.
func (c *testClient) answers(n int) map[string]jsonrpc.Message {
	c.t.Helper()
	got := map[string]jsonrpc.Message{}
	for len(got) < n {
		m := c.recv()
		if m.Method != "" {
			continue // call.progress
		}
		got[string(m.ID)] = m
	}
	return got
}

// TestAPipelinedWriteIsSeenByTheReadBehindIt: a harness that pipelines a
// write and then a read of the same file, without waiting, reads what it
// wrote, and the audit gives every call its place in the turn. On a
// kernel that runs a turn's calls concurrently the read races the write
// (and its fsync) and finds nothing.
func TestAPipelinedWriteIsSeenByTheReadBehindIt(t *testing.T) {
	h := startKernel(t, publicWriter(t))
	c := h.dial()
	c.hello("cc")
	c.list()
	const pairs = 20
	var ids []int
	for i := range pairs {
		p := fmt.Sprintf("/public/sub/new-%d.txt", i)
		ids = append(ids,
			c.send(kproto.MethodInvoke, c.invokeParams(fmt.Sprintf("w%d", i), "files.write", map[string]string{"path": p, "content": fmt.Sprint("content ", i)})),
			c.send(kproto.MethodInvoke, c.invokeParams(fmt.Sprintf("r%d", i), "files.read", map[string]string{"path": p})))
	}
	got := c.answers(2 * pairs)
	for i := range pairs {
		w, r := invokeResult(t, got[fmt.Sprint(ids[2*i])]), invokeResult(t, got[fmt.Sprint(ids[2*i+1])])
		if w.Status != kproto.StatusSucceeded || r.Status != kproto.StatusSucceeded || text(t, r) != fmt.Sprint("content ", i) {
			t.Errorf("pair %d: write %+v, then read %+v: the read did not see the write before it", i, w, r)
		}
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	seqs := map[string]int64{}
	for _, e := range eventsNamed(h.events(), audit.EventToolInvoked) {
		seqs[e.CallID] = e.Seq
	}
	for i := range pairs {
		if seqs[fmt.Sprintf("w%d", i)] != int64(2*i+1) || seqs[fmt.Sprintf("r%d", i)] != int64(2*i+2) {
			t.Errorf("pair %d: seq %d and %d, want %d and %d", i, seqs[fmt.Sprintf("w%d", i)], seqs[fmt.Sprintf("r%d", i)], 2*i+1, 2*i+2)
		}
	}
	for _, e := range eventsNamed(h.events(), audit.EventToolAuthorized) {
		if e.Seq != seqs[e.CallID] {
			t.Errorf("%s: tool.authorized seq %d, tool.invoked seq %d", e.CallID, e.Seq, seqs[e.CallID])
		}
	}
}

// gateTool blocks until the test opens its gate (or the call is
// cancelled), as a slow call would.
func gateTool(gate <-chan struct{}) *tool {
	tl := blockingTool()
	tl.def.Name = "test.gate"
	tl.run = func(ctx context.Context, _ *callEnv, _ policy.Resource, _ map[string]string) outcome {
		select {
		case <-gate:
			return succeeded(nil, "opened")
		case <-ctx.Done():
			return failed(kproto.CodeCancelled, "cancelled")
		}
	}
	return tl
}

// TestEscalationTakesEffectInItsPlace: a write that arrived before the
// escalation runs, though it had to wait for an earlier call; a read that
// arrived after it is refused. Marking the turn escalated when the
// request is read would refuse the earlier write too.
func TestEscalationTakesEffectInItsPlace(t *testing.T) {
	gate := make(chan struct{})
	grants := append(publicWriter(t), grant(t, "integration:cc", "sharedos:/escalate", false, "escalate"))
	h := startKernel(t, grants, func(s *Server) { s.tools = append(registry(), gateTool(gate)) })
	c := h.dial()
	c.hello("cc")
	c.list()
	slow := c.send(kproto.MethodInvoke, c.invokeParams("slow", "test.gate", map[string]string{}))
	write := c.send(kproto.MethodInvoke, c.invokeParams("w", "files.write", map[string]string{"path": "/public/before.txt", "content": "x"}))
	esc := c.send(kproto.MethodEscalate, kproto.EscalateParams{CallID: "e", Reason: "stop here"})
	read := c.send(kproto.MethodInvoke, c.invokeParams("r", "files.read", map[string]string{"path": "/public/a.txt"}))
	close(gate)
	got := c.answers(4)
	if r := invokeResult(t, got[fmt.Sprint(slow)]); r.Status != kproto.StatusSucceeded {
		t.Errorf("the slow call: %+v", r)
	}
	if r := invokeResult(t, got[fmt.Sprint(write)]); r.Status != kproto.StatusSucceeded {
		t.Errorf("the write before the escalation: %+v, want succeeded", r)
	}
	if m := got[fmt.Sprint(esc)]; m.Error != nil {
		t.Errorf("the escalation: %s", m.Error)
	}
	if r := invokeResult(t, got[fmt.Sprint(read)]); r.Status != kproto.StatusDenied || r.Code != kproto.CodeEscalationPending {
		t.Errorf("the read after the escalation: %+v, want denied escalation_pending", r)
	}
}

// TestATurnOverItsBoundIsReadNoFurther: past the turn's bound on calls
// unanswered the kernel stops reading it, so a flood cannot grow its
// memory; it reads on once a call is answered.
func TestATurnOverItsBoundIsReadNoFurther(t *testing.T) {
	gate := make(chan struct{})
	waited := make(chan string, 8)
	h := startKernel(t, publicReader(t), func(s *Server) {
		s.tools = append(registry(), gateTool(gate))
		s.turnCalls = 2
		s.waits = func(bound string) { waited <- bound }
	})
	c := h.dial()
	c.hello("cc")
	c.list()
	a := c.send(kproto.MethodInvoke, c.invokeParams("a", "test.gate", map[string]string{}))
	b := c.send(kproto.MethodInvoke, c.invokeParams("b", "test.gate", map[string]string{}))
	third := c.send(kproto.MethodInvoke, c.invokeParams("c", "files.read", map[string]string{"path": "/public/a.txt"}))
	ping := c.send(kproto.MethodPing, struct{}{})
	if bound := <-waited; bound != "turn" {
		t.Fatalf("the kernel waited for %q, want the turn's bound", bound)
	}
	// The kernel is now stopped at the third call; the ping behind it is
	// not read. Opening the gate answers a and b, and then the rest.
	close(gate)
	got := c.answers(4)
	for _, id := range []int{a, b, third} {
		if r := invokeResult(t, got[fmt.Sprint(id)]); r.Status != kproto.StatusSucceeded {
			t.Errorf("call %d: %+v", id, r)
		}
	}
	if got[fmt.Sprint(ping)].Error != nil {
		t.Errorf("ping: %s", got[fmt.Sprint(ping)].Error)
	}
}

// TestLongLinesAreReadWithinABudget: with one long-line token, a second
// turn's long line is read only once the first one's call is answered, so
// the long lines in memory at once are bounded across turns.
func TestLongLinesAreReadWithinABudget(t *testing.T) {
	gate := make(chan struct{})
	waited := make(chan string, 8)
	h := startKernel(t, publicWriter(t), func(s *Server) {
		s.tools = append(registry(), gateTool(gate))
		s.bigLineCount = 1
		s.waits = func(bound string) { waited <- bound }
	})
	content := strings.Repeat("x", 200<<10) // longer than a read buffer
	first, second := h.dial(), h.dial()
	for _, c := range []*testClient{first, second} {
		c.hello("cc")
		c.list()
	}
	// The first turn's long write waits behind a slow call, holding its
	// line, and so the token.
	slow := first.send(kproto.MethodInvoke, first.invokeParams("slow", "test.gate", map[string]string{}))
	w1 := first.send(kproto.MethodInvoke, first.invokeParams("w1", "files.write", map[string]string{"path": "/public/one.txt", "content": content}))
	w2 := second.send(kproto.MethodInvoke, second.invokeParams("w2", "files.write", map[string]string{"path": "/public/two.txt", "content": content}))
	if bound := <-waited; bound != "line" {
		t.Fatalf("the kernel waited for %q, want the long-line budget", bound)
	}
	close(gate)
	got := first.answers(2)
	if r := invokeResult(t, got[fmt.Sprint(slow)]); r.Status != kproto.StatusSucceeded {
		t.Errorf("slow: %+v", r)
	}
	if r := invokeResult(t, got[fmt.Sprint(w1)]); r.Status != kproto.StatusSucceeded {
		t.Errorf("w1: %+v", r)
	}
	if r := invokeResult(t, second.answers(1)[fmt.Sprint(w2)]); r.Status != kproto.StatusSucceeded {
		t.Errorf("w2 after the budget freed: %+v", r)
	}
}

// TestALineOverTheLimitIsAnsweredUnderItsID: the kernel reads the id of a
// line too long to take from its beginning: a tools.invoke is refused
// too_large as that call (and recorded), another request gets an error
// with its id, and only a line without a readable id gets a null id.
func TestALineOverTheLimitIsAnsweredUnderItsID(t *testing.T) {
	h := startKernel(t, publicReader(t), func(s *Server) { s.MaxLine = 4096 })
	c := h.dial()
	c.hello("cc")
	_, hash := c.list()
	big := strings.Repeat("y", 8192)
	c.sendRaw(fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"tools.invoke","params":{"callId":"huge","tool":"files.read","catalogHash":%q,"arguments":{"path":%q}}}`, hash, big))
	m := c.recv()
	r := invokeResult(t, m)
	if string(m.ID) != "7" || r.Status != kproto.StatusFailed || r.Code != kproto.CodeTooLarge {
		t.Fatalf("an oversized call answered %s %+v, want id 7, failed too_large", m.ID, r)
	}
	c.sendRaw(fmt.Sprintf(`{"jsonrpc":"2.0","id":"p","method":"ping","params":{"pad":%q}}`, big))
	if m := c.recv(); string(m.ID) != `"p"` || m.Error == nil {
		t.Errorf("an oversized ping answered %s %v, want an error with id \"p\"", m.ID, m.Error)
	}
	c.sendRaw(`{"jsonrpc":"2.0","method":"ping","pad":"` + big + `"}`)
	if m := c.recv(); len(m.ID) != 0 && string(m.ID) != "null" {
		t.Errorf("a line without an id answered with id %s", m.ID)
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range eventsNamed(h.events(), audit.EventToolInvoked) {
		if e.CallID == "huge" {
			found = e.Code == kproto.CodeTooLarge && e.Tool == "files.read" && e.Seq == 1
		}
	}
	if !found {
		t.Errorf("the oversized call is not recorded as call 1, too_large: %+v", eventsNamed(h.events(), audit.EventToolInvoked))
	}
}

// TestSearchReportsItsProgress: a search over many files sends
// call.progress with increasing counts of the files it has looked at,
// toward the total it counted first, and none after its answer.
func TestSearchReportsItsProgress(t *testing.T) {
	root, _ := testfs.WriteTree(t)
	many := filepath.Join(root, "public", "many")
	if err := os.MkdirAll(many, 0o755); err != nil {
		t.Fatal(err)
	}
	// Three times the files a search reports its progress after (256), so
	// it reports more than once.
	const n = 3 * 256
	for i := range n {
		if err := os.WriteFile(filepath.Join(many, fmt.Sprintf("f%04d.txt", i)), []byte("hay\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h := startKernel(t, publicReader(t), func(s *Server) { s.Root = root })
	c := h.dial()
	c.hello("cc")
	c.list()
	id := c.send(kproto.MethodInvoke, c.invokeParams("s", "files.search", map[string]string{"path": "/public/many", "query": "needle"}))
	var seen []float64
	for {
		m := c.recv()
		if m.Method == "" {
			if string(m.ID) != fmt.Sprint(id) || invokeResult(t, m).Status != kproto.StatusSucceeded {
				t.Fatalf("answer %+v", m)
			}
			break
		}
		var p kproto.ProgressParams
		if m.Method != kproto.MethodProgress || json.Unmarshal(m.Params, &p) != nil || p.CallID != "s" {
			t.Fatalf("unexpected message %s %s", m.Method, m.Params)
		}
		if p.Total == nil || *p.Total != n || p.Progress > *p.Total {
			t.Errorf("progress %v of %v, want of %d", p.Progress, p.Total, n)
		}
		seen = append(seen, p.Progress)
	}
	if len(seen) < 2 || !slices.IsSorted(seen) || seen[0] == seen[len(seen)-1] {
		t.Errorf("progress reports %v, want at least two, increasing", seen)
	}
	ping := c.send(kproto.MethodPing, struct{}{})
	if m := c.recv(); string(m.ID) != fmt.Sprint(ping) {
		t.Errorf("after the answer the kernel sent %s %s, want nothing but the ping's answer", m.Method, m.Params)
	}
}

// TestANewPolicyAppliesToOpenTurns: SetPolicy (the kernel's SIGHUP
// reload) takes effect for the next decision, in a turn opened before it.
func TestANewPolicyAppliesToOpenTurns(t *testing.T) {
	h := startKernel(t, publicReader(t))
	c := h.dial()
	c.hello("cc")
	c.list()
	if r := c.invoke("files.read", map[string]string{"path": "/public/a.txt"}); r.Status != kproto.StatusSucceeded {
		t.Fatalf("before: %+v", r)
	}
	h.srv.SetPolicy(Policy{})
	if r := c.invoke("files.read", map[string]string{"path": "/public/a.txt"}); r.Status != kproto.StatusDenied || r.Code != kproto.CodeNoMatchingGrant {
		t.Errorf("after a policy without grants: %+v, want denied no_matching_grant", r)
	}
	h.srv.SetPolicy(Policy{Grants: publicReader(t)})
	if r := c.invoke("files.read", map[string]string{"path": "/public/a.txt"}); r.Status != kproto.StatusSucceeded {
		t.Errorf("after the grant is back: %+v", r)
	}
}
