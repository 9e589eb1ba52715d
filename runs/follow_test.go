package runs_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/testkit/agenttest"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/sqlite"
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

// eventReads is a SQLite ledger that counts the reads of a run's events.
type eventReads struct {
	*sqlite.Store
	n atomic.Int64
}

func (s *eventReads) Events(ctx context.Context, runID string, afterSeq int64, limit int) ([]store.Event, error) {
	s.n.Add(1)
	return s.Store.Events(ctx, runID, afterSeq, limit)
}

// LED-2, PERF-2: a follower still behind when its run ends (a printer
// writing a long final text to a pipe) takes the run's last events from
// the run's tail in memory, not back from the ledger, and still gets
// every event once, in order.
func TestLED2_FollowerBehindAtTheEndTakesTheTail(t *testing.T) {
	sq, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "drover.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	st := &eventReads{Store: sq}
	release := make(chan struct{})
	gated := &agenttest.Agent{Name: "gated", Fn: func(ctx context.Context, _ drover.Request, y func(drover.Event, error) bool) {
		if !y(text("first"), nil) {
			return
		}
		select {
		case <-release:
		case <-ctx.Done():
			return
		}
		for i := range 5 {
			if !y(text(fmt.Sprintf("then #%d", i)), nil) {
				return
			}
		}
		y(done("tok"), nil)
	}}
	f := newFixtureOn(t, st, runs.Config{}, gated)
	id := f.start(t, runs.StartRequest{Agent: "gated", Prompt: "p"})

	var seqs []int64
	released := false
	for evs, err := range f.sup.FollowBatches(context.Background(), id, 0) {
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			seqs = append(seqs, ev.Seq)
		}
		if !released {
			// The follower has seen the run active. Let it end, and be
			// recorded as ended, before reading on.
			close(release)
			released = true
			f.await(t, id)
			st.n.Store(0)
		}
	}
	if len(seqs) != 7 {
		t.Fatalf("followed seqs %v, want 1..7 (seven texts and done)", seqs)
	}
	for i, seq := range seqs {
		if seq != int64(i+1) {
			t.Fatalf("followed seqs %v, want 1..7", seqs)
		}
	}
	if n := st.n.Load(); n != 0 {
		t.Errorf("the follower read the ended run's events from the ledger %d times; its tail held them", n)
	}
}
