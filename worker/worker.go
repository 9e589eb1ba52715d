package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/proc"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/postgres"
)

// ReasonWorkerLost is why a run failed when its worker stopped
// heartbeating: the process died, its host was lost, or it could not
// reach the database for longer than its lease.
const ReasonWorkerLost = "worker lost"

// Config describes one worker.
type Config struct {
	// ID names the worker; its runs are owned by Owner(ID). A worker
	// that comes back under the same ID kills the process groups of its
	// runs that were failed while it was gone. Required.
	ID string
	// Agents it serves (ids as the registry names them). Required.
	Agents []string
	// Labels it carries (CheckLabels, at most MaxLabels): it serves the
	// runs that ask for any subset of them.
	Labels []string
	// Limit is how many runs it runs at once; 0 means 8.
	Limit int
	// Lease is how long it may go without a heartbeat before it is lost;
	// 0 means 10 s. It heartbeats every Lease/4.
	Lease time.Duration
	// Defaults, when set, fills in what a run's recorded options leave
	// unset, before it runs (drover worker --fakemodel points runs at its
	// scripted model server).
	Defaults func(*drover.Options)
	// Profiles resolves, from this worker's own configuration, the
	// credential profiles a run's failover names: the ledger holds a
	// profile with its secrets redacted, so a worker runs each profile
	// name with what it has under that name (drover worker: its profiles
	// file). A run naming profiles fails, saying why, when Profiles is nil
	// or cannot resolve them.
	Profiles func(names []string) ([]drover.Profile, error)
	// Logger receives what the worker does; nil means none.
	Logger *slog.Logger
}

// Owner is the ledger's owner name of the runs of worker id: "worker:ID".
// It has no "host:pid" form, so no other drover process reconciles a
// worker's runs by its pid (RUN-6 is per worker: its heartbeats say
// whether it lives).
func Owner(id string) string { return "worker:" + id }

// Run serves the queue until ctx ends: it registers the worker, kills
// what its earlier life left running, claims runs and runs them on sup
// (whose Config.Owner must be Owner(cfg.ID)), heartbeats, and fails the
// runs of lost workers. When ctx ends it stops claiming, cancels its runs,
// waits until they are recorded, and records that it stopped.
func Run(ctx context.Context, st *postgres.Store, sup *runs.Supervisor, cfg Config) error {
	if cfg.ID == "" || len(cfg.Agents) == 0 {
		return errors.New("worker: an id and at least one agent are required")
	}
	labels, err := CheckLabels(cfg.Labels)
	if err != nil {
		return err
	}
	if len(labels) > MaxLabels {
		return fmt.Errorf("worker: %d labels, at most %d", len(labels), MaxLabels)
	}
	if cfg.Limit <= 0 {
		cfg.Limit = 8
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 10 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	queues := map[string]river.QueueConfig{}
	for _, agent := range cfg.Agents {
		for _, sub := range subsets(labels) {
			name, err := queueName(agent, sub)
			if err != nil {
				return err
			}
			queues[name] = river.QueueConfig{MaxWorkers: cfg.Limit}
		}
	}
	if err := Migrate(ctx, st); err != nil {
		if ctx.Err() != nil {
			return nil // stopped before it served: nothing to undo
		}
		return err
	}
	host, _ := os.Hostname()
	w := &worker{st: st, sup: sup, cfg: cfg, log: log, owner: Owner(cfg.ID), slots: make(chan struct{}, cfg.Limit), claimed: map[string]bool{}}
	if err := st.RegisterWorker(ctx, &postgres.Worker{ID: cfg.ID, Host: host, Pid: os.Getpid(), Agents: cfg.Agents,
		Labels: labels, Lease: cfg.Lease}); err != nil {
		if ctx.Err() != nil {
			// Stopped while registering: the registration may have
			// committed, and a registered worker that never heartbeats
			// would be declared lost.
			w.recordStop()
			return nil
		}
		return err
	}
	w.killLeftovers(ctx)
	if ctx.Err() != nil {
		w.recordStop()
		return nil
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(w.work))
	client, err := river.NewClient(riverpgxv5.New(st.Pool()), &river.Config{
		// River records the client that fetched a job: Reap re-offers
		// the jobs a lost worker fetched but never claimed the run of.
		ID:      cfg.ID,
		Queues:  queues,
		Workers: workers,
		// A run has its own timeout (RUN-4): River's must not end it.
		JobTimeout: -1,
		// Liveness is the workers' heartbeats, not a job's age: a long
		// run is not stuck, and a rescued job must not run again.
		RescueStuckJobsAfter: 24 * time.Hour,
		Logger:               log,
	})
	if err != nil {
		return fmt.Errorf("river client: %w", err)
	}
	// The client's goroutines run on a context of their own: ctx ending
	// must stop claiming, not cut short the recording of runs going on.
	if err := client.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("start river client: %w", err)
	}
	var bg sync.WaitGroup
	loops, stopLoops := context.WithCancel(context.WithoutCancel(ctx))
	bg.Go(func() { w.heartbeat(loops) })
	q := &Queue{st: st, client: client}
	// Every live worker reaps; MarkLostWorkers hands each lost worker to one.
	bg.Go(func() { q.reapEvery(loops, w.log) })
	log.Info("worker started", "id", cfg.ID, "agents", cfg.Agents, "labels", labels, "limit", cfg.Limit, "lease", cfg.Lease)

	<-ctx.Done()
	// StopAndCancel cancels the context of every job being worked, and
	// work then cancels its run and waits until the run is recorded.
	stopCtx := context.WithoutCancel(ctx)
	if err := client.StopAndCancel(stopCtx); err != nil {
		log.Error("stop river client", "err", err)
	}
	stopLoops()
	bg.Wait()
	w.recordStop()
	return nil
}

