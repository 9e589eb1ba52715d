package runs

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/store"
)

// recorder persists one run's events and, at the end, its turn record.
type recorder struct {
	s       *Supervisor
	a       *active
	ctx     context.Context // not cancelled with the run: bookkeeping must finish
	seq     int64
	startMu sync.Mutex
	started bool                  // under startMu
	pending chan drover.Event     // recorded events, to the encoder, in seq order
	commits chan (<-chan error)   // pending commits, to the committer, in seq order
	turn    turn                  // the encoder's until it ends
	enc     slabEncoder           // the encoder's
	queued  eventQueue            // the events of pending commits, in the same order
	failed  atomic.Pointer[error] // first ledger failure, set by the committer
	durable int64                 // last seq committed before any failure; the committer's until it ends
	ledger  error                 // read by finish after the committer ended

	// obs, when set, is told the run's progress (Config.Observer); the
	// fields below it are kept for it only. An event's commit is timed by
	// two readings of the monotonic clock against epoch (the run's start):
	// at its hand-off to the ledger and at its commit.
	obs     RunObserver
	epoch   time.Time
	model   string          // the run's goroutine's
	waiting map[string]bool // requests asked and not answered; the run's goroutine's
}

// encodeLinger is how long the encoder lets events queue once a run is
// busy (it found more than one waiting). Sleeping rather than waiting on
// the channel spares the run a wake-up of the encoder at every event.
const encodeLinger = time.Millisecond

// encode folds each event into the turn record, encodes it and queues it
// for the ledger, in seq order; it closes commits when pending is closed.
func (r *recorder) encode() {
	defer close(r.commits)
	warmEncoders()
	last := 0 // events in the previous burst
	for ev := range r.pending {
		r.queue(ev)
		n := 1
	drain:
		for {
			select {
			case ev, ok := <-r.pending:
				if !ok {
					return
				}
				r.queue(ev)
				n++
			default:
				break drain
			}
		}
		if n > 1 || last > 1 {
			time.Sleep(encodeLinger)
		}
		last = n
	}
}

func (r *recorder) queue(ev drover.Event) {
	r.turn.add(ev)
	if r.failed.Load() != nil {
		return
	}
	data, err := r.enc.encode(ev)
	if err != nil {
		res := make(chan error, 1)
		res <- err
		r.queued.push(store.Event{}, 0)
		r.commits <- res
		return
	}
	sev := store.Event{RunID: ev.RunID, Seq: ev.Seq, Type: ev.Type, JSON: data, Time: time.UnixMilli(ev.Timestamp)}
	var at time.Duration
	if r.obs != nil {
		at = time.Since(r.epoch)
	}
	r.queued.push(sev, at)
	r.commits <- r.s.appendAsync(sev)
}

// eventQueue is a FIFO of events shared by the encoder (push) and the
// committer (pop): a ring that grows to the most events pending at once
// (at most pendingCommits + 1) and is reused from then on. (A slice
// popped from its front and appended to at its back was reallocated over
// and over: a tenth of what a long run allocated.)
type eventQueue struct {
	mu   sync.Mutex
	ring []queuedEvent
	head int // ring[head] is the oldest
	n    int
}

// queuedEvent is an event pending commit and when it was handed to the
// ledger (since the recorder's epoch; 0 without an observer).
type queuedEvent struct {
	ev store.Event
	at time.Duration
}

func (q *eventQueue) push(ev store.Event, at time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n == len(q.ring) {
		grown := make([]queuedEvent, max(16, 2*len(q.ring)))
		copy(grown, q.ring[q.head:])
		copy(grown[len(q.ring)-q.head:], q.ring[:q.head])
		q.ring, q.head = grown, 0
	}
	q.ring[(q.head+q.n)%len(q.ring)] = queuedEvent{ev, at}
	q.n++
}

// pop removes and returns the oldest event and when it was handed to the
// ledger; the queue must not be empty.
func (q *eventQueue) pop() (store.Event, time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	e := q.ring[q.head]
	q.ring[q.head] = queuedEvent{} // the slab it points into may go
	q.head = (q.head + 1) % len(q.ring)
	q.n--
	return e.ev, e.at
}

// commit waits for each event's commit in order and wakes readers after it.
func (r *recorder) commit() {
	for res := range r.commits {
		ev, at := r.queued.pop() // pushed before res was sent
		if err := <-res; err != nil {
			if r.failed.CompareAndSwap(nil, &err) {
				// A run the ledger cannot record is stopped: drover must
				// not run agents it cannot account for.
				r.a.cancel(fmt.Errorf("ledger: %w", err))
			}
			continue
		}
		if r.failed.Load() == nil {
			r.durable++ // events commit in seq order, from 1
			r.a.tail.add(ev)
			if r.obs != nil {
				r.obs.Recorded(time.Since(r.epoch) - at)
			}
		}
		r.a.wake()
		r.s.recorded.fire()
		if ev.Type == drover.TypePermissionRequest && r.s.cfg.Notifier != nil {
			r.s.noticeRequest(r.a, ev) // once durable: "drover approve" can see it
		}
	}
}

