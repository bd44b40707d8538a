package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"
)

// requirements is the server side of one requirement set, as the suite
// ships it in requirements/<set>.yaml.
type requirements struct {
	Set       string
	Scored    []string
	NotScored []notScored
}

// notScored is a scenario a set runs and reports without counting it.
type notScored struct {
	Scenario string
	Reason   string // extension, pending, added-after-release
}

// scenarios lists what the set runs, in the file's order, scored first.
func (r requirements) scenarios() []string {
	out := slices.Clone(r.Scored)
	for _, n := range r.NotScored {
		out = append(out, n.Scenario)
	}
	return out
}

// notScoredReason says why a scenario does not count, if it does not.
func (r requirements) notScoredReason(scenario string) (string, bool) {
	for _, n := range r.NotScored {
		if n.Scenario == scenario {
			return n.Reason, true
		}
	}
	return "", false
}

func loadRequirements(suiteDir, set string) (requirements, error) {
	data, err := os.ReadFile(filepath.Join(suiteDir, "requirements", set+".yaml"))
	if err != nil {
		return requirements{}, fmt.Errorf("read requirement set %s: %w", set, err)
	}
	var raw struct {
		Server    []string `yaml:"server"`
		NotScored []struct {
			Scenario string `yaml:"scenario"`
			Leg      string `yaml:"leg"`
			Reason   string `yaml:"reason"`
		} `yaml:"not_scored"`
	}
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return requirements{}, fmt.Errorf("parse requirement set %s: %w", set, err)
	}
	r := requirements{Set: set, Scored: raw.Server}
	for _, n := range raw.NotScored {
		if n.Leg == "server" {
			r.NotScored = append(r.NotScored, notScored{Scenario: n.Scenario, Reason: n.Reason})
		}
	}
	if len(r.Scored) == 0 {
		return requirements{}, fmt.Errorf("requirement set %s: no server scenarios", set)
	}
	return r, nil
}

// runSuite runs the suite's server mode for one requirement set against
// url, writing its per-scenario results under outDir and its console
// output to logPath. The suite exits 1 whenever a check fails, so its exit
// code says nothing the checks do not; only a crash, a signal or a
// timeout is an error here.
func runSuite(ctx context.Context, node, suiteDir, url, set, outDir, logPath string, timeout time.Duration) error {
	log, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("run suite %s: %w", set, err)
	}
	defer log.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(suiteDir, "dist", "index.js"),
		"server", "--url", url, "--requirements", set, "--output-dir", outDir)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("run suite %s: stopped after %s: %w (its output: %s)", set, timeout, ctx.Err(), logPath)
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		return nil
	case err != nil:
		return fmt.Errorf("run suite %s: %w (its output: %s)", set, err, logPath)
	}
	return nil
}

// resultDir is how the suite names a scenario's results:
// server-<scenario>-<ISO time with : and . as ->.
var resultDir = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$`)

// suiteCheck is the part of a check in checks.json the runner reads.
type suiteCheck struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	ErrorMessage string `json:"errorMessage"`
}

// readResults collects the checks of every scenario the set runs. A
// scenario that left no checks.json gets one failing check, "result", so
// a crash of the suite cannot pass as nothing failing.
func readResults(outDir string, req requirements) ([]check, error) {
	entries, err := os.ReadDir(outDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read results %s: %w", req.Set, err)
	}
	dirs := map[string]string{}
	for _, e := range entries {
		m := resultDir.FindStringSubmatch(e.Name())
		if !e.IsDir() || m == nil {
			continue
		}
		if _, dup := dirs[m[1]]; dup {
			return nil, fmt.Errorf("read results %s: two result directories for %s in %s", req.Set, m[1], outDir)
		}
		dirs[m[1]] = filepath.Join(outDir, e.Name())
	}
	names := req.scenarios()
	for n := range dirs {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	var out []check
	for _, name := range names {
		dir, ok := dirs[name]
		if !ok {
			out = append(out, check{Set: req.Set, Scenario: name, ID: "result", Status: statusFailure, Message: "the suite wrote no results for this scenario"})
			continue
		}
		cs, err := readChecks(filepath.Join(dir, "checks.json"), req.Set, name)
		if err != nil {
			return nil, err
		}
		out = append(out, cs...)
	}
	return out, nil
}

// readChecks reads one scenario's checks.json and collapses repeated ids
// to their most severe occurrence, keeping first-seen order.
func readChecks(path, set, scenario string) ([]check, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return []check{{Set: set, Scenario: scenario, ID: "result", Status: statusFailure, Message: "the suite wrote no checks.json for this scenario"}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read checks: %w", err)
	}
	var raw []suiteCheck
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("read checks %s: %w", path, err)
	}
	var out []check
	index := map[string]int{}
	for _, r := range raw {
		if _, known := severity[r.Status]; !known {
			return nil, fmt.Errorf("read checks %s: check %s has status %q", path, r.ID, r.Status)
		}
		c := check{Set: set, Scenario: scenario, ID: r.ID, Status: r.Status, Message: r.ErrorMessage}
		i, seen := index[r.ID]
		switch {
		case !seen:
			index[r.ID] = len(out)
			out = append(out, c)
		case severity[c.Status] > severity[out[i].Status]:
			out[i] = c
		}
	}
	return out, nil
}
