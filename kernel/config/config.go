package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/sharedos/sharedos-mcp/internal/nearest"
	"github.com/sharedos/sharedos-mcp/kernel/secret"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
	"github.com/sharedos/sharedos-mcp/policy"
)

// Config is what the kernel serves and to whom. Flags override the file's
// values before the kernel starts.
type Config struct {
	Socket    string         // "" means sockpath.Default
	AuditLog  string         // "" means audit.DefaultPath
	AllowUIDs []uint32       // nil means the kernel's own uid
	Root      string         // the files root, absolute; "" serves no file tools (only valid with upstreams)
	Grants    []policy.Grant // deny by default: only these allow anything

	// OperatorUIDs are the uids, besides the kernel's own and root, whose
	// connections may ask operator methods (kernel explain) without
	// saying hello. They may connect for that even when AllowUIDs does
	// not name them.
	OperatorUIDs []uint32
	// AskTimeout is how long a call that needs a person's approval is
	// held before it is answered approval_pending; 0 means
	// DefaultAskTimeout.
	AskTimeout time.Duration
	// Integrations are the [[integration]] declarations, in file order,
	// and Hierarchy the parents they give (the zero Hierarchy when there
	// are none).
	Integrations []policy.Integration
	Hierarchy    policy.Hierarchy

	// StateDir holds what the kernel keeps between runs besides its audit
	// log: the upstreams' pins and status. "" means DefaultStateDir.
	StateDir string
	// Upstreams are the [[upstream]] servers the kernel brokers, in the
	// order the file declares them.
	Upstreams []upstream.Spec
	// Secrets are the [[secret]] tables, in order: the credentials the
	// kernel loads at start and on each reload (secret.Load), for the
	// {secret:NAME} references of the upstreams' env and headers values
	// (every one of which names one of these).
	Secrets []secret.Spec

	// AllowHardLinks serves regular files with more than one name; see
	// Server.AllowHardLinks.
	AllowHardLinks bool

	// Arguments is [audit] arguments: what the audit records of each
	// call's arguments, one of the Arguments* values (ArgumentsDigest when
	// the file says nothing).
	Arguments string
	// Telemetry is the [telemetry] table; nil when the file has none, and
	// then nothing is exported, whatever the environment says.
	Telemetry *Telemetry

	// File is the config file the values came from; "" for Default.
	File string
	// SHA256 is the SHA-256 (hex) of the file's bytes as read; "" for
	// Default. The audit's config.loaded records it.
	SHA256 string
	// Lines says where in File each value is, for messages.
	Lines Lines
}

// Lines holds 1-based line numbers in a config file; 0 is unknown.
type Lines struct {
	Root         int   // [files] root
	Grants       []int // each [[grant]] header, in order
	Upstreams    []int // each [[upstream]] header, in order
	Integrations []int // each [[integration]] header, in order
	Secrets      []int // each [[secret]] header, in order
	Telemetry    int   // the [telemetry] header
}

// Rules are the config's grants and hierarchy, as the policy decides on
// them.
func (c Config) Rules() policy.Rules {
	return policy.Rules{Grants: c.Grants, Integrations: c.Hierarchy}
}

// IntegrationRef names [[integration]] i (0-based) for a message:
// "FILE:LINE: integration NAME" when the line is known.
func (c Config) IntegrationRef(i int) string {
	name := "integration"
	if i < len(c.Integrations) {
		name += " " + strconv.Quote(c.Integrations[i].Name)
	}
	return c.ref(lineOf(c.Lines.Integrations, i), name)
}

// ref names what for a message: "FILE:LINE: what" when the config came
// from a file and line is known (not 0), "FILE: what" when only the file
// is, else what alone.
func (c Config) ref(line int, what string) string {
	switch {
	case c.File == "":
		return what
	case line > 0:
		return fmt.Sprintf("%s:%d: %s", c.File, line, what)
	}
	return c.File + ": " + what
}

// lineOf is lines[i], 0 (unknown) when there is no such entry.
func lineOf(lines []int, i int) int {
	if i < len(lines) {
		return lines[i]
	}
	return 0
}

// GrantLine is the line of grant i's [[grant]] header (0-based i), 0
// when unknown.
func (c Config) GrantLine(i int) int {
	return lineOf(c.Lines.Grants, i)
}

// GrantRef names grant i (0-based) for a message: "FILE:LINE: grant #N"
// when the config came from a file, else "grant #N".
func (c Config) GrantRef(i int) string {
	return c.ref(c.GrantLine(i), fmt.Sprintf("grant #%d", i+1))
}

