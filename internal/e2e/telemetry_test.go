package e2e

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sharedos/sharedos-mcp/internal/testbin"
	"github.com/sharedos/sharedos-mcp/internal/testupstream"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
)

// otelBackends is the directory holding the two OpenTelemetry backends
// scripts/otel-backends.sh builds (jaeger, otelcol); the test skips,
// saying how to get them, when SHAREDOS_OTEL_BIN does not name one.
func otelBackends(t *testing.T) (jaeger, otelcol string) {
	t.Helper()
	dir := os.Getenv("SHAREDOS_OTEL_BIN")
	jaeger, otelcol = filepath.Join(dir, "jaeger"), filepath.Join(dir, "otelcol")
	for _, bin := range []string{jaeger, otelcol} {
		if _, err := os.Stat(bin); dir == "" || err != nil {
			t.Skip("skipped: no Jaeger and OpenTelemetry Collector to export to; `bash scripts/otel-backends.sh` builds them (minutes, once; .ci/run does) and prints the directory to put in SHAREDOS_OTEL_BIN")
		}
	}
	return jaeger, otelcol
}

// backend is an OpenTelemetry backend process the test started.
type backend struct {
	name string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
}

// startBackend runs bin with a config it writes to dir, and returns once
// it accepts connections on every port in ports.
func startBackend(t *testing.T, name, bin, dir, config string, ports ...int) *backend {
	t.Helper()
	file := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(file, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	b := &backend{name: name, out: &syncBuffer{}, done: make(chan struct{})}
	b.cmd = exec.Command(bin, "--config", file)
	b.cmd.Stdout, b.cmd.Stderr = b.out, b.out
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		b.cmd.Wait()
		close(b.done)
	}()
	t.Cleanup(b.stop)
	for _, p := range ports {
		if !pollUntil(60*time.Second, func() bool {
			c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err == nil {
				c.Close()
			}
			return err == nil
		}) {
			t.Fatalf("%s does not listen on %d within 60s:\n%s", name, p, b.out)
		}
	}
	return b
}

// stop ends the backend as an operator would, SIGTERM, and waits for it.
func (b *backend) stop() {
	select {
	case <-b.done:
		return
	default:
	}
	b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(30 * time.Second):
		b.cmd.Process.Kill()
		<-b.done
	}
}

func jaegerConfig(otlp, query, queryGRPC int) string {
	return fmt.Sprintf(`service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:%d
    grpc:
      endpoint: 127.0.0.1:%d
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:%d
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`, query, queryGRPC, otlp)
}

func collectorConfig(otlp, jaeger int, logs, metrics string) string {
	return fmt.Sprintf(`receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%d
exporters:
  otlp_grpc/jaeger:
    endpoint: 127.0.0.1:%d
    tls:
      insecure: true
  file/logs:
    path: %s
    append: true
    flush_interval: 100ms
  file/metrics:
    path: %s
    append: true
    flush_interval: 100ms
service:
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [otlp_grpc/jaeger]
    logs:
      receivers: [otlp]
      exporters: [file/logs]
    metrics:
      receivers: [otlp]
      exporters: [file/metrics]
`, otlp, jaeger, logs, metrics)
}

// jaegerSpan is a span as Jaeger's query API returns it.
type jaegerSpan struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
}

func (s jaegerSpan) tag(key string) string {
	for _, t := range s.Tags {
		if t.Key == key {
			return fmt.Sprint(t.Value)
		}
	}
	return ""
}

