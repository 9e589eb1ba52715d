package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/internal/rules"
)

type scanner interface{ Scan(dest ...any) error }

func scanRun(sc scanner) (store.Run, error) {
	var (
		r                           store.Run
		options                     sql.NullString
		timeout                     int64
		created, started, ended     sql.NullInt64
		cost                        sql.NullFloat64
		cacheR, cacheW, reason, trn sql.NullInt64
	)
	err := sc.Scan(&r.ID, &r.Agent, &r.Prompt, &r.Status, &r.Error, &r.ParentID, &r.SessionID, &r.ResumeToken,
		&options, &timeout, &r.Owner, &r.Pid, &r.Pgid, &created, &started, &ended, &r.DoneStatus,
		&r.Usage.InputTokens, &r.Usage.OutputTokens, &r.Usage.ToolUses, &cost, &cacheR,
		&cacheW, &reason, &trn, &r.DurationMs, &r.CancelRequested, &r.Allowed, &r.Denied, &r.LastSeq)
	if err != nil {
		return r, err
	}
	r.Options = jsonVal(options)
	r.Timeout = time.Duration(timeout)
	r.CreatedAt, r.StartedAt, r.EndedAt = timeVal(created), timeVal(started), timeVal(ended)
	if cost.Valid {
		r.Usage.TotalCostUSD = &cost.Float64
	}
	r.Usage.CacheReadTokens = intPtr(cacheR)
	r.Usage.CacheWriteTokens = intPtr(cacheW)
	r.Usage.ReasoningTokens = intPtr(reason)
	r.Usage.Turns = intPtr(trn)
	return r, nil
}

func intPtr(n sql.NullInt64) *int64 {
	if !n.Valid {
		return nil
	}
	v := n.Int64
	return &v
}

// usageArgs are the optional usage columns: NULL when not reported.
func usageArgs(u drover.Usage) []any {
	opt := func(p *int64) any {
		if p == nil {
			return nil
		}
		return *p
	}
	var cost any
	if u.TotalCostUSD != nil {
		cost = *u.TotalCostUSD
	}
	return []any{u.InputTokens, u.OutputTokens, u.ToolUses, cost,
		opt(u.CacheReadTokens), opt(u.CacheWriteTokens), opt(u.ReasoningTokens), opt(u.Turns)}
}

