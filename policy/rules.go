package policy

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Rules are the grants and the integrations' hierarchy: everything a
// decision reads besides the budgets' counters. A Rules value is not
// changed once made; a reload makes a new one.
//
// # How a call is decided
//
// A call of integration I (resource R, action A, time T) is decided at
// every level of I's chain: I, then its parent, and so on up to its root
// (Hierarchy.Chain). At each level the grants whose subject names that
// level (integration:NAME, or integration:*) are asked about the same R,
// A and T, and one of them decides the level:
//
//   - a grant decides only if it covers R, gives A, is live at T and has
//     budget left (its limit in the current window and its turn_limit in
//     this turn, both counted for that level's integration);
//   - among those, the first in file order that does not ask decides;
//     only when every one of them asks does the first asking one with the
//     least strict ask decide, and the level needs that approval.
//
// The call is allowed only when every level is: a child's catalogue and
// calls are the intersection of its own grants and its ancestors', so a
// child can never exceed its parent. When a level refuses, the refusal
// that waiting cannot cure wins: no_matching_grant over grant_expired
// over rate_limited.
//
// # Ask
//
// A call that some level allows only through grants that ask needs
// approval; a level that has a grant allowing it without ask adds
// nothing. Across levels the strictest ask wins: any level that needs
// the operator makes the call need the operator (AskOperator), otherwise
// any level that asks the harness makes it need the harness or the
// operator (AskHarness). The approval is good for the shortest ask_ttl
// among the deciding grants that ask.
//
// # Budgets
//
// A call is charged to the deciding grant of every level (Verdict.Charges),
// so a subagent's calls use its parent's budget as well, once the call
// runs: the caller charges an allowed call that needs no approval at
// once, and one that needs approval when it runs after the approval
// (never when it is refused or waits). A denied call costs nothing.
type Rules struct {
	Grants       []Grant
	Integrations Hierarchy
}

// Counters is what a decision reads of the budgets. The kernel keeps
// them, across restarts; Decide never changes them: the caller charges
// what Verdict.Charges lists.
type Counters interface {
	// Used returns how many calls have been charged to the grant with
	// key for integration in the window of length window that holds t,
	// and when that window ends. A window already running keeps its end
	// even when a reload changed its length.
	Used(key, integration string, window time.Duration, t time.Time) (n int, ends time.Time)
	// TurnUsed returns how many calls of the turn being decided were
	// charged to the grant with key for integration.
	TurnUsed(key, integration string) int
}

// NoCounters is budgets that nothing has been charged to.
type NoCounters struct{}

// Used returns 0 and the end of the epoch-aligned window that holds t.
func (NoCounters) Used(_, _ string, window time.Duration, t time.Time) (int, time.Time) {
	_, end := WindowAt(t, window)
	return 0, end
}

// TurnUsed returns 0.
func (NoCounters) TurnUsed(_, _ string) int { return 0 }

// Verdict is a decision on one call, with what decided it at each level.
type Verdict struct {
	// Decision is Allowed only when every level allowed the call.
	Decision Decision
	// Ask is who must approve the call before it runs (Allowed only):
	// "", AskHarness or AskOperator, the strictest of the levels'.
	Ask string
	// AskTTL is how long an approval is good for, when Ask is set: the
	// shortest ask_ttl among the deciding grants that ask.
	AskTTL time.Duration
	// RetryAfter is, for RateLimited, how long until every level that
	// refused has budget again; 0 with TurnLimited.
	RetryAfter time.Duration
	// TurnLimited is, for RateLimited, that some level has used a
	// turn_limit: no wait helps within this turn.
	TurnLimited bool
	// Levels are the integration's, then each ancestor's, up to the root.
	Levels []Level
	// Charges are what an allowed call costs once it runs: one for each
	// level whose deciding grant has a limit or a turn_limit.
	Charges []Charge
}

// Level is the decision at one level of a call's chain.
type Level struct {
	Integration string
	Decision    Decision
	// Grant is the index, in Rules.Grants, of the grant that decided an
	// allowed level; -1 otherwise.
	Grant int
	// Ask is the deciding grant's ask.
	Ask         string
	RetryAfter  time.Duration // RateLimited: until the soonest of its grants has room
	TurnLimited bool          // RateLimited: each of its grants used its turn_limit
}

