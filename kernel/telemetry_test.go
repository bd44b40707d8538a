package kernel

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/internal/testupstream"
	"github.com/sharedos/sharedos-mcp/kernel/telemetry"
	"github.com/sharedos/sharedos-mcp/policy"
)

// withSpans gives a kernel telemetry whose spans end up in the returned
// exporter as each ends.
func withSpans(t *testing.T) (func(*Server), *tracetest.InMemoryExporter) {
	t.Helper()
	spans := tracetest.NewInMemoryExporter()
	tel, err := telemetry.New(context.Background(), telemetry.Options{Version: "test", Log: zerolog.Nop()}, telemetry.Providers{Spans: spans, SyncSpans: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tel.Shutdown(context.Background()) })
	return func(s *Server) { s.Telemetry = tel }, spans
}

func spanAttrs(s tracetest.SpanStub) map[string]attribute.Value {
	m := map[string]attribute.Value{}
	for _, kv := range s.Attributes {
		m[string(kv.Key)] = kv.Value
	}
	return m
}

const harnessTrace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// TestEveryCallIsASpanOfTheKernelsDecision: each tools.invoke is a
// SERVER span whose attributes say what the kernel decided (status, code,
// resource, action, the grant that decided, the call's place in its
// turn), under the harness's trace when the call carried one.
func TestEveryCallIsASpanOfTheKernelsDecision(t *testing.T) {
	traced, spans := withSpans(t)
	h := startKernel(t, append(publicReader(t), writerGrants(t)...), traced)
	c := h.dial()
	hello := c.hello("cc")
	c.list()
	call := c.invokeParams("c1", "files.read", map[string]string{"path": "/public/a.txt"})
	call.MCP = kproto.InvokeMCP{RequestID: json.RawMessage(`41`), ProtocolVersion: "2025-11-25", TraceParent: harnessTrace}
	if r := invokeResult(t, c.call(kproto.MethodInvoke, call)); r.Status != kproto.StatusSucceeded {
		t.Fatalf("read: %+v", r)
	}
	c.invoke("files.read", map[string]string{"path": "/private/secret.txt"})
	c.invoke("files.write", map[string]string{"path": "/public/n.txt", "content": "x"})
	c.invoke("files.nope", map[string]string{})

	got := spans.GetSpans()
	if len(got) != 4 {
		t.Fatalf("%d spans, want one per call", len(got))
	}
	read, denied, write, unknown := got[0], got[1], got[2], got[3]
	a := spanAttrs(read)
	if read.Name != "tools/call files.read" || read.SpanKind != trace.SpanKindServer || read.Parent.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" ||
		a["sharedos.grant"].AsInt64() != 1 || a["sharedos.resource"].AsString() != "files:/public/a.txt" || a["sharedos.seq"].AsInt64() != 1 ||
		a["sharedos.execution_id"].AsString() != hello.ExecutionID || a["jsonrpc.request.id"].AsString() != "41" || a["mcp.protocol.version"].AsString() != "2025-11-25" {
		t.Errorf("the allowed read: %s %v parent %v %v", read.Name, read.SpanKind, read.Parent, a)
	}
	if a := spanAttrs(denied); a["sharedos.status"].AsString() != "denied" || a["sharedos.code"].AsString() != "no_matching_grant" ||
		a["error.type"].AsString() != "tool_error" || a["sharedos.grant"].Type() != attribute.EMPTY || denied.Parent.IsValid() {
		t.Errorf("the denied read: %v, parent %v", a, denied.Parent)
	}
	if a := spanAttrs(write); a["sharedos.grant"].AsInt64() != 2 || a["sharedos.action"].AsString() != "write" {
		t.Errorf("the write: %v; want it decided by grant #2", a)
	}
	if a := spanAttrs(unknown); unknown.Name != "tools/call" || a["gen_ai.tool.name"].AsString() != "files.nope" || a["sharedos.code"].AsString() != "tool_unavailable" {
		t.Errorf("a tool outside the catalogue: %s %v", unknown.Name, a)
	}
}

