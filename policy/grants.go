package policy

import (
	"errors"
	"fmt"
	"path"
	"slices"
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
// Descendants, on everything beneath it) until Expires; with Ask, only
// once a person approves each call; with Limit and TurnLimit, only so
// many calls (see Rules.Decide).
type Grant struct {
	Subject     string
	Resource    Resource
	Descendants bool
	Actions     []string
	Expires     time.Time // zero: never

	// Ask is who must approve a call this grant allows before it runs:
	// AskHarness, AskOperator, or "" for no one.
	Ask string
	// AskTTL is how long an approval is good for; DefaultAskTTL when
	// Ask is set and the config gives none.
	AskTTL time.Duration
	// Limit bounds the calls this grant allows per integration per
	// window; zero: no bound.
	Limit Limit
	// TurnLimit bounds the calls this grant allows in one turn (one
	// connection); 0: no bound.
	TurnLimit int
}

// Who may approve a call that a grant allows only with asking (Grant.Ask).
// The person at the harness may also be overruled by the operator, never
// the other way round: AskOperator is the stricter.
const (
	AskHarness  = "harness"
	AskOperator = "operator"
)

// DefaultAskTTL is how long an approval is good for when a grant that
// asks does not say (ask_ttl).
const DefaultAskTTL = 10 * time.Minute

// askRank orders Ask values from the least strict ("": no one is asked)
// to the strictest.
func askRank(a string) int {
	switch a {
	case AskHarness:
		return 1
	case AskOperator:
		return 2
	}
	return 0
}

// Validate checks the grant's subject, actions, ask and limits.
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
	switch g.Ask {
	case "", AskHarness, AskOperator:
	default:
		return fmt.Errorf("ask %q: want %q or %q (or no ask at all)", g.Ask, AskHarness, AskOperator)
	}
	if g.AskTTL < 0 {
		return fmt.Errorf("ask_ttl %s: must be positive", g.AskTTL)
	}
	if g.Limit.N < 0 || g.Limit.N > MaxLimitCount || (g.Limit.N > 0) != (g.Limit.Window > 0) {
		return fmt.Errorf("limit %s: want COUNT/WINDOW with a positive count and window", g.Limit)
	}
	if g.TurnLimit < 0 || g.TurnLimit > MaxTurnLimit {
		return fmt.Errorf("turn_limit %d: want a whole number from 1 to %d", g.TurnLimit, MaxTurnLimit)
	}
	return nil
}

// Key identifies the grant's budget across reloads: its subject,
// resource, descendants and actions, but not its limits, expiry or ask,
// so a reload that changes a limit (or moves the grant to another line)
// keeps the count. Two grants that differ only in those share a budget.
func (g Grant) Key() string {
	actions := slices.Clone(g.Actions)
	slices.Sort(actions)
	below := ""
	if g.Descendants {
		below = " and below"
	}
	return g.Subject + " " + g.Resource.String() + below + " " + strings.Join(slices.Compact(actions), ",")
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
	// RateLimited: live grants cover it, but each has used its limit or
	// its turn_limit (Rules.Decide only; Authorize knows no budgets).
	RateLimited
)

func (d Decision) String() string {
	switch d {
	case Allowed:
		return "allowed"
	case GrantExpired:
		return "grant expired"
	case RateLimited:
		return "rate limited"
	}
	return "no matching grant"
}

// severity orders the refusals across the levels of a decision: a
// refusal that waiting cannot cure outranks one it can.
func (d Decision) severity() int {
	switch d {
	case NoMatchingGrant:
		return 3
	case GrantExpired:
		return 2
	case RateLimited:
		return 1
	}
	return 0
}

// Authorize allows req only when one single grant matches its subject,
// resource, action and time. Grants are never combined: a resource from
// one grant and an action from another do not add up to an allowance.
// Paths must be clean (see ParseResource); the caller cleans what it got
// from a client before asking.
func Authorize(grants []Grant, req Request) Decision {
	d := NoMatchingGrant
	for _, g := range grants {
		if !g.matchesSubject(req.Integration) || !g.matchesResource(req.Resource) || !g.hasAction(req.Action) {
			continue
		}
		if g.live(req.Time) {
			return Allowed
		}
		d = GrantExpired
	}
	return d
}

// Discoverable reports whether some live grant gives integration the
// action on scope, on something beneath scope, or on something above it
// that covers scope: the test for listing a tool in the integration's
// catalogue, one level only (Rules.Discoverable follows parents). It says
// nothing about any one call, which Authorize still decides.
func Discoverable(grants []Grant, integration string, scope Resource, action string, t time.Time) bool {
	r := Rules{Grants: grants}
	return r.Discoverable(integration, Scope{Resource: scope, Below: true}, action, t)
}
