// Package runs is drover's supervisor: every agent run becomes a process
// drover starts, limits, times out, cancels, nests in a tree, and records in
// the ledger (DESIGN.md §6, RUN-1…RUN-7).
//
// Events flow one way: the engine yields an event, the supervisor gives it
// runId and seq, persists it, and only then tells readers it exists. Readers
// follow a run through the ledger by seq (Follow), so a slow reader never
// slows a run and never misses an event.
package runs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/proc"
	"github.com/drover-run/drover/store"
)

// Config tunes a Supervisor.
type Config struct {
	// Limit is the number of runs that may be running at once (RUN-7);
	// 0 means 8. Runs past it wait as pending, in the order started.
	Limit int
	// DefaultTimeout applies to runs that name none (RUN-4); 0 means 1 h.
	DefaultTimeout time.Duration
	// Append persists one event durably before returning. nil means
	// Store.AppendEvents with that one event. Used when AppendAsync is nil.
	Append func(ctx context.Context, ev store.Event) error
	// AppendAsync queues one event and returns a channel that receives nil
	// once it is durable (or the error). Calls for one run must keep their
	// seq order. With it, a run never waits for the disk: readers are woken
	// as commits land.
	AppendAsync func(ev store.Event) <-chan error
	// Owner names this supervisor in the ledger; "" means "host:pid".
	Owner string
	// Poll is how often runs owned elsewhere are checked (cross-process
	// cancel, Await and Follow); 0 means 250 ms.
	Poll time.Duration
}

// StartRequest asks for one run.
type StartRequest struct {
	Agent   string
	Prompt  string
	Options drover.Options
	// ParentID makes the run a child of an active run of this supervisor
	// (RUN-5): it is ended when the parent ends.
	ParentID string
	// SessionID continues a drover session (LED-4); "" starts a new one.
	SessionID string
	// ForkFrom starts a new session that continues from the end of that
	// earlier run, leaving the run's own session untouched (LED-4). The
	// agent must be the run's agent and able to fork.
	ForkFrom string
	// Timeout overrides Config.DefaultTimeout.
	Timeout time.Duration
}

// Errors.
var (
	// ErrClosed: the supervisor is closed.
	ErrClosed = errors.New("supervisor closed")
	// ErrParentEnded: the named parent is not an active run of this supervisor.
	ErrParentEnded = errors.New("parent run is not active")
)

// causes are why drover ended a run; their text is what the ledger records.
var (
	errCancelled   = errors.New(store.ReasonCancelled)
	errParentEnded = errors.New(store.ReasonParentEnded)
	errShutdown    = errors.New(store.ReasonCancelled + " (supervisor closed)")
)

// Supervisor starts and tracks runs. Close it to cancel and wait for every
// run it owns.
type Supervisor struct {
	eng   *drover.Engine
	st    store.Store
	cfg   Config
	ctx   context.Context
	close context.CancelFunc
	wg    sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	active  map[string]*active
	queue   []*active // pending runs in start order
	running int
	changed chan struct{} // closed and replaced when a run starts or ends

	recorded signal // fired whenever an event of any run is persisted
}

// active is one run this supervisor owns and has not finished.
type active struct {
	id       string
	req      StartRequest
	ctx      context.Context
	cancel   context.CancelCauseFunc
	done     chan struct{} // closed once the ledger has its end
	parent   *active
	children map[string]*active // guarded by Supervisor.mu

	notify signal // fired whenever an event of the run is persisted
}

func (a *active) changed() <-chan struct{} { return a.notify.wait() }

func (a *active) wake() { a.notify.fire() }

// signal wakes waiters: wait returns a channel that fire closes. A channel
// nobody took is kept rather than replaced: replacing it at every event of
// an unwatched run was a measurable part of recording. The zero signal is
// ready to use.
type signal struct {
	mu      sync.Mutex
	ch      chan struct{}
	watched bool // ch was handed out since it was made
}

func (g *signal) wait() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ch == nil {
		g.ch = make(chan struct{})
	}
	g.watched = true
	return g.ch
}

func (g *signal) fire() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.watched {
		return
	}
	close(g.ch)
	g.ch = make(chan struct{})
	g.watched = false
}

