package telemetry

import (
	"context"
	"encoding/json"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/sharedos/sharedos-mcp/internal/kproto"
)

var (
	noopTracerProvider = tracenoop.NewTracerProvider()
	noopMeterProvider  = metricnoop.NewMeterProvider()
)

// Attribute names. The first are the OpenTelemetry MCP semantic
// conventions' (docs/telemetry.md names the version); sharedos.* are the
// kernel's own.
const (
	AttrMCPMethod        = "mcp.method.name"
	AttrToolName         = "gen_ai.tool.name"
	AttrOperationName    = "gen_ai.operation.name"
	AttrRequestID        = "jsonrpc.request.id"
	AttrProtocolVersion  = "mcp.protocol.version"
	AttrErrorType        = "error.type"
	AttrIntegration      = "sharedos.integration"
	AttrResource         = "sharedos.resource"
	AttrAction           = "sharedos.action"
	AttrStatus           = "sharedos.status"
	AttrCode             = "sharedos.code"
	AttrGrant            = "sharedos.grant"
	AttrSeq              = "sharedos.seq"
	AttrExecutionID      = "sharedos.execution_id"
	AttrUpstream         = "sharedos.upstream"
	AttrUpstreamState    = "sharedos.upstream.state"
	methodToolsCall      = "tools/call"
	operationExecuteTool = "execute_tool"
	// errorToolError is error.type for a call answered isError: denied
	// or failed.
	errorToolError = "tool_error"
	// otherTool stands for a tool name outside the turn's catalogue in the
	// metrics, which must not take a label from whatever a client sent.
	otherTool = "_OTHER"
)

// Metric names.
const (
	MetricCalls         = "sharedos.kernel.calls"
	MetricDuration      = "mcp.server.operation.duration"
	MetricUpstreamState = "sharedos.upstream.state"
	MetricApprovals     = "sharedos.approvals.waiting"
)

// durationBuckets are mcp.server.operation.duration's, in seconds: the
// semantic conventions' advice, below 10 ms made finer, where a kernel's
// own calls fall.
var durationBuckets = []float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}

func (t *Telemetry) instruments(m metric.Meter) error {
	var err error
	if t.calls, err = m.Int64Counter(MetricCalls, metric.WithUnit("{call}"),
		metric.WithDescription("Tool calls the kernel answered, by integration, tool, status and code.")); err != nil {
		return err
	}
	if t.duration, err = m.Float64Histogram(MetricDuration, metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(durationBuckets...),
		metric.WithDescription("How long the kernel took to answer a tools/call, from its arrival to its answer.")); err != nil {
		return err
	}
	upstreams, err := m.Int64ObservableGauge(MetricUpstreamState, metric.WithUnit("{upstream}"),
		metric.WithDescription("1 for each brokered upstream, in its current state."))
	if err != nil {
		return err
	}
	approvals, err := m.Int64ObservableGauge(MetricApprovals, metric.WithUnit("{call}"),
		metric.WithDescription("Approval requests waiting for a person's decision."))
	if err != nil {
		return err
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		if f := t.upstreams.Load(); f != nil {
			for _, u := range (*f)() {
				o.ObserveInt64(upstreams, 1, metric.WithAttributes(attribute.String(AttrUpstream, u.Name), attribute.String(AttrUpstreamState, u.State)))
			}
		}
		n := 0
		if f := t.approvals.Load(); f != nil {
			n = (*f)()
		}
		o.ObserveInt64(approvals, int64(n))
		return nil
	}, upstreams, approvals)
	return err
}

// CallStart is what a call's span starts with.
type CallStart struct {
	Integration, ExecutionID string
	Tool                     string // as the call named it, bounded
	Published                bool   // Tool is in the turn's catalogue
	Seq                      int64
	// MCP is tools.invoke's mcp member as it came (kproto.InvokeMCP): the
	// MCP request's id and protocol version, and the client's trace
	// context, the span's parent when it is valid. nil when absent.
	MCP []byte
}

// CallEnd is how a call ended: its answer and what the kernel decided.
type CallEnd struct {
	Status, Code     string
	Resource, Action string
	Upstream         string // a brokered call's
	Grant            int    // 1-based position of the deciding grant in the config; 0: none
}

// Call is one tools.invoke being answered: its SERVER span and when it
// began. A nil *Call does nothing.
type Call struct {
	t           *Telemetry
	span        trace.Span
	start       time.Time
	tool        string // the metrics' tool label
	integration string
}

