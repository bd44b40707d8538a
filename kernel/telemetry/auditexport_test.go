package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/sharedos/sharedos-mcp/kernel/audit"
	"github.com/sharedos/sharedos-mcp/kernel/config"
)

// collector is an in-memory log exporter that can be down.
type collector struct {
	mu      sync.Mutex
	down    bool
	records []sdklog.Record
	batches int
}

func (c *collector) Export(_ context.Context, rs []sdklog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		return errors.New("connection refused")
	}
	c.batches++
	for _, r := range rs {
		c.records = append(c.records, r.Clone())
	}
	return nil
}
func (c *collector) Shutdown(context.Context) error   { return nil }
func (c *collector) ForceFlush(context.Context) error { return nil }

func (c *collector) setDown(down bool) {
	c.mu.Lock()
	c.down = down
	c.mu.Unlock()
}

// bodies are the bodies of the records received, in order.
func (c *collector) bodies() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, r := range c.records {
		out = append(out, r.Body().AsString())
	}
	return out
}

// auditKernel is an audit log with the audit stream of a kernel on it.
type auditKernel struct {
	t        *testing.T
	path     string
	stateDir string
	log      *audit.Log
	n        int
}

func newAuditKernel(t *testing.T) *auditKernel {
	dir := t.TempDir()
	k := &auditKernel{t: t, path: filepath.Join(dir, "audit.jsonl"), stateDir: filepath.Join(dir, "state")}
	if err := os.MkdirAll(k.stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	var err error
	if k.log, err = audit.Open(k.path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.log.Close() })
	return k
}

// write appends n events.
func (k *auditKernel) write(n int) {
	k.t.Helper()
	for range n {
		k.n++
		d := int64(k.n)
		err := k.log.Write(audit.Event{Time: audit.Stamp(time.Now()), Event: audit.EventToolInvoked, ExecutionID: "exe_1", Integration: "cc",
			CallID: "c" + strconv.Itoa(k.n), Seq: int64(k.n), Tool: "files.read", Status: "succeeded", DurationUs: &d, Changed: []string{"a", "b"}})
		if err != nil {
			k.t.Fatal(err)
		}
	}
}

// start starts a kernel's telemetry with only the audit stream, to exp.
func (k *auditKernel) start(exp sdklog.Exporter) *Telemetry {
	k.t.Helper()
	tel, err := New(context.Background(), Options{Version: "test", AuditLog: k.path, StateDir: k.stateDir, Log: zerolog.Nop()}, Providers{AuditLogs: exp})
	if err != nil {
		k.t.Fatal(err)
	}
	return tel
}

