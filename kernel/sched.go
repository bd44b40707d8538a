package kernel

import (
	"context"
	"sync"
)

// sequencer orders one turn's calls so that their outcome is the outcome
// of running them one at a time, in arrival order, while calls that
// change nothing still overlap: a call with an effect starts only when
// every earlier call has finished, and every call starts only when every
// earlier call with an effect has finished. A harness that pipelines a
// write and then a read of the same file therefore reads what it wrote,
// and the audit's arrival positions (seq) are an order in which the calls
// really could have run.
//
// Calls are admitted on the turn's read goroutine, in arrival order; the
// waiting happens on each call's own goroutine.
type sequencer struct {
	mu      sync.Mutex
	seq     int64
	effect  <-chan struct{}   // done of the last call with an effect; nil before one
	readers []<-chan struct{} // done of the calls without effects admitted since
}

// ticket is one call's place in its turn.
type ticket struct {
	seq   int64 // arrival position, from 1
	after []<-chan struct{}
	done  chan struct{}
	once  sync.Once
}

// compactAt is how many calls without effects may be remembered before
// the finished ones are dropped, so a long turn of reads does not keep a
// channel per call.
const compactAt = 64

// admit places the next call. effect says whether it may change anything
// (an unknown effect counts as one).
func (s *sequencer) admit(effect bool) *ticket {
	t := &ticket{done: make(chan struct{})}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	t.seq = s.seq
	if s.effect != nil {
		t.after = append(t.after, s.effect)
	}
	if effect {
		t.after = append(t.after, s.readers...)
		s.effect = t.done
		s.readers = nil
		return t
	}
	if len(s.readers) >= compactAt {
		s.readers = pending(s.readers)
	}
	s.readers = append(s.readers, t.done)
	return t
}

// pending returns the channels of cs that are not closed yet, in place.
func pending(cs []<-chan struct{}) []<-chan struct{} {
	kept := cs[:0]
	for _, c := range cs {
		select {
		case <-c:
		default:
			kept = append(kept, c)
		}
	}
	clear(cs[len(kept):])
	return kept
}

// wait blocks until every call this one must follow has finished, or ctx
// ends (then it returns ctx's error and the call must not run).
func (t *ticket) wait(ctx context.Context) error {
	for _, c := range t.after {
		select {
		case <-c:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// finish marks the call finished. A call that never ran (its wait was
// cancelled) still finishes only after the calls it had to follow, so the
// calls behind it keep their order. finish may be called more than once.
func (t *ticket) finish() {
	t.once.Do(func() {
		for _, c := range t.after {
			select {
			case <-c:
			default:
				go func() {
					for _, c := range t.after {
						<-c
					}
					close(t.done)
				}()
				return
			}
		}
		close(t.done)
	})
}
