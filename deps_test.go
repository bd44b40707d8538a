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
			forbid: []string{module + "/kernel", module + "/install"},
			why:    "the shim is a translation in front of any kernel; it must not link the reference kernel's code or know harness configs",
		},
		{
			pkgs:   []string{"kernel", "shim", "kernelclient", "policy", "hashing", "install"},
			forbid: []string{module + "/internal/cli", module + "/internal/cmd", module + "/internal/doctor"},
			why:    "libraries return typed errors; only the command layer turns them into messages and hints that name flags",
		},
		{
			pkgs:   []string{"kernel"},
			forbid: []string{module + "/shim", module + "/kernelclient"},
			why:    "the kernel serves the socket protocol; it must not depend on the client side of it",
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