func (k *auditKernel) lines() []string {
	k.t.Helper()
	data, err := os.ReadFile(k.path)
	if err != nil {
		k.t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

func flush(t *testing.T, tel *Telemetry) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return tel.FlushAudit(ctx)
}

// TestTheAuditStreamIsDeliveredInOrderOnceAcrossOutagesAndRestarts: every
// line, in order, as a record whose body is the line; a collector that
// was down gets what it missed when it is back; a restarted kernel sends
// nothing it had delivered.
func TestTheAuditStreamIsDeliveredInOrderOnceAcrossOutagesAndRestarts(t *testing.T) {
	k := newAuditKernel(t)
	col := &collector{}
	k.write(3)
	tel := k.start(col)
	if err := flush(t, tel); err != nil {
		t.Fatal(err)
	}
	col.setDown(true)
	k.write(700) // more than one batch
	if err := flush(t, tel); err == nil {
		t.Fatal("a flush to a collector that is down succeeded")
	}
	col.setDown(false)
	if err := flush(t, tel); err != nil {
		t.Fatal(err)
	}
	k.write(2)
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A restart: the cursor says what was delivered.
	k.write(4)
	tel = k.start(col)
	if err := flush(t, tel); err != nil {
		t.Fatal(err)
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, want := col.bodies(), k.lines(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the collector got %d records; want the %d lines, each once, in order", len(got), len(want))
	}
	if col.batches < 3 {
		t.Errorf("%d batches; 709 lines are more than one", col.batches)
	}
}

// TestAnAuditRecordCarriesTheLine: body the line byte for byte, event
// name and time from it, its fields as attributes, its hash, and the
// audit log named on the resource.
func TestAnAuditRecordCarriesTheLine(t *testing.T) {
	k := newAuditKernel(t)
	k.write(2)
	col := &collector{}
	tel := k.start(col)
	defer tel.Shutdown(context.Background())
	if err := flush(t, tel); err != nil {
		t.Fatal(err)
	}
	lines := k.lines()
	r := col.records[1]
	if r.Body().AsString() != lines[1] || r.EventName() != audit.EventToolInvoked || r.Timestamp().IsZero() {
		t.Errorf("body %q, event %q, time %v", r.Body().AsString(), r.EventName(), r.Timestamp())
	}
	var e audit.Event
	if err := json.Unmarshal([]byte(lines[1]), &e); err != nil {
		t.Fatal(err)
	}
	got := map[string]attribute.Value{}
	r.WalkAttributes(func(kv attribute.KeyValue) bool {
		got[string(kv.Key)] = kv.Value
		return true
	})
	if got[audit.AttrHash].AsString() != audit.LineHash([]byte(lines[1])) || got["prev"].AsString() != e.Prev || got["prev"].AsString() != audit.LineHash([]byte(lines[0])) {
		t.Errorf("hash %v, prev %v", got[audit.AttrHash], got["prev"])
	}
	if got["callId"].AsString() != "c2" || got["seq"].AsInt64() != 2 || got["event"].AsString() != audit.EventToolInvoked ||
		got["peer"].Type() != attribute.MAP || got["changed"].Type() != attribute.STRINGSLICE {
		t.Errorf("fields: %v", got)
	}
	res := map[string]string{}
	for _, kv := range r.Resource().Attributes() {
		res[string(kv.Key)] = kv.Value.String()
	}
	host, _ := os.Hostname()
	if res[audit.AttrLog] != k.path || res[audit.AttrHost] != host || res["service.name"] != config.DefaultServiceName {
		t.Errorf("resource %v", res)
	}
}

// TestAStreamFollowsTheLogThroughARotation: a log renamed while the kernel
// runs is read to its end, then the new one from its first line.
func TestAStreamFollowsTheLogThroughARotation(t *testing.T) {
	k := newAuditKernel(t)
	col := &collector{}
	tel := k.start(col)
	defer tel.Shutdown(context.Background())
	k.write(3)
	if err := flush(t, tel); err != nil {
		t.Fatal(err)
	}
	k.write(2)
	old := k.lines()
	if err := os.Rename(k.path, k.path+".1"); err != nil {
		t.Fatal(err)
	}
	k.write(2) // the first of them opens the new file
	if err := flush(t, tel); err != nil {
		t.Fatal(err)
	}
	if err := flush(t, tel); err != nil {
		t.Fatal(err)
	}
	want := append(old, k.lines()...)
	if got := col.bodies(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestACopyOfTheStreamVerifiesTheLog: what the real OTLP exporter sends,
// written as OTLP/JSON as a collector's file exporter writes it, is what
// audit verify --against checks the log with; and a rewrite of the log
// after it was exported is caught.
func TestACopyOfTheStreamVerifiesTheLog(t *testing.T) {
	var mu sync.Mutex
	var copyOf bytes.Buffer
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var req collogs.ExportLogsServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &req)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		line, _ := protojson.Marshal(&req)
		mu.Lock()
		copyOf.Write(append(line, '\n'))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&collogs.ExportLogsServiceResponse{})
		w.Write(out)
	}))
	defer srv.Close()
	exp, err := otlploghttp.New(context.Background(), otlploghttp.WithEndpointURL(srv.URL+"/v1/logs"))
	if err != nil {
		t.Fatal(err)
	}
	k := newAuditKernel(t)
	k.write(5)
	tel := k.start(exp)
	if err := flush(t, tel); err != nil {
		t.Fatal(err)
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	id := audit.LogID{Host: host, Path: k.path}
	local, err := os.ReadFile(k.path)
	if err != nil {
		t.Fatal(err)
	}
	a, err := audit.VerifyAgainst(bytes.NewReader(local), bytes.NewReader(copyOf.Bytes()), id)
	if err != nil || a.Exported != 5 {
		t.Fatalf("the log against its exported copy: %+v, %v", a, err)
	}
	edited := bytes.Replace(local, []byte(`"callId":"c4"`), []byte(`"callId":"c9"`), 1)
	var br *audit.ChainBreak
	if _, err := audit.VerifyAgainst(bytes.NewReader(edited), bytes.NewReader(copyOf.Bytes()), id); !errors.As(err, &br) || br.Line != 4 {
		t.Errorf("an edited line 4 against the copy: %v", err)
	}
}
