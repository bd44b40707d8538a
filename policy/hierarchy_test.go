package policy

import (
	"errors"
	"slices"
	"testing"
)

func TestNewHierarchy(t *testing.T) {
	tests := []struct {
		name  string
		decls []Integration
		known []string
		kind  HierarchyProblem // "" is no error
		index int              // the declaration the error names
		chain []string
	}{
		{"a child of a root a grant names", []Integration{{"cc.explorer", "cc"}}, []string{"cc"}, "", 0, nil},
		{"a child of a declared root", []Integration{{"cc", ""}, {"cc.explorer", "cc"}}, nil, "", 0, nil},
		{"a parent nobody knows is refused", []Integration{{"cc.explorer", "cc"}}, []string{"codex"}, HierarchyUnknownParent, 0, nil},
		{"a parent declared later is known", []Integration{{"b", "a"}, {"a", ""}}, nil, "", 0, nil},
		{"an integration that is its own parent", []Integration{{"a", "a"}}, nil, HierarchyCycle, 0, []string{"a", "a"}},
		{"a cycle of two", []Integration{{"a", "b"}, {"b", "a"}}, nil, HierarchyCycle, 0, []string{"a", "b", "a"}},
		{"a cycle of three", []Integration{{"x", ""}, {"a", "b"}, {"b", "c"}, {"c", "a"}}, nil, HierarchyCycle, 1, []string{"a", "b", "c", "a"}},
		{"a child that leads into a cycle names the cycle", []Integration{{"d", "a"}, {"a", "b"}, {"b", "a"}}, nil, HierarchyCycle, 1, []string{"a", "b", "a"}},
		{"depth four is allowed", []Integration{{"l1", "l0"}, {"l2", "l1"}, {"l3", "l2"}, {"l4", "l3"}}, []string{"l0"}, "", 0, nil},
		{"depth five is refused", []Integration{{"l1", "l0"}, {"l2", "l1"}, {"l3", "l2"}, {"l4", "l3"}, {"l5", "l4"}}, []string{"l0"}, HierarchyTooDeep, 4, []string{"l5", "l4", "l3", "l2", "l1", "l0"}},
		{"a name declared twice", []Integration{{"a", ""}, {"a", "b"}}, []string{"b"}, HierarchyDuplicate, 1, nil},
		{"a bad name", []Integration{{"a/b", ""}}, nil, HierarchyInvalidName, 0, nil},
		{"a bad parent name", []Integration{{"a", "b/c"}}, nil, HierarchyInvalidName, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewHierarchy(tt.decls, tt.known)
			if tt.kind == "" {
				if err != nil {
					t.Fatalf("NewHierarchy: %v", err)
				}
				return
			}
			var he *HierarchyError
			if !errors.As(err, &he) {
				t.Fatalf("NewHierarchy = %v, want a %s error", err, tt.kind)
			}
			if he.Kind != tt.kind || he.Index != tt.index || (tt.chain != nil && !slices.Equal(he.Chain, tt.chain)) {
				t.Errorf("error = %+v (%v), want kind %s at %d, chain %v", he, err, tt.kind, tt.index, tt.chain)
			}
		})
	}
}

func TestChain(t *testing.T) {
	h, err := NewHierarchy([]Integration{{"cc.explorer", "cc"}, {"cc.explorer.reader", "cc.explorer"}}, []string{"cc"})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]string{
		"cc.explorer.reader": {"cc.explorer.reader", "cc.explorer", "cc"},
		"cc.explorer":        {"cc.explorer", "cc"},
		"cc":                 {"cc"},
		"codex":              {"codex"},
	} {
		if got := h.Chain(name); !slices.Equal(got, want) {
			t.Errorf("Chain(%q) = %v, want %v", name, got, want)
		}
	}
	if got := (Hierarchy{}).Chain("x"); !slices.Equal(got, []string{"x"}) {
		t.Errorf("the zero hierarchy's chain = %v", got)
	}
}
