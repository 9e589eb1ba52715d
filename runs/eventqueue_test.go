package runs

import (
	"testing"

	"github.com/drover-run/drover/store"
)

// LED-2: the committer takes events in the order the encoder queued them,
// across the ring's growth and wrap-around, and the ring stops growing
// once it holds the most events pending at once.
func TestLED2_EventQueueOrder(t *testing.T) {
	var q eventQueue
	next, want := int64(1), int64(1)
	for round, depth := range []int{1, 5, 17, 3, 40, 40, 2, 40} {
		for range depth {
			q.push(store.Event{Seq: next})
			next++
		}
		for range depth - depth/2 { // leave some behind: the ring wraps
			if got := q.pop().Seq; got != want {
				t.Fatalf("round %d: popped seq %d, want %d", round, got, want)
			}
			want++
		}
	}
	for q.n > 0 {
		if got := q.pop().Seq; got != want {
			t.Fatalf("draining: popped seq %d, want %d", got, want)
		}
		want++
	}
	if want != next {
		t.Fatalf("popped up to %d, pushed up to %d", want-1, next-1)
	}
	size := len(q.ring)
	for range 1000 {
		q.push(store.Event{Seq: next})
		q.pop()
		next++
	}
	if len(q.ring) != size {
		t.Errorf("a queue never deeper than before grew from %d to %d slots", size, len(q.ring))
	}
	for i, ev := range q.ring {
		if ev.Seq != 0 {
			t.Errorf("slot %d still holds popped seq %d", i, ev.Seq)
		}
	}
}
