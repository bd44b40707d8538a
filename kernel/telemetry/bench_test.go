package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/sdk/resource"
)

// BenchmarkAuditStream is what the audit stream spends on one line of the
// log, written before: read, made a record, encoded and sent over
// OTLP/HTTP to a collector on loopback that takes everything, and the
// cursor moved once a batch.
func BenchmarkAuditStream(b *testing.B) {
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	exp, err := otlploghttp.New(context.Background(), otlploghttp.WithEndpointURL(collector.URL+"/v1/logs"))
	if err != nil {
		b.Fatal(err)
	}
	k := newAuditKernel(&testing.T{})
	k.write(b.N)
	s := newAuditStream(auditStreamOptions{
		path: k.path, cursor: filepath.Join(k.stateDir, CursorFile), exporter: exp,
		resource: resource.Default(), log: zerolog.Nop(), poll: time.Hour,
	})
	go s.run()
	defer s.stop(context.Background())
	b.ReportAllocs()
	b.ResetTimer()
	if err := s.flush(context.Background()); err != nil {
		b.Fatal(err)
	}
}
