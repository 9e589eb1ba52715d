// Package worker is drover's scale-out (docs/scale-out.md): a shared run
// queue on the PostgreSQL ledger and the workers that serve it. A client
// (drover serve --queue, drover run --queue) records each run and enqueues
// it in one transaction (Queue, a runs.Queue); `drover worker` processes
// on any number of machines claim the runs whose agent they have and
// whose labels they carry, run them under a supervisor of their own
// (Worker), heartbeat, and fail the runs of a worker that stopped
// heartbeating "worker lost".
//
// The queue is River (github.com/riverqueue/river): jobs live in the
// ledger's database, so a run and its job commit together, and workers
// are woken by River's LISTEN/NOTIFY when a job is inserted. River's own
// retry and rescue are off (one attempt, rescue after a day): a coding
// agent's side effects make blind re-execution wrong, and whether a run
// whose worker died ends is decided by drover's heartbeats (Worker), not
// by how long a job has been running.
package worker

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/postgres"
)

// lockRiverMigrate serializes River's migrations across processes that
// start at once ("drover" and a number, as store/postgres's keys).
const lockRiverMigrate int64 = 0x64726f7665720101

// jobKind is River's name for a drover run job.
const jobKind = "drover_run"

// runArgs is a queued run's job: the run is in the ledger; the job only
// names it (and what chose its River queue, for people reading River's
// tables).
type runArgs struct {
	RunID  string   `json:"runId"`
	Agent  string   `json:"agent"`
	Labels []string `json:"labels,omitempty"`
	// Retries is how many more times the run is run anew if its worker
	// is lost (see Reap).
	Retries int `json:"retries,omitempty"`
}

// Kind is River's job kind.
func (runArgs) Kind() string { return jobKind }

// MaxLabels is how many labels a worker may carry: it serves a River
// queue for each subset of them (per agent), 2^MaxLabels at most.
const MaxLabels = 4

var labelRE = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// CheckLabels returns labels sorted and without duplicates, or an error
// naming one that is not a label: lower-case letters and digits, words
// joined by single hyphens.
func CheckLabels(labels []string) ([]string, error) {
	out := slices.Clone(labels)
	slices.Sort(out)
	out = slices.Compact(out)
	for _, l := range out {
		if !labelRE.MatchString(l) {
			return nil, fmt.Errorf("label %q: want lower-case letters and digits, words joined by '-'", l)
		}
	}
	return out, nil
}

// queueName is the River queue of the runs of agent that need labels
// (sorted, checked): "drover_AGENT[_LABEL…]". River names allow lower-case
// letters, digits, and single '_' or '-' between them; an agent id outside
// that is refused.
func queueName(agent string, labels []string) (string, error) {
	if !labelRE.MatchString(agent) {
		return "", fmt.Errorf("agent %q cannot be queued: its id is not lower-case letters, digits and '-'", agent)
	}
	name := strings.Join(append([]string{"drover", agent}, labels...), "_")
	if len(name) > 64 {
		return "", fmt.Errorf("agent %q with labels %v: queue name longer than 64 characters", agent, labels)
	}
	return name, nil
}

// Migrate brings River's schema in the ledger's database up to date
// under a session advisory lock, so that processes starting at once apply
// each migration once. (Not in one transaction: River's migrations add
// enum values that a later one uses, which PostgreSQL allows only after a
// commit; River applies each in a transaction of its own.)
func Migrate(ctx context.Context, st *postgres.Store) error {
	m, err := rivermigrate.New(riverpgxv5.New(st.Pool()), nil)
	if err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}
	conn, err := st.Pool().Acquire(ctx)
	if err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, lockRiverMigrate); err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, lockRiverMigrate) //nolint:errcheck // the session ends the lock too
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}
	return nil
}

// Queue submits runs to the workers: a runs.Queue over the PostgreSQL
// ledger. It only inserts jobs; it works none.
type Queue struct {
	st     *postgres.Store
	client *river.Client[pgx.Tx]
}

// NewQueue returns a Queue on st's database, whose River schema it brings
// up to date first. It starts nothing: there is nothing to close.
func NewQueue(ctx context.Context, st *postgres.Store) (*Queue, error) {
	if err := Migrate(ctx, st); err != nil {
		return nil, err
	}
	client, err := river.NewClient(riverpgxv5.New(st.Pool()), &river.Config{})
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	return &Queue{st: st, client: client}, nil
}

// Submit records r and enqueues its job in one transaction (runs.Queue).
// Labels are checked (CheckLabels; at most MaxLabels); the job goes to the
// queue of r.Agent and those labels, which only workers having them serve.
func (q *Queue) Submit(ctx context.Context, r *store.Run, qr runs.Queued) error {
	if qr.Retries < 0 {
		return fmt.Errorf("retries %d: must not be negative", qr.Retries)
	}
	labels, err := CheckLabels(qr.Labels)
	if err != nil {
		return err
	}
	if len(labels) > MaxLabels {
		return fmt.Errorf("%d labels: a run may ask for at most %d", len(labels), MaxLabels)
	}
	name, err := queueName(r.Agent, labels)
	if err != nil {
		return err
	}
	return q.st.CreateRunTx(ctx, r, func(tx pgx.Tx) error {
		_, err := q.client.InsertTx(ctx, tx, runArgs{RunID: r.ID, Agent: r.Agent, Labels: labels, Retries: qr.Retries},
			&river.InsertOpts{Queue: name, MaxAttempts: 1})
		return err
	})
}

// reapEvery reaps lost workers (Reap) every second until ctx ends.
func (q *Queue) reapEvery(ctx context.Context, log *slog.Logger) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := q.Reap(ctx, log); err != nil && ctx.Err() == nil {
			log.Warn("reap lost workers", "err", err)
		}
	}
}

// CancelQueued ends run id "cancelled" if no worker has claimed it yet
// (see postgres.Store.CancelQueued); its job then finds nothing to do.
func (q *Queue) CancelQueued(ctx context.Context, id string) (bool, error) {
	return q.st.CancelQueued(ctx, id)
}

// Reaping returns a goroutine, started now, that reaps lost workers
// (Reap) every second, and the function that stops it and waits for it.
// A process that queues runs (drover serve --queue) runs one, so that a
// dead worker's runs fail "worker lost" even when no other worker lives.
func (q *Queue) Reaping(log *slog.Logger) (stop func()) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { q.reapEvery(ctx, log) })
	return func() {
		cancel()
		wg.Wait()
	}
}
