package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/sharedos/sharedos-mcp/kernel/config"
	"github.com/sharedos/sharedos-mcp/kernel/secret"
)

// ErrNoEndpoint: [telemetry] is there but neither it nor the environment
// names an endpoint, so nothing is exported.
var ErrNoEndpoint = errors.New("no OTLP endpoint: [telemetry] has no otlp_endpoint and no OTEL_EXPORTER_OTLP_ENDPOINT is set")

// signal is one kind of OTLP export: its name in the OTEL_EXPORTER_OTLP_*
// variables and the path of its HTTP endpoint.
type signal struct{ env, path string }

var (
	traces  = signal{"TRACES", "/v1/traces"}
	metrics = signal{"METRICS", "/v1/metrics"}
	logs    = signal{"LOGS", "/v1/logs"}
)

// target is where one signal goes: url, an endpoint the config named (for
// http/protobuf with the signal's path), or "" to let the exporter read
// the OTEL_EXPORTER_OTLP_* variables, which name one.
type target struct {
	url, protocol string
}

// targetOf says where s goes, and false when nowhere.
func targetOf(c config.Telemetry, s signal) (target, bool, error) {
	proto := c.Protocol
	for _, v := range []string{"OTEL_EXPORTER_OTLP_" + s.env + "_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if proto == "" {
			proto = os.Getenv(v)
		}
	}
	if proto == "" {
		proto = config.ProtocolHTTP
	}
	if proto != config.ProtocolHTTP && proto != config.ProtocolGRPC {
		return target{}, false, fmt.Errorf("OTLP protocol %q: the kernel exports %q or %q", proto, config.ProtocolHTTP, config.ProtocolGRPC)
	}
	t := target{protocol: proto}
	switch {
	case c.Endpoint != "":
		t.url = strings.TrimSuffix(c.Endpoint, "/")
		if proto == config.ProtocolHTTP {
			t.url += s.path
		}
	case os.Getenv("OTEL_EXPORTER_OTLP_"+s.env+"_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "":
		return t, false, nil
	}
	return t, true, nil
}

// otlpProviders makes the OTLP exporters of every signal with a target;
// nil when there is none.
func otlpProviders(ctx context.Context, o Options) (*Providers, error) {
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return nil, nil
	}
	secrets := o.Secrets
	if secrets == nil {
		secrets = &secret.Set{}
	}
	headers, err := secrets.ExpandValues(o.Config.Headers)
	if err != nil {
		// The error names the header and the secret, never a value.
		return nil, fmt.Errorf("[telemetry] headers: %w", err)
	}
	var p Providers
	found := false
	t, ok, err := targetOf(o.Config, traces)
	if err != nil {
		return nil, err
	}
	if ok {
		found = true
		if t.protocol == config.ProtocolGRPC {
			p.Spans, err = otlptracegrpc.New(ctx, options(t, headers, otlptracegrpc.WithHeaders, otlptracegrpc.WithEndpointURL)...)
		} else {
			p.Spans, err = otlptracehttp.New(ctx, options(t, headers, otlptracehttp.WithHeaders, otlptracehttp.WithEndpointURL)...)
		}
		if err != nil {
			return nil, fmt.Errorf("telemetry: trace exporter: %w", err)
		}
	}
	if t, ok, err = targetOf(o.Config, metrics); err != nil {
		return nil, err
	}
	if ok {
		found = true
		var exp sdkmetric.Exporter
		if t.protocol == config.ProtocolGRPC {
			exp, err = otlpmetricgrpc.New(ctx, options(t, headers, otlpmetricgrpc.WithHeaders, otlpmetricgrpc.WithEndpointURL)...)
		} else {
			exp, err = otlpmetrichttp.New(ctx, options(t, headers, otlpmetrichttp.WithHeaders, otlpmetrichttp.WithEndpointURL)...)
		}
		if err != nil {
			return nil, fmt.Errorf("telemetry: metric exporter: %w", err)
		}
		p.Metrics = sdkmetric.NewPeriodicReader(exp)
	}
	if o.Config.AuditLogs {
		if t, ok, err = targetOf(o.Config, logs); err != nil {
			return nil, err
		}
		if ok {
			found = true
			// The audit stream retries on its own, from its cursor: an
			// exporter that retried too would hold a batch it has given up
			// on.
			if t.protocol == config.ProtocolGRPC {
				p.AuditLogs, err = otlploggrpc.New(ctx, options(t, headers, otlploggrpc.WithHeaders, otlploggrpc.WithEndpointURL,
					otlploggrpc.WithRetry(otlploggrpc.RetryConfig{Enabled: false}))...)
			} else {
				p.AuditLogs, err = otlploghttp.New(ctx, options(t, headers, otlploghttp.WithHeaders, otlploghttp.WithEndpointURL,
					otlploghttp.WithRetry(otlploghttp.RetryConfig{Enabled: false}))...)
			}
			if err != nil {
				return nil, fmt.Errorf("telemetry: log exporter: %w", err)
			}
		}
	}
	if !found {
		return nil, ErrNoEndpoint
	}
	return &p, nil
}

// options are an exporter's options for t: extra, the headers the config
// names (none: the exporter reads OTEL_EXPORTER_OTLP_HEADERS, which an
// empty WithHeaders would hide) and t's URL (none: the exporter reads its
// OTEL_EXPORTER_OTLP_*ENDPOINT). Each exporter package has option
// functions of its own types; these are them.
func options[O any](t target, headers map[string]string, withHeaders func(map[string]string) O, withURL func(string) O, extra ...O) []O {
	opts := extra
	if len(headers) > 0 {
		opts = append(opts, withHeaders(headers))
	}
	if t.url != "" {
		opts = append(opts, withURL(t.url))
	}
	return opts
}
