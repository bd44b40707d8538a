package telemetry

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// inMemory starts a Telemetry whose spans go to an in-memory exporter as
// each ends and whose metrics are read on demand.
func inMemory(t *testing.T) (*Telemetry, *tracetest.InMemoryExporter, *sdkmetric.ManualReader) {
	t.Helper()
	spans := tracetest.NewInMemoryExporter()
	reader := sdkmetric.NewManualReader()
	tel, err := New(context.Background(), Options{Version: "test", Log: zerolog.Nop()}, Providers{Spans: spans, SyncSpans: true, Metrics: reader})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tel.Shutdown(context.Background()) })
	return tel, spans, reader
}

func attrs(kvs []attribute.KeyValue) map[string]any {
	m := map[string]any{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return m
}

const clientTrace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// TestACallIsOneServerSpanInTheMCPConventions: the span's name, kind,
// parent (the client's traceparent) and exactly the attributes of the
// MCP semantic conventions and the kernel's own, for a denied call and
// for an allowed one.
func TestACallIsOneServerSpanInTheMCPConventions(t *testing.T) {
	tel, spans, _ := inMemory(t)
	_, c := tel.StartCall(context.Background(), CallStart{
		Integration: "claude-code", ExecutionID: "exe_1", Tool: "files.read", Published: true, Seq: 3,
		MCP: []byte(`{"requestId":"7","protocolVersion":"2025-11-25","traceparent":"` + clientTrace + `","tracestate":"rojo=00f067aa0ba902b7"}`),
	})
	c.End(CallEnd{Status: "denied", Code: "no_matching_grant", Resource: "files:/private/a.txt", Action: "read"})
	_, c = tel.StartCall(context.Background(), CallStart{Integration: "claude-code", ExecutionID: "exe_1", Tool: "files.read", Published: true, Seq: 4})
	c.End(CallEnd{Status: "succeeded", Resource: "files:/public/a.txt", Action: "read", Grant: 2})

	got := spans.GetSpans()
	if len(got) != 2 {
		t.Fatalf("%d spans, want 2", len(got))
	}
	denied, allowed := got[0], got[1]
	if denied.Name != "tools/call files.read" || denied.SpanKind != trace.SpanKindServer {
		t.Errorf("span %q, kind %v; want \"tools/call files.read\", server", denied.Name, denied.SpanKind)
	}
	if denied.Parent.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || denied.Parent.SpanID().String() != "00f067aa0ba902b7" ||
		!denied.Parent.IsRemote() || denied.SpanContext.TraceID() != denied.Parent.TraceID() {
		t.Errorf("parent %v: want the client's traceparent", denied.Parent)
	}
	if ts := denied.SpanContext.TraceState().String(); ts != "rojo=00f067aa0ba902b7" {
		t.Errorf("tracestate %q", ts)
	}
	want := map[string]any{
		"mcp.method.name": "tools/call", "gen_ai.tool.name": "files.read", "gen_ai.operation.name": "execute_tool",
		"jsonrpc.request.id": "7", "mcp.protocol.version": "2025-11-25", "error.type": "tool_error",
		"sharedos.integration": "claude-code", "sharedos.resource": "files:/private/a.txt", "sharedos.action": "read",
		"sharedos.status": "denied", "sharedos.code": "no_matching_grant", "sharedos.seq": int64(3), "sharedos.execution_id": "exe_1",
	}
	if a := attrs(denied.Attributes); !maps.Equal(a, want) {
		t.Errorf("denied call's attributes\n%v\nwant\n%v", a, want)
	}
	if denied.Status.Code != codes.Error || denied.Status.Description != "no_matching_grant" {
		t.Errorf("status %+v", denied.Status)
	}
	want = map[string]any{
		"mcp.method.name": "tools/call", "gen_ai.tool.name": "files.read", "gen_ai.operation.name": "execute_tool",
		"sharedos.integration": "claude-code", "sharedos.resource": "files:/public/a.txt", "sharedos.action": "read",
		"sharedos.status": "succeeded", "sharedos.grant": int64(2), "sharedos.seq": int64(4), "sharedos.execution_id": "exe_1",
	}
	if a := attrs(allowed.Attributes); !maps.Equal(a, want) {
		t.Errorf("allowed call's attributes\n%v\nwant\n%v", a, want)
	}
	if allowed.Parent.IsValid() || allowed.Status.Code == codes.Error {
		t.Errorf("a call without a traceparent has parent %v, status %v; want a root, not an error", allowed.Parent, allowed.Status)
	}
}

// TestABadTraceparentStartsATraceOfItsOwn: what a client sends as trace
// context is a hint; one that does not parse is ignored.
func TestABadTraceparentStartsATraceOfItsOwn(t *testing.T) {
	tel, spans, _ := inMemory(t)
	for _, mcp := range []string{`{"traceparent":"00-zz-00f067aa0ba902b7-01"}`, `{"traceparent":7}`, `not json`} {
		_, c := tel.StartCall(context.Background(), CallStart{Tool: "x", MCP: []byte(mcp)})
		c.End(CallEnd{Status: "succeeded"})
	}
	for _, s := range spans.GetSpans() {
		if s.Parent.IsValid() || !s.SpanContext.IsValid() {
			t.Errorf("span %v has parent %v", s.SpanContext, s.Parent)
		}
	}
}

// TestABrokeredCallsUpstreamCallIsAClientChild: the upstream call is a
// CLIENT span under the call's, and what goes to the upstream in
// params._meta is that span's context.
func TestABrokeredCallsUpstreamCallIsAClientChild(t *testing.T) {
	tel, spans, _ := inMemory(t)
	ctx, c := tel.StartCall(context.Background(), CallStart{Tool: "memory.read_graph", Published: true,
		MCP: []byte(`{"traceparent":"` + clientTrace + `"}`)})
	_, meta, u := tel.StartUpstreamCall(ctx, "memory", "read_graph")
	u.End("upstream_timeout")
	c.End(CallEnd{Status: "failed", Code: "upstream_timeout", Upstream: "memory"})
	got := spans.GetSpans()
	client, server := got[0], got[1]
	if client.SpanKind != trace.SpanKindClient || client.Name != "tools/call read_graph" || client.Parent.SpanID() != server.SpanContext.SpanID() {
		t.Errorf("upstream span %q kind %v parent %v; want a client child of %v", client.Name, client.SpanKind, client.Parent.SpanID(), server.SpanContext.SpanID())
	}
	wantParent := "00-" + client.SpanContext.TraceID().String() + "-" + client.SpanContext.SpanID().String() + "-01"
	if meta["traceparent"] != wantParent || client.SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("meta %v; want traceparent %s in the client's trace", meta, wantParent)
	}
	want := map[string]any{
		"mcp.method.name": "tools/call", "gen_ai.tool.name": "read_graph", "gen_ai.operation.name": "execute_tool",
		"sharedos.upstream": "memory", "error.type": "upstream_timeout", "sharedos.code": "upstream_timeout",
	}
	if a := attrs(client.Attributes); !maps.Equal(a, want) {
		t.Errorf("upstream span's attributes\n%v\nwant\n%v", a, want)
	}
	if a := attrs(server.Attributes); a["sharedos.upstream"] != "memory" {
		t.Errorf("the call's span does not name its upstream: %v", a)
	}
}