// CreateRun records a new run. It fills in r.Status (pending) and
// r.CreatedAt (now) when they are zero; ErrConflict if the id exists.
// r.LastSeq is ignored: a run's last seq is that of its last event.
func (s *Store) CreateRun(ctx context.Context, r *store.Run) error {
	if err := rules.NewRun(r, time.Now()); err != nil {
		return err
	}
	args := []any{r.ID, r.Agent, r.Prompt, string(r.Status), r.Error, r.ParentID, r.SessionID, r.ResumeToken,
		jsonArg(r.Options), int64(r.Timeout), r.Owner, r.Pid, r.Pgid,
		timeArg(r.CreatedAt), timeArg(r.StartedAt), timeArg(r.EndedAt), string(r.DoneStatus)}
	args = append(args, usageArgs(r.Usage)...)
	args = append(args, r.DurationMs, r.CancelRequested, r.Allowed, r.Denied)
	_, err := s.w.ExecContext(ctx, `INSERT INTO runs (`+rules.RunInsertCols+`) VALUES (`+placeholders(len(args))+`)`, args...)
	if isUniqueViolation(err) {
		return fmt.Errorf("create run %s: %w", r.ID, store.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("create run %s: %w", r.ID, err)
	}
	return nil
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// runStatus reads a run's status inside tx; ErrNotFound if unknown.
func runStatus(ctx context.Context, tx *sql.Tx, id string) (store.RunStatus, error) {
	var st store.RunStatus
	err := tx.QueryRowContext(ctx, `SELECT status FROM runs WHERE id = ?`, id).Scan(&st)
	if errors.Is(err, sql.ErrNoRows) {
		return "", store.ErrNotFound
	}
	return st, err
}

// StartRun moves a pending run to running with its process ids, at at (now
// when zero). ErrNotFound if unknown; ErrConflict if it is not pending.
func (s *Store) StartRun(ctx context.Context, id string, pid, pgid int, at time.Time) error {
	rules.Default(&at, time.Now())
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		first, err := rules.Start(runStatus(ctx, tx, id))
		switch {
		case err != nil:
		case first:
			_, err = tx.ExecContext(ctx, `UPDATE runs SET status = 'running', pid = ?, pgid = ?, started_at = ? WHERE id = ?`,
				pid, pgid, timeArg(at), id)
		default:
			_, err = tx.ExecContext(ctx, `UPDATE runs SET pid = ?, pgid = ? WHERE id = ?`, pid, pgid, id)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("start run %s: %w", id, err)
	}
	return nil
}

// FinishRun records a run's end and its turn record in one transaction
// (LED-3). The run may be pending or running; ErrNotFound if unknown,
// ErrConflict if it already ended (nothing is written then). f.EndedAt
// defaults to now; messages and tool calls are stored under f.RunID
// whatever their own RunID says, and two messages with one Index are
// ErrConflict. Messages and tool calls recorded by reference (their Seq
// fields) are stored as those seqs, in one turn_refs row: see turn.go.
// f.SessionID's head moves to the run in the same transaction.
func (s *Store) FinishRun(ctx context.Context, f store.Finish) error {
	inline, inlineCalls, refs, err := rules.Finish(&f, time.Now())
	if err != nil {
		return fmt.Errorf("finish run %s: %w", f.RunID, err)
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if err := rules.Live(runStatus(ctx, tx, f.RunID)); err != nil {
			return err
		}
		// Nobody will take what is still queued for a run that ended.
		if _, err := tx.ExecContext(ctx, `DELETE FROM controls WHERE run_id = ?`, f.RunID); err != nil {
			return err
		}
		args := []any{string(f.Status), f.Error, string(f.DoneStatus), f.ResumeToken, f.DurationMs, timeArg(f.EndedAt)}
		args = append(args, usageArgs(f.Usage)...)
		args = append(args, f.Allowed, f.Denied, f.RunID)
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET status = ?, error = ?, done_status = ?, resume_token = ?,
			duration_ms = ?, ended_at = ?, input_tokens = ?, output_tokens = ?, tool_uses = ?, total_cost_usd = ?,
			cache_read_tokens = ?, cache_write_tokens = ?, reasoning_tokens = ?, turns = ?, allowed = ?, denied = ?
			WHERE id = ?`, args...); err != nil {
			return err
		}
		msgs := make([][]any, len(inline))
		for i, m := range inline {
			msgs[i] = []any{f.RunID, m.Index, m.Role, m.Content, m.ToolUseID}
		}
		if err := insertRows(ctx, tx, `INSERT INTO messages (run_id, idx, role, content, tool_use_id) VALUES `, 5, msgs); err != nil {
			if isUniqueViolation(err) {
				return fmt.Errorf("a message index appears twice: %w", store.ErrConflict)
			}
			return err
		}
		calls := make([][]any, len(inlineCalls))
		for i, c := range inlineCalls {
			calls[i] = []any{f.RunID, c.Ord, c.ID, c.Name, jsonArg(c.Input), string(c.Status), c.Output, timeArg(c.StartedAt), timeArg(c.EndedAt)}
		}
		if err := insertRows(ctx, tx, `INSERT INTO tool_calls (run_id, ord, id, name, input, status, output, started_at, ended_at) VALUES `, 9, calls); err != nil {
			return err
		}
		if err := writeTurnRefs(ctx, tx, f.RunID, refs); err != nil {
			return err
		}
		if f.SessionID != "" && f.ResumeToken != "" {
			if err := advanceSession(ctx, tx, f.SessionID, f.RunID, f.ResumeToken, f.EndedAt); err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("finish run %s: %w", f.RunID, err)
	}
	s.seqs.forget(f.RunID) // the cache holds the runs going on
	return nil
}

// GetRun returns one run; ErrNotFound if unknown.
func (s *Store) GetRun(ctx context.Context, id string) (*store.Run, error) {
	r, err := scanRun(s.r.QueryRowContext(ctx, `SELECT `+rules.RunCols+` FROM runs WHERE id = ?`, id))
	if err := rules.Found("run", id, err, sql.ErrNoRows); err != nil {
		return nil, err
	}
	return &r, nil
}

// ListRuns returns the runs matching f, newest first (by CreatedAt, then
// by insertion).
func (s *Store) ListRuns(ctx context.Context, f store.RunFilter) ([]store.Run, error) {
	q, args := rules.ListRuns(f, "rowid", func(int) string { return "?" }, timeArg)
	return s.queryRuns(ctx, "list runs", q, args...)
}

func (s *Store) queryRuns(ctx context.Context, what, q string, args ...any) ([]store.Run, error) {
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var out []store.Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// Children returns the runs whose parent is id, oldest first; none (and no
// error) for an unknown id.
func (s *Store) Children(ctx context.Context, id string) ([]store.Run, error) {
	if id == "" {
		return nil, nil
	}
	return s.queryRuns(ctx, "children of "+id, `SELECT `+rules.RunCols+` FROM runs
		WHERE parent_id = ? AND parent_id <> '' ORDER BY created_at, rowid`, id)
}

// RequestCancel marks a pending or running run for cancellation by its
// owner. It is idempotent, and unknown or ended runs are not an error (and
// are left unchanged) (RUN-3).
func (s *Store) RequestCancel(ctx context.Context, id string) error {
	_, err := s.w.ExecContext(ctx, `UPDATE runs SET cancel_requested = 1
		WHERE id = ? AND status IN ('pending', 'running') AND cancel_requested = 0`, id)
	if err != nil {
		return fmt.Errorf("request cancel %s: %w", id, err)
	}
	return nil
}

// CancelsRequested returns those of runIDs whose cancellation was
// requested, a query of at most 500 ids at a time.
func (s *Store) CancelsRequested(ctx context.Context, runIDs []string) ([]string, error) {
	var out []string
	for ids := range slices.Chunk(runIDs, 500) {
		args := make([]any, len(ids))
		for i, id := range ids {
			args[i] = id
		}
		rows, err := s.r.QueryContext(ctx, `SELECT id FROM runs WHERE cancel_requested = 1 AND id IN (`+placeholders(len(ids))+`)`, args...)
		if err != nil {
			return nil, fmt.Errorf("cancels requested: %w", err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, fmt.Errorf("cancels requested: %w", err)
			}
			out = append(out, id)
		}
		if err := rows.Close(); err != nil {
			return nil, fmt.Errorf("cancels requested: %w", err)
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("cancels requested: %w", err)
		}
	}
	return out, nil
}

// Unfinished returns the runs left pending or running, oldest first.
func (s *Store) Unfinished(ctx context.Context) ([]store.Run, error) {
	return s.queryRuns(ctx, "unfinished runs", `SELECT `+rules.RunCols+` FROM runs
		WHERE status IN ('pending', 'running') ORDER BY created_at, rowid`)
}

// insertRows inserts rows with multi-row INSERT statements of up to 256
// rows each: a run's turn record can hold thousands of rows, and one
// statement per row made FinishRun the slowest part of recording a run.
func insertRows(ctx context.Context, tx *sql.Tx, prefix string, cols int, rows [][]any) error {
	const chunk = 256
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", cols), ", ") + ")"
	for len(rows) > 0 {
		n := min(chunk, len(rows))
		var q strings.Builder
		q.WriteString(prefix)
		args := make([]any, 0, n*cols)
		for i, r := range rows[:n] {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString(one)
			args = append(args, r...)
		}
		if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
			return err
		}
		rows = rows[n:]
	}
	return nil
}
