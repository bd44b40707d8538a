package audit

import (
	"path/filepath"
	"testing"
	"time"
)

// The numbers in docs/adr/0002-audit-durability.md come from these:
// go test -run '^$' -bench Audit -benchtime 2000x ./kernel/audit
// and the cost of the chain in docs/adr/0009-audit-log-chain-and-repair.md
// from go test -run '^$' -bench Audit -benchmem ./kernel/audit.
//
// A turn is modelled as six events (opened, listed, three calls, closed).

func benchEvent() Event {
	d := int64(42)
	return Event{
		Time: Stamp(time.Now()), Event: EventToolInvoked, ExecutionID: "exe_0123456789abcdef", Integration: "claude-code",
		Peer: Peer{UID: 1000, PID: 4242}, CallID: "call-17", Tool: "files.read", Resource: "files:/src/main.go",
		Action: "read", Status: "succeeded", CatalogHash: emptyCatalogHash, DurationUs: &d,
	}
}

func benchAudit(b *testing.B, syncEvery, eventsPerTurn int) {
	a, err := Open(filepath.Join(b.TempDir(), "audit.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	ev := benchEvent()
	b.ResetTimer()
	for i := range b.N {
		if err := a.Write(ev); err != nil {
			b.Fatal(err)
		}
		if syncEvery > 0 && (i+1)%syncEvery == 0 {
			if err := a.Sync(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)*float64(eventsPerTurn)/1e3, "µs/turn")
}

// BenchmarkAuditNoSync is the floor: write(2) only, durability left to the
// kernel's page cache.
func BenchmarkAuditNoSync(b *testing.B) { benchAudit(b, 0, 6) }

// BenchmarkAuditSyncPerTurn is the chosen policy: one fsync per six events.
func BenchmarkAuditSyncPerTurn(b *testing.B) { benchAudit(b, 6, 6) }

// BenchmarkAuditSyncPerEvent is the rejected policy: fsync after every line.
func BenchmarkAuditSyncPerEvent(b *testing.B) { benchAudit(b, 1, 6) }