// TestCallMetrics: calls by integration, tool, status and code, and the
// duration histogram; a tool outside the catalogue is one label, not
// whatever the client named.
func TestCallMetrics(t *testing.T) {
	tel, _, reader := inMemory(t)
	for _, c := range []struct {
		tool      string
		published bool
		status    string
		code      string
	}{
		{"files.read", true, "succeeded", ""},
		{"files.read", true, "succeeded", ""},
		{"files.read", true, "denied", "no_matching_grant"},
		{"made-up-by-the-model-1", false, "denied", "tool_unavailable"},
		{"made-up-by-the-model-2", false, "denied", "tool_unavailable"},
	} {
		_, call := tel.StartCall(context.Background(), CallStart{Integration: "cc", Tool: c.tool, Published: c.published})
		call.End(CallEnd{Status: c.status, Code: c.code})
	}
	tel.ObserveUpstreams(func() []UpstreamState { return []UpstreamState{{"memory", "ready"}, {"git", "restarting"}} })
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	found := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			found[m.Name] = m.Data
		}
	}
	calls, ok := found[MetricCalls].(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("no %s counter: %v", MetricCalls, slices.Collect(maps.Keys(found)))
	}
	counts := map[string]int64{}
	for _, dp := range calls.DataPoints {
		a := attrs(dp.Attributes.ToSlice())
		counts[a["sharedos.integration"].(string)+" "+a["gen_ai.tool.name"].(string)+" "+a["sharedos.status"].(string)+" "+a["sharedos.code"].(string)] = dp.Value
	}
	wantCounts := map[string]int64{
		"cc files.read succeeded ": 2, "cc files.read denied no_matching_grant": 1, "cc _OTHER denied tool_unavailable": 2,
	}
	if !maps.Equal(counts, wantCounts) {
		t.Errorf("calls %v, want %v", counts, wantCounts)
	}
	hist, ok := found[MetricDuration].(metricdata.Histogram[float64])
	var n uint64
	for _, dp := range hist.DataPoints {
		n += dp.Count
	}
	if !ok || n != 5 {
		t.Errorf("%s holds %d calls, want 5", MetricDuration, n)
	}
	states := map[string]int64{}
	for _, dp := range found[MetricUpstreamState].(metricdata.Gauge[int64]).DataPoints {
		a := attrs(dp.Attributes.ToSlice())
		states[a["sharedos.upstream"].(string)+" "+a["sharedos.upstream.state"].(string)] = dp.Value
	}
	if !maps.Equal(states, map[string]int64{"memory ready": 1, "git restarting": 1}) {
		t.Errorf("upstream states %v", states)
	}
	approvals := found[MetricApprovals].(metricdata.Gauge[int64]).DataPoints
	if len(approvals) != 1 || approvals[0].Value != 0 {
		t.Errorf("approvals waiting %v; want 0 until approvals report", approvals)
	}
	tel.ObserveApprovals(func() int { return 3 })
	rm = metricdata.ResourceMetrics{}
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == MetricApprovals && m.Data.(metricdata.Gauge[int64]).DataPoints[0].Value != 3 {
				t.Errorf("approvals waiting %v, want 3", m.Data)
			}
		}
	}
}