// New returns a supervisor over eng and st. It first reconciles the ledger
// (RUN-6): runs left pending or running by a drover process that is gone are
// marked failed "engine restart", and their recorded process groups are
// killed if still alive.
func New(ctx context.Context, eng *drover.Engine, st store.Store, cfg Config) (*Supervisor, error) {
	if cfg.Limit <= 0 {
		cfg.Limit = 8
	}
	if cfg.DefaultTimeout <= 0 {
		cfg.DefaultTimeout = time.Hour
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 250 * time.Millisecond
	}
	if cfg.Owner == "" {
		cfg.Owner = DefaultOwner()
	}
	if cfg.Append == nil {
		cfg.Append = func(ctx context.Context, ev store.Event) error { return st.AppendEvents(ctx, []store.Event{ev}) }
	}
	if cfg.AppendAsync == nil {
		appendSync := cfg.Append
		cfg.AppendAsync = func(ev store.Event) <-chan error {
			res := make(chan error, 1)
			res <- appendSync(context.Background(), ev)
			return res
		}
	}
	s := &Supervisor{eng: eng, st: st, cfg: cfg, active: map[string]*active{}, changed: make(chan struct{})}
	if err := Reconcile(ctx, st, cfg.Owner); err != nil {
		return nil, fmt.Errorf("reconcile ledger: %w", err)
	}
	// Runs must outlive the request that started them, so their context
	// derives from the supervisor's own, which Close cancels.
	s.ctx, s.close = context.WithCancel(context.WithoutCancel(ctx))
	s.wg.Go(s.pollCancels)
	return s, nil
}

// DefaultOwner is "host:pid" of this process.
func DefaultOwner() string {
	host, _ := os.Hostname()
	return host + ":" + strconv.Itoa(os.Getpid())
}

// ownerAlive reports whether the drover process named owner still runs.
// Owners on other hosts are assumed alive: only their host can tell.
func ownerAlive(owner string) bool {
	host, pidText, ok := strings.Cut(owner, ":")
	me, _ := os.Hostname()
	if !ok || host != me {
		return true
	}
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 0 {
		return false
	}
	return processAlive(pid)
}

// Reconcile marks runs left pending or running by a drover process that is
// gone as failed "engine restart", killing their recorded process groups if
// still alive (RUN-6). owner is the calling process's owner name: runs
// recorded under it come from a dead process that had the same pid.
func Reconcile(ctx context.Context, st store.Store, owner string) error {
	runs, err := st.Unfinished(ctx)
	if err != nil {
		return err
	}
	for _, r := range runs {
		if r.Owner != owner && ownerAlive(r.Owner) {
			continue // another live drover supervises it
		}
		if r.Pgid > 1 && proc.GroupAlive(r.Pgid) {
			_ = proc.KillGroup(r.Pgid)
		}
		err := st.FinishRun(ctx, store.Finish{RunID: r.ID, Status: store.StatusFailed,
			Error: store.ReasonEngineRestart, DoneStatus: drover.StatusError, EndedAt: time.Now()})
		if err != nil && !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
	return nil
}

// NewRunID returns a new run id: time-ordered, unique.
func NewRunID() string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("run_%011x%s", time.Now().UnixMilli(), hex.EncodeToString(b[:]))
}