// recordStop records in the ledger that the worker stopped, whatever
// the context Run was given has become.
func (w *worker) recordStop() {
	if err := w.st.StopWorker(context.Background(), w.cfg.ID); err != nil {
		w.log.Error("record worker stop", "id", w.cfg.ID, "err", err)
	}
}

// worker is one Run's state.
type worker struct {
	st    *postgres.Store
	sup   *runs.Supervisor
	cfg   Config
	log   *slog.Logger
	owner string
	slots chan struct{} // one per run at once: River's limit is per queue

	mu      sync.Mutex
	claimed map[string]bool // runs claimed and not yet ended
}

// work is River's job: claim the run, run it, wait for its end.
func (w *worker) work(ctx context.Context, job *river.Job[runArgs]) error {
	select {
	case w.slots <- struct{}{}:
	case <-ctx.Done():
		// Stopping before claiming: the run is another worker's to take.
		return river.JobSnooze(0)
	}
	defer func() { <-w.slots }()
	id := job.Args.RunID
	r, err := w.st.ClaimRun(ctx, id, w.owner)
	switch {
	case errors.Is(err, postgres.ErrNotClaimable), errors.Is(err, store.ErrNotFound):
		w.log.Info("queued run not claimable: skipped", "run", id, "err", err)
		return nil
	case err != nil:
		// Not claimed (the database is unreachable, say): offered again
		// shortly, to any worker. A snooze is not an attempt.
		w.log.Warn("could not claim a queued run: offered again", "run", id, "err", err)
		return river.JobSnooze(time.Second)
	}
	w.mu.Lock()
	w.claimed[id] = true
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.claimed, id)
		w.mu.Unlock()
	}()
	opts, err := runs.RunOptions(r)
	if err == nil {
		err = w.profiles(&opts)
	}
	if err == nil && w.cfg.Defaults != nil {
		w.cfg.Defaults(&opts)
	}
	var done <-chan struct{}
	if err == nil {
		done, err = w.sup.Adopt(context.WithoutCancel(ctx), r, opts)
	}
	if err != nil {
		ferr := w.st.FinishRun(context.WithoutCancel(ctx), store.Finish{RunID: id, Status: store.StatusFailed,
			Error: err.Error(), DoneStatus: drover.StatusError, EndedAt: time.Now()})
		w.log.Error("could not run a claimed run", "run", id, "err", err, "finish", ferr)
		return nil
	}
	w.log.Info("claimed run", "run", id, "agent", r.Agent)
	select {
	case <-done:
	case <-ctx.Done():
		// The worker is stopping (or River cancelled the job).
		_ = w.sup.Cancel(context.WithoutCancel(ctx), id)
		<-done
	}
	w.ensureEnded(context.WithoutCancel(ctx), id)
	return nil
}

