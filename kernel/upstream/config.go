package upstream

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sharedos/sharedos-mcp/kernel/secret"
	"github.com/sharedos/sharedos-mcp/kernel/webclient"
	"github.com/sharedos/sharedos-mcp/policy"
)

// Config is one [[upstream]] table as the kernel's TOML config holds it.
// The kernel's config loader embeds it (`Upstream []upstream.Config
// `toml:"upstream"“) and decodes with unknown keys refused; Parse then
// checks what the decoder cannot.
//
// An upstream is either a program the kernel runs (command, with env and
// cwd) or a remote server it reaches over Streamable HTTP (url, with
// headers, ca_file and auth); exactly one of command and url is set.
// {secret:NAME} is replaced in env and headers values (and is what
// client_secret must be), nowhere else.
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
	HostPaths bool `toml:"host_paths"`

	URL     string            `toml:"url"`
	Headers map[string]string `toml:"headers"`
	CAFile  string            `toml:"ca_file"`
	// Auth is "oauth" for a server whose tokens kernel login obtains;
	// "" sends only the configured headers.
	Auth         string   `toml:"auth"`
	ClientID     string   `toml:"client_id"`
	ClientSecret string   `toml:"client_secret"`
	Scopes       []string `toml:"scopes"`

	Tools []ToolConfig `toml:"tool"`
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
	Command        []string          // a program's upstream; nil for a remote one
	Env            map[string]string // only these, plus PATH and HOME, reach the upstream; {secret:NAME} not yet replaced
	Dir            string            // "" inherits the kernel's
	StartupTimeout time.Duration
	CallTimeout    time.Duration
	// HostPaths: a {name:path} placeholder's value is resolved on this
	// host (links followed, a relative path taken from Dir), and the path
	// it really leads to is what is authorized, recorded and forwarded.
	HostPaths bool
	// Remote: the MCP endpoint (https, or http to a loopback address),
	// set instead of Command.
	Remote *RemoteSpec
	// Tools holds the configured tools by the upstream's tool name; a tool
	// the upstream offers that is not here gets DefaultTool.
	Tools map[string]ToolSpec
}

// RemoteSpec is how a remote upstream is reached.
type RemoteSpec struct {
	URL     string
	Headers map[string]string // {secret:NAME} not yet replaced
	CAFile  string            // absolute when the config file's directory was known; "" trusts the system roots only
	Auth    string            // AuthOAuth or ""
	// With AuthOAuth: the configured client (none registers one at each
	// login), its secret as configured ({secret:NAME}), the scopes to ask
	// for (none asks for what the server names).
	ClientID     string
	ClientSecret string
	Scopes       []string
}

// AuthOAuth is the auth of a remote upstream whose tokens come from
// kernel login.
const AuthOAuth = "oauth"

// The transports of an upstream, as Spec.Transport names them.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "streamable-http"
)

// Transport is TransportHTTP for a remote upstream, TransportStdio for a
// program.
func (s *Spec) Transport() string {
	if s.Remote != nil {
		return TransportHTTP
	}
	return TransportStdio
}

// DisplayURL is a remote upstream's URL without its query (which may hold
// a key): what logs, doctor, catalog and the status file show. "" for a
// program.
func (s *Spec) DisplayURL() string {
	if s.Remote == nil {
		return ""
	}
	u, err := url.Parse(s.Remote.URL)
	if err != nil {
		return ""
	}
	return webclient.Display(u)
}

// SecretRef is a {secret:NAME} in one of an upstream's keys.
type SecretRef struct {
	Key  string // "env", "headers" or "client_secret"
	Name string
}

// SecretRefs returns the secrets the upstream's config refers to, by key
// (env, headers, client_secret) and then by name, each once per key.
// Parse has checked every reference is well formed.
func (s *Spec) SecretRefs() []SecretRef {
	var refs []SecretRef
	add := func(key string, values ...string) {
		var names []string
		for _, v := range values {
			ns, _ := secret.Refs(v)
			names = append(names, ns...)
		}
		slices.Sort(names)
		for _, n := range slices.Compact(names) {
			refs = append(refs, SecretRef{Key: key, Name: n})
		}
	}
	add("env", slices.Collect(maps.Values(s.Env))...)
	if r := s.Remote; r != nil {
		add("headers", slices.Collect(maps.Values(r.Headers))...)
		add("client_secret", r.ClientSecret)
	}
	return refs
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
	ErrNoTransport   = errors.New("an upstream needs command (a program the kernel runs) or url (a Streamable HTTP server)")
	ErrTwoTransports = errors.New("an upstream has command or url, not both")
	ErrNotForRemote  = errors.New("a remote upstream (url) has no such key: it is for a command")
	ErrNotForCommand = errors.New("an upstream run by command has no such key: it is for a url")
	ErrInvalidAuth   = errors.New(`auth must be "oauth", or left out to send only the configured headers`)
	ErrNotForHeaders = errors.New(`this key is for auth = "oauth" only`)
	ErrClientSecret  = errors.New("client_secret must be a reference to a [[secret]], {secret:NAME}, never the secret itself")
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
		case c.Command != nil && c.URL != "":
			return fail("url", ErrTwoTransports)
		case c.Command == nil && c.URL == "":
			return fail("", ErrNoTransport)
		}
		seen[c.Name] = true
		s := Spec{Name: c.Name, Tools: map[string]ToolSpec{}}
		var key string
		var err error
		if c.URL != "" {
			key, err = parseRemote(&c, &s, base)
		} else {
			key, err = parseCommand(&c, &s, base)
		}
		if err != nil {
			return fail(key, err)
		}
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

