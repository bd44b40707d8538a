package telemetry

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/sharedos/sharedos-mcp/kernel/config"
	"github.com/sharedos/sharedos-mcp/kernel/secret"
)

// headersSeen is a collector on loopback that keeps each request's path
// and the headers named.
type headersSeen struct {
	mu  sync.Mutex
	got map[string]http.Header
}

func newCollector(t *testing.T) (*httptest.Server, *headersSeen) {
	t.Helper()
	seen := &headersSeen{got: map[string]http.Header{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.mu.Lock()
		seen.got[r.URL.Path] = r.Header.Clone()
		seen.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(srv.Close)
	return srv, seen
}

func (h *headersSeen) header(path, name string) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	hd, ok := h.got[path]
	return hd.Get(name), ok
}

// exportOneSpan starts telemetry on c and the environment, ends one call
// and shuts down, which exports it.
func exportOneSpan(t *testing.T, c config.Telemetry, secrets *secret.Set) error {
	t.Helper()
	tel, err := Start(context.Background(), Options{Config: c, Log: zerolog.Nop(), Secrets: secrets})
	if err != nil {
		return err
	}
	_, call := tel.StartCall(context.Background(), CallStart{Tool: "files.read"})
	call.End(CallEnd{Status: "succeeded"})
	return tel.Shutdown(context.Background())
}

func TestExportGoesWhereTheConfigOrTheEnvironmentSays(t *testing.T) {
	srv, seen := newCollector(t)
	secrets := loadSecrets(t, map[string]string{"otlp": "s3cret-0123"})
	if err := exportOneSpan(t, config.Telemetry{Endpoint: srv.URL, Headers: map[string]string{"authorization": "Bearer {secret:otlp}"}}, secrets); err != nil {
		t.Fatal(err)
	}
	if v, ok := seen.header("/v1/traces", "Authorization"); !ok || v != "Bearer s3cret-0123" {
		t.Errorf("traces at /v1/traces with authorization %q (%v); want the expanded header", v, ok)
	}
	if _, ok := seen.header("/v1/metrics", "Content-Type"); !ok {
		t.Error("no metrics at /v1/metrics")
	}

	// No endpoint in the table: the standard variables, headers too.
	env, envSeen := newCollector(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", env.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-team=platform")
	if err := exportOneSpan(t, config.Telemetry{}, nil); err != nil {
		t.Fatal(err)
	}
	if v, ok := envSeen.header("/v1/traces", "X-Team"); !ok || v != "platform" {
		t.Errorf("with OTEL_EXPORTER_OTLP_ENDPOINT: traces %v, x-team %q", ok, v)
	}
}

func TestWhenNothingIsExported(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	if err := exportOneSpan(t, config.Telemetry{}, nil); !errors.Is(err, ErrNoEndpoint) {
		t.Errorf("no endpoint anywhere: %v, want ErrNoEndpoint", err)
	}
	t.Setenv("OTEL_SDK_DISABLED", "true")
	if tel, err := Start(context.Background(), Options{Config: config.Telemetry{Endpoint: "http://127.0.0.1:1"}}); tel != nil || err != nil {
		t.Errorf("OTEL_SDK_DISABLED: %v, %v; want nothing and no error", tel, err)
	}
	t.Setenv("OTEL_SDK_DISABLED", "")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	if err := exportOneSpan(t, config.Telemetry{Endpoint: "http://127.0.0.1:1"}, nil); err == nil || !strings.Contains(err.Error(), `"http/json"`) {
		t.Errorf("an OTLP protocol the kernel does not speak: %v", err)
	}
}

func TestAHeaderThatCannotBeExpandedIsNamedNotShown(t *testing.T) {
	// The header also names a secret that is there: its value must not
	// be in the error about the one that is not.
	secrets := loadSecrets(t, map[string]string{"present": "hunter2-0123"})
	headers := map[string]string{"authorization": "Bearer {secret:present} {secret:otlp}"}
	for _, tt := range []struct {
		set     *secret.Set
		missing string
	}{{secrets, "otlp"}, {nil, "present"}} {
		err := exportOneSpan(t, config.Telemetry{Endpoint: "http://127.0.0.1:1", Headers: headers}, tt.set)
		if !errors.Is(err, secret.ErrUnknownSecret) || !strings.Contains(err.Error(), "[telemetry] headers: authorization: {secret:"+tt.missing+"}") || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error %v: want it to name the header and {secret:%s}, and show no value", err, tt.missing)
		}
	}
}

// loadSecrets is a secret set of env secrets with these names and values,
// loaded as the kernel loads its own.
func loadSecrets(t *testing.T, values map[string]string) *secret.Set {
	t.Helper()
	var specs []secret.Spec
	for name := range values {
		specs = append(specs, secret.Spec{Name: name, Kind: secret.KindEnv, Env: name})
	}
	set, err := secret.Load(context.Background(), specs, secret.Options{LookupEnv: func(k string) (string, bool) {
		v, ok := values[k]
		return v, ok
	}})
	if err != nil {
		t.Fatal(err)
	}
	return set
}
