package policy

import "fmt"

// Integration is one [[integration]]: a name, and the integration it is
// a child of ("" for one that is no one's child). A child is narrower
// than its parent by construction: it is allowed a call only when a grant
// of its own allows it and its parent would be allowed the same call too
// (see Rules.Decide), so a subagent can never exceed the agent that
// started it, whatever its own grants say.
type Integration struct {
	Name   string
	Parent string
}

// MaxDepth is how deep children may nest: an integration's depth is the
// number of its ancestors (one that is no one's child is at depth 0), so
// a chain from a child to its root holds at most MaxDepth+1
// integrations, and every decision at most as many levels.
const MaxDepth = 4

// Hierarchy is the parent of each integration that has one. The zero
// value is the flat world: every integration is its own root.
type Hierarchy struct {
	parent map[string]string
}

// HierarchyError is a declaration NewHierarchy refuses. Index is the
// declaration's position in what it was given, so the config can name its
// file and line.
type HierarchyError struct {
	Index int
	Kind  HierarchyProblem
	Name  string // the declaration's name
	// Parent is the parent it names (unknown parent); for a cycle, the
	// names around it, from Name back to Name; for depth, the chain from
	// Name up to its root.
	Parent string
	Chain  []string
}

// HierarchyProblem says what is wrong with a declaration.
type HierarchyProblem string

// The problems NewHierarchy finds.
const (
	HierarchyInvalidName   HierarchyProblem = "invalid name"
	HierarchyDuplicate     HierarchyProblem = "duplicate"
	HierarchyUnknownParent HierarchyProblem = "unknown parent"
	HierarchyCycle         HierarchyProblem = "cycle"
	HierarchyTooDeep       HierarchyProblem = "too deep"
)

func (e *HierarchyError) Error() string {
	return fmt.Sprintf("integration %q: %s", e.Name, e.Reason())
}

// Reason is the error without the name it is about, for a message that
// names the declaration already.
func (e *HierarchyError) Reason() string {
	switch e.Kind {
	case HierarchyInvalidName:
		return "not a valid integration name (1-64 letters, digits, spaces, '-', '_' or '.')"
	case HierarchyDuplicate:
		return "declared twice"
	case HierarchyUnknownParent:
		return fmt.Sprintf("parent %q is neither an [[integration]] nor the subject of any grant, so the child could never be allowed anything", e.Parent)
	case HierarchyCycle:
		return fmt.Sprintf("its parents lead back to it (%s), so none of them has a root", arrows(e.Chain))
	case HierarchyTooDeep:
		return fmt.Sprintf("nested %d deep (%s); children may nest at most %d deep", len(e.Chain)-1, arrows(e.Chain), MaxDepth)
	}
	return string(e.Kind)
}

func arrows(names []string) string {
	s := ""
	for i, n := range names {
		if i > 0 {
			s += " -> "
		}
		s += n
	}
	return s
}

// NewHierarchy checks declarations and returns their hierarchy. Every
// name and parent must be a valid integration name and no name may be
// declared twice; a parent must be declared itself or be one of known
// (the integrations the grants name as subjects), so a misspelt parent is
// an error rather than a child that can do nothing; parents may not lead
// back to a child (a cycle), nor nest deeper than MaxDepth. The first
// problem, in declaration order, is returned as a *HierarchyError.
func NewHierarchy(decls []Integration, known []string) (Hierarchy, error) {
	h := Hierarchy{parent: map[string]string{}}
	declared := map[string]int{}
	for i, d := range decls {
		if !ValidIntegrationName(d.Name) {
			return Hierarchy{}, &HierarchyError{Index: i, Kind: HierarchyInvalidName, Name: d.Name}
		}
		if d.Parent != "" && !ValidIntegrationName(d.Parent) {
			return Hierarchy{}, &HierarchyError{Index: i, Kind: HierarchyInvalidName, Name: d.Parent}
		}
		if _, dup := declared[d.Name]; dup {
			return Hierarchy{}, &HierarchyError{Index: i, Kind: HierarchyDuplicate, Name: d.Name}
		}
		declared[d.Name] = i
		if d.Parent != "" {
			h.parent[d.Name] = d.Parent
		}
	}
	isKnown := map[string]bool{}
	for _, k := range known {
		isKnown[k] = true
	}
	for i, d := range decls {
		if d.Parent == "" {
			continue
		}
		if _, ok := declared[d.Parent]; !ok && !isKnown[d.Parent] {
			return Hierarchy{}, &HierarchyError{Index: i, Kind: HierarchyUnknownParent, Name: d.Name, Parent: d.Parent}
		}
		// Each name has at most one parent, so the walk up either reaches
		// a root or comes back to a name it passed: a cycle, reported at
		// the declaration of the first name in it (which may be d.Name's
		// ancestor when d.Name only leads into the cycle).
		chain := []string{d.Name}
		seen := map[string]int{d.Name: 0}
		for at := d.Name; ; {
			p, ok := h.parent[at]
			if !ok {
				break
			}
			if j, again := seen[p]; again {
				cyc := append(chain[j:len(chain):len(chain)], p)
				return Hierarchy{}, &HierarchyError{Index: declared[p], Kind: HierarchyCycle, Name: p, Chain: cyc}
			}
			seen[p] = len(chain)
			chain = append(chain, p)
			at = p
		}
		if len(chain)-1 > MaxDepth {
			return Hierarchy{}, &HierarchyError{Index: i, Kind: HierarchyTooDeep, Name: d.Name, Chain: chain}
		}
	}
	return h, nil
}

// Parent returns the parent of name, "" for a root.
func (h Hierarchy) Parent(name string) string { return h.parent[name] }

// Chain returns name, then its parent, then the parent's parent, up to
// the root: the levels every decision for name is made at.
func (h Hierarchy) Chain(name string) []string {
	chain := []string{name}
	for at := name; len(chain) <= MaxDepth; {
		p, ok := h.parent[at]
		if !ok {
			break
		}
		chain = append(chain, p)
		at = p
	}
	return chain
}

// Children returns the integrations whose parent is name, in no
// particular order.
func (h Hierarchy) Children(name string) []string {
	var out []string
	for c, p := range h.parent {
		if p == name {
			out = append(out, c)
		}
	}
	return out
}

// HasParents reports whether any integration has a parent.
func (h Hierarchy) HasParents() bool { return len(h.parent) > 0 }
