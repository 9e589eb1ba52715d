package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-run/drover/store"
)

// What a shared run queue (package queue) needs of the ledger beyond
// store.Store: recording a run and enqueueing it in one transaction,
// claiming a queued run, and the workers table (migration 0002).

// Pool returns the Store's connection pool, for a job queue that shares
// the ledger's database (and its transactions). Closing the Store closes
// it.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// CreateRunTx records r as CreateRun does and, in the same transaction,
// calls then (which enqueues it): both are committed, or neither. An error
// from then is returned as it is.
func (s *Store) CreateRunTx(ctx context.Context, r *store.Run, then func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := createRun(ctx, tx, r); err != nil {
			return err
		}
		return then(tx)
	})
}

// ErrNotClaimable is what ClaimRun fails with (wrapped) when the run is no
// longer waiting for a worker: it ended (cancelled before it was claimed)
// or another process owns it.
var ErrNotClaimable = errors.New("run is not waiting for a worker")

// ClaimRun makes owner the owner of the queued run id: a pending run that
// no process owns. It returns the run as claimed; ErrNotFound if unknown,
// ErrNotClaimable otherwise.
func (s *Store) ClaimRun(ctx context.Context, id, owner string) (*store.Run, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE runs SET owner = $2 WHERE id = $1 AND status = 'pending' AND owner = ''`, id, owner)
	if err != nil {
		return nil, fmt.Errorf("claim run %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		if _, err := s.GetRun(ctx, id); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("claim run %s: %w", id, ErrNotClaimable)
	}
	return s.GetRun(ctx, id)
}

// CancelQueued ends the queued run id failed "cancelled" if no process has
// claimed it yet, and reports whether it did; a run already claimed is
// left to its owner (store.RequestCancel reaches it).
func (s *Store) CancelQueued(ctx context.Context, id string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE runs SET status = 'failed', error = $2, done_status = 'interrupted', ended_at = $3
		WHERE id = $1 AND status = 'pending' AND owner = ''`, id, store.ReasonCancelled, now())
	if err != nil {
		return false, fmt.Errorf("cancel queued run %s: %w", id, err)
	}
	if tag.RowsAffected() == 1 {
		_, _ = s.pool.Exec(ctx, `SELECT pg_notify('`+chanEvents+`', '')`) // followers see the end
		return true, nil
	}
	return false, nil
}

// Worker is one row of the workers table: a `drover worker` process.
type Worker struct {
	ID     string   `json:"id"`
	Host   string   `json:"host"`
	Pid    int      `json:"pid"`
	Agents []string `json:"agents"`
	Labels []string `json:"labels"`
	// Lease is how long the worker may go without a heartbeat before it
	// is lost.
	Lease       time.Duration `json:"lease"`
	StartedAt   time.Time     `json:"startedAt"`
	HeartbeatAt time.Time     `json:"heartbeatAt"`
	StoppedAt   time.Time     `json:"stoppedAt,omitzero"`
	LostAt      time.Time     `json:"lostAt,omitzero"`
}

// RegisterWorker records w as started now (replacing an earlier row of
// the same id: a worker that comes back).
func (s *Store) RegisterWorker(ctx context.Context, w *Worker) error {
	t := now()
	if w.Agents == nil {
		w.Agents = []string{}
	}
	if w.Labels == nil {
		w.Labels = []string{}
	}
	w.StartedAt, w.HeartbeatAt, w.StoppedAt, w.LostAt = t, t, time.Time{}, time.Time{}
	_, err := s.pool.Exec(ctx, `INSERT INTO workers (id, host, pid, agents, labels, lease_ms, started_at, heartbeat_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $7)
		ON CONFLICT (id) DO UPDATE SET host = $2, pid = $3, agents = $4, labels = $5, lease_ms = $6,
			started_at = $7, heartbeat_at = $7, stopped_at = NULL, lost_at = NULL`,
		w.ID, w.Host, w.Pid, w.Agents, w.Labels, w.Lease.Milliseconds(), t)
	if err != nil {
		return fmt.Errorf("register worker %s: %w", w.ID, err)
	}
	return nil
}

// Heartbeat moves worker id's heartbeat to now. It fails with
// ErrNotFound if the worker has no row, and with ErrConflict if it was
// declared lost meanwhile: its runs have been failed, and it must stop
// them rather than go on.
func (s *Store) Heartbeat(ctx context.Context, id string) error {
	var lost bool
	err := s.pool.QueryRow(ctx, `UPDATE workers SET heartbeat_at = CASE WHEN lost_at IS NULL THEN $2 ELSE heartbeat_at END
		WHERE id = $1 RETURNING lost_at IS NOT NULL`, id, now()).Scan(&lost)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("worker %s: %w", id, store.ErrNotFound)
	case err != nil:
		return fmt.Errorf("heartbeat of worker %s: %w", id, err)
	case lost:
		return fmt.Errorf("worker %s was declared lost: %w", id, store.ErrConflict)
	}
	return nil
}

// StopWorker records that worker id stopped on purpose (its runs ended
// with it).
func (s *Store) StopWorker(ctx context.Context, id string) error {
	_, err := s.pool.Exec(ctx, `UPDATE workers SET stopped_at = $2 WHERE id = $1`, id, now())
	return err
}

// MarkLostWorkers declares lost every worker still registered (not
// stopped, not already lost) whose last heartbeat is older than its lease
// plus grace, and returns them. Each lost worker is returned to exactly
// one caller (the row is updated once), which then fails its runs.
func (s *Store) MarkLostWorkers(ctx context.Context, grace time.Duration) ([]Worker, error) {
	rows, err := s.pool.Query(ctx, `UPDATE workers SET lost_at = $1
		WHERE stopped_at IS NULL AND lost_at IS NULL
			AND heartbeat_at + (lease_ms + $2) * interval '1 millisecond' < $1
		RETURNING `+workerCols, now(), grace.Milliseconds())
	if err != nil {
		return nil, fmt.Errorf("mark lost workers: %w", err)
	}
	return pgx.CollectRows(rows, scanWorker)
}

// Workers returns every worker that ever registered, most recently started first.
func (s *Store) Workers(ctx context.Context) ([]Worker, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+workerCols+` FROM workers ORDER BY started_at DESC`)
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	return pgx.CollectRows(rows, scanWorker)
}

const workerCols = `id, host, pid, agents, labels, lease_ms, started_at, heartbeat_at, stopped_at, lost_at`

func scanWorker(row pgx.CollectableRow) (Worker, error) {
	var w Worker
	var lease int64
	var stopped, lost *time.Time
	err := row.Scan(&w.ID, &w.Host, &w.Pid, &w.Agents, &w.Labels, &lease, &w.StartedAt, &w.HeartbeatAt, &stopped, &lost)
	w.Lease = time.Duration(lease) * time.Millisecond
	w.StartedAt, w.HeartbeatAt = w.StartedAt.UTC(), w.HeartbeatAt.UTC()
	if stopped != nil {
		w.StoppedAt = stopped.UTC()
	}
	if lost != nil {
		w.LostAt = lost.UTC()
	}
	return w, err
}
