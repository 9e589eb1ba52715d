package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/internal/turnref"
)

// The turn record by reference (LED-3, migrations/0002_turn_refs.sql):
// one turn_refs row per run holds the JSON arrays of package turnref.

// writeTurnRefs stores refs for runID inside tx, after checking that every
// seq they name has been recorded.
func writeTurnRefs(ctx context.Context, tx *sql.Tx, runID string, refs turnref.Refs) error {
	if refs.Empty() {
		return nil
	}
	var last int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = ?`, runID).Scan(&last); err != nil {
		return err
	}
	if err := refs.CheckLast(last); err != nil {
		return err
	}
	msgs, calls := refs.JSON()
	_, err := tx.ExecContext(ctx, `INSERT INTO turn_refs (run_id, messages, tool_calls) VALUES (?, ?, ?)`,
		runID, string(msgs), string(calls))
	return err
}

// turnSource is runID's turn record inside tx.
type turnSource struct {
	ctx   context.Context
	tx    *sql.Tx
	runID string
}

func (t turnSource) Messages() ([]store.Message, error) {
	rows, err := t.tx.QueryContext(t.ctx, `SELECT idx, role, content, tool_use_id FROM messages WHERE run_id = ? ORDER BY idx`, t.runID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Message
	for rows.Next() {
		m := store.Message{RunID: t.runID}
		if err := rows.Scan(&m.Index, &m.Role, &m.Content, &m.ToolUseID); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

func (t turnSource) Calls() ([]turnref.OrdCall, error) {
	rows, err := t.tx.QueryContext(t.ctx, `SELECT ord, id, name, input, status, output, started_at, ended_at
		FROM tool_calls WHERE run_id = ? ORDER BY ord`, t.runID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []turnref.OrdCall
	for rows.Next() {
		c := turnref.OrdCall{ToolCall: store.ToolCall{RunID: t.runID}}
		var input sql.NullString
		var status string
		var started, ended sql.NullInt64
		if err := rows.Scan(&c.Ord, &c.ID, &c.Name, &input, &status, &c.Output, &started, &ended); err != nil {
			return nil, err
		}
		c.Input = jsonVal(input)
		c.Status = drover.ToolStatus(status)
		c.StartedAt, c.EndedAt = timeVal(started), timeVal(ended)
		out = append(out, c)
	}
	return out, rows.Err()
}

// Refs returns the turn_refs column name of the run, nil when the run has
// no references.
func (t turnSource) Refs(name string) ([]byte, error) {
	var v []byte
	err := t.tx.QueryRowContext(t.ctx, `SELECT `+name+` FROM turn_refs WHERE run_id = ?`, t.runID).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return v, err
}

// Parts reads the events of the run a turn record names.
func (t turnSource) Parts(seqs []int64) (map[int64]*turnref.Part, error) {
	out := make(map[int64]*turnref.Part, len(seqs))
	if len(seqs) == 0 {
		return out, nil
	}
	// One range scan of the run's events, skipping those not asked for:
	// references are dense in a run's events, so this beats a seek each.
	rows, err := t.tx.QueryContext(t.ctx, `SELECT seq, type, json, time FROM events
		WHERE run_id = ? AND seq >= ? AND seq <= ? ORDER BY seq`, t.runID, seqs[0], seqs[len(seqs)-1])
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	i := 0
	for rows.Next() {
		var seq int64
		var typ string
		var raw sql.RawBytes
		var at sql.NullInt64
		if err := rows.Scan(&seq, &typ, &raw, &at); err != nil {
			return nil, err
		}
		for i < len(seqs) && seqs[i] < seq {
			i++
		}
		if i == len(seqs) {
			break
		}
		if seqs[i] != seq {
			continue
		}
		p, err := turnref.NewPart(seq, drover.EventType(typ), timeVal(at), raw)
		if err != nil {
			return nil, err
		}
		out[seq] = p
	}
	return out, rows.Err()
}

// readTx runs fn in one read transaction, so that what it reads in several
// queries is one state of the ledger.
func (s *Store) readTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	return fn(tx)
}
