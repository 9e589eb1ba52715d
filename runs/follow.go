package runs

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/drover-run/drover/internal/fanin"
	"github.com/drover-run/drover/store"
)

func (s *Supervisor) lookup(id string) *active {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active[id]
}

// Await blocks until every run in ids has ended and returns their records
// in the same order (RUN-2). It answers for runs that ended long ago and
// for runs owned by other processes (polling the ledger); many callers may
// await the same run. It returns store.ErrNotFound for an unknown id, and
// an *UnrecordedError for a run of this supervisor that has ended but
// whose end the ledger could not record.
func (s *Supervisor) Await(ctx context.Context, ids ...string) ([]*store.Run, error) {
	out := make([]*store.Run, 0, len(ids))
	for _, id := range ids {
		for {
			if a := s.lookup(id); a != nil {
				select {
				case <-a.done:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			ended := s.EventsRecorded() // a run's end wakes it too: runs/notify.go
			r, err := s.st.GetRun(ctx, id)
			if err != nil {
				return nil, fmt.Errorf("run %s: %w", id, err)
			}
			if r.Status.Terminal() {
				out = append(out, r)
				break
			}
			if err := s.lostRecord(id); err != nil {
				return nil, err // its end will never be in the ledger
			}
			select {
			case <-ended:
			case <-time.After(s.remotePoll()):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	return out, nil
}

// Follow yields a run's events with seq > afterSeq from the ledger, waiting
// for new ones until the run has ended and every event was yielded. It
// follows runs of other processes too: woken by a ledger that notifies
// (PostgreSQL, runs/notify.go), else polling. A reader never slows the
// run: it reads what was already persisted (for a run this process owns,
// the latest of it from memory: see tail). A run of this supervisor that
// ended with events or its end the ledger could not record ends with an
// *UnrecordedError, after the events the ledger has (LED-7).
func (s *Supervisor) Follow(ctx context.Context, id string, afterSeq int64) iter.Seq2[store.Event, error] {
	return Flatten(s.FollowBatches(ctx, id, afterSeq))
}

// FollowBatches is Follow by batches: each yield is the events that became
// available together (at most 1000, in seq order), so that a reader can
// write them out at once; an error is yielded with no events, last. The
// slices are the reader's.
func (s *Supervisor) FollowBatches(ctx context.Context, id string, afterSeq int64) iter.Seq2[[]store.Event, error] {
	return func(yield func([]store.Event, error) bool) {
		// held is the run's tail once seen, kept after the run has ended
		// and left s.active: a follower still behind then (say, writing a
		// long final text to a pipe) takes the last events from it rather
		// than reading them back from the ledger. Read back, the text
		// event and done of a gemini run with a 10 MB text were each held
		// twice more at once, by SQLite and by its copy.
		var held *tail
		for {
			var wake <-chan struct{}
			var evs []store.Event
			fromTail, live := false, false
			remote := s.EventsRecorded() // for a run owned elsewhere: runs/notify.go
			var ended <-chan struct{}
			if a := s.lookup(id); a != nil {
				ended = a.done
				wake = a.changed() // taken before reading, so no wake-up is missed
				held, live = &a.tail, true
			}
			if held != nil {
				evs, fromTail = held.after(afterSeq, 1000)
				// Once the run has left s.active its tail takes no more
				// events: beyond them, only the ledger knows (the run
				// may go on in another process).
				fromTail = fromTail && (live || len(evs) > 0)
			}
			if !fromTail {
				var err error
				if evs, err = s.st.Events(ctx, id, afterSeq, 1000); err != nil {
					yield(nil, err)
					return
				}
			}
			if len(evs) > 0 {
				afterSeq = evs[len(evs)-1].Seq
				if !yield(evs, nil) {
					return
				}
			}
			if len(evs) == 1000 {
				continue
			}
			if fromTail && live {
				// The run is active, so not over: it leaves s.active, and
				// wakes its followers, only after its last event is durable
				// and its end recorded. Its last wake-up may come between
				// lookup and changed, though, and then no wake-up follows:
				// done, closed after it, ends that wait.
				select {
				case <-wake:
				case <-ended:
				case <-ctx.Done():
					yield(nil, ctx.Err())
					return
				}
				continue
			}
			r, err := s.st.GetRun(ctx, id)
			if err != nil {
				yield(nil, err)
				return
			}
			if r.LastSeq <= afterSeq {
				// Every event the ledger has was yielded. A run of this
				// process that lost some to the ledger, or its end, is
				// over all the same: waiting for the ledger to say so was
				// a hang (LED-7).
				if err := s.lostRecord(id); err != nil {
					yield(nil, err)
					return
				}
				if r.Status.Terminal() {
					return
				}
			}
			if wake == nil {
				t := time.NewTimer(s.remotePoll())
				select {
				case <-t.C:
				case <-remote:
					t.Stop()
				case <-ctx.Done():
					t.Stop()
					yield(nil, ctx.Err())
					return
				}
				continue
			}
			select {
			case <-wake:
			case <-ctx.Done():
				yield(nil, ctx.Err())
				return
			}
		}
	}
}

// Flatten yields the events of batches (FollowBatches, api.Service's
// Follow) one by one; an error is yielded last.
func Flatten(batches iter.Seq2[[]store.Event, error]) iter.Seq2[store.Event, error] {
	return func(yield func(store.Event, error) bool) {
		for evs, err := range batches {
			if err != nil {
				yield(store.Event{}, err)
				return
			}
			for _, ev := range evs {
				if !yield(ev, nil) {
					return
				}
			}
		}
	}
}

// FollowMany follows several runs at once (Follow for each, from their
// first event), yielding their events as they are persisted: the
// ledger-side twin of engine.Engine.RunParallel. Each run's events come in
// seq order; runs interleave as they are recorded. It ends once every run
// has ended and every event was yielded, or at the first error (yielded
// last; a cancelled ctx ends it silently). Its goroutines are owned by the
// iteration: breaking out stops and waits for them.
func (s *Supervisor) FollowMany(ctx context.Context, ids ...string) iter.Seq2[store.Event, error] {
	return Flatten(s.FollowManyBatches(ctx, 0, ids...))
}

// FollowManyBatches is FollowMany by batches, each run from afterSeq: each
// yield is events of one run that became available together (see
// FollowBatches). Handing batches rather than events from the followers'
// goroutines to the reader spares a goroutine switch per event.
func (s *Supervisor) FollowManyBatches(ctx context.Context, afterSeq int64, ids ...string) iter.Seq2[[]store.Event, error] {
	followers := make([]func(context.Context) iter.Seq2[[]store.Event, error], len(ids))
	for i, id := range ids {
		followers[i] = func(ctx context.Context) iter.Seq2[[]store.Event, error] { return s.FollowBatches(ctx, id, afterSeq) }
	}
	return func(yield func([]store.Event, error) bool) {
		for evs, err := range fanin.Merge(ctx, followers...) {
			if err != nil && ctx.Err() != nil {
				return
			}
			if !yield(evs, err) {
				return
			}
		}
	}
}
