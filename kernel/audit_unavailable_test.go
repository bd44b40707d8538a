package kernel

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
	"github.com/sharedos/sharedos-mcp/policy"
)

// Issue 12 item 2, the call flow: no effect and no answer without a
// record, and a kernel that goes on refusing calls, rather than exiting,
// while its log cannot be written.

// failingSink passes events to the real log until fail is set; then each
// write fails as on a full disk (only writes of the event failOn, when it
// is set).
type failingSink struct {
	inner  auditSink
	failOn string
	fail   atomic.Bool
}

func (f *failingSink) Write(ev audit.Event) error {
	if f.fail.Load() && (f.failOn == "" || f.failOn == ev.Event) {
		return fmt.Errorf("write audit log: %w", syscall.ENOSPC)
	}
	return f.inner.Write(ev)
}

func (f *failingSink) Sync() error {
	if f.fail.Load() && f.failOn == "" {
		return fmt.Errorf("sync audit log: %w", syscall.EIO)
	}
	return f.inner.Sync()
}

func failing(sink *failingSink) func(*Server) {
	return func(s *Server) {
		sink.inner = s.Audit
		s.sink = sink
	}
}

func writerGrants(t *testing.T) []policy.Grant {
	return []policy.Grant{
		grant(t, "integration:cc", "files:/public", true, "read", "write"),
		grant(t, "integration:cc", "sharedos:/escalate", false, "escalate"),
	}
}

func wantAuditUnavailable(t *testing.T, what string, r kproto.InvokeResult) {
	t.Helper()
	if r.Status != kproto.StatusFailed || r.Code != codeAuditUnavailable || r.Retryable == nil || !*r.Retryable {
		t.Errorf("%s: %+v, want failed audit_unavailable, retryable", what, r)
	}
	if len(r.Content) > 0 || len(r.Output) > 0 {
		t.Errorf("%s handed out a result it could not record: %s %s", what, r.Content, r.Output)
	}
}

// wantNothingWrittenAndServing checks what refused writes to
// /public/new.txt and /public/a.txt must leave: no new file, a.txt as it
// was, and a kernel that still answers and has not exited.
func wantNothingWrittenAndServing(t *testing.T, h *kernelHarness, c *testClient) {
	t.Helper()
	if _, err := os.Lstat(filepath.Join(h.root, "public", "new.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("an unrecorded write created its file (%v)", err)
	}
	if got := mustRead(t, filepath.Join(h.root, "public", "a.txt")); got != "hello world\nsecond line\n" {
		t.Errorf("an unrecorded write changed a.txt to %q", got)
	}
	if m := c.call(kproto.MethodPing, struct{}{}); m.Error != nil {
		t.Errorf("the kernel stopped serving: %+v", m)
	}
	select {
	case err := <-h.done:
		t.Fatalf("the kernel exited: %v", err)
	default:
	}
}

func TestAnUnwritableAuditLogRefusesCallsUntilItWorks(t *testing.T) {
	sink := &failingSink{}
	h := startKernel(t, writerGrants(t), failing(sink))
	c := h.dial()
	c.hello("cc")
	c.list()

	sink.fail.Store(true)
	wantAuditUnavailable(t, "a new file", c.invoke("files.write", map[string]string{"path": "/public/new.txt", "content": "x"}))
	wantAuditUnavailable(t, "an overwrite", c.invoke("files.write", map[string]string{"path": "/public/a.txt", "content": "x"}))
	wantAuditUnavailable(t, "a read", c.invoke("files.read", map[string]string{"path": "/public/a.txt"}))
	wantAuditUnavailable(t, "sharedos.escalate", c.invoke("sharedos.escalate", map[string]string{"reason": "help"}))
	if code := errorCode(t, c.call(kproto.MethodEscalate, kproto.EscalateParams{CallID: "e1", Reason: "help"})); code != codeAuditUnavailable {
		t.Errorf("turn.escalate: data.code %q, want audit_unavailable", code)
	}
	wantNothingWrittenAndServing(t, h, c)

	// The log works again: the next calls go through, and the turn was
	// never escalated.
	sink.fail.Store(false)
	r := c.invoke("files.write", map[string]string{"path": "/public/new.txt", "content": "after"})
	if r.Status != kproto.StatusSucceeded || mustRead(t, filepath.Join(h.root, "public", "new.txt")) != "after" {
		t.Errorf("a write once the log works: %+v", r)
	}
	if r := c.invoke("files.read", map[string]string{"path": "/public/a.txt"}); r.Status != kproto.StatusSucceeded {
		t.Errorf("a read once the log works: %+v", r)
	}
	if r := c.invoke("sharedos.escalate", map[string]string{"reason": "now"}); r.Status != kproto.StatusSucceeded {
		t.Errorf("escalating once the log works: %+v", r)
	}
	c.conn.Close()
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range h.events() {
		names = append(names, e.Event)
		if e.Event == audit.EventTurnEscalated && e.Reason != "now" {
			t.Errorf("an escalation that was refused is in the log: %+v", e)
		}
	}
	want := []string{audit.EventTurnOpened, audit.EventCatalogListed, audit.EventToolAuthorized, audit.EventToolInvoked, audit.EventToolInvoked,
		audit.EventTurnEscalated, audit.EventToolInvoked, audit.EventTurnClosed}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("events\n %v\nwant\n %v", names, want)
	}
}

// TestAWriteWhoseOutcomeCannotBeRecorded: the decision was recorded
// before the write; when the outcome cannot be, the answer says the write
// happened, withholds the result and is not retryable (docs/adr/0035).
func TestAWriteWhoseOutcomeCannotBeRecorded(t *testing.T) {
	sink := &failingSink{failOn: audit.EventToolInvoked}
	h := startKernel(t, writerGrants(t), failing(sink))
	c := h.dial()
	c.hello("cc")
	c.list()
	sink.fail.Store(true)
	r := c.invoke("files.write", map[string]string{"path": "/public/new.txt", "content": "x"})
	wantOutcomeUnrecorded(t, "files.write", r)
	if !strings.Contains(r.Message, "carried out") {
		t.Errorf("the answer does not say the write happened: %q", r.Message)
	}
	if got := mustRead(t, filepath.Join(h.root, "public", "new.txt")); got != "x" {
		t.Errorf("the file holds %q", got)
	}
	authorized := eventsNamed(h.events(), audit.EventToolAuthorized)
	if len(authorized) != 1 || authorized[0].Resource != "files:/public/new.txt" || authorized[0].Action != "write" || authorized[0].Tool != "files.write" {
		t.Errorf("tool.authorized events %+v", authorized)
	}
	sink.fail.Store(false)
}
