// Package telemetry is the reference kernel's OpenTelemetry export
// (docs/telemetry.md, docs/adr/0037): one SERVER span per tools.invoke in
// the MCP semantic conventions, a CLIENT span per brokered upstream call
// whose trace context goes to the upstream in params._meta, the call and
// upstream metrics, and (audit_logs) every audit line as a log record,
// from a durable cursor, in order, at least once.
//
// A kernel without [telemetry] has no *Telemetry: every method here is a
// no-op on a nil receiver, so the call path pays a nil check and nothing
// else. Export never blocks or fails a call: spans wait in the SDK's
// bounded batch queue (and are dropped when it is full), metrics are
// aggregated in place, and the audit stream reads the log file, which is
// its own queue. A collector that is down or slow costs bounded memory
// and a log line.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/sharedos/sharedos-mcp/kernel/audit"
	"github.com/sharedos/sharedos-mcp/kernel/config"
	"github.com/sharedos/sharedos-mcp/kernel/secret"
)

// scope is the instrumentation scope of everything the kernel exports.
const scope = "github.com/sharedos/sharedos-mcp/kernel"

// Options is what Start needs besides the [telemetry] table.
type Options struct {
	Config  config.Telemetry
	Version string // service.version
	// AuditLog is the audit log's path and StateDir the directory the
	// audit stream keeps its cursor in; both are needed for audit_logs.
	AuditLog string
	StateDir string
	Log      zerolog.Logger
	// Secrets fill in the {secret:NAME} references of the config's header
	// values, as an upstream's headers are filled in (secret.ExpandValues);
	// nil holds none, so a reference is an error. The exporters keep the
	// values they were made with: a secret read again on SIGHUP reaches
	// them when the kernel restarts, like any [telemetry] change.
	Secrets *secret.Set
}

// Providers are the SDK pieces New exports through: Start makes OTLP
// ones from the config; tests give in-memory ones. A nil piece exports
// nothing of its signal.
type Providers struct {
	// Spans is registered with a batch span processor, or, when
	// SyncSpans is set, exported as each span ends.
	Spans     sdktrace.SpanExporter
	SyncSpans bool
	Metrics   sdkmetric.Reader
	// AuditLogs receives the audit stream; nil when audit_logs is off.
	AuditLogs sdklog.Exporter
}

// Telemetry is a kernel's export. Its methods may be called on a nil
// *Telemetry (telemetry off): they do nothing and allocate nothing.
type Telemetry struct {
	tracer   trace.Tracer
	calls    metric.Int64Counter
	duration metric.Float64Histogram
	prop     propagation.TraceContext

	upstreams atomic.Pointer[func() []UpstreamState]
	approvals atomic.Pointer[func() int]

	audit    *auditStream
	shutdown []func(context.Context) error
}

// UpstreamState is one brokered upstream's state, as the
// sharedos.upstream.state gauge reports it.
type UpstreamState struct {
	Name, State string
}

// Enabled reports whether t exports anything; false for a nil t.
func (t *Telemetry) Enabled() bool { return t != nil }

// ObserveUpstreams sets what the sharedos.upstream.state gauge reads at
// each collection: f must not block. Until it is called the gauge
// reports no upstream.
func (t *Telemetry) ObserveUpstreams(f func() []UpstreamState) {
	if t != nil {
		t.upstreams.Store(&f)
	}
}

// ObserveApprovals sets what the sharedos.approvals.waiting gauge reads
// at each collection: how many approval requests wait for a person's
// decision. f runs on the metric reader's goroutine, never a call's; it
// must not wait for more than a short lock. Until it is called the gauge
// reports 0.
func (t *Telemetry) ObserveApprovals(f func() int) {
	if t != nil {
		t.approvals.Store(&f)
	}
}

// Start makes the exporters the [telemetry] table and the standard OTEL_*
// variables ask for and starts exporting through them. It returns nil,
// and no error, when they name no endpoint at all (or OTEL_SDK_DISABLED
// is true): nothing is exported, and the caller should say so.
func Start(ctx context.Context, o Options) (*Telemetry, error) {
	p, err := otlpProviders(ctx, o)
	if err != nil || p == nil {
		return nil, err
	}
	return New(ctx, o, *p)
}

