package postgres_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/postgres/pgtest"
)

// WS-3: two Stores on one database (two processes, as far as the server
// can tell) deciding the same pending changes at once: each change is
// applied exactly once; the other decisions are ErrConflict and leave
// nothing behind.
func TestWS3_TwoStoresDecideOnce(t *testing.T) {
	u := pgtest.NewDatabase(t)
	a, b := open(t, u), open(t, u)
	ctx := t.Context()
	const changes, workers = 40, 4 // workers per Store
	for i := range changes {
		id := fmt.Sprint("c", i)
		mkRuns(t, a, id)
		if err := a.RecordChange(ctx, &store.Change{RunID: id, Repo: "/src/app", Base: "3f78", State: store.ChangePending}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for n, s := range []store.Store{a, b} {
		for w := range workers {
			wg.Go(func() {
				for i := range changes {
					err := s.DecideChange(ctx, fmt.Sprint("c", i),
						store.ChangeDecision{Action: store.ChangeApplied, By: fmt.Sprintf("store %d, worker %d", n, w)}, store.ChangePending)
					if err != nil && !errors.Is(err, store.ErrConflict) {
						t.Errorf("store %d, worker %d: %v", n, w, err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	cs, err := b.ListChanges(ctx, store.ChangeFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != changes {
		t.Fatalf("%d changes, want %d", len(cs), changes)
	}
	for _, c := range cs {
		if c.State != store.ChangeApplied || len(c.Decisions) != 1 {
			t.Errorf("%s: state %s, decisions %+v; want applied once", c.RunID, c.State, c.Decisions)
		}
	}
}
