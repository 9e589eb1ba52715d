// Package batch is what the ledger backends share about appending events:
// the rules an appended event must follow (Validate, CheckSeqs) and the
// batched group-commit Writer (LED-1) behind store.AsyncAppender. A
// backend supplies only its transaction (Config.Write).
package batch

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/drover-run/drover/store"
)

// Validate checks what can be checked of ev without the ledger: a run id
// and a positive seq (ErrConflict otherwise).
func Validate(ev store.Event) error {
	if ev.RunID == "" {
		return fmt.Errorf("append event: empty run id")
	}
	if ev.Seq <= 0 {
		return fmt.Errorf("append event %s/%d: seq must be positive: %w", ev.RunID, ev.Seq, store.ErrConflict)
	}
	return nil
}

// ValidateAll is Validate of each event of evs: the first error.
func ValidateAll(evs []store.Event) error {
	for _, ev := range evs {
		if err := Validate(ev); err != nil {
			return err
		}
	}
	return nil
}

// RunIDs returns the runs evs name, each once, in order of first mention.
func RunIDs(evs []store.Event) []string {
	var ids []string
	seen := make(map[string]bool)
	for _, ev := range evs {
		if !seen[ev.RunID] {
			seen[ev.RunID] = true
			ids = append(ids, ev.RunID)
		}
	}
	return ids
}

// CheckSeqs checks that each event of evs continues its run, given last,
// the last seq of every existing run named in evs (0 for a run with no
// events; absent for an unknown run), read where no other writer can move
// it. errs[i] is nil for an event that may be written, ErrNotFound for an
// unknown run, ErrConflict for a gap or a duplicate. An event that fails
// does not advance its run, so a later event of the same run is checked
// against the last good one. last is updated to the runs' new last seqs.
func CheckSeqs(evs []store.Event, last map[string]int64) []error {
	errs := make([]error, len(evs))
	for i, ev := range evs {
		cur, ok := last[ev.RunID]
		switch {
		case !ok:
			errs[i] = fmt.Errorf("append event %s/%d: run %w", ev.RunID, ev.Seq, store.ErrNotFound)
		case ev.Seq != cur+1:
			errs[i] = fmt.Errorf("append event %s/%d: run's last seq is %d: %w", ev.RunID, ev.Seq, cur, store.ErrConflict)
		default:
			last[ev.RunID] = ev.Seq
		}
	}
	return errs
}