// StartCall starts a call's SERVER span, as a child of the client's trace
// when the call carries a valid traceparent, and returns the context the
// call runs in. On a nil t it returns ctx and nil, and allocates nothing.
func (t *Telemetry) StartCall(ctx context.Context, s CallStart) (context.Context, *Call) {
	if t == nil {
		return ctx, nil
	}
	var m kproto.InvokeMCP
	if len(s.MCP) > 0 {
		_ = json.Unmarshal(s.MCP, &m) // a member that does not decode is as good as none
	}
	if m.TraceParent != "" {
		carrier := propagation.MapCarrier{"traceparent": m.TraceParent}
		if m.TraceState != "" {
			carrier["tracestate"] = m.TraceState
		}
		ctx = t.prop.Extract(ctx, carrier)
	}
	name := methodToolsCall
	label := otherTool
	if s.Published {
		name += " " + s.Tool
		label = s.Tool
	}
	attrs := []attribute.KeyValue{
		attribute.String(AttrMCPMethod, methodToolsCall),
		attribute.String(AttrToolName, s.Tool),
		attribute.String(AttrOperationName, operationExecuteTool),
		attribute.String(AttrIntegration, s.Integration),
		attribute.Int64(AttrSeq, s.Seq),
		attribute.String(AttrExecutionID, s.ExecutionID),
	}
	if id := requestID(m.RequestID); id != "" {
		attrs = append(attrs, attribute.String(AttrRequestID, id))
	}
	if m.ProtocolVersion != "" {
		attrs = append(attrs, attribute.String(AttrProtocolVersion, m.ProtocolVersion))
	}
	ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	return ctx, &Call{t: t, span: span, start: time.Now(), tool: label, integration: s.Integration}
}

// requestID is jsonrpc.request.id: the string form of a JSON-RPC id, a
// string's value or a number's text; "" for null or none.
func requestID(raw json.RawMessage) string {
	var s string
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return ""
	case json.Unmarshal(raw, &s) == nil:
		return s
	}
	return string(raw)
}

// End ends the span with what the call ended as, and records the call in
// the metrics.
func (c *Call) End(e CallEnd) {
	if c == nil {
		return
	}
	attrs := []attribute.KeyValue{attribute.String(AttrStatus, e.Status)}
	if e.Code != "" {
		attrs = append(attrs, attribute.String(AttrCode, e.Code))
	}
	if e.Resource != "" {
		attrs = append(attrs, attribute.String(AttrResource, e.Resource))
	}
	if e.Action != "" {
		attrs = append(attrs, attribute.String(AttrAction, e.Action))
	}
	if e.Grant > 0 {
		attrs = append(attrs, attribute.Int(AttrGrant, e.Grant))
	}
	if e.Upstream != "" {
		attrs = append(attrs, attribute.String(AttrUpstream, e.Upstream))
	}
	failed := e.Status != "succeeded"
	if failed {
		attrs = append(attrs, attribute.String(AttrErrorType, errorToolError))
		c.span.SetStatus(codes.Error, e.Code)
	}
	c.span.SetAttributes(attrs...)
	c.span.End()

	ctx := context.Background()
	c.t.calls.Add(ctx, 1, metric.WithAttributes(
		attribute.String(AttrIntegration, c.integration), attribute.String(AttrToolName, c.tool),
		attribute.String(AttrStatus, e.Status), attribute.String(AttrCode, e.Code)))
	d := []attribute.KeyValue{
		attribute.String(AttrMCPMethod, methodToolsCall), attribute.String(AttrToolName, c.tool),
		attribute.String(AttrOperationName, operationExecuteTool), attribute.String(AttrIntegration, c.integration),
		attribute.String(AttrStatus, e.Status),
	}
	if failed {
		d = append(d, attribute.String(AttrErrorType, errorToolError))
	}
	c.t.duration.Record(ctx, time.Since(c.start).Seconds(), metric.WithAttributes(d...))
}

// UpstreamCall is a brokered call's call to its upstream: a CLIENT span.
// A nil *UpstreamCall does nothing.
type UpstreamCall struct {
	span trace.Span
}

// StartUpstreamCall starts the CLIENT span of a call to upstream's tool,
// a child of the call's span in ctx, and returns the context to call in
// and the trace context to send the upstream in params._meta
// (traceparent, tracestate). On a nil t it returns ctx, nil, nil.
func (t *Telemetry) StartUpstreamCall(ctx context.Context, upstream, tool string) (context.Context, map[string]any, *UpstreamCall) {
	if t == nil {
		return ctx, nil, nil
	}
	ctx, span := t.tracer.Start(ctx, methodToolsCall+" "+tool, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String(AttrMCPMethod, methodToolsCall),
		attribute.String(AttrToolName, tool),
		attribute.String(AttrOperationName, operationExecuteTool),
		attribute.String(AttrUpstream, upstream),
	))
	carrier := propagation.MapCarrier{}
	t.prop.Inject(ctx, carrier)
	meta := make(map[string]any, len(carrier))
	for k, v := range carrier {
		meta[k] = v
	}
	return ctx, meta, &UpstreamCall{span: span}
}

// End ends the span; code is the call's failure code, "" when the
// upstream answered a result.
func (u *UpstreamCall) End(code string) {
	if u == nil {
		return
	}
	if code != "" {
		// upstream_error is the upstream's isError (or JSON-RPC error);
		// the others are the kernel's view of the exchange.
		typ := code
		if code == "upstream_error" {
			typ = errorToolError
		}
		u.span.SetAttributes(attribute.String(AttrErrorType, typ), attribute.String(AttrCode, code))
		u.span.SetStatus(codes.Error, code)
	}
	u.span.End()
}
