package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/drover-run/drover/store"
)

// Many goroutines use one store at once (store.Store is safe for
// concurrent use): each drives its own run through its whole life while
// reading, and all of them advance one shared session and cancel one shared
// run, so a lost update would show.
func testConcurrency(t *testing.T, s store.Store) {
	const (
		workers = 50
		perRun  = 20
	)
	ctx := t.Context()
	mustCreate(t, s, newRun("shared", at(0)))
	if err := s.PutSession(ctx, &store.Session{ID: "sess", Agent: "claude", Heads: []string{}, CreatedAt: at(0), UpdatedAt: at(0)}); err != nil {
		t.Fatal(err)
	}

	work := func(w int) error {
		id := fmt.Sprintf("run-%02d", w)
		r := newRun(id, at(time.Duration(w+1)*time.Second))
		r.SessionID = "sess"
		if err := s.CreateRun(ctx, r); err != nil {
			return err
		}
		if err := s.StartRun(ctx, id, 1000+w, 1000+w, at(time.Minute)); err != nil {
			return err
		}
		for seq := int64(1); seq <= perRun; {
			n := min(int64(1+(w+int(seq))%4), perRun-seq+1) // batches of 1 to 4
			if err := s.AppendEvents(ctx, events(id, seq, seq+n-1)); err != nil {
				return fmt.Errorf("append %d..%d: %w", seq, seq+n-1, err)
			}
			got, err := s.Events(ctx, id, seq-1, 0)
			if err != nil {
				return err
			}
			if len(got) != int(n) || got[0].Seq != seq {
				return fmt.Errorf("after appending %d..%d read back %v", seq, seq+n-1, seqs(got))
			}
			seq += n
		}
		if err := s.RequestCancel(ctx, "shared"); err != nil {
			return err
		}
		if err := s.AdvanceSession(ctx, "sess", id, "tok-"+id, at(time.Hour)); err != nil {
			return err
		}
		if _, err := s.ListRuns(ctx, store.RunFilter{SessionID: "sess", Limit: 10}); err != nil {
			return err
		}
		return s.FinishRun(ctx, turnRecord(id))
	}

	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			if err := work(w); err != nil {
				t.Errorf("worker %d: %v", w, err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	for w := range workers {
		id := fmt.Sprintf("run-%02d", w)
		got, err := s.Events(ctx, id, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		checkEvents(t, got, events(id, 1, perRun))
		r := mustGet(t, s, id)
		if r.Status != store.StatusCompleted || r.LastSeq != perRun {
			t.Errorf("%s: status %s last seq %d", id, r.Status, r.LastSeq)
		}
		if ms, err := s.Messages(ctx, id); err != nil || len(ms) != len(turnRecord(id).Messages) {
			t.Errorf("%s: %d messages, %v", id, len(ms), err)
		}
	}
	if !mustGet(t, s, "shared").CancelRequested {
		t.Error("shared run not marked for cancellation")
	}
	ss, err := s.GetSession(ctx, "sess")
	if err != nil {
		t.Fatal(err)
	}
	// The first advance had no former head to keep.
	if len(ss.Heads) != workers-1 {
		t.Errorf("session kept %d former heads, want %d (lost updates)", len(ss.Heads), workers-1)
	}
	seen := map[string]bool{ss.HeadRunID: true}
	for _, h := range ss.Heads {
		if seen[h] {
			t.Errorf("head %s recorded twice", h)
		}
		seen[h] = true
	}
	if len(seen) != workers {
		t.Errorf("session saw %d distinct heads, want %d", len(seen), workers)
	}
	all, err := s.ListRuns(ctx, store.RunFilter{SessionID: "sess"})
	if err != nil || len(all) != workers {
		t.Errorf("ListRuns(session) = %d runs, %v; want %d", len(all), err, workers)
	}
}