// RootRef names where the files root was set, "[files] root at FILE:LINE",
// or "" when the config did not set it.
func (c Config) RootRef() string {
	if c.File == "" || c.Lines.Root == 0 {
		return ""
	}
	return fmt.Sprintf("[files] root at %s:%d", c.File, c.Lines.Root)
}

// UpstreamRef names upstream i (0-based) for a message: "FILE:LINE:
// upstream NAME" when the config came from a file and the line is known.
func (c Config) UpstreamRef(i int) string {
	name := "upstream"
	if i < len(c.Upstreams) {
		name += " " + c.Upstreams[i].Name
	}
	return c.ref(lineOf(c.Lines.Upstreams, i), name)
}

// builtinNamespaces are the namespaces of the kernel's own tools: the
// file tools' and sharedos.escalate's. The kernel's tests hold its
// registry to them.
var builtinNamespaces = []string{"files", "sharedos"}

// Namespaces returns the resource namespaces a grant in this config can
// name: the built-in tools' (files, sharedos) and each upstream's name. A
// namespace not in the list is a grant that could never match anything,
// so Parse refuses it.
func (c Config) Namespaces() []string {
	ns := slices.Clone(builtinNamespaces)
	for _, u := range c.Upstreams {
		ns = append(ns, u.Name)
	}
	return ns
}

// DefaultStateDir is where the kernel keeps its upstreams' pins and
// status when the config names no state_dir: $XDG_STATE_HOME/sharedos,
// else ~/.local/state/sharedos.
func DefaultStateDir(getenv func(string) string) (string, error) {
	return upstream.DefaultStateDir(getenv)
}

// StateDirOrDefault is the config's state_dir, else DefaultStateDir.
func (c Config) StateDirOrDefault(getenv func(string) string) (string, error) {
	if c.StateDir != "" {
		return c.StateDir, nil
	}
	return DefaultStateDir(getenv)
}

// fileConfig is the TOML document. Unknown keys are an error, so a typo in
// a grant cannot silently widen or narrow what is allowed.
type fileConfig struct {
	Socket       string   `toml:"socket"`
	AuditLog     string   `toml:"audit_log"`
	StateDir     string   `toml:"state_dir"`
	AllowUIDs    []uint32 `toml:"allow_uids"`
	OperatorUIDs []uint32 `toml:"operator_uids"`
	AskTimeout   string   `toml:"ask_timeout"`
	Files        struct {
		Root           string `toml:"root"`
		AllowHardLinks bool   `toml:"allow_hard_links"`
	} `toml:"files"`
	Grant       []fileGrant       `toml:"grant"`
	Upstream    []upstream.Config `toml:"upstream"`
	Integration []fileIntegration `toml:"integration"`
	Secret      []secret.Config   `toml:"secret"`
	Audit       struct {
		Arguments string `toml:"arguments"`
	} `toml:"audit"`
	Telemetry *fileTelemetry `toml:"telemetry"`
}

type fileIntegration struct {
	Name   string `toml:"name"`
	Parent string `toml:"parent"`
}

type fileGrant struct {
	Subject     string   `toml:"subject"`
	Resource    string   `toml:"resource"`
	Descendants bool     `toml:"descendants"`
	Actions     []string `toml:"actions"`
	// any, so that a local date-time (no offset, ambiguous across time
	// zones) can be told apart from an offset one and refused.
	Expires any `toml:"expires"`

	Ask       string `toml:"ask"`
	AskTTL    string `toml:"ask_ttl"`
	Limit     string `toml:"limit"`
	TurnLimit *int64 `toml:"turn_limit"`
}

// DefaultAskTimeout is how long the kernel holds a call that waits for a
// person's approval when the config does not say: below serve's default
// --call-timeout (2m), so the held call is answered approval_pending
// before the shim gives up on it.
const DefaultAskTimeout = 60 * time.Second

// MaxAskTimeout bounds ask_timeout: a held call keeps its place in its
// turn, and the calls with effects behind it wait for it.
const MaxAskTimeout = 10 * time.Minute

// Default serves root read-only (read, list, search, everything
// beneath it) to every integration: the quickstart with no --config.
func Default(root string) Config {
	return Config{
		Root:      root,
		Arguments: ArgumentsDigest,
		Grants: []policy.Grant{{
			Subject:     policy.SubjectWildcard,
			Resource:    policy.Resource{Namespace: "files", Path: "/"},
			Descendants: true,
			Actions:     []string{policy.ActionRead, policy.ActionList, policy.ActionSearch},
		}},
	}
}

