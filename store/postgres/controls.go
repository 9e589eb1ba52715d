package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/internal/rules"
)

// PostControl queues m for its run's owner (CTL-1, CTL-3), in one
// statement that share-locks the run's row while it queues: a FinishRun
// in another transaction either ends the run first (ErrConflict here) or
// waits, and then discards the message.
func (s *Store) PostControl(ctx context.Context, m *store.ControlMessage) error {
	rules.Default(&m.CreatedAt, now())
	var st store.RunStatus
	var id *int64
	err := s.pool.QueryRow(ctx, `WITH run AS (SELECT id, status FROM runs WHERE id = $1 FOR SHARE),
		queued AS (INSERT INTO controls (run_id, kind, payload, sent_by, created_at)
			SELECT id, $2, $3, $4, $5 FROM run WHERE status IN ('pending', 'running') RETURNING id)
		SELECT run.status, queued.id FROM run LEFT JOIN queued ON true`,
		m.RunID, m.Kind, jsonArg(m.Payload), m.By, m.CreatedAt).Scan(&st, &id)
	if errors.Is(err, pgx.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err = rules.Live(st, err); err != nil {
		return fmt.Errorf("post control to %s: %w", m.RunID, err)
	}
	m.ID = *id
	s.notifyControls(ctx)
	return nil
}

// TakeControls returns and deletes the queued messages of runIDs, oldest
// first, in one statement: takers racing for a message wait on its row
// lock, and all but the first then find it gone, so each is taken once.
func (s *Store) TakeControls(ctx context.Context, runIDs []string) ([]store.ControlMessage, error) {
	if len(runIDs) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `WITH taken AS (
			DELETE FROM controls WHERE run_id = ANY($1) RETURNING id, run_id, kind, payload, sent_by, created_at
		) SELECT * FROM taken ORDER BY id`, runIDs)
	if err == nil {
		var out []store.ControlMessage
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.ControlMessage, error) {
			var m store.ControlMessage
			err := row.Scan(&m.ID, &m.RunID, &m.Kind, &m.Payload, &m.By, &m.CreatedAt)
			if len(m.Payload) == 0 {
				m.Payload = nil
			}
			m.CreatedAt = m.CreatedAt.UTC()
			return m, err
		})
		if err == nil {
			return out, nil
		}
	}
	return nil, fmt.Errorf("take controls of %s: %w", strings.Join(runIDs, ", "), err)
}
