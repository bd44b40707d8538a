package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sharedos/sharedos-mcp/internal/testupstream"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
	"github.com/sharedos/sharedos-mcp/kernel/status"
)

// options are what a run is given.
type options struct {
	bin         string        // the sharedos-mcp binary under test
	npmPrefix   string        // where `npm install --prefix` put the harnesses
	caseTimeout time.Duration // one harness process
	parallel    int           // cases run at once
	keep        bool          // leave each case's sandbox behind
}

// CaseResult is one cell of the table.
type CaseResult struct {
	Case        string   `json:"case"`
	Grade       string   `json:"grade"`
	Detail      string   `json:"detail"`
	CatalogHash string   `json:"catalogHash,omitempty"`
	Offered     []string `json:"offeredTools,omitempty"`
	Seconds     float64  `json:"seconds"`

	// startupRace: the harness asked the model before its MCP server had
	// connected, so the run says nothing about the case.
	startupRace bool
}

// findCLI looks for h's executable on PATH, then in the npm prefix (in
// its own directory there when it has one).
func findCLI(h *harness, prefix string) (string, bool) {
	if p, err := exec.LookPath(h.Exe); err == nil {
		return p, true
	}
	if prefix != "" {
		p := filepath.Join(prefix, h.npmDir, "node_modules", ".bin", h.Exe)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, true
		}
	}
	return "", false
}

// cliVersion is the first line of `<cli> --version` (Pi prints it on
// stderr), run with the harness's PATH.
func cliVersion(ctx context.Context, h *harness, cli string) string {
	return firstLine(ctx, h, cli, "--version")
}

// nodeRuntime names the node a harness that brings its own runs on.
func nodeRuntime(ctx context.Context, h *harness, cli string) string {
	if !h.nodeBeside {
		return ""
	}
	return "node " + firstLine(ctx, h, filepath.Join(filepath.Dir(cli), "node"), "--version") + " from the npm prefix"
}

func firstLine(ctx context.Context, h *harness, exe string, args ...string) string {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(os.Environ(), "PATH="+pathFor(h, exe))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line
}

// runColumn runs every case against one harness, at most opts.parallel at
// a time, and returns the results in case order.
func runColumn(ctx context.Context, h *harness, cli string, cs []Case, opts options) []CaseResult {
	results := make([]CaseResult, len(cs))
	sem := make(chan struct{}, max(1, opts.parallel))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			start := time.Now()
			r, err := runCase(ctx, h, cli, c, opts)
			if err == nil && r.startupRace {
				// The harness raced its own MCP start-up (seen on a loaded
				// machine): that says nothing about the case, so run it once
				// more and keep the second answer, saying so.
				r, err = runCase(ctx, h, cli, c, opts)
				r.Detail += " (second run: the first asked the model before the MCP server had connected)"
			}
			if err != nil {
				r = CaseResult{Grade: gradeFail, Detail: "runner: " + err.Error()}
			}
			r.Case = c.ID
			r.Seconds = time.Since(start).Round(10 * time.Millisecond).Seconds()
			results[i] = r
		}()
	}
	wg.Wait()
	return results
}