// Error is a config file that cannot be used as it stands. Its
// message names the file and, where known, the line, of each problem,
// one per line when there are several.
type Error struct {
	File string
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Problems lists what is wrong with the file, one problem each, in the
// order they were found (unknown keys, the top-level values, the
// upstreams, the grants): all that one reading can find. Only a document
// that cannot be read on (bad TOML, a value of the wrong type) stops at
// its first.
func (e *Error) Problems() []error {
	var p problems
	if errors.As(e.Err, &p) {
		return p
	}
	return []error{e.Err}
}

// problems collects what is wrong with a config document as it is read,
// so that one run of the kernel or kernel check reports it all.
type problems []error

// add appends err's problems.
func (p *problems) add(err error) {
	var more problems
	if errors.As(err, &more) {
		*p = append(*p, more...)
		return
	}
	*p = append(*p, err)
}

// err is nil, the one problem, or all of them.
func (p problems) err() error {
	switch len(p) {
	case 0:
		return nil
	case 1:
		return p[0]
	}
	return p
}

func (p problems) Error() string {
	lines := make([]string, len(p))
	for i, err := range p {
		lines[i] = err.Error()
	}
	return strings.Join(lines, "\n")
}

func (p problems) Unwrap() []error { return p }

// DefaultPath is where the kernel looks for its config when it is
// given none: $XDG_CONFIG_HOME/sharedos/kernel.toml, else
// ~/.config/sharedos/kernel.toml. A relative $XDG_CONFIG_HOME is ignored,
// as the XDG base directory specification asks.
func DefaultPath(getenv func(string) string) (string, error) {
	if d := getenv("XDG_CONFIG_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "sharedos", "kernel.toml"), nil
	}
	home := getenv("HOME")
	if home == "" {
		return "", errors.New("neither XDG_CONFIG_HOME nor HOME is set")
	}
	return filepath.Join(home, ".config", "sharedos", "kernel.toml"), nil
}

// Load reads and validates a TOML config file. Errors are
// *Error and name the file and, for anything the decoder saw, the
// line and column. In the file's paths a leading ~ is the home directory,
// and relative paths are taken relative to the file's directory, not to
// wherever the kernel happens to be started.
func Load(file string) (Config, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return Config{}, &Error{File: file, Err: fmt.Errorf("read config: %w", err)}
	}
	sum := sha256.Sum256(data)
	base := filepath.Dir(file)
	// An upstream runs in its cwd, taken from the file's directory; that
	// must not depend on where the kernel is later started from.
	absBase, err := filepath.Abs(base)
	if err != nil {
		return Config{}, &Error{File: file, Err: fmt.Errorf("read config: %w", err)}
	}
	c, err := parseConfig(file, data, absBase)
	if err != nil {
		return Config{}, &Error{File: file, Err: err}
	}
	c.SHA256 = hex.EncodeToString(sum[:])
	var errs problems
	for _, p := range []struct {
		key string
		v   *string
	}{{"socket", &c.Socket}, {"audit_log", &c.AuditLog}, {"state_dir", &c.StateDir}, {"[files] root", &c.Root}} {
		if *p.v == "" {
			continue
		}
		expanded, err := expandHome(*p.v)
		if err != nil {
			errs.add(fmt.Errorf("%s: %s: %w", file, p.key, err))
			continue
		}
		if !filepath.IsAbs(expanded) {
			expanded = filepath.Join(base, expanded)
			if p.v == &c.StateDir {
				// The pins are found again by kernel approve and doctor,
				// started from anywhere.
				expanded = filepath.Join(absBase, *p.v)
			}
		}
		*p.v = expanded
	}
	if err := errs.err(); err != nil {
		return Config{}, &Error{File: file, Err: err}
	}
	return c, nil
}

// expandHome replaces a leading "~" or "~/" with the home directory. The
// ~user form is refused rather than left as a directory named "~user".
func expandHome(p string) (string, error) {
	if !strings.HasPrefix(p, "~") {
		return p, nil
	}
	rest, ok := strings.CutPrefix(p, "~/")
	if p == "~" {
		rest, ok = "", true
	}
	if !ok {
		return "", fmt.Errorf("%q: only ~ and ~/ are expanded; write the full path", p)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("%q: no home directory to expand ~ to", p)
	}
	return filepath.Join(home, rest), nil
}

// Parse decodes and validates a config document; name is used in
// error messages, which are *Error. Paths are not resolved (see
// Load) nor checked on disk: CheckRoot does that once flags have
// had their say.
func Parse(name string, data []byte) (Config, error) {
	c, err := parseConfig(name, data, "")
	if err != nil {
		return Config{}, &Error{File: name, Err: err}
	}
	return c, nil
}