// Start records a new run and returns its id at once (RUN-1); the run waits
// as pending until a slot is free (RUN-7). It fails for an unknown agent,
// invalid options, an unknown session, or a parent that is not active.
func (s *Supervisor) Start(ctx context.Context, req StartRequest) (string, error) {
	ad, ok := s.eng.Registry().Get(req.Agent)
	if !ok {
		return "", fmt.Errorf("%w %q", drover.ErrUnknownAgent, req.Agent)
	}
	req.Agent = ad.ID() // record the canonical id, not an alias
	if err := req.Options.Validate(); err != nil {
		return "", err
	}
	// An option the agent cannot honour is refused before anything is
	// recorded (ADP-3), not a run that fails at once.
	if err := ad.Capabilities().Unsupported(req.Options); err != nil {
		return "", err
	}
	if req.Timeout <= 0 {
		req.Timeout = s.cfg.DefaultTimeout
	}
	if req.ForkFrom != "" {
		if req.SessionID != "" {
			return "", &drover.Error{Code: drover.CodeValidation, Message: "a fork starts a new session: do not also name one"}
		}
		from, err := s.st.GetRun(ctx, req.ForkFrom)
		if err != nil {
			return "", fmt.Errorf("fork from %s: %w", req.ForkFrom, err)
		}
		if from.Agent != req.Agent || from.ResumeToken == "" {
			return "", &drover.Error{Code: drover.CodeValidation, Message: fmt.Sprintf("run %s (%s) has no %s conversation to fork", from.ID, from.Agent, req.Agent)}
		}
		req.Options.Resume, req.Options.Fork = from.ResumeToken, true
		if err := ad.Capabilities().Unsupported(req.Options); err != nil {
			return "", err
		}
	}
	if req.SessionID != "" {
		sess, err := s.st.GetSession(ctx, req.SessionID)
		if err != nil {
			return "", fmt.Errorf("session %s: %w", req.SessionID, err)
		}
		if req.Options.Resume == "" {
			req.Options.Resume = sess.ResumeToken
		}
	} else {
		req.SessionID = drover.NewSessionID()
		now := time.Now()
		if err := s.st.PutSession(ctx, &store.Session{ID: req.SessionID, Agent: req.Agent, Heads: []string{}, CreatedAt: now, UpdatedAt: now}); err != nil {
			return "", fmt.Errorf("create session: %w", err)
		}
	}
	req.Options.SessionID = req.SessionID
	optsJSON, _ := json.Marshal(req.Options)

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", ErrClosed
	}
	var parent *active
	if req.ParentID != "" {
		parent = s.active[req.ParentID]
		if parent == nil || parent.ctx.Err() != nil {
			return "", fmt.Errorf("%w: %s", ErrParentEnded, req.ParentID)
		}
	}
	id := NewRunID()
	r := &store.Run{ID: id, Agent: req.Agent, Prompt: req.Prompt, Status: store.StatusPending, ParentID: req.ParentID,
		SessionID: req.SessionID, Options: optsJSON, Timeout: req.Timeout, Owner: s.cfg.Owner, CreatedAt: time.Now()}
	if err := s.st.CreateRun(ctx, r); err != nil {
		return "", fmt.Errorf("record run: %w", err)
	}
	// A child's context is its own, not derived from the parent's, so that
	// its end can say "parent ended" rather than the parent's own reason;
	// cancelTreeLocked and execute cascade explicitly.
	a := &active{id: id, req: req, done: make(chan struct{}), parent: parent,
		children: map[string]*active{}}
	a.ctx, a.cancel = context.WithCancelCause(s.ctx)
	if parent != nil {
		parent.children[id] = a
	}
	s.active[id] = a
	s.queue = append(s.queue, a)
	s.scheduleLocked()
	s.notifyLocked()
	return id, nil
}

// notifyLocked wakes everyone waiting on RunsChanged.
func (s *Supervisor) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// EventsRecorded returns a channel that is closed the next time an event
// of any run of this supervisor is persisted. Followers of the ledger's
// log of all events (store.Store.EventsAfter) wait on it instead of
// polling; runs of other processes sharing the ledger do not fire it.
func (s *Supervisor) EventsRecorded() <-chan struct{} { return s.recorded.wait() }

// RunsChanged returns a channel that is closed the next time a run of this
// supervisor starts or ends. Watchers read what changed from the ledger
// (ListRuns), so a slow watcher never misses a run and never blocks one.
func (s *Supervisor) RunsChanged() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// scheduleLocked starts queued runs while slots are free, oldest first.
func (s *Supervisor) scheduleLocked() {
	for s.running < s.cfg.Limit && len(s.queue) > 0 {
		a := s.queue[0]
		s.queue = s.queue[1:]
		s.running++
		s.wg.Go(func() { s.execute(a) })
	}
}

// execute runs one run to its end and records it.
func (s *Supervisor) execute(a *active) {
	defer func() {
		s.mu.Lock()
		s.running--
		delete(s.active, a.id)
		if a.parent != nil {
			delete(a.parent.children, a.id)
		}
		s.scheduleLocked()
		s.notifyLocked()
		s.mu.Unlock()
		a.wake()
		close(a.done)
	}()
	rec := &recorder{s: s, a: a, ctx: context.WithoutCancel(a.ctx),
		pending: make(chan drover.Event, 1024), commits: make(chan (<-chan error), 4096)}
	// The encoder encodes and queues each event for the ledger, and the
	// committer wakes readers as each becomes durable, so the run itself
	// neither encodes nor waits for the disk: on another core, that work
	// does not slow the agent's event path. Both are owned here and waited
	// for before the run's end is recorded. The buffered channels bound
	// how far the run may get ahead of the ledger.
	var pipeline sync.WaitGroup
	pipeline.Go(rec.encode)
	pipeline.Go(rec.commit)
	if a.ctx.Err() == nil {
		opts := a.req.Options
		opts.Timeout = a.req.Timeout
		ctx := drover.WithProcessObserver(a.ctx, rec.processStarted)
		events, err := s.eng.Run(ctx, a.req.Agent, a.req.Prompt, opts)
		if err != nil {
			for _, ev := range failEvents(a, err) {
				rec.record(ev)
			}
		} else {
			for ev := range events {
				rec.record(ev)
			}
		}
	} else {
		rec.record(drover.NewEvent(drover.TypeDone, a.req.Agent, a.req.SessionID, drover.DonePayload{Status: drover.StatusInterrupted}))
	}
	// A child never outlives its parent (RUN-5): end the children and wait
	// for them before this run's end is recorded.
	s.mu.Lock()
	children := make([]*active, 0, len(a.children))
	for _, c := range a.children {
		children = append(children, c)
		s.cancelTreeLocked(c, errParentEnded)
	}
	s.mu.Unlock()
	for _, c := range children {
		<-c.done
	}
	close(rec.pending)
	pipeline.Wait()
	rec.finish()
}

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
	failed  atomic.Pointer[error] // first ledger failure, set by the committer
	durable int64                 // last seq committed before any failure; the committer's until it ends
	ledger  error                 // read by finish after the committer ended
}