// runCase plays one case in a fresh sandbox: its own files root, kernel,
// audit log, HOME and scripted model, and one harness process.
func runCase(ctx context.Context, h *harness, cli string, c Case, opts options) (CaseResult, error) {
	// Short, so the socket path stays under the 107-byte sun_path limit.
	dir, err := os.MkdirTemp("", "cf")
	if err != nil {
		return CaseResult{}, err
	}
	if opts.keep {
		fmt.Fprintf(os.Stderr, "conformance: %s/%s sandbox kept at %s\n", h.ID, c.ID, dir)
	} else {
		defer os.RemoveAll(dir)
	}
	env := &caseEnv{
		dir: dir, home: filepath.Join(dir, "home"), work: filepath.Join(dir, "work"), root: filepath.Join(dir, "root"),
		sock: filepath.Join(dir, "k.sock"), audit: filepath.Join(dir, "audit.jsonl"), bin: opts.bin, cli: cli,
		path: pathFor(h, cli),
	}
	for _, d := range []string{env.home, env.work} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return CaseResult{}, err
		}
	}
	if err := writeFixtures(env.root); err != nil {
		return CaseResult{}, fmt.Errorf("fixtures: %w", err)
	}
	cfg := filepath.Join(dir, "kernel.toml")
	record := filepath.Join(dir, "upstream-calls.jsonl")
	upstreamTable, err := upstreamConfig(record)
	if err != nil {
		return CaseResult{}, err
	}
	if err := os.WriteFile(cfg, append(slices.Clone(kernelConfig), upstreamTable...), 0o600); err != nil {
		return CaseResult{}, err
	}
	// A case that holds a call puts the hold proxy on the installed
	// socket and the reference kernel behind it.
	kernelSock := env.sock
	if c.Hold != nil {
		kernelSock = filepath.Join(dir, "ref.sock")
	}
	stopKernel := func() {}
	if !c.NoKernel {
		stop, err := startKernel(ctx, env, cfg, kernelSock)
		if err != nil {
			return CaseResult{}, err
		}
		defer stop()
		stopKernel = stop
		// Every case's turns must see the same catalogue, the upstream's
		// tool in it: wait until the upstream is ready before the harness
		// lists anything.
		if err := waitUpstream(filepath.Join(dir, "state"), "test", 30*time.Second); err != nil {
			return CaseResult{}, err
		}
	}
	var proxy *holdProxy
	var settle func()
	if c.Hold != nil {
		if proxy, err = startHoldProxy(env.sock, kernelSock, c.Hold); err != nil {
			return CaseResult{}, fmt.Errorf("hold proxy: %w", err)
		}
		defer proxy.close()
		settle = func() { proxy.awaitCancel(settleWait) }
	}
	env.toolTimeout = c.ToolTimeout
	if c.Elicit != "" {
		env.elicit, env.elicited = c.Elicit, filepath.Join(dir, "elicited.json")
	}

	inst := exec.CommandContext(ctx, env.bin, "install", h.installID(), "--scope", "user", "--socket", env.sock)
	inst.Env, inst.Dir = baseEnv(env), env.work
	if out, err := inst.CombinedOutput(); err != nil {
		return CaseResult{}, fmt.Errorf("sharedos-mcp install %s: %v: %s", h.installID(), err, bytes.TrimSpace(out))
	}

	model, err := startModel(c.Steps, h, settle)
	if err != nil {
		return CaseResult{}, err
	}
	defer model.close()
	env.modelURL = model.url()

	cmd, err := h.command(env)
	if err != nil {
		return CaseResult{}, fmt.Errorf("prepare %s: %w", h.ID, err)
	}
	var stdout, stderr bytes.Buffer
	cmd.Dir, cmd.Stdout, cmd.Stderr = env.work, &stdout, &stderr
	cmd.Stdin = nil
	// Its own process group, so a timeout ends the harness and every MCP
	// server it spawned.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return CaseResult{}, fmt.Errorf("start %s: %w", h.ID, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var exitErr error
	select {
	case exitErr = <-exited:
	case <-time.After(opts.caseTimeout):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		exitErr = fmt.Errorf("killed after %s", opts.caseTimeout)
	case <-ctx.Done():
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		return CaseResult{}, ctx.Err()
	}
	if exitErr != nil && stderr.Len() > 0 {
		exitErr = fmt.Errorf("%w: %s", exitErr, clip(stderr.String()))
	}

	var held []heldCall
	if proxy != nil {
		proxy.close()
		held = proxy.calls()
	}
	stopKernel()
	events, err := readAudit(ctx, env)
	if err != nil {
		return CaseResult{}, err
	}
	exchanges, modelErrs := model.exchanges()
	if opts.keep {
		os.WriteFile(filepath.Join(dir, "model.json"), mustMarshal(exchanges), 0o600)
		os.WriteFile(filepath.Join(dir, "harness.out"), append(stdout.Bytes(), stderr.Bytes()...), 0o600)
	}
	r := CaseResult{CatalogHash: catalogHash(events), Offered: offered(exchanges)}
	if len(modelErrs) > 0 {
		r.Grade, r.Detail = gradeFail, "scripted model: "+strings.Join(modelErrs, "; ")
		return r, nil
	}
	upstreamCalls, err := testupstream.ReadRecord(record)
	if err != nil {
		return CaseResult{}, err
	}
	ev := &evidence{audit: events, exchanges: exchanges, held: held, root: env.root, exitErr: exitErr, stdout: stdout.String(),
		output: stdout.String() + stderr.String(), sock: env.sock, upstream: upstreamCalls}
	if env.elicited != "" {
		if b, err := os.ReadFile(env.elicited); err == nil {
			ev.elicited = elicitedMessage(b)
		}
	}
	r.Grade, r.Detail = c.grade(ev, h)
	switch {
	case r.Grade != gradeNotExercised:
	case len(exchanges) == 0:
		r.Detail += fmt.Sprintf("; the harness never reached the model (exit: %v)", exitErr)
	case !h.offersKernel(r.Offered):
		r.startupRace = true
		r.Detail += "; the harness asked the model without offering the kernel's tools (its MCP server was not connected yet)"
	}
	return r, nil
}