// Charge is one budget an allowed call uses: the grant (index and Key)
// and the level's integration it is counted for.
type Charge struct {
	Integration string
	Grant       int
	Key         string
	Limit       Limit
	TurnLimit   int
}

// Fits reports whether the charge still has room in c at t (both its
// limit and its turn_limit), and if not how long until it has (0 when
// its turn_limit is used up, which no wait cures within the turn).
func (ch Charge) Fits(c Counters, t time.Time) (ok bool, retryAfter time.Duration, turn bool) {
	if ch.TurnLimit > 0 && c.TurnUsed(ch.Key, ch.Integration) >= ch.TurnLimit {
		return false, 0, true
	}
	if ch.Limit.N > 0 {
		n, ends := c.Used(ch.Key, ch.Integration, ch.Limit.Window, t)
		if n >= ch.Limit.N {
			return false, max(ends.Sub(t), time.Millisecond), false
		}
	}
	return true, 0, false
}

// limited reports whether the grant has a budget: a limit or a
// turn_limit, which a call it decides is charged to.
func (g Grant) limited() bool { return g.Limit.N > 0 || g.TurnLimit > 0 }

func (r *Rules) charge(i int, integration string) Charge {
	g := r.Grants[i]
	return Charge{Integration: integration, Grant: i, Key: g.Key(), Limit: g.Limit, TurnLimit: g.TurnLimit}
}

// Decide decides req at every level of its integration's chain (see
// Rules): the same resource, action and time at each. It reads c and
// changes nothing.
func (r *Rules) Decide(req Request, c Counters) Verdict {
	chain := r.Integrations.Chain(req.Integration)
	v := Verdict{Decision: Allowed, Levels: make([]Level, 0, len(chain))}
	for _, name := range chain {
		lv := r.level(name, req, c)
		v.Levels = append(v.Levels, lv)
		if lv.Decision.severity() > v.Decision.severity() {
			v.Decision = lv.Decision
		}
		if lv.Decision == RateLimited {
			v.RetryAfter = max(v.RetryAfter, lv.RetryAfter)
			v.TurnLimited = v.TurnLimited || lv.TurnLimited
		}
	}
	if v.Decision != Allowed {
		v.Ask = ""
		if v.Decision != RateLimited || v.TurnLimited {
			v.RetryAfter = 0
		}
		return v
	}
	for _, lv := range v.Levels {
		g := r.Grants[lv.Grant]
		if g.Ask != "" {
			ttl := g.AskTTL
			if ttl == 0 {
				ttl = DefaultAskTTL
			}
			if v.AskTTL == 0 || ttl < v.AskTTL {
				v.AskTTL = ttl
			}
		}
		if askRank(g.Ask) > askRank(v.Ask) {
			v.Ask = g.Ask
		}
		if g.limited() {
			v.Charges = append(v.Charges, r.charge(lv.Grant, lv.Integration))
		}
	}
	return v
}

// level decides req for one integration of the chain.
func (r *Rules) level(name string, req Request, c Counters) Level {
	lv := Level{Integration: name, Decision: NoMatchingGrant, Grant: -1}
	asking := -1
	// Of the grants that cover the call but have no budget left: whether
	// there are any, whether each one's turn_limit is used up, and the
	// soonest window end among those only a window holds back.
	limited, allTurn, soonest := false, true, time.Duration(0)
	for i, g := range r.Grants {
		if !g.matchesSubject(name) || !g.matchesResource(req.Resource) || !g.hasAction(req.Action) {
			continue
		}
		if !g.live(req.Time) {
			if lv.Decision == NoMatchingGrant {
				lv.Decision = GrantExpired
			}
			continue
		}
		if g.limited() {
			// Only a grant with a budget can have used it up; its key
			// (Grant.Key) is made only then.
			ok, retry, turn := r.charge(i, name).Fits(c, req.Time)
			if !ok {
				if !turn && (allTurn || retry < soonest) {
					soonest = retry
				}
				limited, allTurn = true, allTurn && turn
				continue
			}
		}
		if g.Ask == "" {
			lv.Decision, lv.Grant = Allowed, i
			return lv
		}
		if asking < 0 || askRank(g.Ask) < askRank(r.Grants[asking].Ask) {
			asking = i
		}
	}
	switch {
	case asking >= 0:
		lv.Decision, lv.Grant, lv.Ask = Allowed, asking, r.Grants[asking].Ask
	case limited:
		lv.Decision, lv.TurnLimited = RateLimited, allTurn
		if !allTurn {
			lv.RetryAfter = soonest
		}
	}
	return lv
}

