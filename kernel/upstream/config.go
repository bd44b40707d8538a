package upstream

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sharedos/sharedos-mcp/policy"
)

// Config is one [[upstream]] table as the kernel's TOML config holds it.
// The kernel's config loader embeds it (`Upstream []upstream.Config
// `toml:"upstream"“) and decodes with unknown keys refused; Parse then
// checks what the decoder cannot.
type Config struct {
	Name           string            `toml:"name"`
	Command        []string          `toml:"command"`
	Env            map[string]string `toml:"env"`
	Cwd            string            `toml:"cwd"`
	StartupTimeout string            `toml:"startup_timeout"` // Go duration; "" is DefaultStartupTimeout
	CallTimeout    string            `toml:"call_timeout"`    // Go duration; "" is DefaultCallTimeout
	// HostPaths says the upstream reads and writes this host's files by
	// the paths its arguments name: each {name:path} placeholder is then
	// resolved on this host (see Spec.HostPaths).
	HostPaths bool         `toml:"host_paths"`
	Tools     []ToolConfig `toml:"tool"`
}

// ToolConfig is one [[upstream.tool]] table: what a tool needs beyond the
// defaults (action "call", resource "/<tool name>").
type ToolConfig struct {
	Name     string `toml:"name"`
	Action   string `toml:"action"`
	Resource string `toml:"resource"`
}

// Defaults of an upstream's timeouts.
const (
	DefaultStartupTimeout = 30 * time.Second
	DefaultCallTimeout    = 90 * time.Second
)

// Spec is a checked upstream: defaults applied, durations and templates
// parsed, the working directory absolute when the config file's was known.
type Spec struct {
	Name           string
	Command        []string
	Env            map[string]string // only these, plus PATH and HOME, reach the upstream
	Dir            string            // "" inherits the kernel's
	StartupTimeout time.Duration
	CallTimeout    time.Duration
	// HostPaths: a {name:path} placeholder's value is resolved on this
	// host (links followed, a relative path taken from Dir), and the path
	// it really leads to is what is authorized, recorded and forwarded.
	HostPaths bool
	// Tools holds the configured tools by the upstream's tool name; a tool
	// the upstream offers that is not here gets DefaultTool.
	Tools map[string]ToolSpec
}

// ToolSpec is how one upstream tool is authorized: the grant action a
// call needs and the resource it acts on, within the upstream's namespace.
type ToolSpec struct {
	Action   string
	Resource policy.Template
}

// DefaultTool is the spec of a tool the config says nothing about: action
// "call" on "/<tool name>". ok is false when the name cannot be one path
// segment ("", ".", "..", or holding '/' or NUL).
func DefaultTool(name string) (ToolSpec, bool) {
	r, err := policy.LiteralTemplate(name)
	if err != nil {
		return ToolSpec{}, false
	}
	return ToolSpec{Action: policy.ActionCall, Resource: r}, true
}

// Tool returns how the upstream's tool name is authorized.
func (s *Spec) Tool(name string) (ToolSpec, bool) {
	if t, ok := s.Tools[name]; ok {
		return t, true
	}
	return DefaultTool(name)
}

// reservedNames are namespaces the kernel's own tools use; an upstream
// cannot take them.
var reservedNames = []string{"files", "sharedos"}

// ConfigError is a problem with one [[upstream]] table, or with one of its
// [[upstream.tool]] tables, and the key it is about ("" for the table as a
// whole). Indexes count from 0 in the order the tables appear. The
// loader can turn them into a line with Locate.
type ConfigError struct {
	Upstream int // index of the [[upstream]] table
	Tool     int // index of the [[upstream.tool]] table within it; -1 when the error is the upstream's own
	Key      string
	Err      error
}

func (e *ConfigError) Error() string {
	where := fmt.Sprintf("upstream #%d", e.Upstream+1)
	if e.Tool >= 0 {
		where += fmt.Sprintf(" tool #%d", e.Tool+1)
	}
	if e.Key != "" {
		where += " " + e.Key
	}
	return where + ": " + e.Err.Error()
}

func (e *ConfigError) Unwrap() error { return e.Err }

// Errors a ConfigError can wrap, besides the parse errors of durations and
// templates.
var (
	ErrReservedName  = errors.New("the name is reserved for the kernel's own tools")
	ErrDuplicateName = errors.New("another upstream already has this name")
	ErrInvalidName   = errors.New("a name must be 1-64 of a-z, 0-9, '-', '_'")
	ErrEmptyCommand  = errors.New("the command must name a program")
	ErrInvalidAction = errors.New("the action must be one of read, list, search, write, call")
)

