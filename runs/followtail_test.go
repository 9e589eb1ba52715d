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
	first := tl.evs[0].Seq
	if len(tl.evs) > 2*tailMax || len(tl.evs) < tailMax || tl.evs[len(tl.evs)-1].Seq != n {
		t.Fatalf("tail holds %d events, %d to %d", len(tl.evs), first, tl.evs[len(tl.evs)-1].Seq)
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
