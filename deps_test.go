package main

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/sharedos/sharedos-mcp"

// pkg is what go list says of one package of this module.
type pkg struct {
	ImportPath string
	Imports    []string // direct, of the non-test files
	Deps       []string // everything it links, transitively
}

func listPackages(t *testing.T) map[string]pkg {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command on PATH")
	}
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		pkgs[strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")] = p
	}
	return pkgs
}

// TestDeps holds the layering docs/architecture.md describes. Each rule
// says why; a change that breaks one is a change of design, to be made in
// the doc first.
func TestDeps(t *testing.T) {
	pkgs := listPackages(t)
	rules := []struct {
		pkgs   []string
		direct bool // check direct imports only (fmt links os, so "no I/O" can only be direct)
		forbid []string
		why    string
	}{
		{
			pkgs: []string{"policy", "hashing"}, direct: true,
			forbid: []string{"os", "os/exec", "os/signal", "net", "io/fs", "path/filepath", "syscall", "log", "log/slog", "github.com/rs/zerolog", "golang.org/x/sys/unix"},
			why:    "grants and the catalogue hash are pure functions: no file system, network or logging, so they are tested as values and cannot depend on where they run",
		},
		{
			pkgs:   []string{"shim", "kernelclient"},
			forbid: []string{module + "/kernel", module + "/kernel/audit", module + "/kernel/files", module + "/kernel/config", module + "/kernel/status", module + "/kernel/telemetry", module + "/install"},
			why:    "the shim is a translation in front of any kernel; it must not link the reference kernel's code or know harness configs",
		},
		{
			pkgs:   []string{"kernel", "kernel/audit", "kernel/files", "kernel/config", "kernel/status", "kernel/telemetry", "shim", "kernelclient", "policy", "hashing", "install"},
			forbid: []string{module + "/internal/cli", module + "/internal/cmd", module + "/internal/doctor"},
			why:    "libraries return typed errors; only the command layer turns them into messages and hints that name flags",
		},
		{
			pkgs:   []string{"kernel"},
			forbid: []string{module + "/shim", module + "/kernelclient"},
			why:    "the kernel serves the socket protocol; it must not depend on the client side of it",
		},
		{
			pkgs:   []string{"kernel/audit"},
			forbid: []string{module + "/kernel", module + "/kernel/files", module + "/kernel/config", module + "/kernel/status", module + "/kernel/upstream", module + "/kernel/telemetry", module + "/policy", "go.opentelemetry.io/otel"},
			why:    "the record depends on nothing that acts: the server, the tools and the brokers write to it, and it reads and verifies a log without any of them",
		},
		{
			pkgs:   []string{"kernel/files"},
			forbid: []string{module + "/kernel", module + "/kernel/audit", module + "/kernel/config", module + "/kernel/status", module + "/kernel/upstream"},
			why:    "the file tools decide no grant and write no record: they ask the turn through a files.Call, so every decision and its record stay on the kernel's path",
		},
		{
			pkgs:   []string{"kernel/config"},
			forbid: []string{module + "/kernel", module + "/kernel/audit", module + "/kernel/files", module + "/kernel/telemetry"},
			why:    "a config is read and checked (kernel check, catalog, doctor) without linking the server, the record or the file tools; the kernel runs on a config, not the other way round",
		},
		{
			pkgs:   []string{"kernel/status"},
			forbid: []string{module + "/kernel", module + "/kernel/audit", module + "/kernel/files", module + "/kernel/config", module + "/kernel/upstream"},
			why:    "the status file is a format the kernel writes and the commands read; reading it links none of the kernel",
		},
		{
			pkgs:   []string{"kernel/telemetry"},
			forbid: []string{module + "/kernel", module + "/kernel/files"},
			why:    "telemetry is told what the kernel decided; it decides nothing and runs no tool, so the server depends on it and not the other way round",
		},
		{
			pkgs:   []string{"shim", "kernelclient", "policy", "hashing"},
			forbid: []string{"go.opentelemetry.io/otel", "go.opentelemetry.io/otel/sdk"},
			why:    "only the kernel exports telemetry; the shim passes the client's trace context on as bytes, and the pure packages stay pure",
		},
		{
			pkgs:   []string{"internal/cmd", "internal/doctor"},
			forbid: []string{module + "/kernel/files"},
			direct: true,
			why:    "the command layer asks the kernel packages and renders what they say; it runs no tool of its own",
		},
	}
	for _, r := range rules {
		for _, name := range r.pkgs {
			p, ok := pkgs[name]
			if !ok {
				t.Errorf("package %s is gone; update this rule", name)
				continue
			}
			imports := p.Deps
			if r.direct {
				imports = p.Imports
			}
			for _, f := range r.forbid {
				if slices.Contains(imports, f) {
					t.Errorf("%s imports %s: %s", name, f, r.why)
				}
			}
		}
	}
}