// processStarted records each vendor process of the run (RUN-6 needs the
// live one's group): the first moves the run to running, a later one (the
// resume fallback starts a second process) replaces the ids.
func (r *recorder) processStarted(pid, pgid int) {
	r.startMu.Lock()
	defer r.startMu.Unlock()
	if err := r.s.st.StartRun(r.ctx, r.a.id, pid, pgid, time.Now()); err != nil {
		// The run goes on; only a crash of this drover would miss the ids.
		r.s.log.Warn("ledger: could not record the run's process", "run", r.a.id, "pid", pid, "pgid", pgid, "err", err)
		return
	}
	r.started = true
}

// markStarted moves the run to running at its first event if no process
// did (an adapter that runs none). Adapters report a process before its
// first event, but may do so from another goroutine than the one
// recording events, hence the lock.
func (r *recorder) markStarted() {
	r.startMu.Lock()
	defer r.startMu.Unlock()
	if r.started {
		return
	}
	if err := r.s.st.StartRun(r.ctx, r.a.id, 0, 0, time.Now()); err != nil {
		r.s.log.Warn("ledger: could not mark the run running", "run", r.a.id, "err", err)
		return
	}
	r.started = true
}

// record gives ev its runId and seq and hands it to the encoder; readers
// are woken only once it is durable ("persist first, then notify").
func (r *recorder) record(ev drover.Event) {
	if r.seq == 0 {
		r.markStarted()
	}
	r.seq++
	ev.RunID, ev.Seq = r.a.id, r.seq
	if ev.Type == drover.TypeDone {
		ev = ownShare(ev, r.a.costBefore)
	}
	if r.obs != nil {
		r.observe(&ev)
	}
	r.pending <- ev
}

// finish writes the run's end, its turn record and its session's new head
// in one transaction (LED-3, LED-4). It returns what the ledger could not
// record of the run: the first event it failed, else the end; nil when it
// has it all.
func (r *recorder) finish() error {
	if p := r.failed.Load(); p != nil {
		r.ledger = *p
	}
	a := r.a
	res := r.turn.result()
	f := store.Finish{RunID: a.id, Status: store.StatusCompleted, DoneStatus: res.Status,
		ResumeToken: res.ResumeToken, Usage: res.Usage, DurationMs: res.DurationMs, EndedAt: time.Now(),
		SessionID: a.req.Options.SessionID, Allowed: r.turn.allowed, Denied: r.turn.denied()}
	if res.Status != drover.StatusSuccess {
		f.Status, f.Error = store.StatusFailed, r.reason(res)
	}
	f.Messages, f.ToolCalls = r.turn.record(a.id, a.req.Prompt, r.durable)
	err := r.s.st.FinishRun(r.ctx, f)
	if err == nil && r.s.cfg.Notifier != nil {
		r.s.noticeEnd(a, f)
	}
	if r.obs != nil {
		r.observeEnd(f)
	}
	if err != nil {
		// Reconciliation marks it failed at the next start-up; until then
		// only this process knows it has ended (Supervisor.lostRecord).
		r.s.log.Warn("ledger: could not record the run's end", "run", a.id, "status", f.Status, "err", err)
	}
	if r.ledger != nil {
		r.s.log.Warn("ledger: the run was stopped because its events could not be recorded", "run", a.id, "err", r.ledger)
		return r.ledger
	}
	return err
}

// reason says why a run failed, in the ledger's words.
func (r *recorder) reason(res *engine.Result) string {
	if r.ledger != nil {
		return "ledger: " + r.ledger.Error()
	}
	switch res.Status {
	case drover.StatusInterrupted:
		if r.a.ctx.Err() == nil {
			return store.ReasonInterrupted // its turn, not the run, was ended (CTL-3)
		}
		if cause := context.Cause(r.a.ctx); cause != nil && cause != context.Canceled {
			return cause.Error()
		}
		return store.ReasonCancelled
	case drover.StatusMaxTurns:
		return "max turns reached"
	case drover.StatusMaxBudget:
		return "max budget reached"
	}
	if res.Error != nil {
		switch res.Error.Code {
		case drover.CodeTimeout:
			return store.ReasonTimeout
		case drover.CodeIdleTimeout:
			return store.ReasonIdleTimeout
		}
		return res.Error.Message
	}
	return "failed"
}

// failEvents are the events of a run the engine refused to start.
func failEvents(a *active, err error) []drover.Event {
	code := drover.CodeOf(err, drover.CodeAdapterError)
	return []drover.Event{
		drover.NewEvent(drover.TypeError, a.req.Agent, a.req.Options.SessionID, drover.ErrorPayload{Code: code, Message: err.Error()}),
		drover.NewEvent(drover.TypeDone, a.req.Agent, a.req.Options.SessionID, drover.DonePayload{Status: drover.StatusError}),
	}
}
