package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/drover-run/drover/store"
)

// PostControl queues m for its run's owner (CTL-1, CTL-3). The run's row
// is share-locked while the message is queued, so a FinishRun in another
// transaction either ends the run first (ErrConflict here) or waits, and
// then discards the message.
func (s *Store) PostControl(ctx context.Context, m *store.ControlMessage) error {
	if m.CreatedAt.IsZero() {
		m.CreatedAt = now()
	}
	return s.inTx(ctx, func(tx pgx.Tx) error {
		st, err := runStatus(ctx, tx, m.RunID, "FOR SHARE")
		if err != nil {
			return fmt.Errorf("post control to %s: %w", m.RunID, err)
		}
		if st.Terminal() {
			return fmt.Errorf("post control to %s: run %s: %w", m.RunID, st, store.ErrConflict)
		}
		return tx.QueryRow(ctx, `INSERT INTO controls (run_id, kind, payload, sent_by, created_at)
			VALUES ($1, $2, $3, $4, $5) RETURNING id`, m.RunID, m.Kind, jsonArg(m.Payload), m.By, m.CreatedAt).Scan(&m.ID)
	})
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
