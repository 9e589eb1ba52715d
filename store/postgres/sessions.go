package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/internal/rules"
)

const sessionCols = `id, agent, resume_token, head_run_id, heads, created_at, updated_at`

func scanSession(row pgx.CollectableRow) (store.Session, error) {
	var ss store.Session
	var created, updated time.Time
	if err := row.Scan(&ss.ID, &ss.Agent, &ss.ResumeToken, &ss.HeadRunID, &ss.Heads, &created, &updated); err != nil {
		return ss, err
	}
	if ss.Heads == nil {
		ss.Heads = []string{}
	}
	ss.CreatedAt, ss.UpdatedAt = created.UTC(), updated.UTC()
	return ss, nil
}

// PutSession creates the session or replaces every field of an existing
// one. CreatedAt and UpdatedAt default to now when zero.
func (s *Store) PutSession(ctx context.Context, ss *store.Session) error {
	if err := rules.NewSession(ss, now()); err != nil {
		return err
	}
	heads := ss.Heads
	if heads == nil {
		heads = []string{}
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO sessions (`+sessionCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (id) DO UPDATE SET agent = excluded.agent, resume_token = excluded.resume_token,
			head_run_id = excluded.head_run_id, heads = excluded.heads,
			created_at = excluded.created_at, updated_at = excluded.updated_at`,
		ss.ID, ss.Agent, ss.ResumeToken, ss.HeadRunID, heads, ss.CreatedAt, ss.UpdatedAt); err != nil {
		return fmt.Errorf("put session %s: %w", ss.ID, err)
	}
	return nil
}

// AdvanceSession makes runID the session's head with resumeToken, appends
// the former head (if any) to Heads and sets UpdatedAt to at (now when
// zero), in one statement: the row lock it takes makes concurrent
// advances, from any process, wait for each other, and each then builds on
// the one before, so none is lost. ErrNotFound if the session is unknown.
func (s *Store) AdvanceSession(ctx context.Context, id, runID, resumeToken string, at time.Time) error {
	rules.Default(&at, now())
	tag, err := s.pool.Exec(ctx, advanceSessionSQL, id, runID, resumeToken, at)
	if err == nil && tag.RowsAffected() == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("advance session %s: %w", id, err)
	}
	return nil
}

// advanceSessionSQL moves session $1's head to run $2 with resume token
// $3 at $4 (AdvanceSession, FinishRun).
const advanceSessionSQL = `UPDATE sessions SET
		heads = CASE WHEN head_run_id <> '' THEN array_append(heads, head_run_id) ELSE heads END,
		head_run_id = $2, resume_token = $3, updated_at = $4
	WHERE id = $1`

// GetSession returns one session (Heads never nil); ErrNotFound if unknown.
func (s *Store) GetSession(ctx context.Context, id string) (*store.Session, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+sessionCols+` FROM sessions WHERE id = $1`, id)
	var ss store.Session
	if err == nil {
		ss, err = pgx.CollectExactlyOneRow(rows, scanSession)
	}
	if err := rules.Found("session", id, err, pgx.ErrNoRows); err != nil {
		return nil, err
	}
	return &ss, nil
}

// ListSessions returns at most limit sessions (0 = all), most recently
// updated first.
func (s *Store) ListSessions(ctx context.Context, limit int) ([]store.Session, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+sessionCols+` FROM sessions ORDER BY updated_at DESC, n DESC LIMIT $1`, limitArg(limit))
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanSession)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return out, nil
}
