package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/internal/batch"
)

// Writer is a Store's batched event writer (LED-1): one goroutine that
// group-commits the events of every run of the process. Each event is
// acknowledged only once the transaction holding it has committed, so a
// caller can persist first, then notify.
//
// Group commit: the writer takes whatever is queued (up to the batch
// limits, see [WithBatchLimits]) and writes it in one transaction; events
// arriving meanwhile queue up and make the next transaction. An event
// arriving at an idle writer is committed at once, alone. Under a steady
// stream (events keep arriving while a batch is written) the writer lets
// them gather for a short delay before each commit (see
// [WithCommitDelay]), so that batches are large and commits, each costing
// as much CPU as tens of events, are few.
//
// Each event is checked on its own: one that does not continue its run's
// last seq fails with store.ErrConflict (store.ErrNotFound for an unknown
// run) without failing the others of its transaction; an event that makes
// the whole transaction fail (say, too large) is retried alone, so it
// cannot fail its neighbours. Events are written in the order they were
// queued, so a run's events are accepted when one goroutine queues them in
// seq order, waiting for earlier ones or not. (Mixing the Writer and
// Store.AppendEvents for one run is fine as long as each call has returned
// before the next one for that run is made.)
type Writer struct {
	b *batch.Writer
}

// WriterStats counts the writer's work since Open.
type WriterStats = batch.Stats

func newWriter(s *Store) *Writer {
	cfg := s.cfg.batch
	cfg.Closed, cfg.Write = ErrClosed, s.writeBatch
	// The file staying locked for the whole busy timeout would only
	// repeat per event.
	cfg.RetryEach = func(err error) bool { return !isBusy(err) }
	return &Writer{batch.New(cfg)}
}

// Append queues ev and waits until it is durably committed (see the package
// doc for what survives which crash) or has failed. The Writer reads
// ev.JSON until then: the caller must not modify it meanwhile. Errors:
// store.ErrConflict if ev does not continue its run's last seq,
// store.ErrNotFound if its run does not exist, [ErrClosed] once the Store
// is closed. If ctx ends first, Append returns ctx.Err(); the event may
// still be written.
func (w *Writer) Append(ctx context.Context, ev store.Event) error { return w.b.Append(ctx, ev) }

// AppendAsync queues ev and returns a channel that receives exactly one
// value: nil once ev is durably committed, or the error Append would have
// returned; until then ev.JSON must not be modified. It waits only while
// the queue is full. Calling AppendAsync for seq n+1 as soon as it has
// returned for seq n (on one goroutine) keeps a run's events in order
// without waiting for each commit.
func (w *Writer) AppendAsync(ev store.Event) <-chan error { return w.b.AppendAsync(ev) }

// Stats returns the writer's counters; Events/Commits is the mean batch.
func (w *Writer) Stats() WriterStats { return w.b.Stats() }

// writeBatch commits the events of evs that continue their runs; errs says
// which did not. Runs' last seqs come from the writer's cache where it has
// them; when an event then fails (a gap, or an insert that hits a seq the
// ledger has: the cache may be behind it), the batch is checked again
// against the ledger alone, so a stale value never fails an event that
// continues its run.
func (s *Store) writeBatch(evs []store.Event) (errs []error, err error) {
	// Not a caller's context: a batch holds many callers' events, and Close
	// must be able to flush after callers have given up.
	ctx := context.Background()
	ids := batch.RunIDs(evs)
	errs, err = s.writeChecked(ctx, evs, ids, true)
	if errors.Is(err, errStaleSeq) {
		errs, err = s.writeChecked(ctx, evs, ids, false)
	}
	if err == nil {
		n := 0
		for i, ev := range evs {
			if errs == nil || errs[i] == nil {
				n += len(ev.JSON)
			}
		}
		s.ck.wrote(pagesWritten(n, len(ids)))
	}
	return errs, err
}

// errStaleSeq is a conflict in a batch checked against cached last seqs:
// the cache may have been behind the ledger.
var errStaleSeq = errors.New("a cached last seq was behind the ledger")

// writeChecked is one transaction of writeBatch, checking seqs against the
// cache (cached) or the ledger alone; ids are the runs evs name.
func (s *Store) writeChecked(ctx context.Context, evs []store.Event, ids []string, cached bool) (errs []error, err error) {
	var last map[string]int64
	if cached {
		last = s.seqs.lookup(ids)
	}
	hit := len(last) > 0
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		if errs, last, err = s.checkSeqs(ctx, tx, evs, ids, last); err != nil {
			return err
		}
		if hit && batch.FirstError(errs) != nil {
			// A cached seq behind the ledger makes an event that
			// continues its run look like a gap: only the ledger says.
			return errStaleSeq
		}
		if good := batch.Good(evs, errs); len(good) > 0 {
			if err := s.insertEvents(ctx, tx, good); err != nil {
				if hit && errors.Is(err, store.ErrConflict) {
					return errStaleSeq
				}
				return err
			}
		}
		return nil
	})
	if err != nil {
		s.seqs.forget(ids...)
		return errs, err
	}
	s.seqs.set(last)
	return errs, nil
}
