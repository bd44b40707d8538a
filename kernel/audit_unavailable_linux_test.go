package kernel

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sharedos/sharedos-mcp/kernel/audit"
)

// TestAFullDiskUnderTheAuditLogStopsEffects puts the audit log on a real
// full file system (a small tmpfs), as the issue did: a write is not
// performed and a read hands out nothing, and the kernel keeps serving.
func TestAFullDiskUnderTheAuditLogStopsEffects(t *testing.T) {
	dir := mountTmpfs(t, "256k")
	logPath := filepath.Join(dir, "audit.jsonl")
	h := startKernel(t, writerGrants(t), func(s *Server) {
		if err := s.Audit.Close(); err != nil {
			t.Fatal(err)
		}
		a, err := audit.Open(logPath)
		if err != nil {
			t.Fatal(err)
		}
		s.Audit = a
	})
	c := h.dial()
	c.hello("cc")
	c.list()
	// Fill the file system: the log's last page with empty lines (which
	// the log's readers skip), then everything else with a filler.
	fi, err := os.Stat(logPath)
	if err != nil {
		t.Fatal(err)
	}
	pad, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	page := int64(os.Getpagesize())
	if _, err := pad.Write([]byte(strings.Repeat("\n", int(page-fi.Size()%page)))); err != nil {
		t.Fatal(err)
	}
	pad.Close()
	filler, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := filler.Write(make([]byte, page)); err != nil {
			break
		}
	}
	filler.Close()

	for i := range 3 {
		wantAuditUnavailable(t, fmt.Sprintf("write %d on a full disk", i), c.invoke("files.write", map[string]string{"path": "/public/new.txt", "content": "x"}))
		wantAuditUnavailable(t, fmt.Sprintf("overwrite %d on a full disk", i), c.invoke("files.write", map[string]string{"path": "/public/a.txt", "content": "x"}))
		wantAuditUnavailable(t, fmt.Sprintf("read %d on a full disk", i), c.invoke("files.read", map[string]string{"path": "/public/a.txt"}))
	}
	wantNothingWrittenAndServing(t, h, c)
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if evs := parseEvents(t, data); len(eventsNamed(evs, audit.EventToolInvoked)) != 0 {
		t.Errorf("calls recorded on a full disk: %+v", evs)
	}
	// Whether turn.closed can be recorded once space is back depends on
	// the log retrying after a failure; either way the kernel stops.
	if err := os.Remove(filepath.Join(dir, "filler")); err != nil {
		t.Fatal(err)
	}
	c.conn.Close()
	if err := h.stop(); err != nil {
		t.Logf("the kernel stopped with: %v", err)
	}
	h.stopErr = nil
}