// encodeLinger is how long the encoder lets events queue once a run is
// busy (it found more than one waiting). Sleeping rather than waiting on
// the channel spares the run a wake-up of the encoder at every event.
const encodeLinger = time.Millisecond

// encode folds each event into the turn record, encodes it and queues it
// for the ledger, in seq order; it closes commits when pending is closed.
func (r *recorder) encode() {
	defer close(r.commits)
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
		r.commits <- res
		return
	}
	r.commits <- r.s.cfg.AppendAsync(store.Event{RunID: ev.RunID, Seq: ev.Seq, Type: ev.Type, JSON: data, Time: time.UnixMilli(ev.Timestamp)})
}

// commit waits for each event's commit in order and wakes readers after it.
func (r *recorder) commit() {
	for res := range r.commits {
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
		}
		r.a.wake()
		r.s.recorded.fire()
	}
}

// processStarted records each vendor process of the run (RUN-6 needs the
// live one's group): the first moves the run to running, a later one (the
// resume fallback starts a second process) replaces the ids.
func (r *recorder) processStarted(pid, pgid int) {
	r.startMu.Lock()
	defer r.startMu.Unlock()
	if r.s.st.StartRun(r.ctx, r.a.id, pid, pgid, time.Now()) == nil {
		r.started = true
	}
}

// markStarted moves the run to running at its first event if no process
// did (an adapter that runs none). Adapters report a process before its
// first event, but may do so from another goroutine than the one
// recording events, hence the lock.
func (r *recorder) markStarted() {
	r.startMu.Lock()
	defer r.startMu.Unlock()
	if !r.started {
		r.started = r.s.st.StartRun(r.ctx, r.a.id, 0, 0, time.Now()) == nil
	}
}

// record gives ev its runId and seq and hands it to the encoder; readers
// are woken only once it is durable ("persist first, then notify").
func (r *recorder) record(ev drover.Event) {
	if r.seq == 0 {
		r.markStarted()
	}
	r.seq++
	ev.RunID, ev.Seq = r.a.id, r.seq
	r.pending <- ev
}

// finish writes the run's end and turn record in one transaction (LED-3)
// and moves its session's head (LED-4).
func (r *recorder) finish() {
	if p := r.failed.Load(); p != nil {
		r.ledger = *p
	}
	a := r.a
	res := r.turn.result()
	f := store.Finish{RunID: a.id, Status: store.StatusCompleted, DoneStatus: res.Status,
		ResumeToken: res.ResumeToken, Usage: res.Usage, DurationMs: res.DurationMs, EndedAt: time.Now()}
	if res.Status != drover.StatusSuccess {
		f.Status, f.Error = store.StatusFailed, r.reason(res)
	}
	f.Messages, f.ToolCalls = r.turn.record(a.id, a.req.Prompt, r.durable)
	if err := r.s.st.FinishRun(r.ctx, f); err != nil && r.ledger == nil {
		r.ledger = err
	}
	if res.ResumeToken != "" {
		_ = r.s.st.AdvanceSession(r.ctx, a.req.SessionID, a.id, res.ResumeToken, f.EndedAt)
	}
}

// reason says why a run failed, in the ledger's words.
func (r *recorder) reason(res *drover.Result) string {
	if r.ledger != nil {
		return "ledger: " + r.ledger.Error()
	}
	switch res.Status {
	case drover.StatusInterrupted:
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
			return "idle timeout"
		}
		return res.Error.Message
	}
	return "failed"
}

