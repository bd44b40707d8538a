package install

import (
	"bytes"
	"slices"
	"testing"
)

func TestEntryName(t *testing.T) {
	cc, _ := Lookup("claude-code")
	for integration, want := range map[string]string{
		"claude-code":          "sharedos",
		"claude-code.explorer": "sharedos-claude-code_explorer",
		"team tools":           "sharedos-team_tools",
		"Reviewer-2_b":         "sharedos-Reviewer-2_b",
		"équipe":               "sharedos-_quipe", // one '_' a character, not a byte
	} {
		if got := EntryName(cc, integration); got != want {
			t.Errorf("EntryName(%q) = %q, want %q", integration, got, want)
		}
	}
}

// TestAFurtherEntrySitsBesideTheMainOne: for every harness, a subagent's
// entry is added beside the main one, found by its name and listed with
// it, and removing it leaves the main one as it was.
func TestAFurtherEntrySitsBesideTheMainOne(t *testing.T) {
	for _, h := range harnesses {
		t.Run(h.ID, func(t *testing.T) {
			main := NewEntry("/bin/sharedos-mcp", h.ID, "")
			withMain, err := h.Render(nil, main)
			if err != nil {
				t.Fatal(err)
			}
			name := EntryName(h, "claude-code.explorer")
			sub := h.Named(name)
			child := NewEntry("/bin/sharedos-mcp", "claude-code.explorer", "")
			both, err := sub.Render(withMain, child)
			if err != nil {
				t.Fatal(err)
			}
			if again, err := sub.Render(both, child); err != nil || !bytes.Equal(again, both) {
				t.Errorf("rendering the further entry again changed the file (%v):\n%s", err, again)
			}
			if found, e, err := h.Find(both); err != nil || !found || !slices.Equal(e.Args, main.Args) {
				t.Errorf("the main entry after adding the further one: %v %+v %v", found, e, err)
			}
			if found, e, err := sub.Find(both); err != nil || !found || !slices.Equal(e.Args, child.Args) {
				t.Errorf("the further entry: %v %+v %v", found, e, err)
			}
			names, err := h.format.names(both)
			if err != nil || !slices.Equal(names, []string{ServerName, name}) {
				t.Errorf("names = %v, %v; want %v", names, err, []string{ServerName, name})
			}
			removed, err := sub.Remove(both)
			if err != nil || !bytes.Equal(removed, withMain) {
				t.Errorf("removing the further entry (%v) left\n%s\nwant\n%s", err, removed, withMain)
			}
		})
	}
}