// TestOffCostsNothing: a kernel without [telemetry] has a nil
// *Telemetry, and a call's telemetry then allocates nothing.
func TestOffCostsNothing(t *testing.T) {
	var tel *Telemetry
	ctx := context.Background()
	mcp := []byte(`{"traceparent":"` + clientTrace + `"}`)
	n := testing.AllocsPerRun(100, func() {
		cctx, c := tel.StartCall(ctx, CallStart{Integration: "cc", Tool: "files.read", MCP: mcp})
		uctx, meta, u := tel.StartUpstreamCall(cctx, "memory", "read_graph")
		if uctx != ctx || meta != nil {
			t.Fatal("a nil Telemetry changed the context")
		}
		u.End("")
		c.End(CallEnd{Status: "succeeded"})
	})
	if n != 0 {
		t.Errorf("%v allocations a call with telemetry off, want 0", n)
	}
}

// blockingExporter is a collector that takes no spans at all until
// released.
type blockingExporter struct {
	release chan struct{}
	once    sync.Once
	got     int
	mu      sync.Mutex
}

func (b *blockingExporter) ExportSpans(ctx context.Context, s []sdktrace.ReadOnlySpan) error {
	select {
	case <-b.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	b.mu.Lock()
	b.got += len(s)
	b.mu.Unlock()
	return nil
}

func (b *blockingExporter) Shutdown(context.Context) error {
	b.once.Do(func() { close(b.release) })
	return nil
}

// TestAStuckCollectorNeverHoldsACall: with a collector that takes
// nothing, calls still end at once: spans wait in the SDK's bounded
// queue, and past it are dropped.
func TestAStuckCollectorNeverHoldsACall(t *testing.T) {
	b := &blockingExporter{release: make(chan struct{})}
	tel, err := New(context.Background(), Options{Log: zerolog.Nop()}, Providers{Spans: b})
	if err != nil {
		t.Fatal(err)
	}
	const calls = 20000 // ten times the SDK's queue
	for i := range calls {
		_, c := tel.StartCall(context.Background(), CallStart{Tool: "files.read", Seq: int64(i)})
		c.End(CallEnd{Status: "succeeded"})
	}
	b.Shutdown(context.Background())
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.got == 0 || b.got >= calls {
		t.Errorf("%d of %d spans exported once the collector took them; want some, and the rest dropped, not held", b.got, calls)
	}
}
