package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/drover-run/drover/store"
)

// LED-2: the ledger's log of all events, by cursor: in commit order,
// paged, the same cursors as Events gives, and LastCursor at its end.
func testEventsAfter(t *testing.T, s store.Store) {
	ctx := t.Context()
	if c, err := s.LastCursor(ctx); err != nil || c != 0 {
		t.Fatalf("LastCursor of an empty ledger: %d %v", c, err)
	}
	if evs, err := s.EventsAfter(ctx, 0, 0); err != nil || len(evs) != 0 {
		t.Fatalf("EventsAfter of an empty ledger: %v %v", evs, err)
	}
	mustCreate(t, s, newRun("r1", at(0)))
	mustCreate(t, s, newRun("r2", at(time.Second)))
	batches := [][]store.Event{
		events("r1", 1, 2),
		{event("r2", 1), event("r1", 3), event("r2", 2)},
		events("r2", 3, 3),
	}
	var want []store.Event
	for _, b := range batches {
		if err := s.AppendEvents(ctx, b); err != nil {
			t.Fatal(err)
		}
		want = append(want, b...)
	}
	all, err := s.EventsAfter(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkEvents(t, all, want)
	for i := 1; i < len(all); i++ {
		if all[i].Cursor <= all[i-1].Cursor || all[0].Cursor <= 0 {
			t.Fatalf("cursors not increasing: %d then %d", all[i-1].Cursor, all[i].Cursor)
		}
	}
	if c, err := s.LastCursor(ctx); err != nil || c != all[len(all)-1].Cursor {
		t.Fatalf("LastCursor %d %v, want %d", c, err, all[len(all)-1].Cursor)
	}
	// Paged from any cursor.
	var paged []store.Event
	for c := int64(0); ; {
		page, err := s.EventsAfter(ctx, c, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		if len(page) > 2 {
			t.Fatalf("limit 2 gave %d", len(page))
		}
		paged = append(paged, page...)
		c = page[len(page)-1].Cursor
	}
	checkEvents(t, paged, want)
	// Events of one run carry the same cursors.
	r2, err := s.Events(ctx, "r2", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]int64{}
	for _, ev := range all {
		byKey[fmt.Sprintf("%s/%d", ev.RunID, ev.Seq)] = ev.Cursor
	}
	for _, ev := range r2 {
		if ev.Cursor != byKey[fmt.Sprintf("%s/%d", ev.RunID, ev.Seq)] {
			t.Fatalf("Events gave %s/%d cursor %d, EventsAfter %d", ev.RunID, ev.Seq, ev.Cursor, byKey[fmt.Sprintf("%s/%d", ev.RunID, ev.Seq)])
		}
	}
	if evs, err := s.EventsAfter(ctx, all[len(all)-1].Cursor, 0); err != nil || len(evs) != 0 {
		t.Fatalf("EventsAfter the last cursor: %v %v", seqs(evs), err)
	}
}

// LED-2: a reader following EventsAfter from the last cursor it read,
// while several writers append, sees every event exactly once: no event
// ever appears behind a cursor already read.
func testEventsAfterFollow(t *testing.T, s store.Store) {
	ctx := t.Context()
	const writers, perWriter = 4, 60
	for w := range writers {
		mustCreate(t, s, newRun(fmt.Sprintf("w%d", w), at(time.Duration(w)*time.Second)))
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			run := fmt.Sprintf("w%d", w)
			for seq := int64(1); seq <= perWriter; seq += 3 {
				if err := s.AppendEvents(ctx, events(run, seq, seq+2)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	seen := map[string]bool{}
	var cursor int64
	deadline := time.Now().Add(30 * time.Second)
	for len(seen) < writers*perWriter && time.Now().Before(deadline) {
		evs, err := s.EventsAfter(ctx, cursor, 7)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			k := fmt.Sprintf("%s/%d", ev.RunID, ev.Seq)
			if seen[k] || ev.Cursor <= cursor {
				t.Fatalf("%s seen twice or behind cursor %d (at %d)", k, cursor, ev.Cursor)
			}
			seen[k] = true
			cursor = ev.Cursor
		}
		if len(evs) == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(seen) != writers*perWriter {
		t.Fatalf("the follower saw %d events of %d: some appeared behind its cursor", len(seen), writers*perWriter)
	}
}