// FirstError is the error AppendEvents returns for errs (from CheckSeqs):
// the first, as later ones of its run follow from it.
func FirstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Good returns the events of evs whose errs entry is nil (evs itself when
// all are).
func Good(evs []store.Event, errs []error) []store.Event {
	if FirstError(errs) == nil {
		return evs
	}
	var good []store.Event
	for i, ev := range evs {
		if errs[i] == nil {
			good = append(good, ev)
		}
	}
	return good
}

// queueLen bounds the events waiting for the writer. A producer that finds
// the queue full waits: backpressure instead of unbounded memory. Two
// batches of the default MaxEvents keep the writer busy; a long run cycles
// through the whole queue, so each slot is resident memory (~100 bytes):
// 8192 had cost a run 1.5 MB of peak RSS for no throughput.
const queueLen = 2048

// delayBackoff is how many batches the writer cuts without delay after a
// delay that gathered little.
const delayBackoff = 32

// Config is what a backend gives its Writer.
type Config struct {
	// MaxEvents and MaxBytes bound one transaction: at most MaxEvents
	// events and about MaxBytes bytes of event JSON.
	MaxEvents, MaxBytes int
	// CommitDelay is how long a steady stream of events may gather before
	// each commit (see Writer).
	CommitDelay time.Duration
	// Closed is the error appends get once the Writer is closed.
	Closed error
	// Write commits, in one transaction, the events of evs that continue
	// their runs; errs[i] says why evs[i] was not written (see CheckSeqs).
	// err is the transaction's own failure: then nothing was written.
	Write func(evs []store.Event) (errs []error, err error)
	// RetryEach reports whether a batch whose transaction failed with err
	// is worth retrying one event per transaction (so one bad event cannot
	// fail its neighbours): not when the ledger itself is unreachable or
	// locked, which would only repeat per event.
	RetryEach func(err error) bool
}

// Defaults are a Config's limits unless a backend's options change them:
// 1024 events or about 4 MiB of JSON a transaction, 1 ms of gathering.
func Defaults() Config {
	return Config{MaxEvents: 1024, MaxBytes: 4 << 20, CommitDelay: time.Millisecond}
}

// SetLimits sets MaxEvents and MaxBytes; values ≤ 0 keep the current ones.
func (c *Config) SetLimits(events, bytes int) {
	if events > 0 {
		c.MaxEvents = events
	}
	if bytes > 0 {
		c.MaxBytes = bytes
	}
}

// Writer is a ledger's batched event writer (LED-1): one goroutine that
// group-commits the events of every run of the process. Each event is
// acknowledged only once the transaction holding it has committed, so a
// caller can persist first, then notify.
//
// Group commit: the writer takes whatever is queued (up to the batch
// limits) and writes it in one transaction; events arriving meanwhile
// queue up and make the next transaction. An event arriving at an idle
// writer is committed at once, alone. Under a steady stream (events keep
// arriving while a batch is written) the writer lets them gather for
// Config.CommitDelay before each commit, so that batches are large and
// commits, each costing as much CPU as tens of events, are few.
//
// Each event is checked on its own: one that does not continue its run's
// last seq fails with store.ErrConflict (store.ErrNotFound for an unknown
// run) without failing the others of its transaction. Events are written
// in the order they were queued, so a run's events are accepted when one
// goroutine queues them in seq order, waiting for earlier ones or not.
// (Mixing the Writer and the store's AppendEvents for one run is fine as
// long as each call has returned before the next one for that run is
// made.)
type Writer struct {
	cfg   Config
	queue chan request

	// mu makes closing the queue safe: appends send while holding it for
	// reading, close takes it for writing, so no send can hit a closed
	// channel.
	mu     sync.RWMutex
	closed bool
	wg     sync.WaitGroup

	commits, events atomic.Int64

	evs []store.Event // the loop's, reused for each batch
}

type request struct {
	ev  store.Event
	res chan error // buffered: the writer never blocks on a reply
}

// New starts a Writer's goroutine; Close stops it.
func New(cfg Config) *Writer {
	w := &Writer{cfg: cfg, queue: make(chan request, queueLen)}
	w.wg.Add(1)
	go w.loop()
	return w
}

// Append queues ev and waits until it is durably committed or has failed.
// The Writer reads ev.JSON until then: the caller must not modify it
// meanwhile. Errors: store.ErrConflict if ev does not continue its run's
// last seq, store.ErrNotFound if its run does not exist, the ledger's
// closed error once it is closed. If ctx ends first, Append returns
// ctx.Err(); the event may still be written.
func (w *Writer) Append(ctx context.Context, ev store.Event) error {
	res, err := w.enqueue(ctx, ev)
	if err != nil {
		return err
	}
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// AppendAsync queues ev and returns a channel that receives exactly one
// value: nil once ev is durably committed, or the error Append would have
// returned; until then ev.JSON must not be modified. It waits only while
// the queue is full. Calling AppendAsync for seq n+1 as soon as it has
// returned for seq n (on one goroutine) keeps a run's events in order
// without waiting for each commit.
func (w *Writer) AppendAsync(ev store.Event) <-chan error {
	res, err := w.enqueue(context.Background(), ev)
	if err != nil {
		res = make(chan error, 1)
		res <- err
	}
	return res
}

func (w *Writer) enqueue(ctx context.Context, ev store.Event) (chan error, error) {
	if err := Validate(ev); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err // select below would pick at random
	}
	res := make(chan error, 1)
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return nil, w.cfg.Closed
	}
	select {
	case w.queue <- request{ev: ev, res: res}:
		return res, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Stats counts a Writer's work since it started.
type Stats struct {
	Commits int64 // transactions committed
	Events  int64 // events written by them
}

// Stats returns the writer's counters; Events/Commits is the mean batch.
func (w *Writer) Stats() Stats {
	return Stats{Commits: w.commits.Load(), Events: w.events.Load()}
}

// Close stops taking events, commits those already queued and waits for
// the goroutine to end. Closing again does nothing.
func (w *Writer) Close() {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.queue)
	}
	w.mu.Unlock()
	w.wg.Wait()
}

