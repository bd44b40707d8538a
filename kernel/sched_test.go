package kernel

import (
	"context"
	"math/rand/v2"
	"testing"
)

// ready reports, without blocking, whether t's wait would return now.
func ready(t *ticket) bool {
	for _, c := range t.after {
		select {
		case <-c:
		default:
			return false
		}
	}
	return true
}

func isDone(t *ticket) bool {
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}

// TestSequencerMatchesTheArrivalOrderModel drives random turns through the
// sequencer and checks, at every step, that exactly the calls the rule
// allows are ready: a call with an effect when every earlier call has
// finished, any other call when every earlier call with an effect has.
func TestSequencerMatchesTheArrivalOrderModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 300 {
		var s sequencer
		n := 1 + rng.IntN(150)
		effect := make([]bool, n)
		tickets := make([]*ticket, n)
		for i := range n {
			effect[i] = rng.IntN(4) == 0
			tickets[i] = s.admit(effect[i])
			if tickets[i].seq != int64(i+1) {
				t.Fatalf("round %d: call %d got seq %d", round, i, tickets[i].seq)
			}
		}
		finished := make([]bool, n)
		for left := n; left > 0; {
			var runnable []int
			for i := range n {
				if finished[i] {
					continue
				}
				allowed := true
				for j := range i {
					if !finished[j] && (effect[i] || effect[j]) {
						allowed = false
						break
					}
				}
				if got := ready(tickets[i]); got != allowed {
					t.Fatalf("round %d: call %d (effect %v) ready = %v, the model says %v", round, i, effect[i], got, allowed)
				}
				if allowed {
					runnable = append(runnable, i)
				}
			}
			if len(runnable) == 0 {
				t.Fatalf("round %d: %d calls left and none may run", round, left)
			}
			i := runnable[rng.IntN(len(runnable))]
			if err := tickets[i].wait(context.Background()); err != nil {
				t.Fatal(err)
			}
			tickets[i].finish()
			finished[i] = true
			left--
		}
	}
}

// TestACancelledCallKeepsTheOrderBehindIt: a write whose wait was
// cancelled must not let the write after it overtake the one before it.
func TestACancelledCallKeepsTheOrderBehindIt(t *testing.T) {
	var s sequencer
	first, second, third := s.admit(true), s.admit(true), s.admit(true)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := second.wait(ctx); err == nil {
		t.Fatal("second's wait returned nil while first still runs")
	}
	second.finish()
	if isDone(second) || ready(third) {
		t.Fatal("a cancelled call finished before the call it follows, so the next one may overtake it")
	}
	first.finish()
	<-second.done // finishes once first has
	if !ready(third) {
		t.Fatal("third is not ready after first finished and second was cancelled")
	}
	second.finish() // a second finish is harmless
}

// TestLongReadOnlyTurnsForgetFinishedCalls: a turn of many reads keeps
// only the unfinished ones, and a write still waits for those.
func TestLongReadOnlyTurnsForgetFinishedCalls(t *testing.T) {
	var s sequencer
	var slow *ticket
	for i := range 10 * compactAt {
		tk := s.admit(false)
		if i == 5 {
			slow = tk
			continue
		}
		tk.finish()
	}
	if len(s.readers) > compactAt+1 {
		t.Errorf("the sequencer remembers %d reads, want at most %d", len(s.readers), compactAt+1)
	}
	w := s.admit(true)
	if ready(w) {
		t.Fatal("a write is ready while an earlier read runs")
	}
	slow.finish()
	if !ready(w) {
		t.Fatal("the write is not ready after every earlier read finished")
	}
}