func (s jaegerSpan) parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// jaegerSpans asks Jaeger's query API for the spans of service.
func jaegerSpans(t *testing.T, query int, service string) []jaegerSpan {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/api/traces?service=%s&limit=1000&lookback=1h", query, service))
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var r struct {
		Data []struct {
			Spans []jaegerSpan `json:"spans"`
		} `json:"data"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&r) != nil {
		return nil
	}
	var out []jaegerSpan
	for _, tr := range r.Data {
		out = append(out, tr.Spans...)
	}
	return out
}

// exportedHashes counts the audit lines in a collector's file export, by
// hash, and lists them in the order they arrived.
func exportedHashes(t *testing.T, file string) (map[string]int, []string) {
	t.Helper()
	count := map[string]int{}
	var order []string
	f, err := os.Open(file)
	if err != nil {
		return count, nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var req struct {
			ResourceLogs []struct {
				ScopeLogs []struct {
					LogRecords []struct {
						Attributes []struct {
							Key   string `json:"key"`
							Value struct {
								StringValue string `json:"stringValue"`
							} `json:"value"`
						} `json:"attributes"`
					} `json:"logRecords"`
				} `json:"scopeLogs"`
			} `json:"resourceLogs"`
		}
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			continue // a line the exporter is still writing
		}
		for _, rl := range req.ResourceLogs {
			for _, sl := range rl.ScopeLogs {
				for _, lr := range sl.LogRecords {
					for _, a := range lr.Attributes {
						if a.Key == audit.AttrHash {
							count[a.Value.StringValue]++
							order = append(order, a.Value.StringValue)
						}
					}
				}
			}
		}
	}
	return count, order
}

// auditHashes are the hashes of the audit log's lines, in order.
func auditHashes(t *testing.T, file string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range lines(string(data)) {
		sum := sha256.Sum256([]byte(l))
		out = append(out, hex.EncodeToString(sum[:]))
	}
	return out
}

const clientTraceID, clientSpanID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"

// TestTelemetryReachesRealBackends runs the built kernel with [telemetry]
// against a real OpenTelemetry Collector (its OTLP receiver, its file
// exporter for log records and metrics, its OTLP exporter on to Jaeger)
// and a real Jaeger, all on loopback. It finds the session's spans through
// Jaeger's own query API (an allowed call under the client's traceparent,
// a denied one, a brokered one with its upstream call as a child) and
// every audit line among the collector's log records, once each, in
// order, with an unbroken chain; and it stops the collector mid-session
// and restarts the kernel, and nothing is lost or duplicated.
func TestTelemetryReachesRealBackends(t *testing.T) {
	jaegerBin, otelcolBin := otelBackends(t)
	dir := t.TempDir()
	jOTLP, jQuery, jGRPC, cOTLP := freePort(t), freePort(t), freePort(t), freePort(t)
	startBackend(t, "jaeger", jaegerBin, dir, jaegerConfig(jOTLP, jQuery, jGRPC), jOTLP, jQuery)
	logsFile, metricsFile := filepath.Join(dir, "audit-export.jsonl"), filepath.Join(dir, "metrics.jsonl")
	collector := collectorConfig(cOTLP, jOTLP, logsFile, metricsFile)
	col := startBackend(t, "otelcol", otelcolBin, dir, collector, cOTLP)

	// Exports at once rather than on the SDK's default timers.
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	t.Setenv("OTEL_METRIC_EXPORT_INTERVAL", "500")
	root := filepath.Join(dir, "root")
	for _, d := range []string{"public", "private"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, d, "a.txt"), []byte(d), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	quoted := func(argv []string) string {
		q := make([]string, len(argv))
		for i, a := range argv {
			q[i] = strconv.Quote(a)
		}
		return strings.Join(q, ", ")
	}
	state, auditLog := filepath.Join(dir, "state"), filepath.Join(dir, "audit.jsonl")
	config := filepath.Join(dir, "kernel.toml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`state_dir = %q
[files]
root = %q

[telemetry]
otlp_endpoint = "http://127.0.0.1:%d"
service_name = "sharedos-e2e"
audit_logs = true

[[upstream]]
name = "test"
command = [%s]
env = { GORACE = "atexit_sleep_ms=0" }

[[upstream.tool]]
name = "echo"
action = "read"
resource = "/echo"

[[grant]]
subject = "integration:claude-code"
resource = "files:/public"
descendants = true
actions = ["read"]

[[grant]]
subject = "integration:claude-code"
resource = "test:/echo"
actions = ["read"]
`, state, root, cOTLP, quoted(testupstream.Command(exe)))), 0o600); err != nil {
		t.Fatal(err)
	}
	sockDir, err := os.MkdirTemp("", "tk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "k.sock")
	startKernel := func() *brokerKernel {
		k := &brokerKernel{refKernel: runKernelProcess(t, sock, auditLog, "--config", config), state: state}
		k.waitReady(t, "test")
		return k
	}
	session := func(k *brokerKernel, lines ...string) map[string]map[string]any {
		return mcpSession(t, &kernelProcess{sock: k.sock}, "claude-code", append([]string{mcpInit}, lines...)...)
	}
	stopKernel := func(k *brokerKernel) {
		k.cmd.Process.Signal(syscall.SIGTERM)
		if err := k.wait(); err != nil {
			t.Fatalf("kernel: %v\n%s", err, k.stderr)
		}
	}

	k := startKernel()
	traceparent := "00-" + clientTraceID + "-" + clientSpanID + "-01"
	answers := session(k,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"files.read","arguments":{"path":"/public/a.txt"},"_meta":{"traceparent":"`+traceparent+`"}}}`,
		mcpCall(2, "files.read", map[string]string{"path": "/private/a.txt"}),
		mcpCall(3, "test.echo", map[string]string{"text": "hi"}),
	)
	if dig(answers["1"], "result", "isError") != nil || dig(answers["2"], "result", "_meta", "sharedos/code") != "no_matching_grant" || dig(answers["3"], "result", "isError") != nil {
		t.Fatalf("answers: %v", answers)
	}

	// The spans, from Jaeger's own query API.
	var spans []jaegerSpan
	find := func(op, key, value string) (jaegerSpan, bool) {
		for _, s := range spans {
			if s.OperationName == op && s.tag(key) == value {
				return s, true
			}
		}
		return jaegerSpan{}, false
	}
	if !pollUntil(60*time.Second, func() bool {
		spans = jaegerSpans(t, jQuery, "sharedos-e2e")
		_, ok1 := find("tools/call files.read", "sharedos.code", "no_matching_grant")
		_, ok2 := find("tools/call echo", "span.kind", "client")
		_, ok3 := find("tools/call files.read", "sharedos.status", "succeeded")
		return ok1 && ok2 && ok3
	}) {
		var seen []string
		for _, s := range spans {
			seen = append(seen, s.OperationName+" "+s.tag("span.kind")+" "+s.tag("sharedos.status")+" "+s.tag("sharedos.code"))
		}
		t.Fatalf("Jaeger has %d spans of sharedos-e2e, not the session's:\n%s\nkernel:\n%s\ncollector:\n%s", len(spans), strings.Join(seen, "\n"), k.stderr, col.out)
	}
	allowed := false
	for _, s := range spans {
		if s.OperationName == "tools/call files.read" && s.TraceID == clientTraceID {
			allowed = s.parent() == clientSpanID && s.tag("sharedos.status") == "succeeded" && s.tag("span.kind") == "server" &&
				s.tag("sharedos.grant") == "1" && s.tag("sharedos.resource") == "files:/public/a.txt" && s.tag("mcp.method.name") == "tools/call" &&
				s.tag("jsonrpc.request.id") == "1" && s.tag("mcp.protocol.version") == "2025-06-18"
		}
	}
	if !allowed {
		t.Errorf("no span of the allowed read in the client's trace %s under its span %s, with the kernel's decision", clientTraceID, clientSpanID)
	}
	denied, _ := find("tools/call files.read", "sharedos.code", "no_matching_grant")
	if denied.tag("error.type") != "tool_error" || denied.tag("sharedos.status") != "denied" || denied.TraceID == clientTraceID {
		t.Errorf("the denied read: %+v", denied)
	}
	client, _ := find("tools/call echo", "span.kind", "client")
	server, ok := find("tools/call test.echo", "span.kind", "server")
	if !ok || client.TraceID != server.TraceID || client.parent() != server.SpanID || client.tag("sharedos.upstream") != "test" {
		t.Errorf("the brokered call: server %+v, upstream call %+v; want the upstream call a child of the call", server, client)
	}
	// The collector goes away mid-session: calls go on, and the audit
	// lines of that time reach it once it is back.
	col.stop()
	answers = session(k, mcpCall(4, "files.read", map[string]string{"path": "/public/a.txt"}), mcpCall(5, "files.read", map[string]string{"path": "/private/a.txt"}))
	if dig(answers["4"], "result", "isError") != nil || dig(answers["5"], "result", "_meta", "sharedos/code") != "no_matching_grant" {
		t.Fatalf("answers while the collector was down: %v", answers)
	}
	startBackend(t, "otelcol", otelcolBin, dir, collector, cOTLP)
	want := auditHashes(t, auditLog)
	if !pollUntil(90*time.Second, func() bool {
		got, _ := exportedHashes(t, logsFile)
		for _, h := range want {
			if got[h] == 0 {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("the audit lines written while the collector was down did not reach it within 90s\nkernel:\n%s", k.stderr)
	}

	// A restarted kernel sends nothing it had delivered.
	stopKernel(k)
	k = startKernel()
	session(k, mcpCall(6, "files.read", map[string]string{"path": "/public/a.txt"}))
	stopKernel(k)

	want = auditHashes(t, auditLog)
	var order []string
	var got map[string]int
	if !pollUntil(30*time.Second, func() bool {
		got, order = exportedHashes(t, logsFile)
		return len(order) >= len(want)
	}) {
		t.Fatalf("%d of the %d audit lines exported", len(order), len(want))
	}
	for i, h := range want {
		if got[h] != 1 {
			t.Errorf("audit line %d exported %d times, want once", i+1, got[h])
		}
	}
	if strings.Join(order, "\n") != strings.Join(want, "\n") {
		t.Errorf("the collector got the audit lines in another order, or others:\n%s\nwant\n%s", strings.Join(order, "\n"), strings.Join(want, "\n"))
	}
	out, err := exec.Command(testbin.Path(t), "audit", "verify", "--file", auditLog, "--against", logsFile).CombinedOutput()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("ok against %s: %d of %d line(s) exported", logsFile, len(want), len(want))) {
		t.Errorf("audit verify --against the collector's copy: %v\n%s", err, out)
	}

	if b, err := os.ReadFile(metricsFile); err != nil || !strings.Contains(string(b), `"sharedos.kernel.calls"`) || !strings.Contains(string(b), `"mcp.server.operation.duration"`) {
		t.Errorf("the collector has no call metrics: %v", err)
	}
}