// New starts exporting through p. The caller must call Shutdown.
func New(ctx context.Context, o Options, p Providers) (*Telemetry, error) {
	res, err := kernelResource(ctx, o)
	if err != nil {
		return nil, err
	}
	otel.SetErrorHandler(errorLog(o.Log))
	t := &Telemetry{}

	var tp trace.TracerProvider = noopTracerProvider
	if p.Spans != nil {
		sp := sdktrace.NewBatchSpanProcessor(p.Spans)
		if p.SyncSpans {
			sp = sdktrace.NewSimpleSpanProcessor(p.Spans)
		}
		stp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSpanProcessor(sp))
		t.shutdown = append(t.shutdown, stp.Shutdown)
		tp = stp
	}
	t.tracer = tp.Tracer(scope, trace.WithInstrumentationVersion(o.Version))

	var mp metric.MeterProvider = noopMeterProvider
	if p.Metrics != nil {
		smp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(p.Metrics),
			sdkmetric.WithCardinalityLimit(maxSeries))
		t.shutdown = append(t.shutdown, smp.Shutdown)
		mp = smp
	}
	if err := t.instruments(mp.Meter(scope, metric.WithInstrumentationVersion(o.Version))); err != nil {
		return nil, errors.Join(err, t.Shutdown(ctx))
	}

	if p.AuditLogs != nil {
		if o.AuditLog == "" || o.StateDir == "" {
			return nil, errors.Join(errors.New("telemetry: audit_logs needs the audit log's path and a state directory"), t.Shutdown(ctx))
		}
		path, err := filepath.Abs(o.AuditLog)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("telemetry: audit log: %w", err), t.Shutdown(ctx))
		}
		host, _ := os.Hostname()
		logRes, err := resource.Merge(res, resource.NewSchemaless(attribute.String(audit.AttrHost, host), attribute.String(audit.AttrLog, path)))
		if err != nil {
			return nil, errors.Join(err, t.Shutdown(ctx))
		}
		t.audit = newAuditStream(auditStreamOptions{
			path: path, cursor: filepath.Join(o.StateDir, CursorFile), exporter: p.AuditLogs,
			resource: logRes, version: o.Version, log: o.Log, poll: auditPoll,
		})
		go t.audit.run()
	}
	return t, nil
}

// maxSeries bounds the series each metric keeps (the SDK's cardinality
// limit): an integration name is whatever a hello said, so a client that
// says hello under ever new names costs the kernel this much at most.
const maxSeries = 2000

// Shutdown exports what is left, within ctx: the audit stream's last
// lines, then the spans and metrics still held. Calls must have ended.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	var errs []error
	if t.audit != nil {
		errs = append(errs, t.audit.stop(ctx))
	}
	for _, f := range t.shutdown {
		errs = append(errs, f(ctx))
	}
	return errors.Join(errs...)
}

// FlushAudit exports the audit lines written so far, now, and returns
// when they are delivered or the export failed (the lines are then sent
// again later). It does nothing without audit_logs.
func (t *Telemetry) FlushAudit(ctx context.Context) error {
	if t == nil || t.audit == nil {
		return nil
	}
	return t.audit.flush(ctx)
}

func kernelResource(ctx context.Context, o Options) (*resource.Resource, error) {
	name := o.Config.ServiceName
	if name == "" {
		name = os.Getenv("OTEL_SERVICE_NAME")
	}
	if name == "" {
		name = config.DefaultServiceName
	}
	version := o.Version
	if version == "" {
		version = "devel"
	}
	// Later detectors win: the config's name over OTEL_RESOURCE_ATTRIBUTES.
	return resource.New(ctx, resource.WithTelemetrySDK(), resource.WithHost(), resource.WithFromEnv(),
		resource.WithAttributes(attribute.String("service.name", name), attribute.String("service.version", version)))
}

// errorLog is the SDK's error handler: its export failures go to the
// kernel's log, the first of a run of failures at once and then at most
// one a minute with how many there were, so a collector that is down
// costs a log line, not a flood.
func errorLog(log zerolog.Logger) otel.ErrorHandler {
	var mu sync.Mutex
	var last time.Time
	var since int
	return otel.ErrorHandlerFunc(func(err error) {
		mu.Lock()
		defer mu.Unlock()
		since++
		if now := time.Now(); now.Sub(last) >= time.Minute {
			log.Warn().Err(err).Int("errors", since).Msg("telemetry export failed; calls go on, and what could not be sent is dropped (the audit stream is sent again)")
			last, since = now, 0
		}
	})
}