// parseCommand fills s from the keys of an upstream run by command; it
// returns the key of the first problem and the problem.
func parseCommand(c *Config, s *Spec, base string) (string, error) {
	if len(c.Command) == 0 || c.Command[0] == "" {
		return "command", ErrEmptyCommand
	}
	for _, a := range c.Command {
		if strings.ContainsRune(a, 0) {
			return "command", errors.New("an argument contains NUL")
		}
	}
	for _, k := range []struct {
		key string
		set bool
	}{{"headers", c.Headers != nil}, {"ca_file", c.CAFile != ""}, {"auth", c.Auth != ""}, {"client_id", c.ClientID != ""}, {"client_secret", c.ClientSecret != ""}, {"scopes", c.Scopes != nil}} {
		if k.set {
			return k.key, ErrNotForCommand
		}
	}
	s.Env = map[string]string{}
	for _, k := range sortedKeys(c.Env) {
		v := c.Env[k]
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return "env", fmt.Errorf("%q: a variable name must be non-empty without '=' or NUL, and its value without NUL", k)
		}
		if _, err := secret.Refs(v); err != nil {
			return "env", fmt.Errorf("%s: %w", k, err)
		}
		s.Env[k] = v
	}
	s.Command, s.HostPaths = slices.Clone(c.Command), c.HostPaths
	s.Dir = c.Cwd
	if s.Dir == "" {
		s.Dir = base
	} else if base != "" && !filepath.IsAbs(s.Dir) {
		s.Dir = filepath.Join(base, s.Dir)
	}
	return "", nil
}

// parseRemote fills s from the keys of a remote upstream; it returns the
// key of the first problem and the problem.
func parseRemote(c *Config, s *Spec, base string) (string, error) {
	if _, err := webclient.CheckURL(c.URL); err != nil {
		return "url", err
	}
	for _, k := range []struct {
		key string
		set bool
	}{{"env", c.Env != nil}, {"cwd", c.Cwd != ""}, {"host_paths", c.HostPaths}} {
		if k.set {
			return k.key, ErrNotForRemote
		}
	}
	r := &RemoteSpec{URL: c.URL, Headers: map[string]string{}, Auth: c.Auth, ClientID: c.ClientID, ClientSecret: c.ClientSecret, Scopes: slices.Clone(c.Scopes)}
	switch c.Auth {
	case "", AuthOAuth:
	default:
		return "auth", fmt.Errorf("%q: %w", c.Auth, ErrInvalidAuth)
	}
	if c.Auth != AuthOAuth {
		for _, k := range []struct {
			key string
			set bool
		}{{"client_id", c.ClientID != ""}, {"client_secret", c.ClientSecret != ""}, {"scopes", c.Scopes != nil}} {
			if k.set {
				return k.key, ErrNotForHeaders
			}
		}
	}
	if c.ClientSecret != "" {
		names, err := secret.Refs(c.ClientSecret)
		if err != nil || len(names) != 1 || c.ClientSecret != "{secret:"+names[0]+"}" {
			return "client_secret", ErrClientSecret
		}
		if c.ClientID == "" {
			return "client_secret", errors.New("a client_secret goes with the client_id it is the secret of")
		}
	}
	for _, sc := range c.Scopes {
		if sc == "" || strings.ContainsAny(sc, " \t\r\n\x00") {
			return "scopes", fmt.Errorf("%q: a scope is one word", sc)
		}
	}
	for _, k := range sortedKeys(c.Headers) {
		v := c.Headers[k]
		if _, err := secret.Refs(v); err != nil {
			return "headers", fmt.Errorf("%s: %w", k, err)
		}
		// The value as written: a secret's own value is checked the same
		// way once it is known, when the upstream starts.
		if err := webclient.CheckHeader(k, v, c.Auth == AuthOAuth); err != nil {
			return "headers", err
		}
		r.Headers[k] = v
	}
	if c.CAFile != "" {
		if strings.ContainsRune(c.CAFile, 0) {
			return "ca_file", errors.New("the path contains NUL")
		}
		r.CAFile = c.CAFile
		if base != "" && !filepath.IsAbs(r.CAFile) {
			r.CAFile = filepath.Join(base, r.CAFile)
		}
	}
	s.Remote = r
	return "", nil
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