// toolActions are the actions a brokered tool may be configured with:
// the grant actions except escalate, which only the kernel's own tool
// has.
var toolActions = []string{policy.ActionRead, policy.ActionList, policy.ActionSearch, policy.ActionWrite, policy.ActionCall}

// Parse checks the [[upstream]] tables of a config and returns their
// specs, in order. base is the directory of the config file: a relative
// cwd is taken from it, and an upstream without a cwd runs in it ("" keeps
// cwd as written and an unset one inherited). The first problem found is
// returned as a *ConfigError. What can only be known once an upstream runs
// (a configured tool it does not offer, a placeholder its schema lacks) is
// not checked here; Snapshot reports it.
func Parse(cfgs []Config, base string) ([]Spec, error) {
	specs := make([]Spec, 0, len(cfgs))
	seen := map[string]bool{}
	for i, c := range cfgs {
		fail := func(key string, err error) ([]Spec, error) {
			return nil, &ConfigError{Upstream: i, Tool: -1, Key: key, Err: err}
		}
		switch {
		case !validNamespace(c.Name):
			return fail("name", fmt.Errorf("%q: %w", c.Name, ErrInvalidName))
		case slices.Contains(reservedNames, c.Name):
			return fail("name", fmt.Errorf("%q: %w", c.Name, ErrReservedName))
		case seen[c.Name]:
			return fail("name", fmt.Errorf("%q: %w", c.Name, ErrDuplicateName))
		case len(c.Command) == 0 || c.Command[0] == "":
			return fail("command", ErrEmptyCommand)
		}
		seen[c.Name] = true
		for _, a := range c.Command {
			if strings.ContainsRune(a, 0) {
				return fail("command", errors.New("an argument contains NUL"))
			}
		}
		for k, v := range c.Env {
			if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
				return fail("env", fmt.Errorf("%q: a variable name must be non-empty without '=' or NUL, and its value without NUL", k))
			}
		}
		s := Spec{Name: c.Name, Command: slices.Clone(c.Command), Env: map[string]string{}, Tools: map[string]ToolSpec{}, HostPaths: c.HostPaths}
		for k, v := range c.Env {
			s.Env[k] = v
		}
		s.Dir = c.Cwd
		if s.Dir == "" {
			s.Dir = base
		} else if base != "" && !filepath.IsAbs(s.Dir) {
			s.Dir = filepath.Join(base, s.Dir)
		}
		var err error
		if s.StartupTimeout, err = duration(c.StartupTimeout, DefaultStartupTimeout); err != nil {
			return fail("startup_timeout", err)
		}
		if s.CallTimeout, err = duration(c.CallTimeout, DefaultCallTimeout); err != nil {
			return fail("call_timeout", err)
		}
		for j, tc := range c.Tools {
			tfail := func(key string, err error) ([]Spec, error) {
				return nil, &ConfigError{Upstream: i, Tool: j, Key: key, Err: err}
			}
			if tc.Name == "" {
				return tfail("name", errors.New("the tool's name is required"))
			}
			if _, dup := s.Tools[tc.Name]; dup {
				return tfail("name", fmt.Errorf("%q is configured twice", tc.Name))
			}
			ts := ToolSpec{Action: tc.Action}
			if ts.Action == "" {
				ts.Action = policy.ActionCall
			}
			if !slices.Contains(toolActions, ts.Action) {
				return tfail("action", fmt.Errorf("%q: %w", tc.Action, ErrInvalidAction))
			}
			if tc.Resource == "" {
				d, ok := DefaultTool(tc.Name)
				if !ok {
					return tfail("resource", fmt.Errorf("tool name %q cannot be the default resource's one segment; set resource", tc.Name))
				}
				ts.Resource = d.Resource
			} else if ts.Resource, err = policy.ParseTemplate(tc.Resource); err != nil {
				return tfail("resource", err)
			}
			s.Tools[tc.Name] = ts
		}
		specs = append(specs, s)
	}
	return specs, nil
}

// duration parses a Go duration string; "" is def.
func duration(s string, def time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as \"30s\" or \"2m\"", s)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q: must be longer than zero", s)
	}
	return d, nil
}

// validNamespace reports whether s can be an upstream's name: the
// namespace of every resource its tools act on, so policy's rule for
// namespaces.
func validNamespace(s string) bool {
	_, err := policy.ParseResource(s + ":/")
	return err == nil && !strings.Contains(s, ":")
}
