package runs

import (
	"testing"

	"github.com/drover-run/drover/store"
)

// LED-2: a follower of an active run reads the events after any seq from
// its tail while the tail holds them, and is sent to the ledger (ok false)
// once it is further behind than the tail reaches.
func TestLED2_TailAfter(t *testing.T) {
	var tl tail
	if evs, ok := tl.after(0, 10); !ok || len(evs) != 0 {
		t.Fatalf("empty tail: %d events, ok %v", len(evs), ok)
	}
	n := int64(3*tailMax + 5)
	for seq := int64(1); seq <= n; seq++ {
		tl.add(store.Event{Seq: seq})
	}
	held := tl.evs[tl.head:]
	first := held[0].Seq
	if len(held) > tailHold || len(held) < tailMax || held[len(held)-1].Seq != n {
		t.Fatalf("tail holds %d events, %d to %d", len(held), first, held[len(held)-1].Seq)
	}
	if _, ok := tl.after(first-2, 10); ok {
		t.Errorf("after(%d) served from a tail starting at %d", first-2, first)
	}
	evs, ok := tl.after(first-1, 10)
	if !ok || len(evs) != 10 || evs[0].Seq != first || evs[9].Seq != first+9 {
		t.Errorf("after(%d): ok %v, %d events from %d", first-1, ok, len(evs), evs[0].Seq)
	}
	evs, ok = tl.after(n-3, 10)
	if !ok || len(evs) != 3 || evs[0].Seq != n-2 || evs[2].Seq != n {
		t.Errorf("after(%d): ok %v, %v", n-3, ok, evs)
	}
	if evs, ok := tl.after(n, 10); !ok || len(evs) != 0 {
		t.Errorf("after(last): ok %v, %d events", ok, len(evs))
	}
	evs[0].Seq = -1 // the caller's copy, not the tail
	if tl.evs[len(tl.evs)-3].Seq != n-2 {
		t.Error("after returned the tail's own slice")
	}
}

// LED-2: the tail forgets what is older than tailAge, so a slow run's
// tail holds only its last moments (a follower further behind reads the
// ledger).
func TestLED2_TailForgetsOldEvents(t *testing.T) {
	var tl tail
	tl.add(store.Event{Seq: 1})
	tl.add(store.Event{Seq: 2})
	tl.at[tl.head] -= int64(2 * tailAge) // seq 1 was added long ago
	tl.add(store.Event{Seq: 3})
	if _, ok := tl.after(0, 10); ok {
		t.Error("seq 1, older than tailAge, is still served")
	}
	evs, ok := tl.after(1, 10)
	if !ok || len(evs) != 2 || evs[0].Seq != 2 || evs[1].Seq != 3 {
		t.Errorf("after(1): ok %v, %v", ok, evs)
	}
}
