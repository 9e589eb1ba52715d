package runs_test

import (
	"context"
	"testing"

	"github.com/drover-run/drover/runs"
)

// ENG-010 on the ledger side: FollowMany yields every event of several
// runs, each run's in seq order, ending once all have ended; breaking out
// stops its followers (goleak checks).
func TestFollowMany(t *testing.T) {
	f := newFixture(t, runs.Config{}, quick(5), hang())
	var ids []string
	for _, p := range []string{"a", "b", "c"} {
		ids = append(ids, f.start(t, runs.StartRequest{Agent: "quick", Prompt: p}))
	}
	last := map[string]int64{}
	for ev, err := range f.sup.FollowMany(context.Background(), ids...) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Seq != last[ev.RunID]+1 {
			t.Fatalf("run %s: seq %d after %d", ev.RunID, ev.Seq, last[ev.RunID])
		}
		last[ev.RunID] = ev.Seq
	}
	for _, id := range ids {
		if last[id] != 6 {
			t.Fatalf("run %s: %d events, want 6 (5 texts and done)", id, last[id])
		}
	}

	live := f.start(t, runs.StartRequest{Agent: "hang", Prompt: "p"})
	for ev, err := range f.sup.FollowMany(context.Background(), live, ids[0]) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.RunID == live {
			break // the live run never ends: only breaking out ends this
		}
	}
}