// failEvents are the events of a run the engine refused to start.
func failEvents(a *active, err error) []drover.Event {
	code := drover.CodeOf(err, drover.CodeAdapterError)
	return []drover.Event{
		drover.NewEvent(drover.TypeError, a.req.Agent, a.req.SessionID, drover.ErrorPayload{Code: code, Message: err.Error()}),
		drover.NewEvent(drover.TypeDone, a.req.Agent, a.req.SessionID, drover.DonePayload{Status: drover.StatusError}),
	}
}

// cancelTreeLocked cancels a with cause and all its descendants with
// "parent ended". A pending run leaves the queue and ends at once.
func (s *Supervisor) cancelTreeLocked(a *active, cause error) {
	a.cancel(cause)
	if i := slices.Index(s.queue, a); i >= 0 {
		s.queue = slices.Delete(s.queue, i, i+1)
		s.running++ // released again by execute's deferred bookkeeping
		s.wg.Go(func() { s.execute(a) })
	}
	for _, c := range a.children {
		s.cancelTreeLocked(c, errParentEnded)
	}
}

// Cancel ends a run (RUN-3). It is idempotent: unknown and finished runs
// are not an error. A run owned by another drover process is marked in the
// ledger, and that process stops it within its poll interval.
func (s *Supervisor) Cancel(ctx context.Context, id string) error {
	s.mu.Lock()
	a := s.active[id]
	if a != nil {
		s.cancelTreeLocked(a, errCancelled)
	}
	s.mu.Unlock()
	if a != nil {
		return nil
	}
	if err := s.st.RequestCancel(ctx, id); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}

// pollCancels applies cancellations requested in the ledger by other
// processes to the runs this supervisor owns.
func (s *Supervisor) pollCancels() {
	t := time.NewTicker(s.cfg.Poll)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		ids := make([]string, 0, len(s.active))
		for id := range s.active {
			ids = append(ids, id)
		}
		s.mu.Unlock()
		for _, id := range ids {
			if r, err := s.st.GetRun(s.ctx, id); err == nil && r.CancelRequested {
				_ = s.Cancel(s.ctx, id)
			}
		}
	}
}

func (s *Supervisor) lookup(id string) *active {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active[id]
}

// Await blocks until every run in ids has ended and returns their records
// in the same order (RUN-2). It answers for runs that ended long ago and
// for runs owned by other processes (polling the ledger); many callers may
// await the same run. It returns store.ErrNotFound for an unknown id.
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
			r, err := s.st.GetRun(ctx, id)
			if err != nil {
				return nil, fmt.Errorf("run %s: %w", id, err)
			}
			if r.Status.Terminal() {
				out = append(out, r)
				break
			}
			select {
			case <-time.After(s.cfg.Poll):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	return out, nil
}

// Follow yields a run's events with seq > afterSeq from the ledger, waiting
// for new ones until the run has ended and every event was yielded. It
// follows runs of other processes too, polling. A reader never slows the
// run: it reads what was already persisted.
func (s *Supervisor) Follow(ctx context.Context, id string, afterSeq int64) iter.Seq2[store.Event, error] {
	return func(yield func(store.Event, error) bool) {
		for {
			var wake <-chan struct{}
			if a := s.lookup(id); a != nil {
				wake = a.changed() // taken before reading, so no wake-up is missed
			}
			evs, err := s.st.Events(ctx, id, afterSeq, 1000)
			if err != nil {
				yield(store.Event{}, err)
				return
			}
			for _, ev := range evs {
				if !yield(ev, nil) {
					return
				}
				afterSeq = ev.Seq
			}
			if len(evs) == 1000 {
				continue
			}
			r, err := s.st.GetRun(ctx, id)
			if err != nil {
				yield(store.Event{}, err)
				return
			}
			if r.Status.Terminal() && r.LastSeq <= afterSeq {
				return
			}
			if wake == nil {
				t := time.NewTimer(s.cfg.Poll)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					yield(store.Event{}, ctx.Err())
					return
				}
				continue
			}
			select {
			case <-wake:
			case <-ctx.Done():
				yield(store.Event{}, ctx.Err())
				return
			}
		}
	}
}

// Close cancels every run this supervisor owns, waits for them to be
// recorded, and stops its goroutines. The store is not closed.
func (s *Supervisor) Close() error {
	s.mu.Lock()
	s.closed = true
	for _, a := range s.active {
		if a.parent == nil {
			s.cancelTreeLocked(a, errShutdown)
		}
	}
	s.mu.Unlock()
	// Each run keeps the cause given above (the first cause wins), and
	// cancelling the supervisor's context also stops the cancel poller.
	s.close()
	s.wg.Wait()
	return nil
}
