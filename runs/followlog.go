package runs

import (
	"context"
	"iter"
	"slices"
	"time"

	"github.com/drover-run/drover/store"
)

// FromLive starts FollowLog with the runs live now, rather than after a
// cursor.
const FromLive = -1

// FollowLog yields the events of every run from the ledger's log of all
// events (store.Store.EventsAfter) as they are recorded, each with its
// Cursor, until ctx ends or the ledger fails (the error is yielded last).
// A reader never slows a run: it reads what was already persisted.
//
// From a cursor ≥ 0 it yields every event after it. From FromLive it first
// yields the events so far of the runs live now, oldest run first, with
// Cursor 0; then a marker, an Event with no RunID whose Cursor is where
// the log continues (resume from it); then the log. There, a run met part
// way (it started or ended while following began, so the catch-up missed
// it) first gets its earlier events, also with Cursor 0: every run is seen
// from its first event. "Now" is when FollowLog is called, not when the
// iteration begins: it reads the log's position and the live runs before
// it returns, so a run started after it returns is seen, however late the
// iteration begins (a failed read is yielded when it does).
//
// Events of this supervisor's runs are seen at once (EventsRecorded),
// those of other processes sharing the ledger at once on a ledger that
// notifies (PostgreSQL, runs/notify.go), else within Poll.
func (s *Supervisor) FollowLog(ctx context.Context, cursor int64) iter.Seq2[store.Event, error] {
	fromLive := cursor < 0
	var live []store.Run
	var startErr error
	if fromLive {
		// The cursor is read before the live runs are listed: a run
		// that starts in between has all its events after it.
		cursor, startErr = s.st.LastCursor(ctx)
		if startErr == nil {
			live, startErr = s.st.ListRuns(ctx, store.RunFilter{Status: []store.RunStatus{store.StatusPending, store.StatusRunning}})
		}
	}
	return func(yield func(store.Event, error) bool) {
		cursor := cursor
		var known map[string]bool // with FromLive: runs already caught up
		if fromLive {
			if startErr != nil {
				yield(store.Event{}, startErr)
				return
			}
			slices.SortStableFunc(live, func(a, b store.Run) int { return a.CreatedAt.Compare(b.CreatedAt) })
			known = make(map[string]bool, len(live))
			for _, r := range live {
				known[r.ID] = true
				if !s.catchUp(ctx, r.ID, cursor, yield) {
					return
				}
			}
			if !yield(store.Event{Cursor: cursor}, nil) {
				return
			}
		}
		synced := cursor
		const page = 1000
		for {
			recorded := s.EventsRecorded() // taken before reading, so no wake-up is missed
			evs, err := s.st.EventsAfter(ctx, cursor, page)
			if err != nil {
				yield(store.Event{}, err)
				return
			}
			for _, ev := range evs {
				if known != nil && !known[ev.RunID] {
					known[ev.RunID] = true
					if ev.Seq > 1 && !s.catchUp(ctx, ev.RunID, synced, yield) {
						return
					}
				}
				if !yield(ev, nil) {
					return
				}
				cursor = ev.Cursor
			}
			if len(evs) == page {
				continue
			}
			t := time.NewTimer(s.remotePoll())
			select {
			case <-recorded:
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				yield(store.Event{}, ctx.Err())
				return
			}
			t.Stop()
		}
	}
}

// catchUp yields runID's events with a cursor ≤ upto, with Cursor 0 (they
// are out of the log's order); false if the consumer stopped or the ledger
// failed (then the error was yielded).
func (s *Supervisor) catchUp(ctx context.Context, runID string, upto int64, yield func(store.Event, error) bool) bool {
	const page = 1000
	var afterSeq int64
	for {
		evs, err := s.st.Events(ctx, runID, afterSeq, page)
		if err != nil {
			yield(store.Event{}, err)
			return false
		}
		for _, ev := range evs {
			if ev.Cursor > upto {
				return true
			}
			ev.Cursor = 0
			if !yield(ev, nil) {
				return false
			}
			afterSeq = ev.Seq
		}
		if len(evs) < page {
			return true
		}
	}
}
