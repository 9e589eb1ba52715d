package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/internal/rules"
)

// PostControl queues m for its run's owner (migrations/0003_controls.sql).
func (s *Store) PostControl(ctx context.Context, m *store.ControlMessage) error {
	rules.Default(&m.CreatedAt, time.Now())
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if err := rules.Live(runStatus(ctx, tx, m.RunID)); err != nil {
			return fmt.Errorf("post control to %s: %w", m.RunID, err)
		}
		return tx.QueryRowContext(ctx, `INSERT INTO controls (run_id, kind, payload, by, created_at)
			VALUES (?, ?, ?, ?, ?) RETURNING id`, m.RunID, m.Kind, jsonArg(m.Payload), m.By, timeArg(m.CreatedAt)).Scan(&m.ID)
	})
}

// TakeControls returns and deletes the queued messages of runIDs, in one
// write transaction: a message is taken by exactly one caller. When none
// is queued it only reads.
func (s *Store) TakeControls(ctx context.Context, runIDs []string) ([]store.ControlMessage, error) {
	if len(runIDs) == 0 {
		return nil, nil
	}
	args := make([]any, len(runIDs))
	for i, id := range runIDs {
		args[i] = id
	}
	// A supervisor polls this every 250 ms while it has runs, and there is
	// almost never anything queued. A write transaction takes the file's
	// write lock even to delete nothing, and a writer in another process
	// sharing the ledger then waits in SQLite's busy handler, which
	// sleeps; a read on a reader connection takes no lock. A message
	// posted just after the read is taken by the next poll, as one posted
	// just after the delete always was.
	var queued bool
	if err := s.r.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM controls WHERE run_id IN (`+placeholders(len(args))+`))`,
		args...).Scan(&queued); err != nil {
		return nil, fmt.Errorf("take controls of %s: %w", strings.Join(runIDs, ", "), err)
	}
	if !queued {
		return nil, nil
	}
	var out []store.ControlMessage
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		out = out[:0]
		rows, err := tx.QueryContext(ctx, `DELETE FROM controls WHERE run_id IN (`+placeholders(len(args))+`)
			RETURNING id, run_id, kind, payload, by, created_at`, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var m store.ControlMessage
			var payload sql.NullString
			var created sql.NullInt64
			if err := rows.Scan(&m.ID, &m.RunID, &m.Kind, &payload, &m.By, &created); err != nil {
				return err
			}
			m.Payload, m.CreatedAt = jsonVal(payload), timeVal(created)
			out = append(out, m)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("take controls of %s: %w", strings.Join(runIDs, ", "), err)
	}
	// RETURNING gives no order; the contract is oldest first.
	sortControls(out)
	return out, nil
}

func sortControls(ms []store.ControlMessage) {
	slices.SortFunc(ms, func(a, b store.ControlMessage) int { return cmp.Compare(a.ID, b.ID) })
}