// TestABrokeredCallPassesItsTraceToTheUpstream: the upstream call is a
// CLIENT span under the call's, and the upstream receives that span's
// context in params._meta, as the MCP semantic conventions carry it.
func TestABrokeredCallPassesItsTraceToTheUpstream(t *testing.T) {
	traced, spans := withSpans(t)
	h, u := startBrokered(t, brokerGrants(t), brokerTools, traced)
	c := h.dial()
	c.hello("claude-code")
	c.list()
	call := c.invokeParams("c1", "test.echo", map[string]string{"text": "hi"})
	call.MCP = kproto.InvokeMCP{TraceParent: harnessTrace}
	if r := invokeResult(t, c.call(kproto.MethodInvoke, call)); r.Status != kproto.StatusSucceeded {
		t.Fatalf("echo: %+v", r)
	}
	got := spans.GetSpans()
	if len(got) != 2 {
		t.Fatalf("%d spans, want the call's and its upstream call's", len(got))
	}
	client, server := got[0], got[1]
	if client.SpanKind != trace.SpanKindClient || client.Parent.SpanID() != server.SpanContext.SpanID() ||
		server.Parent.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || spanAttrs(client)["sharedos.upstream"].AsString() != "test" {
		t.Errorf("upstream span %s (%v) under %v; the call's %s under %v", client.Name, client.SpanKind, client.Parent, server.Name, server.Parent)
	}
	rec, err := testupstream.ReadRecord(u.record)
	if err != nil || len(rec) != 1 {
		t.Fatalf("the upstream's record: %v, %v", rec, err)
	}
	want := "00-" + client.SpanContext.TraceID().String() + "-" + client.SpanContext.SpanID().String() + "-01"
	if rec[0].Meta["traceparent"] != want {
		b, _ := json.Marshal(rec[0].Meta)
		t.Errorf("the upstream got _meta %s; want traceparent %s", b, want)
	}
}

// TestTheApprovalsWaitingGaugeFollowsAHeldCall: sharedos.approvals.waiting
// reads the kernel's approval requests: 0, then 1 while a call is held
// and its harness asked, then 0 once the person approved it.
func TestTheApprovalsWaitingGaugeFollowsAHeldCall(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	tel, err := telemetry.New(context.Background(), telemetry.Options{Version: "test", Log: zerolog.Nop()}, telemetry.Providers{Metrics: reader})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tel.Shutdown(context.Background()) })
	h := startKernel(t, []policy.Grant{asked(t, policy.AskHarness)}, func(s *Server) {
		s.StateDir, s.AskTimeout, s.Telemetry = t.TempDir(), time.Minute, tel
	})
	waiting := func() int64 {
		t.Helper()
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if g, ok := m.Data.(metricdata.Gauge[int64]); ok && m.Name == telemetry.MetricApprovals && len(g.DataPoints) == 1 {
					return g.DataPoints[0].Value
				}
			}
		}
		t.Fatalf("no %s gauge of one point in %+v", telemetry.MetricApprovals, rm.ScopeMetrics)
		return 0
	}

	c := h.askingTurn("cc")
	if n := waiting(); n != 0 {
		t.Errorf("before any call: %d approvals waiting, want 0", n)
	}
	id := c.startWrite("/public/held.txt", "x")
	askID, _ := c.askOf() // the request is on the record and the harness asked
	if n := waiting(); n != 1 {
		t.Errorf("while the call is held: %d approvals waiting, want 1", n)
	}
	c.answerAsk(askID, kproto.ApprovalApproved)
	if r := c.resultOf(id); r.Status != kproto.StatusSucceeded {
		t.Fatalf("approved: %+v", r)
	}
	if n := waiting(); n != 0 {
		t.Errorf("once approved: %d approvals waiting, want 0", n)
	}
}
