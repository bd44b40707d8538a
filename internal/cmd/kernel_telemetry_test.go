package cmd

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/cli"
)

// TestTelemetryHeadersCarryASecretShownNowhere: a [telemetry] header's
// {secret:NAME} reaches the collector as the secret's value, and the
// value is in nothing the kernel writes: not its log, when the collector
// refuses the export and echoes the header back in its error, not the
// audit log, not the state directory.
func TestTelemetryHeadersCarryASecretShownNowhere(t *testing.T) {
	const token = "otlp-token-6f1c2b9e"
	t.Setenv("OTLP_TOKEN", token)
	var mu sync.Mutex
	got := map[string]string{}
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		mu.Lock()
		got[r.URL.Path] = auth
		mu.Unlock()
		if r.URL.Path == "/v1/metrics" {
			// A collector that says what it refused, credential and all.
			http.Error(w, "refused "+auth, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()

	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	auditPath := filepath.Join(dir, "audit.jsonl")
	config := filepath.Join(dir, "kernel.toml")
	doc := fmt.Sprintf(`state_dir = %q

[files]
root = %q

[[secret]]
name = "otlp"
env = "OTLP_TOKEN"

[telemetry]
otlp_endpoint = %q
headers = { authorization = "Bearer {secret:otlp}" }
audit_logs = true
`, state, dir, collector.URL)
	if err := os.WriteFile(config, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	sockDir, err := os.MkdirTemp("", "sk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })

	stderr := &lineSignal{lines: make(chan string, 1024)}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	code := make(chan int, 1)
	go func() {
		code <- Run(ctx, cli.IO{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: stderr},
			[]string{"kernel", "--config", config, "--socket", filepath.Join(sockDir, "k.sock"), "--audit", auditPath, "--log-level", "debug"})
	}()
	var log strings.Builder
	for !strings.Contains(log.String(), "kernel listening on") {
		select {
		case l := <-stderr.lines:
			log.WriteString(l)
		case c := <-code:
			t.Fatalf("the kernel exited %d before it listened:\n%s", c, log.String())
		}
	}
	cancel()
	if c := <-code; c != 0 {
		t.Errorf("kernel exited %d", c)
	}
	for len(stderr.lines) > 0 {
		log.WriteString(<-stderr.lines)
	}

	mu.Lock()
	for _, path := range []string{"/v1/metrics", "/v1/logs"} {
		if got[path] != "Bearer "+token {
			t.Errorf("%s was sent with authorization %q, want the secret's value", path, got[path])
		}
	}
	mu.Unlock()
	if !strings.Contains(log.String(), "401") {
		t.Errorf("the kernel's log does not say the collector refused the metrics:\n%s", log.String())
	}
	if strings.Contains(log.String(), token) {
		t.Errorf("the kernel's log shows the secret:\n%s", log.String())
	}
	for _, root := range []string{auditPath, state} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := os.ReadFile(path)
			if err == nil && bytes.Contains(data, []byte(token)) {
				t.Errorf("%s holds the secret", path)
			}
			return err
		})
		if err != nil {
			t.Error(err)
		}
	}
}