// profiles replaces the profiles of opts' failover chain, recorded with
// their secrets redacted, with this worker's own of the same names.
func (w *worker) profiles(opts *drover.Options) error {
	if opts.Failover == nil || len(opts.Failover.Profiles) == 0 {
		return nil
	}
	names := make([]string, len(opts.Failover.Profiles))
	for i, p := range opts.Failover.Profiles {
		names[i] = p.Name
	}
	if w.cfg.Profiles == nil {
		return fmt.Errorf("the run names credential profiles (%s) and worker %s has none configured", strings.Join(names, ", "), w.cfg.ID)
	}
	ps, err := w.cfg.Profiles(names)
	if err != nil {
		return fmt.Errorf("worker %s: credential profiles: %w", w.cfg.ID, err)
	}
	fo := *opts.Failover
	fo.Profiles = ps
	opts.Failover = &fo
	return nil
}

// ReasonLedgerUnavailable is why a run failed when the database was
// unreachable as it ended, so that its own end could not be recorded.
const ReasonLedgerUnavailable = "ledger unavailable: the run's end could not be recorded"

// ensureEnded makes sure the ledger shows run id ended once its
// supervisor is done with it. When the database was down as the run
// ended (a restart), the supervisor could not record the end and the run
// would stay "running" under a live worker for ever: the worker records
// it failed ReasonLedgerUnavailable as soon as the database is back,
// trying for up to a minute (after which the lease lapses on a worker
// that cannot reach the database, and the reaper fails it).
func (w *worker) ensureEnded(ctx context.Context, id string) {
	deadline := time.Now().Add(time.Minute)
	for {
		r, err := w.st.GetRun(ctx, id)
		if err == nil && r.Status.Terminal() {
			return
		}
		if err == nil {
			err = w.st.FinishRun(ctx, store.Finish{RunID: id, Status: store.StatusFailed, Error: ReasonLedgerUnavailable,
				DoneStatus: drover.StatusError, EndedAt: time.Now()})
			if err == nil || errors.Is(err, store.ErrConflict) {
				w.log.Warn("recorded the end of a run the database missed", "run", id)
				return
			}
		}
		if time.Now().After(deadline) {
			w.log.Error("could not record the end of a run", "run", id, "err", err)
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// heartbeat moves the worker's heartbeat forward every Lease/4. If the
// worker was declared lost meanwhile (it could not reach the database for
// longer than its lease), its runs have been failed: it kills them and
// registers afresh.
func (w *worker) heartbeat(ctx context.Context) {
	t := time.NewTicker(w.cfg.Lease / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := w.st.Heartbeat(ctx, w.cfg.ID)
		switch {
		case err == nil, ctx.Err() != nil:
		case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrNotFound):
			w.log.Error("this worker was declared lost: stopping its runs", "id", w.cfg.ID)
			w.mu.Lock()
			ids := make([]string, 0, len(w.claimed))
			for id := range w.claimed {
				ids = append(ids, id)
			}
			w.mu.Unlock()
			for _, id := range ids {
				_ = w.sup.Cancel(ctx, id)
			}
			host, _ := os.Hostname()
			labels, _ := CheckLabels(w.cfg.Labels)
			if err := w.st.RegisterWorker(ctx, &postgres.Worker{ID: w.cfg.ID, Host: host, Pid: os.Getpid(),
				Agents: w.cfg.Agents, Labels: labels, Lease: w.cfg.Lease}); err != nil {
				w.log.Error("register worker again", "id", w.cfg.ID, "err", err)
			}
		default:
			w.log.Warn("heartbeat failed", "id", w.cfg.ID, "err", err)
		}
	}
}

// Reap declares lost every worker whose heartbeat is older than its lease
// and fails its unfinished runs "worker lost" (their process groups are
// on the lost worker's host: it kills them if it comes back). A run that
// asked for retries (StartRequest.Retries) is queued again as a new run
// (same agent, prompt, options, session, parent and labels; one retry
// fewer), and its error names it: "worker lost (retried as run_…)". It
// returns the first error; what it did is logged.
func (q *Queue) Reap(ctx context.Context, log *slog.Logger) error {
	st := q.st
	lost, err := st.MarkLostWorkers(ctx, 0)
	if err != nil || len(lost) == 0 {
		return err
	}
	owners := map[string]string{}
	for _, l := range lost {
		owners[Owner(l.ID)] = l.ID
		log.Warn("worker lost", "id", l.ID, "host", l.Host, "lastHeartbeat", l.HeartbeatAt)
	}
	ids := make([]string, 0, len(lost))
	for _, l := range lost {
		ids = append(ids, l.ID)
	}
	// A job the lost worker fetched but whose run it never claimed has
	// run nothing: it is offered again (one more attempt), not lost.
	tag, err := st.Pool().Exec(ctx, `UPDATE river_job SET state = 'available', scheduled_at = now(), max_attempts = attempt + 1
		WHERE kind = $1 AND state = 'running' AND attempted_by[cardinality(attempted_by)] = ANY($2)
			AND args->>'runId' IN (SELECT id FROM runs WHERE status = 'pending' AND owner = '')`, jobKind, ids)
	if err != nil {
		return fmt.Errorf("re-offer the lost workers' unclaimed jobs: %w", err)
	}
	if n := tag.RowsAffected(); n > 0 {
		log.Warn("queued runs a lost worker fetched but never claimed are offered again", "runs", n)
	}
	unfinished, err := st.Unfinished(ctx)
	if err != nil {
		return err
	}
	for _, r := range unfinished {
		if _, ok := owners[r.Owner]; !ok {
			continue
		}
		args, err := q.jobOf(ctx, r.ID)
		if err != nil {
			return err
		}
		reason, retry := ReasonWorkerLost, ""
		if args.Retries > 0 {
			// The retry is queued before the run is failed, so that whoever
			// sees the failure finds the run it names.
			retry = runs.NewRunID()
			again := &store.Run{ID: retry, Agent: r.Agent, Prompt: r.Prompt, ParentID: r.ParentID, SessionID: r.SessionID,
				Options: r.Options, Timeout: r.Timeout}
			if err := q.Submit(ctx, again, runs.Queued{Labels: args.Labels, Retries: args.Retries - 1}); err != nil {
				log.Error("could not queue the retry of a run whose worker was lost", "run", r.ID, "err", err)
				retry = ""
			} else {
				reason += " (retried as " + retry + ")"
			}
		}
		err = st.FinishRun(ctx, store.Finish{RunID: r.ID, Status: store.StatusFailed, Error: reason,
			DoneStatus: drover.StatusError, EndedAt: time.Now()})
		switch {
		case errors.Is(err, store.ErrConflict):
			// It ended meanwhile: its worker was not lost after all.
			if retry != "" {
				_, _ = st.CancelQueued(ctx, retry)
			}
			continue
		case err != nil:
			return err
		}
		log.Warn("run failed: worker lost", "run", r.ID, "worker", owners[r.Owner], "retry", retry)
	}
	return nil
}

// killLeftovers kills the process groups of this worker's runs that were
// failed "worker lost" while it was gone and may still be running on this
// host (its runs left unfinished were reconciled by its supervisor).
func (w *worker) killLeftovers(ctx context.Context) {
	ended, err := w.st.ListRuns(ctx, store.RunFilter{Status: []store.RunStatus{store.StatusFailed}, Since: time.Now().Add(-7 * 24 * time.Hour)})
	if err != nil {
		w.log.Warn("list runs to kill leftovers", "err", err)
		return
	}
	for _, r := range ended {
		if r.Owner == w.owner && r.Error == ReasonWorkerLost && r.Pgid > 1 && proc.GroupAlive(r.Pgid) {
			err := proc.KillGroup(r.Pgid)
			w.log.Warn("killed the process group of a run failed while this worker was lost", "run", r.ID, "pgid", r.Pgid, "err", err)
		}
	}
}

// subsets returns every subset of labels (sorted), the empty one first.
func subsets(labels []string) [][]string {
	out := [][]string{nil}
	for _, l := range labels {
		for _, s := range slices.Clone(out) {
			out = append(out, append(slices.Clone(s), l))
		}
	}
	for _, s := range out {
		slices.Sort(s)
	}
	return out
}

// jobOf returns the job args of run id's queue job (zero if it has none:
// a run not queued, or whose job River has since deleted).
func (q *Queue) jobOf(ctx context.Context, id string) (runArgs, error) {
	var args runArgs
	err := q.st.Pool().QueryRow(ctx, `SELECT args FROM river_job WHERE kind = $1 AND args->>'runId' = $2 ORDER BY id DESC LIMIT 1`,
		jobKind, id).Scan(&args)
	if errors.Is(err, pgx.ErrNoRows) {
		return runArgs{}, nil
	}
	if err != nil {
		return args, fmt.Errorf("queue job of run %s: %w", id, err)
	}
	return args, nil
}