// Condition is a condition of a grant that a request can fail, in the
// order Explain checks them: a grant that fails a later one came nearer
// to allowing the request.
type Condition string

// The conditions, in order. Matched is a grant that fails none.
const (
	CondSubject     Condition = "subject"
	CondNamespace   Condition = "namespace"
	CondResource    Condition = "resource"
	CondDescendants Condition = "descendants"
	CondAction      Condition = "action"
	CondExpiry      Condition = "expiry"
	CondLimit       Condition = "limit"
	CondAsk         Condition = "ask"
	Matched         Condition = ""
)

// nearness is how near a grant that failed cond came to allowing a
// request: the later the condition, the nearer.
func (cond Condition) nearness() int {
	switch cond {
	case CondSubject:
		return 1
	case CondNamespace:
		return 2
	case CondResource:
		return 3
	case CondDescendants:
		return 4
	case CondAction:
		return 5
	case CondExpiry:
		return 6
	case CondLimit:
		return 7
	case CondAsk:
		return 8
	}
	return 9
}

// Check is what one grant says of a request at one level: the first
// condition it fails, and why, in words.
type Check struct {
	Level       int    // index in the chain: 0 is the integration itself
	Integration string // the level's integration
	Grant       int    // index in Rules.Grants
	Failed      Condition
	Detail      string
	// RetryAfter is, for CondLimit, how long until it has room again;
	// 0 when its turn_limit is used up.
	RetryAfter time.Duration
}

// Explain checks req against every grant at every level of its chain and
// returns, for each grant and level, the first condition it fails
// (subject, namespace, resource, descendants, action, expiry, limit,
// ask), nearest first: a grant that failed a later condition before one
// that failed an earlier one, then the integration's own level before
// its parent's, then file order. It reads c and changes nothing.
func (r *Rules) Explain(req Request, c Counters) []Check {
	chain := r.Integrations.Chain(req.Integration)
	out := make([]Check, 0, len(chain)*len(r.Grants))
	for li, name := range chain {
		for i := range r.Grants {
			ch := r.check(i, name, req, c)
			ch.Level, ch.Integration, ch.Grant = li, name, i
			out = append(out, ch)
		}
	}
	slices.SortStableFunc(out, func(a, b Check) int {
		if d := b.Failed.nearness() - a.Failed.nearness(); d != 0 {
			return d
		}
		return a.Level - b.Level
	})
	return out
}

// check is the first condition grant i fails for req at the level name.
func (r *Rules) check(i int, name string, req Request, c Counters) Check {
	g := r.Grants[i]
	want := req.Resource
	switch {
	case !g.matchesSubject(name):
		return Check{Failed: CondSubject, Detail: fmt.Sprintf("is for %s, not integration:%s", g.Subject, name)}
	case g.Resource.Namespace != want.Namespace:
		return Check{Failed: CondNamespace, Detail: fmt.Sprintf("is on %s, not %s", g.Resource, want.Namespace+":")}
	case !g.matchesResource(want):
		if under(want.Path, g.Resource.Path) {
			return Check{Failed: CondDescendants, Detail: fmt.Sprintf("covers %s only, not what is beneath it (descendants is false)", g.Resource)}
		}
		return Check{Failed: CondResource, Detail: fmt.Sprintf("covers %s, not %s", scopeText(g), want)}
	case !g.hasAction(req.Action):
		return Check{Failed: CondAction, Detail: fmt.Sprintf("gives %s, not %s", strings.Join(g.Actions, ", "), req.Action)}
	case !g.live(req.Time):
		return Check{Failed: CondExpiry, Detail: "expired at " + g.Expires.UTC().Format(time.RFC3339)}
	}
	if ok, retry, turn := r.charge(i, name).Fits(c, req.Time); !ok {
		if turn {
			return Check{Failed: CondLimit, Detail: fmt.Sprintf("turn_limit %d: used up in this turn; a new turn starts afresh", g.TurnLimit)}
		}
		return Check{Failed: CondLimit, RetryAfter: retry,
			Detail: fmt.Sprintf("limit %s: used up for %s; room again in %s", g.Limit, name, retry.Round(time.Second))}
	}
	if g.Ask != "" {
		return Check{Failed: CondAsk, Detail: "allows it once approved by " + askWho(g.Ask)}
	}
	return Check{Failed: Matched, Detail: "allows it"}
}