func (w *Writer) loop() {
	defer w.wg.Done()
	maxEvents, maxBytes, delay := w.cfg.MaxEvents, w.cfg.MaxBytes, w.cfg.CommitDelay
	batch := make([]request, 0, maxEvents)
	var last int       // size of the previous batch
	var streaming bool // events arrived while the previous batch was written
	var backoff int    // batches to cut at once, after a delay that gathered little
	for first := range w.queue {
		if last > 1 {
			// Under load, let the producers just woken by the last batch's
			// replies queue their next events before this batch is cut: a
			// yield, not a timer, so an idle writer never waits.
			runtime.Gosched()
		}
		batch = append(batch[:0], first)
		size := w.fill(&batch, evSize(first.ev))
		switch {
		case backoff > 0:
			backoff--
		case streaming && delay > 0 && len(batch) < maxEvents && size < maxBytes:
			// Producers that do not wait for their commits (the
			// supervisor's pipeline) keep queueing: let them queue for
			// delay before cutting the batch, as each commit costs about
			// as much CPU as tens of events, CPU the producers need.
			// Sleeping, rather than waiting on the queue, spares them a
			// wake-up of the writer at every event. Producers that wait
			// for each commit gain nothing by it (they are waiting for
			// this very batch), so a delay that did not at least double
			// the batch is not tried again for a while.
			before := len(batch)
			time.Sleep(delay)
			w.fill(&batch, size)
			if len(batch) < 2*before {
				backoff = delayBackoff
			}
		}
		last = len(batch)
		streaming = w.commit(batch)
		clear(batch) // drop references to delivered events (len stays)
	}
}

// fill adds the requests already queued to batch, up to the batch limits,
// without waiting for more: waiting would add latency to an idle writer.
// It returns the batch's size in bytes.
func (w *Writer) fill(batch *[]request, size int) int {
	maxEvents, maxBytes := w.cfg.MaxEvents, w.cfg.MaxBytes
	for len(*batch) < maxEvents && size < maxBytes {
		select {
		case r, ok := <-w.queue:
			if !ok {
				return size
			}
			*batch = append(*batch, r)
			size += evSize(r.ev)
		default:
			return size
		}
	}
	return size
}

func evSize(ev store.Event) int { return len(ev.JSON) + len(ev.RunID) + len(ev.Type) + 32 }

// commit writes batch in one transaction and answers every request. If the
// transaction itself fails (not just some events' seq checks), each event
// is retried in its own transaction when Config.RetryEach allows. It
// reports whether events were queued while the batch was written, by
// producers that did not wait for it.
func (w *Writer) commit(batch []request) (streaming bool) {
	evs := w.evs[:0]
	for _, r := range batch {
		evs = append(evs, r.ev)
	}
	w.evs = evs
	defer clear(evs) // drop references to delivered events
	errs, err := w.cfg.Write(evs)
	// Before any answer: an event queued now comes from a producer not
	// waiting for this batch.
	streaming = len(w.queue) > 0
	if err != nil && len(batch) > 1 && w.cfg.RetryEach(err) {
		for _, r := range batch {
			w.commit([]request{r})
		}
		return streaming
	}
	if err == nil {
		w.commits.Add(1)
		w.events.Add(int64(len(Good(evs, errs))))
	}
	for i, r := range batch {
		if err != nil {
			r.res <- err
		} else {
			r.res <- errs[i]
		}
	}
	return streaming
}
