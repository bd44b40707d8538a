package audit

import (
	"cmp"
	"slices"
	"testing"
)

// TestCallOrderListsATurnsCallsInArrivalOrder: overlapping reads are
// recorded as they finish; the table lists them by seq, turn by turn, and
// a call whose predecessor's record never came still shows by the end.
func TestCallOrderListsATurnsCallsInArrivalOrder(t *testing.T) {
	in := []Event{
		{Event: EventTurnOpened, ExecutionID: "a"},
		{Event: EventTurnOpened, ExecutionID: "b"},
		{Event: EventToolInvoked, ExecutionID: "a", Seq: 2, CallID: "a2"},
		{Event: EventToolInvoked, ExecutionID: "b", Seq: 1, CallID: "b1"},
		{Event: EventToolInvoked, ExecutionID: "a", Seq: 3, CallID: "a3"},
		{Event: EventToolInvoked, ExecutionID: "a", Seq: 1, CallID: "a1"},
		{Event: EventToolInvoked, ExecutionID: "b", Seq: 3, CallID: "b3"}, // b2's record is missing
		{Event: EventTurnClosed, ExecutionID: "a"},
		{Event: EventToolInvoked, ExecutionID: "c", Seq: 2, CallID: "c2"}, // c1 is missing, c never closes
	}
	var got []string
	o := NewCallOrder(func(e Event, _ []byte) error {
		got = append(got, cmp.Or(e.CallID, e.Event+" "+e.ExecutionID))
		return nil
	})
	for _, e := range in {
		if err := o.Event(e, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := o.Flush(); err != nil {
		t.Fatal(err)
	}
	want := []string{"turn.opened a", "turn.opened b", "b1", "a1", "a2", "a3", "turn.closed a", "b3", "c2"}
	if !slices.Equal(got, want) {
		t.Errorf("order %q, want %q", got, want)
	}
}
