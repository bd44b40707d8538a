package kernel

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rs/zerolog"

	"github.com/sharedos/sharedos-mcp/kernel/config"
	"github.com/sharedos/sharedos-mcp/kernel/telemetry"
)

// BenchmarkCallWithTelemetry is BenchmarkFilesReadThroughATurn with the
// kernel's telemetry off (no [telemetry]), on for traces and metrics, and
// on as a team runs it, with every audit line as a log record too
// (audit_logs): exported over OTLP/HTTP to a collector on loopback that
// takes everything. The differences are what export adds to a call, the
// exporters' own work on the machine's two cores included (the numbers
// are in BENCHMARKS.md).
func BenchmarkCallWithTelemetry(b *testing.B) {
	b.Run("off", func(b *testing.B) {
		t := startBenchTurn(b)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			t.invoke(b, i, "files.read", `{"path":"/docs/a.txt"}`)
		}
	})
	b.Run("traces-metrics", func(b *testing.B) { benchExport(b, false) })
	b.Run("traces-metrics-audit", func(b *testing.B) { benchExport(b, true) })
}

// benchExport runs calls with the kernel exporting to a collector that
// takes everything; auditLogs adds the audit stream.
func benchExport(b *testing.B, auditLogs bool) {
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	t := startBenchTurn(b, func(s *Server) {
		tel, err := telemetry.Start(context.Background(), telemetry.Options{
			Config:   config.Telemetry{Endpoint: collector.URL, AuditLogs: auditLogs},
			AuditLog: s.Config.AuditLog, StateDir: s.StateDir, Log: zerolog.Nop(),
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { tel.Shutdown(context.Background()) })
		s.Telemetry = tel
	})
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		t.invoke(b, i, "files.read", `{"path":"/docs/a.txt"}`)
	}
}
