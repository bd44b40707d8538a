package policy

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// counts is a Counters of fixed numbers, keyed "KEY|INTEGRATION".
type counts struct {
	used map[string]int // in the current window
	turn map[string]int
	ends time.Time
}

func (c counts) Used(key, integration string, _ time.Duration, _ time.Time) (int, time.Time) {
	return c.used[key+"|"+integration], c.ends
}

func (c counts) TurnUsed(key, integration string) int { return c.turn[key+"|"+integration] }

var now = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

func grant(t *testing.T, subject, resource string, descendants bool, actions ...string) Grant {
	t.Helper()
	return Grant{Subject: subject, Resource: res(t, resource), Descendants: descendants, Actions: actions}
}

func hierarchy(t *testing.T, decls ...Integration) Hierarchy {
	t.Helper()
	h, err := NewHierarchy(decls, []string{"cc", "codex"})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestDecideIntersectsAChildWithItsAncestors(t *testing.T) {
	h := hierarchy(t, Integration{"cc.explorer", "cc"}, Integration{"cc.explorer.reader", "cc.explorer"})
	tests := []struct {
		name     string
		grants   []Grant
		who      string
		resource string
		action   string
		want     Decision
		levels   []Decision
		grantAt  []int
	}{
		{"a child with nothing of its own is denied what its parent may do",
			[]Grant{grant(t, "integration:cc", "files:/", true, "read")},
			"cc.explorer", "files:/a", "read", NoMatchingGrant, []Decision{NoMatchingGrant, Allowed}, []int{-1, 0}},
		{"a child's grant beyond its parent's is denied",
			[]Grant{grant(t, "integration:cc", "files:/src", true, "read"), grant(t, "integration:cc.explorer", "files:/", true, "read", "write")},
			"cc.explorer", "files:/etc/passwd", "read", NoMatchingGrant, []Decision{Allowed, NoMatchingGrant}, []int{1, -1}},
		{"a child's write its parent may not do is denied",
			[]Grant{grant(t, "integration:cc", "files:/", true, "read"), grant(t, "integration:cc.explorer", "files:/", true, "read", "write")},
			"cc.explorer", "files:/a", "write", NoMatchingGrant, []Decision{Allowed, NoMatchingGrant}, []int{1, -1}},
		{"inside both, the child is allowed and each level names its grant",
			[]Grant{grant(t, "integration:cc", "files:/", true, "read", "write"), grant(t, "integration:cc.explorer", "files:/src", true, "read")},
			"cc.explorer", "files:/src/main.go", "read", Allowed, []Decision{Allowed, Allowed}, []int{1, 0}},
		{"the parent is asked exactly the same: its grant on another path does not count",
			[]Grant{grant(t, "integration:cc", "files:/docs", true, "read"), grant(t, "integration:cc.explorer", "files:/src", true, "read")},
			"cc.explorer", "files:/src/a", "read", NoMatchingGrant, []Decision{Allowed, NoMatchingGrant}, []int{1, -1}},
		{"a wildcard grant serves every level",
			[]Grant{grant(t, "integration:*", "files:/", true, "read")},
			"cc.explorer.reader", "files:/x", "read", Allowed, []Decision{Allowed, Allowed, Allowed}, []int{0, 0, 0}},
		{"a grandparent's refusal is the grandchild's",
			[]Grant{grant(t, "integration:cc.explorer.reader", "files:/", true, "read"), grant(t, "integration:cc.explorer", "files:/", true, "read")},
			"cc.explorer.reader", "files:/x", "read", NoMatchingGrant, []Decision{Allowed, Allowed, NoMatchingGrant}, []int{0, 1, -1}},
		{"a parent is not narrowed by its child",
			[]Grant{grant(t, "integration:cc", "files:/", true, "write")},
			"cc", "files:/x", "write", Allowed, []Decision{Allowed}, []int{0}},
		{"an expired parent grant makes the child's call grant_expired",
			[]Grant{{Subject: "integration:cc", Resource: res(t, "files:/"), Descendants: true, Actions: []string{"read"}, Expires: now.Add(-time.Second)},
				grant(t, "integration:cc.explorer", "files:/", true, "read")},
			"cc.explorer", "files:/x", "read", GrantExpired, []Decision{Allowed, GrantExpired}, []int{1, -1}},
		{"no matching grant at one level outranks an expired one at another",
			[]Grant{{Subject: "integration:cc.explorer", Resource: res(t, "files:/"), Descendants: true, Actions: []string{"read"}, Expires: now}},
			"cc.explorer", "files:/x", "read", NoMatchingGrant, []Decision{GrantExpired, NoMatchingGrant}, []int{-1, -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Rules{Grants: tt.grants, Integrations: h}
			v := r.Decide(Request{Integration: tt.who, Resource: res(t, tt.resource), Action: tt.action, Time: now}, NoCounters{})
			if v.Decision != tt.want {
				t.Errorf("Decision = %v, want %v", v.Decision, tt.want)
			}
			var levels []Decision
			var grants []int
			for _, lv := range v.Levels {
				levels, grants = append(levels, lv.Decision), append(grants, lv.Grant)
			}
			if !slices.Equal(levels, tt.levels) || !slices.Equal(grants, tt.grantAt) {
				t.Errorf("levels = %v with grants %v, want %v with %v", levels, grants, tt.levels, tt.grantAt)
			}
		})
	}
}

func TestDiscoverableIsTheIntersection(t *testing.T) {
	h := hierarchy(t, Integration{"cc.explorer", "cc"})
	tests := []struct {
		name   string
		grants []Grant
		scope  Scope
		action string
		want   bool
	}{
		{"both reach the tool's namespace", []Grant{grant(t, "integration:cc", "files:/", true, "read"), grant(t, "integration:cc.explorer", "files:/src", true, "read")},
			Scope{Resource: res(t, "files:/"), Below: true}, "read", true},
		{"child and parent on disjoint subtrees publish nothing", []Grant{grant(t, "integration:cc", "files:/docs", true, "read"), grant(t, "integration:cc.explorer", "files:/src", true, "read")},
			Scope{Resource: res(t, "files:/"), Below: true}, "read", false},
		{"a child's point inside its parent's subtree", []Grant{grant(t, "integration:cc", "files:/src", true, "read"), grant(t, "integration:cc.explorer", "files:/src/a.go", false, "read")},
			Scope{Resource: res(t, "files:/"), Below: true}, "read", true},
		{"a parent's point above the child's subtree", []Grant{grant(t, "integration:cc", "files:/src", false, "read"), grant(t, "integration:cc.explorer", "files:/src", true, "read")},
			Scope{Resource: res(t, "files:/"), Below: true}, "read", true},
		{"a parent's point outside the child's subtree", []Grant{grant(t, "integration:cc", "files:/docs", false, "read"), grant(t, "integration:cc.explorer", "files:/src", true, "read")},
			Scope{Resource: res(t, "files:/"), Below: true}, "read", false},
		{"a fixed resource both cover", []Grant{grant(t, "integration:cc", "memory:/", true, "read"), grant(t, "integration:cc.explorer", "memory:/graph", false, "read")},
			Scope{Resource: res(t, "memory:/graph")}, "read", true},
		{"a fixed resource only the child covers", []Grant{grant(t, "integration:cc", "memory:/other", false, "read"), grant(t, "integration:cc.explorer", "memory:/graph", false, "read")},
			Scope{Resource: res(t, "memory:/graph")}, "read", false},
		{"the action must be given at every level", []Grant{grant(t, "integration:cc", "files:/", true, "read"), grant(t, "integration:cc.explorer", "files:/", true, "read", "write")},
			Scope{Resource: res(t, "files:/"), Below: true}, "write", false},
		{"the three-way meeting point must be common to all", []Grant{
			grant(t, "integration:cc", "files:/a", true, "read"), grant(t, "integration:cc", "files:/b", true, "read"),
			grant(t, "integration:cc.explorer", "files:/b/c", true, "read")},
			Scope{Resource: res(t, "files:/"), Below: true}, "read", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Rules{Grants: tt.grants, Integrations: h}
			if got := r.Discoverable("cc.explorer", tt.scope, tt.action, now); got != tt.want {
				t.Errorf("Discoverable = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDecideWithLimits(t *testing.T) {
	h := hierarchy(t, Integration{"cc.explorer", "cc"})
	limited := func(g Grant, l Limit, turn int) Grant {
		g.Limit, g.TurnLimit = l, turn
		return g
	}
	perHour := Limit{N: 2, Window: time.Hour}
	ends := now.Add(20 * time.Minute)
	tests := []struct {
		name        string
		grants      []Grant
		who         string
		used, turn  map[string]int
		want        Decision
		retry       time.Duration
		turnLimited bool
		grantAt     []int
		charged     []string // "grant#integration"
	}{
		{"a grant with budget left allows and is charged",
			[]Grant{limited(grant(t, "integration:cc", "files:/", true, "read"), perHour, 0)},
			"cc", nil, nil, Allowed, 0, false, []int{0}, []string{"0#cc"}},
		{"a grant without limits is never charged",
			[]Grant{grant(t, "integration:cc", "files:/", true, "read")},
			"cc", nil, nil, Allowed, 0, false, []int{0}, nil},
		{"a used-up window is rate limited until it ends",
			[]Grant{limited(grant(t, "integration:cc", "files:/", true, "read"), perHour, 0)},
			"cc", map[string]int{"K0|cc": 2}, nil, RateLimited, 20 * time.Minute, false, []int{-1}, nil},
		{"another integration's count is its own",
			[]Grant{limited(grant(t, "integration:*", "files:/", true, "read"), perHour, 0)},
			"codex", map[string]int{"K0|cc": 2}, nil, Allowed, 0, false, []int{0}, []string{"0#codex"}},
		{"the next grant with budget decides",
			[]Grant{limited(grant(t, "integration:cc", "files:/", true, "read"), perHour, 0), limited(grant(t, "integration:cc", "files:/", true, "read", "list"), perHour, 0)},
			"cc", map[string]int{"K0|cc": 2}, nil, Allowed, 0, false, []int{1}, []string{"1#cc"}},
		{"a used-up turn_limit is not cured by waiting",
			[]Grant{limited(grant(t, "integration:cc", "files:/", true, "read"), Limit{}, 3)},
			"cc", nil, map[string]int{"K0|cc": 3}, RateLimited, 0, true, []int{-1}, nil},
		{"a child's call uses its parent's budget too",
			[]Grant{limited(grant(t, "integration:cc", "files:/", true, "read"), perHour, 0), limited(grant(t, "integration:cc.explorer", "files:/", true, "read"), Limit{}, 10)},
			"cc.explorer", nil, nil, Allowed, 0, false, []int{1, 0}, []string{"1#cc.explorer", "0#cc"}},
		{"a parent that used its budget holds its child back",
			[]Grant{limited(grant(t, "integration:cc", "files:/", true, "read"), perHour, 0), grant(t, "integration:cc.explorer", "files:/", true, "read")},
			"cc.explorer", map[string]int{"K0|cc": 2}, nil, RateLimited, 20 * time.Minute, false, []int{1, -1}, nil},
		{"a refusal no wait cures outranks a limit",
			[]Grant{limited(grant(t, "integration:cc", "files:/", true, "read"), perHour, 0)},
			"cc.explorer", map[string]int{"K0|cc": 2}, nil, NoMatchingGrant, 0, false, []int{-1, -1}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := counts{used: map[string]int{}, turn: map[string]int{}, ends: ends}
			for i, g := range tt.grants {
				for k, n := range tt.used {
					if k[:2] == fmt.Sprintf("K%d", i) {
						c.used[g.Key()+k[2:]] = n
					}
				}
				for k, n := range tt.turn {
					if k[:2] == fmt.Sprintf("K%d", i) {
						c.turn[g.Key()+k[2:]] = n
					}
				}
			}
			r := Rules{Grants: tt.grants, Integrations: h}
			v := r.Decide(Request{Integration: tt.who, Resource: res(t, "files:/a"), Action: "read", Time: now}, c)
			if v.Decision != tt.want || v.RetryAfter != tt.retry || v.TurnLimited != tt.turnLimited {
				t.Errorf("Decide = %v retry %s turn %v, want %v retry %s turn %v", v.Decision, v.RetryAfter, v.TurnLimited, tt.want, tt.retry, tt.turnLimited)
			}
			var grants []int
			for _, lv := range v.Levels {
				grants = append(grants, lv.Grant)
			}
			if !slices.Equal(grants, tt.grantAt) {
				t.Errorf("deciding grants = %v, want %v", grants, tt.grantAt)
			}
			var charged []string
			for _, ch := range v.Charges {
				charged = append(charged, fmt.Sprintf("%d#%s", ch.Grant, ch.Integration))
				if ch.Key != tt.grants[ch.Grant].Key() {
					t.Errorf("charge %+v has the wrong key", ch)
				}
			}
			if !slices.Equal(charged, tt.charged) {
				t.Errorf("charges = %v, want %v", charged, tt.charged)
			}
		})
	}
}

func TestDecideWithAsk(t *testing.T) {
	h := hierarchy(t, Integration{"cc.explorer", "cc"})
	asks := func(g Grant, who string, ttl time.Duration) Grant {
		g.Ask, g.AskTTL = who, ttl
		return g
	}
	write := func(subject string) Grant { return grant(t, subject, "files:/", true, "write") }
	tests := []struct {
		name    string
		grants  []Grant
		who     string
		ask     string
		ttl     time.Duration
		grantAt []int
	}{
		{"a call only an asking grant allows asks", []Grant{asks(write("integration:cc"), AskHarness, 0)}, "cc", AskHarness, DefaultAskTTL, []int{0}},
		{"a grant that allows without asking wins, wherever it is", []Grant{asks(write("integration:cc"), AskOperator, 0), write("integration:cc")}, "cc", "", 0, []int{1}},
		{"of two asking grants the least strict decides", []Grant{asks(write("integration:cc"), AskOperator, 0), asks(write("integration:cc"), AskHarness, time.Minute)}, "cc", AskHarness, time.Minute, []int{1}},
		{"the strictest level wins: a parent that needs the operator", []Grant{asks(write("integration:cc"), AskOperator, time.Hour), asks(write("integration:cc.explorer"), AskHarness, 0)}, "cc.explorer", AskOperator, DefaultAskTTL, []int{1, 0}},
		{"a child that asks while its parent does not still asks", []Grant{write("integration:cc"), asks(write("integration:cc.explorer"), AskHarness, 0)}, "cc.explorer", AskHarness, DefaultAskTTL, []int{1, 0}},
		{"the shortest ask_ttl of the asking levels", []Grant{asks(write("integration:cc"), AskHarness, 2*time.Minute), asks(write("integration:cc.explorer"), AskHarness, time.Hour)}, "cc.explorer", AskHarness, 2 * time.Minute, []int{1, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Rules{Grants: tt.grants, Integrations: h}
			v := r.Decide(Request{Integration: tt.who, Resource: res(t, "files:/a"), Action: "write", Time: now}, NoCounters{})
			if v.Decision != Allowed || v.Ask != tt.ask || v.AskTTL != tt.ttl {
				t.Errorf("Decide = %v ask %q ttl %s, want allowed ask %q ttl %s", v.Decision, v.Ask, v.AskTTL, tt.ask, tt.ttl)
			}
			var grants []int
			for _, lv := range v.Levels {
				grants = append(grants, lv.Grant)
			}
			if !slices.Equal(grants, tt.grantAt) {
				t.Errorf("deciding grants = %v, want %v", grants, tt.grantAt)
			}
		})
	}
}

func TestExplainOrdersNearestFirst(t *testing.T) {
	h := hierarchy(t, Integration{"cc.explorer", "cc"})
	expired := grant(t, "integration:cc.explorer", "files:/src", true, "write")
	expired.Expires = now.Add(-time.Hour)
	capped := grant(t, "integration:cc", "files:/src", true, "write")
	capped.Limit = Limit{N: 1, Window: time.Hour}
	asking := grant(t, "integration:cc.explorer", "files:/src", true, "write")
	asking.Ask = AskOperator
	grants := []Grant{
		grant(t, "integration:codex", "files:/", true, "write"),           // 0 subject
		grant(t, "integration:cc.explorer", "memory:/", true, "write"),    // 1 namespace
		grant(t, "integration:cc.explorer", "files:/docs", true, "write"), // 2 resource
		grant(t, "integration:cc.explorer", "files:/src", false, "write"), // 3 descendants
		grant(t, "integration:cc.explorer", "files:/", true, "read"),      // 4 action
		expired, // 5 expiry
		capped,  // 6 limit, at cc
		asking,  // 7 ask
	}
	r := Rules{Grants: grants, Integrations: h}
	c := counts{used: map[string]int{capped.Key() + "|cc": 1}, ends: now.Add(time.Minute)}
	checks := r.Explain(Request{Integration: "cc.explorer", Resource: res(t, "files:/src/a.go"), Action: "write", Time: now}, c)
	var got []string
	for _, ch := range checks {
		got = append(got, fmt.Sprintf("%s#%d:%s", ch.Integration, ch.Grant, ch.Failed))
	}
	want := []string{
		"cc.explorer#7:ask",
		"cc#6:limit",
		"cc.explorer#5:expiry",
		"cc.explorer#4:action",
		"cc.explorer#3:descendants",
		"cc.explorer#2:resource",
		"cc.explorer#1:namespace",
		"cc.explorer#0:subject", "cc.explorer#6:subject",
		"cc#0:subject", "cc#1:subject", "cc#2:subject", "cc#3:subject", "cc#4:subject", "cc#5:subject", "cc#7:subject",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Explain order:\n got %v\nwant %v", got, want)
	}
	if checks[1].RetryAfter != time.Minute || checks[1].Detail != "limit 1/1h: used up for cc; room again in 1m0s" {
		t.Errorf("the limit's check = %+v", checks[1])
	}
	if checks[4].Detail != "covers files:/src only, not what is beneath it (descendants is false)" {
		t.Errorf("the descendants check says %q", checks[4].Detail)
	}
	if checks[5].Detail != "covers files:/docs and below, not files:/src/a.go" {
		t.Errorf("the resource check says %q", checks[5].Detail)
	}
}

// TestDecideCostsNoKeyForAGrantWithoutBudget: deciding on a grant with
// neither limit nor turn_limit makes no budget key (Grant.Key, which
// sorts and joins): what a call costs is its chain and its levels.
func TestDecideCostsNoKeyForAGrantWithoutBudget(t *testing.T) {
	r := Rules{Grants: []Grant{grant(t, "integration:cc", "files:/docs", true, "write", "read")}}
	req := Request{Integration: "cc", Resource: res(t, "files:/docs/a.txt"), Action: "read", Time: now}
	var v Verdict
	allocs := testing.AllocsPerRun(100, func() { v = r.Decide(req, NoCounters{}) })
	if v.Decision != Allowed {
		t.Fatalf("decision %v, want allowed", v.Decision)
	}
	if allocs > 2 {
		t.Errorf("Decide makes %.0f allocations, want at most 2 (the chain and the levels)", allocs)
	}
}
