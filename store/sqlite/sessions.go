package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/internal/rules"
)

const sessionCols = `id, agent, resume_token, head_run_id, heads, created_at, updated_at`

func scanSession(sc scanner) (store.Session, error) {
	var (
		ss               store.Session
		heads            string
		created, updated sql.NullInt64
	)
	if err := sc.Scan(&ss.ID, &ss.Agent, &ss.ResumeToken, &ss.HeadRunID, &heads, &created, &updated); err != nil {
		return ss, err
	}
	if err := json.Unmarshal([]byte(heads), &ss.Heads); err != nil {
		return ss, fmt.Errorf("session %s heads: %w", ss.ID, err)
	}
	if ss.Heads == nil {
		ss.Heads = []string{}
	}
	ss.CreatedAt, ss.UpdatedAt = timeVal(created), timeVal(updated)
	return ss, nil
}

func headsArg(h []string) (string, error) {
	if h == nil {
		h = []string{}
	}
	b, err := json.Marshal(h)
	return string(b), err
}

// PutSession creates the session or replaces every field of an existing
// one. CreatedAt and UpdatedAt default to now when zero.
func (s *Store) PutSession(ctx context.Context, ss *store.Session) error {
	if err := rules.NewSession(ss, time.Now()); err != nil {
		return err
	}
	heads, err := headsArg(ss.Heads)
	if err != nil {
		return fmt.Errorf("put session %s: %w", ss.ID, err)
	}
	_, err = s.w.ExecContext(ctx, `INSERT INTO sessions (`+sessionCols+`) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET agent = excluded.agent, resume_token = excluded.resume_token,
			head_run_id = excluded.head_run_id, heads = excluded.heads,
			created_at = excluded.created_at, updated_at = excluded.updated_at`,
		ss.ID, ss.Agent, ss.ResumeToken, ss.HeadRunID, heads, timeArg(ss.CreatedAt), timeArg(ss.UpdatedAt))
	if err != nil {
		return fmt.Errorf("put session %s: %w", ss.ID, err)
	}
	return nil
}

// AdvanceSession makes runID the session's head with resumeToken, appends
// the former head (if any) to Heads and sets UpdatedAt to at (now when
// zero), in one transaction: concurrent advances, from any process, are
// all kept. ErrNotFound if the session is unknown.
func (s *Store) AdvanceSession(ctx context.Context, id, runID, resumeToken string, at time.Time) error {
	rules.Default(&at, time.Now())
	err := s.inTx(ctx, func(tx *sql.Tx) error { return advanceSession(ctx, tx, id, runID, resumeToken, at) })
	if err != nil {
		return fmt.Errorf("advance session %s: %w", id, err)
	}
	return nil
}

// advanceSession is AdvanceSession inside tx (FinishRun's too).
func advanceSession(ctx context.Context, tx *sql.Tx, id, runID, resumeToken string, at time.Time) error {
	var head, headsJSON string
	err := tx.QueryRowContext(ctx, `SELECT head_run_id, heads FROM sessions WHERE id = ?`, id).Scan(&head, &headsJSON)
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	if err != nil {
		return err
	}
	var heads []string
	if err := json.Unmarshal([]byte(headsJSON), &heads); err != nil {
		return fmt.Errorf("heads: %w", err)
	}
	if head != "" {
		heads = append(heads, head)
	}
	hs, err := headsArg(heads)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `UPDATE sessions SET head_run_id = ?, resume_token = ?, heads = ?, updated_at = ? WHERE id = ?`,
		runID, resumeToken, hs, timeArg(at), id)
	return err
}

// GetSession returns one session (Heads never nil); ErrNotFound if unknown.
func (s *Store) GetSession(ctx context.Context, id string) (*store.Session, error) {
	ss, err := scanSession(s.r.QueryRowContext(ctx, `SELECT `+sessionCols+` FROM sessions WHERE id = ?`, id))
	if err := rules.Found("session", id, err, sql.ErrNoRows); err != nil {
		return nil, err
	}
	return &ss, nil
}

// ListSessions returns at most limit sessions (0 = all), most recently
// updated first.
func (s *Store) ListSessions(ctx context.Context, limit int) ([]store.Session, error) {
	q := `SELECT ` + sessionCols + ` FROM sessions ORDER BY updated_at DESC, rowid DESC`
	var args []any
	if limit > 0 {
		q += ` LIMIT ?`
		args = append(args, limit)
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	defer rows.Close()
	var out []store.Session
	for rows.Next() {
		ss, err := scanSession(rows)
		if err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		out = append(out, ss)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return out, nil
}
