package runs

import (
	"testing"
	"time"

	"github.com/drover-run/drover/store"
)

// LED-2: the committer takes events in the order the encoder queued them,
// across the ring's growth and wrap-around, and the ring stops growing
// once it holds the most events pending at once. Each event keeps the
// time it was handed to the ledger (OBS-2).
func TestLED2_EventQueueOrder(t *testing.T) {
	var q eventQueue
	next, want := int64(1), int64(1)
	for round, depth := range []int{1, 5, 17, 3, 40, 40, 2, 40} {
		for range depth {
			q.push(store.Event{Seq: next}, time.Duration(next))
			next++
		}
		for range depth - depth/2 { // leave some behind: the ring wraps
			if got, at := q.pop(); got.Seq != want || at != time.Duration(want) {
				t.Fatalf("round %d: popped seq %d (at %d), want %d", round, got.Seq, at, want)
			}
			want++
		}
	}
	for q.n > 0 {
		if got, _ := q.pop(); got.Seq != want {
			t.Fatalf("draining: popped seq %d, want %d", got.Seq, want)
		}
		want++
	}
	if want != next {
		t.Fatalf("popped up to %d, pushed up to %d", want-1, next-1)
	}
	size := len(q.ring)
	for range 1000 {
		q.push(store.Event{Seq: next}, 0)
		q.pop()
		next++
	}
	if len(q.ring) != size {
		t.Errorf("a queue never deeper than before grew from %d to %d slots", size, len(q.ring))
	}
	for i, e := range q.ring {
		if e.ev.Seq != 0 {
			t.Errorf("slot %d still holds popped seq %d", i, e.ev.Seq)
		}
	}
}
