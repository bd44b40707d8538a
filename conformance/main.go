// Command conformance drives real coding CLIs (Claude Code, Codex, …)
// end to end against the reference kernel and a scripted model, one case
// per harness process, and grades each case from the kernel's audit log
// and what the harness sent back to the model.
//
//	go run ./conformance [-harness claude-code,codex] [-out conformance]
package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sharedos/sharedos-mcp/internal/testupstream"
)

//go:embed kernel.toml
var kernelConfig []byte

func main() {
	// The kernel of each case runs this program as its brokered upstream.
	testupstream.MaybeRun()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "conformance: error: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("conformance", flag.ContinueOnError)
	only := fs.String("harness", "", "comma-separated harness ids to run (default: all)")
	caseList := fs.String("case", "", "comma-separated case ids to run (default: all)")
	out := fs.String("out", "conformance", "directory for results.json and RESULTS.md")
	bin := fs.String("bin", "", "sharedos-mcp binary to test (default: build this module)")
	home, _ := os.UserHomeDir()
	prefix := fs.String("npm-prefix", filepath.Join(home, ".cache", "sharedos-conformance"), "npm --prefix where harnesses were installed")
	timeout := fs.Duration("case-timeout", 90*time.Second, "kill a harness process after this long")
	parallel := fs.Int("parallel", 2, "cases run at once per harness")
	keep := fs.Bool("keep", false, "keep each case's sandbox (logs, audit, model exchanges)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	hs, err := selectHarnesses(*only)
	if err != nil {
		return err
	}
	cs, err := selectCases(*caseList)
	if err != nil {
		return err
	}
	opts := options{bin: *bin, npmPrefix: *prefix, caseTimeout: *timeout, parallel: *parallel, keep: *keep}
	if opts.bin == "" {
		dir, err := os.MkdirTemp("", "cfbin")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if opts.bin, err = buildBinary(ctx, dir); err != nil {
			return err
		}
	}
	res, err := runAll(ctx, hs, cs, opts)
	if err != nil {
		return err
	}
	if err := writeResults(*out, res); err != nil {
		return err
	}
	fmt.Print(renderTable(res))
	return nil
}

// buildBinary builds the module's sharedos-mcp into dir.
func buildBinary(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "sharedos-mcp")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/sharedos/sharedos-mcp")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v: %s", err, out)
	}
	return bin, nil
}

func selectHarnesses(list string) ([]*harness, error) {
	if list == "" {
		return harnesses, nil
	}
	var hs []*harness
	for _, id := range strings.Split(list, ",") {
		h, ok := harnessByID(strings.TrimSpace(id))
		if !ok {
			return nil, fmt.Errorf("unknown harness %q", id)
		}
		hs = append(hs, h)
	}
	return hs, nil
}

func harnessByID(id string) (*harness, bool) {
	for _, h := range harnesses {
		if h.ID == id {
			return h, true
		}
	}
	return nil, false
}

func selectCases(list string) ([]Case, error) {
	if list == "" {
		return cases, nil
	}
	var cs []Case
	for _, id := range strings.Split(list, ",") {
		found := false
		for _, c := range cases {
			if c.ID == strings.TrimSpace(id) {
				cs, found = append(cs, c), true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown case %q", id)
		}
	}
	return cs, nil
}

// runAll runs one column per harness, one after the other (each column
// runs its cases in parallel).
func runAll(ctx context.Context, hs []*harness, cs []Case, opts options) (*Results, error) {
	res := &Results{Cases: make([]CaseInfo, len(cs))}
	for i, c := range cs {
		res.Cases[i] = CaseInfo{ID: c.ID, Title: c.Title}
		if c.Hold != nil {
			res.Cases[i].Kernel = "the reference kernel behind a proxy that holds files.read " + heldPath +
				" until call.cancel (README.md); hello, the catalogue and its catalogHash are the reference kernel's, so this row's hash is part of the comparison"
		}
	}
	for _, h := range hs {
		if err := h.Policy.Validate(); err != nil {
			return nil, fmt.Errorf("%s: %w", h.ID, err)
		}
		col := Column{Manifest: Manifest{Harness: h.ID, Title: h.Title, Package: h.Package, MCPClient: h.Client, Model: declaredModel, ToolPolicy: h.Policy, ProxyTools: h.proxyTools}}
		cli, ok := findCLI(h, opts.npmPrefix)
		if !ok {
			col.Manifest.Available = false
			for _, c := range cs {
				col.Results = append(col.Results, CaseResult{Case: c.ID, Grade: gradeUnavailable, Detail: h.Exe + " is not on PATH or in the npm prefix"})
			}
			res.Columns = append(res.Columns, col)
			continue
		}
		col.Manifest.Available = true
		col.Manifest.Version = cliVersion(ctx, h, cli)
		col.Manifest.Runtime = nodeRuntime(ctx, h, cli)
		fmt.Fprintf(os.Stderr, "conformance: %s %s (%s): %d cases\n", h.ID, col.Manifest.Version, cli, len(cs))
		col.Results = runColumn(ctx, h, cli, cs, opts)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		col.Manifest.summarize(col.Results)
		res.Columns = append(res.Columns, col)
	}
	res.compare()
	if len(res.Columns) == 0 {
		return nil, errors.New("no harness selected")
	}
	return res, nil
}
