package policy

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"time"
)

// Actions a grant can carry. Each is granted on its own: write is never
// implied by read, nor search by list, and call (a brokered tool whose
// effect the kernel cannot classify) implies nothing and is implied by
// nothing.
const (
	ActionRead     = "read"
	ActionList     = "list"
	ActionSearch   = "search"
	ActionWrite    = "write"
	ActionEscalate = "escalate"
	ActionCall     = "call"
)

// KnownAction reports whether a is one of the actions above.
func KnownAction(a string) bool {
	switch a {
	case ActionRead, ActionList, ActionSearch, ActionWrite, ActionEscalate, ActionCall:
		return true
	}
	return false
}

// Resource is a namespaced, clean absolute path, written "namespace:/path".
type Resource struct {
	Namespace string
	Path      string
}

func (r Resource) String() string { return r.Namespace + ":" + r.Path }

// ParseResource parses "namespace:/path". The namespace is 1–64 lowercase
// letters, digits, '-' or '_'; the path must be absolute and already clean
// (no "..", no "//", no trailing "/"), so that the string a grant is
// written with is the string it matches.
func ParseResource(s string) (Resource, error) {
	ns, p, ok := strings.Cut(s, ":")
	if !ok {
		return Resource{}, fmt.Errorf("resource %q: want namespace:/path", s)
	}
	if !validNamespace(ns) {
		return Resource{}, fmt.Errorf("resource %q: namespace must be 1-64 of a-z, 0-9, '-', '_'", s)
	}
	if !strings.HasPrefix(p, "/") {
		return Resource{}, fmt.Errorf("resource %q: path must be absolute", s)
	}
	if strings.ContainsRune(p, 0) {
		return Resource{}, fmt.Errorf("resource %q: path contains NUL", s)
	}
	if path.Clean(p) != p {
		return Resource{}, fmt.Errorf("resource %q: path is not clean (want %q)", s, path.Clean(p))
	}
	return Resource{Namespace: ns, Path: p}, nil
}

func validNamespace(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// SubjectWildcard is the subject that matches every integration.
const SubjectWildcard = "integration:*"

// ValidateSubject checks a grant subject: "integration:NAME" with a valid
// integration name, or "integration:*".
func ValidateSubject(s string) error {
	name, ok := strings.CutPrefix(s, "integration:")
	if !ok {
		return fmt.Errorf("subject %q: want integration:NAME or %s", s, SubjectWildcard)
	}
	if name != "*" && !ValidIntegrationName(name) {
		return fmt.Errorf("subject %q: %q is not a valid integration name", s, name)
	}
	return nil
}

// Grant allows one subject the listed actions on one resource (and, with
// Descendants, on everything beneath it) until Expires.
type Grant struct {
	Subject     string
	Resource    Resource
	Descendants bool
	Actions     []string
	Expires     time.Time // zero: never
}

// Validate checks the grant's subject and actions.
func (g Grant) Validate() error {
	if err := ValidateSubject(g.Subject); err != nil {
		return err
	}
	if len(g.Actions) == 0 {
		return errors.New("actions: at least one action is required")
	}
	for _, a := range g.Actions {
		if !KnownAction(a) {
			return fmt.Errorf("action %q: want one of read, list, search, write, escalate, call", a)
		}
	}
	return nil
}

func (g Grant) matchesSubject(integration string) bool {
	return g.Subject == SubjectWildcard || g.Subject == "integration:"+integration
}

func (g Grant) matchesResource(r Resource) bool {
	if g.Resource.Namespace != r.Namespace {
		return false
	}
	if g.Resource.Path == r.Path {
		return true
	}
	if !g.Descendants {
		return false
	}
	if g.Resource.Path == "/" {
		return strings.HasPrefix(r.Path, "/")
	}
	return strings.HasPrefix(r.Path, g.Resource.Path+"/")
}

func (g Grant) hasAction(a string) bool {
	for _, x := range g.Actions {
		if x == a {
			return true
		}
	}
	return false
}

// live reports whether the grant is in force at t: an expiry is the first
// instant at which it no longer is.
func (g Grant) live(t time.Time) bool {
	return g.Expires.IsZero() || t.Before(g.Expires)
}

// Request is one thing an integration wants to do.
type Request struct {
	Integration string
	Resource    Resource
	Action      string
	Time        time.Time
}

// Decision is the outcome of Authorize.
type Decision int

const (
	// NoMatchingGrant: no grant, live or expired, covers the request.
	NoMatchingGrant Decision = iota
	// Allowed: one live grant covers the request whole.
	Allowed
	// GrantExpired: only a grant that has expired would have covered it.
	GrantExpired
)

func (d Decision) String() string {
	switch d {
	case Allowed:
		return "allowed"
	case GrantExpired:
		return "grant expired"
	}
	return "no matching grant"
}

// Authorize allows req only when one single grant matches its subject,
// resource, action and time. Grants are never combined: a resource from
// one grant and an action from another do not add up to an allowance.
// Paths must be clean (see ParseResource); the caller cleans what it got
// from a client before asking.
func Authorize(grants []Grant, req Request) Decision {
	d, _ := Decide(grants, req)
	return d
}

// Decide is Authorize, and also says which grant decided: the index in
// grants of the live grant that allows req, or of the last expired one
// that would have; -1 when no grant covers it.
func Decide(grants []Grant, req Request) (Decision, int) {
	d, which := NoMatchingGrant, -1
	for i, g := range grants {
		if !g.matchesSubject(req.Integration) || !g.matchesResource(req.Resource) || !g.hasAction(req.Action) {
			continue
		}
		if g.live(req.Time) {
			return Allowed, i
		}
		d, which = GrantExpired, i
	}
	return d, which
}

// Discoverable reports whether some live grant gives integration the
// action on scope, on something beneath scope, or on something above it
// that covers scope: the test for listing a tool in the integration's
// catalogue. It says nothing about any one call, which Authorize still
// decides.
func Discoverable(grants []Grant, integration string, scope Resource, action string, t time.Time) bool {
	for _, g := range grants {
		if !g.matchesSubject(integration) || !g.hasAction(action) || !g.live(t) {
			continue
		}
		within := Grant{Resource: scope, Descendants: true}
		if g.matchesResource(scope) || within.matchesResource(g.Resource) {
			return true
		}
	}
	return false
}