// askWho says who may approve under ask a.
func askWho(a string) string {
	if a == AskOperator {
		return "the operator"
	}
	return "the person at the harness (or the operator)"
}

// scopeText is a grant's resource as people read it.
func scopeText(g Grant) string {
	if g.Descendants {
		return g.Resource.String() + " and below"
	}
	return g.Resource.String()
}

// under reports whether p is strictly beneath dir.
func under(p, dir string) bool {
	if dir == "/" {
		return p != "/"
	}
	return strings.HasPrefix(p, dir+"/")
}

// Scope is where a tool's calls land: one resource or, with Below, it and
// everything beneath it.
type Scope struct {
	Resource Resource
	Below    bool
}

// Within reports whether every resource of s is also one of o.
func (s Scope) Within(o Scope) bool {
	return s.Resource.Namespace == o.Resource.Namespace && o.covers(s.Resource.Path) && (!s.Below || o.Below)
}

// String is the scope as people read it: "files:/src and below".
func (s Scope) String() string {
	if s.Below {
		return s.Resource.String() + " and below"
	}
	return s.Resource.String()
}

func (s Scope) covers(p string) bool {
	return s.Resource.Path == p || s.Below && under(p, s.Resource.Path)
}

// Intersect is the part of the resources two scopes share, a scope again
// (on a tree, two subtrees meet only where one holds the other).
func (s Scope) Intersect(o Scope) (Scope, bool) {
	if s.Resource.Namespace != o.Resource.Namespace {
		return Scope{}, false
	}
	switch {
	case s.Below && s.covers(o.Resource.Path):
		return o, true
	case o.Below && o.covers(s.Resource.Path):
		return s, true
	case s.Resource.Path == o.Resource.Path:
		return Scope{Resource: s.Resource}, true
	}
	return Scope{}, false
}

// Discoverable reports whether integration could be allowed action on
// some resource of scope at t, at every level of its chain at once: the
// test for publishing a tool in its catalogue, which is thus the
// intersection of its own grants' and each ancestor's. Asking and budgets
// do not take a tool out of a catalogue: a call may wait for approval or
// for its window, and is decided then.
func (r *Rules) Discoverable(integration string, scope Scope, action string, t time.Time) bool {
	regions := []Scope{scope}
	for _, name := range r.Integrations.Chain(integration) {
		var next []Scope
		for _, g := range r.Grants {
			if !g.matchesSubject(name) || !g.hasAction(action) || !g.live(t) {
				continue
			}
			gs := Scope{Resource: g.Resource, Below: g.Descendants}
			for _, x := range regions {
				if y, ok := x.Intersect(gs); ok && !slices.Contains(next, y) {
					next = append(next, y)
				}
			}
		}
		if len(next) == 0 {
			return false
		}
		regions = next
	}
	return true
}

// Narrowed is a part of a scope that every one of some levels may be
// allowed an action on: the part, and the grant of each level whose
// scope holds it.
type Narrowed struct {
	Scope  Scope
	Grants []int // index in Rules.Grants, one per level, in order
}

// Narrow returns the parts of scope on which each of levels, in turn,
// has a live grant giving action at t: what a child's grant on scope
// allows in effect, given its ancestors as levels. Each part lies within
// the grant named for each level (Scope.Within), which is the proof that
// every level may do whatever the part allows. Empty: some level may do
// none of it.
func (r *Rules) Narrow(levels []string, scope Scope, action string, t time.Time) []Narrowed {
	parts := []Narrowed{{Scope: scope}}
	for _, name := range levels {
		var next []Narrowed
		for _, p := range parts {
			for i, g := range r.Grants {
				if !g.matchesSubject(name) || !g.hasAction(action) || !g.live(t) {
					continue
				}
				x, ok := p.Scope.Intersect(Scope{Resource: g.Resource, Below: g.Descendants})
				if ok && !slices.ContainsFunc(next, func(n Narrowed) bool { return n.Scope == x }) {
					next = append(next, Narrowed{Scope: x, Grants: append(slices.Clip(p.Grants), i)})
				}
			}
		}
		if len(next) == 0 {
			return nil
		}
		parts = next
	}
	return parts
}