// parseConfig decodes and validates; base, when not "", is the config
// file's directory, which an upstream's cwd is relative to (and where an
// upstream without one runs).
func parseConfig(name string, data []byte, base string) (Config, error) {
	var fc fileConfig
	var errs problems
	dec := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields()
	if err := dec.Decode(&fc); err != nil {
		var strict *toml.StrictMissingError
		if !errors.As(err, &strict) {
			// A document that cannot be read on past its first problem.
			return Config{}, decodeError(name, err)
		}
		// Unknown keys: the rest was read, and is checked as well.
		errs.add(decodeError(name, err))
	}
	c := Config{Socket: fc.Socket, AuditLog: fc.AuditLog, StateDir: fc.StateDir, AllowUIDs: fc.AllowUIDs, OperatorUIDs: fc.OperatorUIDs,
		Root: fc.Files.Root, AllowHardLinks: fc.Files.AllowHardLinks, File: name, Lines: configLines(data)}
	if fc.AllowUIDs != nil && len(fc.AllowUIDs) == 0 {
		errs.add(fmt.Errorf("%s: allow_uids is empty, so no one could connect; remove it to serve your own uid", name))
	}
	if fc.OperatorUIDs != nil && len(fc.OperatorUIDs) == 0 {
		errs.add(fmt.Errorf("%s: operator_uids is empty; remove it (the kernel's own uid and root are operators anyway)", name))
	}
	var err error
	if c.Arguments, err = parseArguments(fc.Audit.Arguments); err != nil {
		errs.add(fmt.Errorf("%s: %w", name, err))
	}
	if c.Telemetry, err = parseTelemetry(fc.Telemetry); err != nil {
		errs.add(telemetryError(name, c.Lines, err))
	}
	if fc.AskTimeout != "" {
		d, err := time.ParseDuration(fc.AskTimeout)
		if err != nil || d <= 0 || d > MaxAskTimeout {
			errs.add(fmt.Errorf("%s: ask_timeout %q: want a positive Go duration of at most %s, below serve's --call-timeout (2m by default), e.g. \"60s\"",
				name, fc.AskTimeout, MaxAskTimeout))
		} else {
			c.AskTimeout = d
		}
	}
	upstreamsOK := true
	for i := range fc.Upstream {
		if err := checkUpstream(name, data, base, fc.Upstream, i); err != nil {
			errs.add(err)
			upstreamsOK = false
		}
	}
	namespaces := slices.Clone(builtinNamespaces)
	for _, u := range fc.Upstream {
		if !slices.Contains(namespaces, u.Name) {
			namespaces = append(namespaces, u.Name)
		}
	}
	if upstreamsOK {
		// What holds between the upstreams (no name twice), once each
		// one is known to be well formed.
		specs, err := upstream.Parse(fc.Upstream, base)
		var ce *upstream.ConfigError
		switch {
		case errors.As(err, &ce):
			errs.add(upstreamError(name, data, fc.Upstream, ce))
		case err != nil:
			errs.add(fmt.Errorf("%s: %w", name, err))
		case len(specs) > 0:
			c.Upstreams = specs
			namespaces = c.Namespaces()
		}
	}
	c.Secrets = parseSecrets(&errs, name, data, base, c.Lines, fc.Secret, fc.Upstream, c.Upstreams, c.Telemetry)
	// The grants a hierarchy's parents may be named by: every grant with
	// a subject, even one wrong otherwise, so that its problem is not
	// said twice.
	var named []policy.Grant
	for i, g := range fc.Grant {
		pg, ok := c.grant(&errs, i, g, namespaces)
		if ok {
			c.Grants = append(c.Grants, pg)
		}
		if policy.ValidateSubject(g.Subject) == nil {
			named = append(named, policy.Grant{Subject: g.Subject})
		}
	}
	h := Config{Grants: named, File: c.File, Lines: c.Lines}
	if err := h.hierarchy(fc.Integration); err != nil {
		errs.add(err)
	}
	c.Integrations, c.Hierarchy = h.Integrations, h.Hierarchy
	if err := errs.err(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// checkUpstream checks the [[upstream]] at i on its own, its cwd expanded
// when base (the config's directory) is known.
func checkUpstream(name string, data []byte, base string, ups []upstream.Config, i int) error {
	if base != "" {
		cwd, err := expandHome(ups[i].Cwd)
		if err != nil {
			return upstreamError(name, data, ups, &upstream.ConfigError{Upstream: i, Tool: -1, Key: "cwd", Err: err})
		}
		ups[i].Cwd = cwd
		if ups[i].CAFile, err = expandHome(ups[i].CAFile); err != nil {
			return upstreamError(name, data, ups, &upstream.ConfigError{Upstream: i, Tool: -1, Key: "ca_file", Err: err})
		}
	}
	_, err := upstream.Parse(ups[i:i+1], base)
	var ce *upstream.ConfigError
	if errors.As(err, &ce) {
		ce.Upstream = i
		return upstreamError(name, data, ups, ce)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// grant reads [[grant]] i, adding each of its problems to errs; ok is
// false when it had any.
func (c *Config) grant(errs *problems, i int, g fileGrant, namespaces []string) (pg policy.Grant, ok bool) {
	where := c.GrantRef(i)
	var mine []string // this grant's problems, each said once
	add := func(err error) {
		if !slices.Contains(mine, err.Error()) {
			mine = append(mine, err.Error())
			errs.add(err)
		}
	}
	r, err := policy.ParseResource(g.Resource)
	switch {
	case err != nil:
		add(fmt.Errorf("%s: %w", where, err))
	case !slices.Contains(namespaces, r.Namespace):
		msg := fmt.Sprintf("%s: resource %q: unknown namespace %q, so the grant could never match (the namespaces are %s)",
			where, g.Resource, r.Namespace, strings.Join(namespaces, ", "))
		if s := nearest.Find(r.Namespace, nearest.Names(namespaces...)); s != "" {
			msg += fmt.Sprintf("; did you mean %s:%s?", s, r.Path)
		}
		add(errors.New(msg))
	}
	// The subject on its own, then the rest as Validate sees it, so that
	// a grant wrong in both says so at once.
	if err := policy.ValidateSubject(g.Subject); err != nil {
		add(fmt.Errorf("%s: %w", where, err))
	}
	pg = policy.Grant{Subject: policy.SubjectWildcard, Resource: r, Descendants: g.Descendants, Actions: g.Actions}
	actions := nearestAction(g.Actions, policy.KnownAction, grantActions)
	if err := pg.Validate(); err != nil {
		add(fmt.Errorf("%s: %w%s", where, err, actions))
	}
	switch e := g.Expires.(type) {
	case nil:
	case time.Time:
		pg.Expires = e
	default:
		add(fmt.Errorf("%s: expires must be a date-time with an offset, e.g. 2027-01-01T00:00:00Z", where))
	}
	if err := grantBudget(g, &pg); err != nil {
		add(fmt.Errorf("%s: %w%s", where, err, actions))
	}
	pg.Subject = g.Subject
	return pg, len(mine) == 0
}

// grantActions and upstreamToolActions are what a grant and an
// [[upstream.tool]] may name, for "did you mean".
var (
	grantActions        = []string{policy.ActionRead, policy.ActionList, policy.ActionSearch, policy.ActionWrite, policy.ActionEscalate, policy.ActionCall}
	upstreamToolActions = []string{policy.ActionRead, policy.ActionList, policy.ActionSearch, policy.ActionWrite, policy.ActionCall}
)

// nearestAction is "; did you mean read?" for the first action that is
// not known and is one edit from one of names; "" otherwise.
func nearestAction(actions []string, known func(string) bool, names []string) string {
	for _, a := range actions {
		if known(a) {
			continue
		}
		if s := nearest.Find(a, nearest.Names(names...)); s != "" {
			return fmt.Sprintf("; did you mean %s?", s)
		}
	}
	return ""
}

// grantBudget reads a grant's ask, ask_ttl, limit and turn_limit into pg.
func grantBudget(g fileGrant, pg *policy.Grant) error {
	switch g.Ask {
	case "", policy.AskHarness, policy.AskOperator:
		pg.Ask = g.Ask
	default:
		return fmt.Errorf("ask %q: want %q (the person at the harness, or the operator, approves each call) or %q (only the operator does); leave it out for no approval",
			g.Ask, policy.AskHarness, policy.AskOperator)
	}
	if g.AskTTL != "" {
		if g.Ask == "" {
			return fmt.Errorf("ask_ttl %q is set but ask is not; set ask, or remove ask_ttl", g.AskTTL)
		}
		d, err := time.ParseDuration(g.AskTTL)
		if err != nil || d <= 0 {
			return fmt.Errorf("ask_ttl %q: want a positive Go duration, e.g. \"10m\"", g.AskTTL)
		}
		pg.AskTTL = d
	} else if g.Ask != "" {
		pg.AskTTL = policy.DefaultAskTTL
	}
	if g.Limit != "" {
		l, err := policy.ParseLimit(g.Limit)
		if err != nil {
			return err
		}
		pg.Limit = l
	}
	if g.TurnLimit != nil {
		if *g.TurnLimit < 1 || *g.TurnLimit > policy.MaxTurnLimit {
			return fmt.Errorf("turn_limit %d: want a whole number from 1 to %d; leave it out for no limit", *g.TurnLimit, policy.MaxTurnLimit)
		}
		pg.TurnLimit = int(*g.TurnLimit)
	}
	return pg.Validate()
}

// hierarchy reads the [[integration]] declarations. A parent must be
// declared, or named by a grant's subject: one nobody names is a typo
// that would leave its child with nothing.
func (c *Config) hierarchy(decls []fileIntegration) error {
	if len(decls) == 0 {
		return nil
	}
	var known []string
	for _, g := range c.Grants {
		if n, ok := strings.CutPrefix(g.Subject, "integration:"); ok && n != "*" {
			known = append(known, n)
		}
	}
	for _, d := range decls {
		c.Integrations = append(c.Integrations, policy.Integration{Name: d.Name, Parent: d.Parent})
	}
	h, err := policy.NewHierarchy(c.Integrations, known)
	var he *policy.HierarchyError
	if errors.As(err, &he) {
		if he.Kind == policy.HierarchyInvalidName && he.Name != c.Integrations[he.Index].Name {
			return fmt.Errorf("%s: parent %q is not a valid integration name (1-64 letters, digits, spaces, '-', '_' or '.')", c.IntegrationRef(he.Index), he.Name)
		}
		msg := fmt.Sprintf("%s: %s", c.IntegrationRef(he.Index), he.Reason())
		switch he.Kind {
		case policy.HierarchyUnknownParent:
			names := slices.Clone(known)
			for _, d := range c.Integrations {
				names = append(names, d.Name)
			}
			if s := nearest.Find(he.Parent, nearest.Names(names...)); s != "" && s != he.Parent {
				msg += fmt.Sprintf("; did you mean parent = %q?", s)
			} else {
				msg += fmt.Sprintf("; declare it ([[integration]] name = %q) or give it a grant", he.Parent)
			}
		case policy.HierarchyCycle:
			msg += "; one of them must have no parent"
		}
		return errors.New(msg)
	}
	if err != nil {
		return err
	}
	c.Hierarchy = h
	return nil
}

// upstreamError places an [[upstream]] problem at its line and column,
// with the action an [[upstream.tool]] likely meant.
func upstreamError(name string, data []byte, ups []upstream.Config, ce *upstream.ConfigError) error {
	hint := ""
	if errors.Is(ce.Err, upstream.ErrInvalidAction) && ce.Upstream < len(ups) && ce.Tool >= 0 && ce.Tool < len(ups[ce.Upstream].Tools) {
		a := ups[ce.Upstream].Tools[ce.Tool].Action
		hint = nearestAction([]string{a}, func(s string) bool { return slices.Contains(upstreamToolActions, s) }, upstreamToolActions)
	}
	if line, col, ok := upstream.Locate(data, ce); ok {
		return fmt.Errorf("%s:%d:%d: %w%s", name, line, col, ce, hint)
	}
	return fmt.Errorf("%s: %w%s", name, ce, hint)
}

// configLines finds the lines of [files] root and of each [[grant]] in a
// document that has already decoded. It reads go-toml's unstable parser,
// the one API that gives positions; TestConfigLines pins what it relies
// on. A document it cannot follow gives no lines, not an error.
func configLines(data []byte) Lines {
	var l Lines
	var p unstable.Parser
	p.Reset(data)
	table := ""
	line := func(n *unstable.Node) int {
		it := n.Key()
		if !it.Next() {
			return 0
		}
		off := int(it.Node().Raw.Offset)
		return 1 + bytes.Count(data[:min(off, len(data))], []byte("\n"))
	}
	for p.NextExpression() {
		n := p.Expression()
		key := tomlKey(n)
		switch n.Kind {
		case unstable.Table, unstable.ArrayTable:
			table = key
			if n.Kind == unstable.ArrayTable && key == "grant" {
				l.Grants = append(l.Grants, line(n))
			}
			if n.Kind == unstable.ArrayTable && key == "upstream" {
				l.Upstreams = append(l.Upstreams, line(n))
			}
			if n.Kind == unstable.ArrayTable && key == "secret" {
				l.Secrets = append(l.Secrets, line(n))
			}
			if n.Kind == unstable.ArrayTable && key == "integration" {
				l.Integrations = append(l.Integrations, line(n))
			}
			if n.Kind == unstable.Table && key == "telemetry" {
				l.Telemetry = line(n)
			}
		case unstable.KeyValue:
			if table+"."+key == "files.root" || (table == "" && key == "files.root") {
				l.Root = line(n)
			}
		}
	}
	if p.Error() != nil {
		return Lines{}
	}
	return l
}

// tomlKey is an expression's dotted key.
func tomlKey(n *unstable.Node) string {
	var parts []string
	it := n.Key()
	for it.Next() {
		parts = append(parts, string(it.Node().Data))
	}
	return strings.Join(parts, ".")
}

// decodeError turns go-toml's errors into one line per problem, each with
// file:line:column, so the user can jump to it.
func decodeError(name string, err error) error {
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) {
		var lines []string
		for i := range strict.Errors {
			de := &strict.Errors[i]
			row, col := de.Position()
			key := strings.Join(de.Key(), ".")
			msg := fmt.Sprintf("%s:%d:%d: unknown key %q", name, row, col, key)
			if s := nearestKey(key); s != "" {
				msg += fmt.Sprintf(" (did you mean %s?)", s)
			}
			lines = append(lines, msg)
		}
		p := make(problems, len(lines))
		for i, l := range lines {
			p[i] = errors.New(l)
		}
		return p.err()
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, col := de.Position()
		msg := strings.TrimPrefix(de.Error(), "toml: ")
		if k := strings.Join(de.Key(), "."); k != "" {
			msg = k + ": " + typeMessage(k, msg)
		}
		return fmt.Errorf("%s:%d:%d: %s", name, row, col, msg)
	}
	return fmt.Errorf("%s: %w", name, err)
}

// nearestKey is the known key of the same table nearest to a misspelt
// one ("ask_tll" for "ask_ttl"), by its last part; "" when none is close.
func nearestKey(key string) string {
	table, last := "", key
	if i := strings.LastIndexByte(key, '.'); i >= 0 {
		table, last = key[:i+1], key[i+1:]
	}
	var names []string
	for k := range wantValue {
		if rest, ok := strings.CutPrefix(k, table); ok && !strings.Contains(rest, ".") {
			names = append(names, rest)
		}
	}
	slices.Sort(names)
	return nearest.Find(last, nearest.Names(names...))
}

// wantValue says, per key, what a value must look like: what a message
// shows instead of the Go type go-toml names ("cannot decode TOML string
// into struct field kernel.fileGrant.Actions of type []string").
var wantValue = map[string]string{
	"socket":                   `a string, e.g. socket = "/run/user/1000/sharedos/kernel.sock"`,
	"audit_log":                `a string, e.g. audit_log = "~/.local/state/sharedos/audit.jsonl"`,
	"state_dir":                `a string, e.g. state_dir = "~/.local/state/sharedos"`,
	"allow_uids":               "an array of uids, e.g. allow_uids = [1000]",
	"operator_uids":            "an array of uids, e.g. operator_uids = [1001]",
	"ask_timeout":              `a Go duration string, e.g. ask_timeout = "60s"`,
	"integration":              "tables: [[integration]]",
	"integration.name":         `a string, e.g. name = "claude-code.explorer"`,
	"integration.parent":       `a string, e.g. parent = "claude-code"`,
	"grant.ask":                `"harness" or "operator"`,
	"grant.ask_ttl":            `a Go duration string, e.g. ask_ttl = "10m"`,
	"grant.limit":              `a string COUNT/WINDOW, e.g. limit = "100/1h"`,
	"grant.turn_limit":         "a whole number, e.g. turn_limit = 20",
	"files":                    "a table: [files]",
	"files.root":               `a string, e.g. root = "~/work"`,
	"files.allow_hard_links":   "true or false",
	"grant":                    "tables: [[grant]]",
	"grant.subject":            `a string, e.g. subject = "integration:claude-code"`,
	"grant.resource":           `a string, e.g. resource = "files:/docs"`,
	"grant.descendants":        "true or false",
	"grant.actions":            `an array of strings, e.g. actions = ["read", "list"]`,
	"grant.expires":            "a date-time with an offset, e.g. expires = 2027-01-01T00:00:00Z",
	"upstream":                 "tables: [[upstream]]",
	"upstream.name":            `a string, e.g. name = "memory"`,
	"upstream.command":         `an array of strings, e.g. command = ["npx", "-y", "@modelcontextprotocol/server-memory"]`,
	"upstream.env":             `a table of strings, e.g. env = { MEMORY_FILE_PATH = "/home/me/memory.jsonl" }`,
	"upstream.cwd":             `a string, e.g. cwd = "~/work"`,
	"upstream.startup_timeout": `a Go duration string, e.g. startup_timeout = "30s"`,
	"upstream.call_timeout":    `a Go duration string, e.g. call_timeout = "90s"`,
	"upstream.host_paths":      "true or false",
	"upstream.url":             `a string, e.g. url = "https://api.githubcopilot.com/mcp/"`,
	"upstream.headers":         `a table of strings, e.g. headers = { Authorization = "Bearer {secret:github-token}" }`,
	"upstream.ca_file":         `a string, e.g. ca_file = "~/.config/sharedos/company-ca.pem"`,
	"upstream.auth":            `"oauth", or leave it out`,
	"upstream.client_id":       `a string, e.g. client_id = "sharedos-mcp"`,
	"upstream.client_secret":   `a reference to a [[secret]], e.g. client_secret = "{secret:github-client}"`,
	"upstream.scopes":          `an array of strings, e.g. scopes = ["repo", "read:org"]`,
	"secret":                   "tables: [[secret]]",
	"secret.name":              `a string, e.g. name = "github-token"`,
	"secret.file":              `a string, e.g. file = "~/.config/sharedos/secrets/github"`,
	"secret.command":           `an array of strings, e.g. command = ["pass", "show", "github"]`,
	"secret.env":               `a string, e.g. env = "GITHUB_TOKEN"`,
	"upstream.tool":            "tables: [[upstream.tool]]",
	"upstream.tool.name":       `a string, e.g. name = "read_graph"`,
	"upstream.tool.action":     `one of "read", "list", "search", "write", "call"`,
	"upstream.tool.resource":   `a string, e.g. resource = "/graph" or "/repos/{owner}/{repo}"`,
	"audit":                    "a table: [audit]",
	"audit.arguments":          `one of "digest", "full", "none"`,
	"telemetry":                "a table: [telemetry]",
	"telemetry.otlp_endpoint":  `a string, e.g. otlp_endpoint = "http://127.0.0.1:4318"`,
	"telemetry.otlp_protocol":  `"http/protobuf" or "grpc"`,
	"telemetry.headers":        `a table of strings, e.g. headers = { authorization = "Bearer {secret:otlp-token}" }`,
	"telemetry.service_name":   `a string, e.g. service_name = "sharedos-kernel"`,
	"telemetry.audit_logs":     "true or false",
}

// The patterns typeMessage reads go-toml's errors with, compiled at the
// first type error, not at every start of every command.
var (
	tomlKind    = lazyRegexp(`cannot decode TOML (\w+)`)
	tooBig      = lazyRegexp(`value (-?\d+) cannot be stored`)
	goTypeWords = lazyRegexp(` into (struct field )?\S+ of type \S+| in \S+$`)
)

func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// typeMessage rewrites a go-toml type error for key in the config's own
// terms.
func typeMessage(key, msg string) string {
	want, ok := wantValue[key]
	if !ok {
		return goTypeWords().ReplaceAllString(msg, "")
	}
	switch {
	case tomlKind().MatchString(msg):
		kind := tomlKind().FindStringSubmatch(msg)[1]
		article := "a"
		if strings.ContainsRune("aeiou", rune(kind[0])) {
			article = "an"
		}
		return fmt.Sprintf("want %s, have %s %s", want, article, kind)
	case tooBig().MatchString(msg):
		return fmt.Sprintf("want %s, have %s", want, tooBig().FindStringSubmatch(msg)[1])
	}
	return "want " + want
}

// ErrNoRoot is a config that sets no files root.
var ErrNoRoot = errors.New("no files root")

// RootError is a files root that is not an existing directory.
type RootError struct {
	Path string // absolute
	Err  error  // what is wrong, without the path
}

func (e *RootError) Error() string { return fmt.Sprintf("files root %s: %v", e.Path, e.Err) }
func (e *RootError) Unwrap() error { return e.Err }

// CheckRoot makes root absolute and checks it is an existing directory.
// It returns ErrNoRoot for "" and a *RootError otherwise.
func CheckRoot(root string) (string, error) {
	if root == "" {
		return "", ErrNoRoot
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return "", &RootError{Path: root, Err: err}
	}
	fi, err := os.Stat(abs)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return "", &RootError{Path: abs, Err: err}
	}
	if !fi.IsDir() {
		return "", &RootError{Path: abs, Err: errors.New("not a directory")}
	}
	return abs, nil
}