// upstreamConfig is the [[upstream]] table kernel.toml's brokered grants
// are for: this program, run as the test upstream, recording each call it
// receives in record, in a state directory beside the config.
func upstreamConfig(record string) ([]byte, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this program to run as the test upstream: %w", err)
	}
	return fmt.Appendf(nil, `
[[upstream]]
name = "test"
command = [%q, %q, "-record", %q]
env = { GORACE = "atexit_sleep_ms=0" }

[[upstream.tool]]
name = "get_repo"
action = "read"
resource = "/repos/{owner}/{repo}"
`, self, testupstream.Arg, record), nil
}

// waitUpstream polls the status a kernel writes in its state directory
// until the upstream is ready (its log is not the runner's to read).
func waitUpstream(stateDir, name string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		r, err := status.Read(stateDir)
		if err == nil {
			for _, u := range r.Upstreams {
				if u.Name == name && u.State == "ready" {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("upstream %s not ready within %s (%+v, %v)", name, d, r, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// settleWait bounds how long the final answer of a case that holds a call
// waits for the harness's cancel to reach the kernel.
const settleWait = 5 * time.Second

// startKernel runs `sharedos-mcp kernel` on sock for one case and waits
// until it accepts; the returned stop is idempotent and waits for the
// exit, so the audit log is complete once it returns.
func startKernel(ctx context.Context, env *caseEnv, cfg, sock string) (func(), error) {
	cmd := exec.CommandContext(ctx, env.bin, "kernel", "--config", cfg, "--socket", sock, "--audit", env.audit, "--log-level", "warn")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start kernel: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				<-done
			}
		})
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if fi, err := os.Stat(sock); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return stop, nil
		}
		select {
		case err := <-done:
			done <- err
			stop()
			return nil, fmt.Errorf("kernel exited: %v: %s", err, bytes.TrimSpace(stderr.Bytes()))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return nil, errors.New("kernel did not listen within 10s")
		}
	}
}

// readAudit reads the case's audit log through `sharedos-mcp audit --json`,
// as an operator would.
func readAudit(ctx context.Context, env *caseEnv) ([]audit.Event, error) {
	out, err := exec.CommandContext(ctx, env.bin, "audit", "--file", env.audit, "--json").Output()
	if err != nil {
		if _, statErr := os.Stat(env.audit); errors.Is(statErr, os.ErrNotExist) {
			return nil, nil // the kernel was never reached
		}
		return nil, fmt.Errorf("sharedos-mcp audit: %w", err)
	}
	var events []audit.Event
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var e audit.Event
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("decode audit: %w", err)
		}
		events = append(events, e)
	}
	return events, nil
}

// catalogHash is the hash the kernel gave the case's turns; several
// different ones are reported joined, which makes the column
// incomparable.
func catalogHash(events []audit.Event) string {
	var hashes []string
	for _, e := range events {
		if (e.Event == audit.EventCatalogListed || e.Event == audit.EventToolInvoked) && e.CatalogHash != "" {
			if !slices.Contains(hashes, e.CatalogHash) {
				hashes = append(hashes, e.CatalogHash)
			}
		}
	}
	return strings.Join(hashes, ",")
}

// offered is the set of tool names the harness offered its model,
// declared or deferred (a deferred tool is one load away).
func offered(exchanges []exchange) []string {
	var names []string
	for _, ex := range exchanges {
		for _, t := range slices.Concat(ex.Tools, ex.Deferred) {
			if !slices.Contains(names, t) {
				names = append(names, t)
			}
		}
	}
	return names
}

// elicitedMessage is the first line of the question an Elicitation hook
// was given (its input's message), or what it was given when that cannot
// be read.
func elicitedMessage(input []byte) string {
	var in struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(input, &in) != nil || in.Message == "" {
		return string(input)
	}
	first, _, _ := strings.Cut(in.Message, "\n")
	return "asked: " + first
}
