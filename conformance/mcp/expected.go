package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// Kinds of expected failure. Every listed failure has exactly one; a
// failure that fits none of them is a failure of the shim and must be
// fixed, not listed.
var kinds = map[string]string{
	"not-offered": "a capability the shim does not offer",
	"fixture":     "a fixture tool the suite expects",
	"bridge":      "a check of the bridge itself",
}

// kindOrder is the order RESULTS.md groups expected failures in.
var kindOrder = []string{"not-offered", "fixture", "bridge"}

// expectation is why one listed check fails.
type expectation struct {
	Kind   string
	Reason string
}

// expectedFile is expected-failures.toml: groups of checks that fail for
// one reason.
type expectedFile struct {
	Failure []struct {
		Kind   string   `toml:"kind"`
		Reason string   `toml:"reason"`
		Checks []string `toml:"checks"`
	} `toml:"failure"`
}

// checkKey is "<requirement set> <scenario>:<check id>", the suite's own
// scenario:check-id form with the set in front (a scenario runs once per
// set, at that set's wire version, and fails differently in each).
var checkKey = regexp.MustCompile(`^(\S+) ([a-z0-9][a-z0-9/._-]*):([A-Za-z0-9][A-Za-z0-9._-]*)$`)

// loadExpected reads and validates an expected-failures file: every entry
// names a known set, a known kind, a reason, and appears once.
func loadExpected(path string, sets []string) (map[string]expectation, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read expected failures: %w", err)
	}
	return parseExpected(data, sets)
}

func parseExpected(data []byte, sets []string) (map[string]expectation, error) {
	var f expectedFile
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		var strict *toml.StrictMissingError
		if errors.As(err, &strict) {
			return nil, fmt.Errorf("parse expected failures: unknown fields:\n%s", strict.String())
		}
		return nil, fmt.Errorf("parse expected failures: %w", err)
	}
	out := map[string]expectation{}
	var errs []error
	for i, g := range f.Failure {
		if _, ok := kinds[g.Kind]; !ok {
			errs = append(errs, fmt.Errorf("failure %d: unknown kind %q (one of %s)", i+1, g.Kind, strings.Join(kindOrder, ", ")))
		}
		if strings.TrimSpace(g.Reason) == "" {
			errs = append(errs, fmt.Errorf("failure %d: no reason", i+1))
		}
		if len(g.Checks) == 0 {
			errs = append(errs, fmt.Errorf("failure %d: no checks", i+1))
		}
		for _, k := range g.Checks {
			m := checkKey.FindStringSubmatch(k)
			switch {
			case m == nil:
				errs = append(errs, fmt.Errorf("failure %d: %q is not \"<set> <scenario>:<check id>\"", i+1, k))
				continue
			case !slices.Contains(sets, m[1]):
				errs = append(errs, fmt.Errorf("failure %d: %q names requirement set %q (known: %s)", i+1, k, m[1], strings.Join(sets, ", ")))
				continue
			}
			if _, dup := out[k]; dup {
				errs = append(errs, fmt.Errorf("failure %d: %q is listed twice", i+1, k))
				continue
			}
			out[k] = expectation{Kind: g.Kind, Reason: strings.TrimSpace(g.Reason)}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("expected failures: %w", err)
	}
	return out, nil
}

// Check statuses as the suite writes them.
const (
	statusSuccess = "SUCCESS"
	statusFailure = "FAILURE"
	statusWarning = "WARNING"
	statusSkipped = "SKIPPED"
	statusInfo    = "INFO"
)

// severity orders statuses for collapsing a check id that repeats within
// a scenario: the most severe occurrence is the check's verdict.
var severity = map[string]int{statusInfo: 0, statusSuccess: 1, statusSkipped: 2, statusWarning: 3, statusFailure: 4}

// check is one collapsed check of one scenario run under one set.
type check struct {
	Set      string
	Scenario string
	ID       string
	Status   string
	Message  string
}

func (c check) key() string { return c.Set + " " + c.Scenario + ":" + c.ID }

// listedOutcome is a failing check that the file lists.
type listedOutcome struct {
	Check check
	Why   expectation
}

// staleEntry is a listed check that did not fail: the list is no longer
// true and must be edited.
type staleEntry struct {
	Key  string
	Why  expectation
	Saw  string // the check's status, or "absent"
	Note string
}

// verdict is what a run's checks say against the expected failures.
type verdict struct {
	Passed     int
	Warnings   []check
	Skipped    []check
	Expected   []listedOutcome
	Unexpected []check
	Stale      []staleEntry
}

func (v verdict) ok() bool { return len(v.Unexpected) == 0 && len(v.Stale) == 0 }

// judge compares the checks of the sets that ran with the expected
// failures. A failing check must be listed; a listed check of a set that
// ran must fail. A listed check that is absent or skipped is stale too:
// the run is deterministic (one server, one kernel, fixed tools), so a
// check that stops being reached means the scenario changed and the entry
// must be looked at again.
func judge(checks []check, expected map[string]expectation, ran []string) verdict {
	var v verdict
	seen := map[string]check{}
	for _, c := range checks {
		seen[c.key()] = c
		why, listed := expected[c.key()]
		switch {
		case c.Status == statusFailure && listed:
			v.Expected = append(v.Expected, listedOutcome{Check: c, Why: why})
		case c.Status == statusFailure:
			v.Unexpected = append(v.Unexpected, c)
		case c.Status == statusSuccess:
			v.Passed++
		case c.Status == statusWarning:
			v.Warnings = append(v.Warnings, c)
		case c.Status == statusSkipped:
			v.Skipped = append(v.Skipped, c)
		}
	}
	keys := make([]string, 0, len(expected))
	for k := range expected {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		set, _, _ := strings.Cut(k, " ")
		if !slices.Contains(ran, set) {
			continue
		}
		c, ok := seen[k]
		switch {
		case !ok:
			v.Stale = append(v.Stale, staleEntry{Key: k, Why: expected[k], Saw: "absent"})
		case c.Status != statusFailure:
			v.Stale = append(v.Stale, staleEntry{Key: k, Why: expected[k], Saw: c.Status, Note: c.Message})
		}
	}
	return v
}
