package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/internal/rules"
)

func scanRun(row pgx.Row) (store.Run, error) {
	var (
		r                       store.Run
		timeout                 int64
		created, started, ended *time.Time
	)
	err := row.Scan(&r.ID, &r.Agent, &r.Prompt, &r.Status, &r.Error, &r.ParentID, &r.SessionID, &r.ResumeToken,
		&r.Options, &timeout, &r.Owner, &r.Pid, &r.Pgid, &created, &started, &ended, &r.DoneStatus,
		&r.Usage.InputTokens, &r.Usage.OutputTokens, &r.Usage.ToolUses, &r.Usage.TotalCostUSD, &r.Usage.CacheReadTokens,
		&r.Usage.CacheWriteTokens, &r.Usage.ReasoningTokens, &r.Usage.Turns, &r.DurationMs, &r.CancelRequested, &r.Allowed, &r.Denied, &r.LastSeq)
	if err != nil {
		return r, err
	}
	if len(r.Options) == 0 {
		r.Options = nil
	}
	r.Timeout = time.Duration(timeout)
	r.CreatedAt, r.StartedAt, r.EndedAt = timeVal(created), timeVal(started), timeVal(ended)
	return r, nil
}

// CreateRun records a new run. It fills in r.Status (pending) and
// r.CreatedAt (now) when they are zero; ErrConflict if the id exists.
// r.LastSeq is ignored: a run's last seq is that of its last event.
func (s *Store) CreateRun(ctx context.Context, r *store.Run) error {
	return createRun(ctx, s.pool, r)
}

// execer is what createRun writes with: the pool, or a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func createRun(ctx context.Context, db execer, r *store.Run) error {
	if err := rules.NewRun(r, now()); err != nil {
		return err
	}
	u := r.Usage
	_, err := db.Exec(ctx, `INSERT INTO runs (`+rules.RunInsertCols+`) VALUES (`+params(1, 29)+`)`,
		r.ID, r.Agent, r.Prompt, string(r.Status), r.Error, r.ParentID, r.SessionID, r.ResumeToken,
		jsonArg(r.Options), int64(r.Timeout), r.Owner, r.Pid, r.Pgid,
		timeArg(r.CreatedAt), timeArg(r.StartedAt), timeArg(r.EndedAt), string(r.DoneStatus),
		u.InputTokens, u.OutputTokens, u.ToolUses, u.TotalCostUSD, u.CacheReadTokens,
		u.CacheWriteTokens, u.ReasoningTokens, u.Turns, r.DurationMs, r.CancelRequested, r.Allowed, r.Denied)
	if isUniqueViolation(err) {
		return fmt.Errorf("create run %s: %w", r.ID, store.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("create run %s: %w", r.ID, err)
	}
	return nil
}

// params returns "$from, …, $to".
func params(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		if i > from {
			b.WriteString(", ")
		}
		b.WriteString("$" + strconv.Itoa(i))
	}
	return b.String()
}

// runStatus reads a run's status inside tx and locks its row with lock
// ("FOR NO KEY UPDATE" to change it, "FOR SHARE" to keep it from changing
// until tx ends); ErrNotFound if unknown.
func runStatus(ctx context.Context, tx pgx.Tx, id, lock string) (store.RunStatus, error) {
	var st store.RunStatus
	err := tx.QueryRow(ctx, `SELECT status FROM runs WHERE id = $1 `+lock, id).Scan(&st)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", store.ErrNotFound
	}
	return st, err
}

// StartRun moves a pending run to running with its process ids, at at (now
// when zero); for a run already running it replaces the process ids.
// ErrNotFound if unknown; ErrConflict if it has ended.
func (s *Store) StartRun(ctx context.Context, id string, pid, pgid int, at time.Time) error {
	rules.Default(&at, now())
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		// One statement either way: a first start sets the start time.
		first, err := rules.Start(runStatus(ctx, tx, id, "FOR NO KEY UPDATE"))
		if err == nil {
			_, err = tx.Exec(ctx, `UPDATE runs SET status = 'running', pid = $1, pgid = $2,
				started_at = CASE WHEN $3 THEN $4 ELSE started_at END WHERE id = $5`, pid, pgid, first, at, id)
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
// fields) are stored as those seqs, in one turn_refs row (package
// store/internal/turnref). f.SessionID's head moves to the run in the
// same transaction.
func (s *Store) FinishRun(ctx context.Context, f store.Finish) error {
	msgs, calls, refs, err := rules.Finish(&f, now())
	if err != nil {
		return fmt.Errorf("finish run %s: %w", f.RunID, err)
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		if err := rules.Live(runStatus(ctx, tx, f.RunID, "FOR NO KEY UPDATE")); err != nil {
			return err
		}
		if !refs.Empty() {
			var last int64
			if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = $1`, f.RunID).Scan(&last); err != nil {
				return err
			}
			if err := refs.CheckLast(last); err != nil {
				return err
			}
		}
		// The rest in one round trip.
		b := &pgx.Batch{}
		// Nobody will take what is still queued for a run that ended.
		b.Queue(`DELETE FROM controls WHERE run_id = $1`, f.RunID)
		b.Queue(`SELECT pg_notify('` + chanEvents + `', '')`) // followers see the end (notify.go)
		u := f.Usage
		b.Queue(`UPDATE runs SET status = $1, error = $2, done_status = $3, resume_token = $4,
			duration_ms = $5, ended_at = $6, input_tokens = $7, output_tokens = $8, tool_uses = $9, total_cost_usd = $10,
			cache_read_tokens = $11, cache_write_tokens = $12, reasoning_tokens = $13, turns = $14,
			allowed = $15, denied = $16
			WHERE id = $17`, string(f.Status), f.Error, string(f.DoneStatus), f.ResumeToken, f.DurationMs, f.EndedAt,
			u.InputTokens, u.OutputTokens, u.ToolUses, u.TotalCostUSD, u.CacheReadTokens, u.CacheWriteTokens,
			u.ReasoningTokens, u.Turns, f.Allowed, f.Denied, f.RunID)
		if len(msgs) > 0 {
			idx, role, content, toolUse := make([]int32, len(msgs)), make([]string, len(msgs)), make([]string, len(msgs)), make([]string, len(msgs))
			for i, m := range msgs {
				idx[i], role[i], content[i], toolUse[i] = int32(m.Index), m.Role, m.Content, m.ToolUseID
			}
			b.Queue(`INSERT INTO messages (run_id, idx, role, content, tool_use_id)
				SELECT $1::text, * FROM unnest($2::integer[], $3::text[], $4::text[], $5::text[])`, f.RunID, idx, role, content, toolUse)
		}
		if len(calls) > 0 {
			n := len(calls)
			ord, id, name, status, output := make([]int32, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
			input := make([]*string, n)
			started, ended := make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n)
			for i, c := range calls {
				ord[i], id[i], name[i], status[i], output[i] = int32(c.Ord), c.ID, c.Name, string(c.Status), c.Output
				if len(c.Input) > 0 {
					in := string(c.Input)
					input[i] = &in
				}
				started[i] = pgtype.Timestamptz{Time: c.StartedAt, Valid: !c.StartedAt.IsZero()}
				ended[i] = pgtype.Timestamptz{Time: c.EndedAt, Valid: !c.EndedAt.IsZero()}
			}
			b.Queue(`INSERT INTO tool_calls (run_id, ord, id, name, input, status, output, started_at, ended_at)
				SELECT $1::text, c_ord, c_id, c_name, c_input::json, c_status, c_output, c_started, c_ended
				FROM unnest($2::integer[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::timestamptz[], $9::timestamptz[])
					AS u(c_ord, c_id, c_name, c_input, c_status, c_output, c_started, c_ended)`,
				f.RunID, ord, id, name, input, status, output, started, ended)
		}
		if !refs.Empty() {
			m, c := refs.JSON()
			b.Queue(`INSERT INTO turn_refs (run_id, messages, tool_calls) VALUES ($1, $2, $3)`, f.RunID, m, c)
		}
		if f.SessionID != "" && f.ResumeToken != "" {
			// No row for an unknown session: it is left alone.
			b.Queue(advanceSessionSQL, f.SessionID, f.RunID, f.ResumeToken, f.EndedAt)
		}
		err = tx.SendBatch(ctx, b).Close()
		if isUniqueViolation(err) {
			return fmt.Errorf("a message index appears twice: %w", store.ErrConflict)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("finish run %s: %w", f.RunID, err)
	}
	return nil
}

// GetRun returns one run; ErrNotFound if unknown.
func (s *Store) GetRun(ctx context.Context, id string) (*store.Run, error) {
	r, err := scanRun(s.pool.QueryRow(ctx, `SELECT `+rules.RunCols+` FROM runs WHERE id = $1`, id))
	if err := rules.Found("run", id, err, pgx.ErrNoRows); err != nil {
		return nil, err
	}
	return &r, nil
}

// ListRuns returns the runs matching f, newest first (by CreatedAt, then
// by insertion).
func (s *Store) ListRuns(ctx context.Context, f store.RunFilter) ([]store.Run, error) {
	q, args := rules.ListRuns(f, "n", func(n int) string { return "$" + strconv.Itoa(n) }, timeArg)
	return s.queryRuns(ctx, "list runs", q, args...)
}

func (s *Store) queryRuns(ctx context.Context, what, q string, args ...any) ([]store.Run, error) {
	rows, err := s.pool.Query(ctx, q, args...)
	var out []store.Run
	if err == nil {
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Run, error) { return scanRun(row) })
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// Children returns the runs whose parent is id, oldest first; none (and no
// error) for an unknown id, or for "" (no run has that parent).
func (s *Store) Children(ctx context.Context, id string) ([]store.Run, error) {
	return s.queryRuns(ctx, "children of "+id, `SELECT `+rules.RunCols+` FROM runs
		WHERE parent_id = $1 AND parent_id <> '' ORDER BY created_at, n`, id)
}

// RequestCancel marks a pending or running run for cancellation by its
// owner. It is idempotent, and unknown or ended runs are not an error (and
// are left unchanged) (RUN-3).
func (s *Store) RequestCancel(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, `UPDATE runs SET cancel_requested = true
		WHERE id = $1 AND status IN ('pending', 'running') AND NOT cancel_requested`, id); err != nil {
		return fmt.Errorf("request cancel %s: %w", id, err)
	}
	s.notifyControls(ctx)
	return nil
}

// CancelsRequested returns those of runIDs whose cancellation was
// requested.
func (s *Store) CancelsRequested(ctx context.Context, runIDs []string) ([]string, error) {
	if len(runIDs) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT id FROM runs WHERE cancel_requested AND id = ANY($1)`, runIDs)
	if err != nil {
		return nil, fmt.Errorf("cancels requested: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("cancels requested: %w", err)
	}
	return ids, nil
}

// Unfinished returns the runs left pending or running, oldest first.
func (s *Store) Unfinished(ctx context.Context) ([]store.Run, error) {
	return s.queryRuns(ctx, "unfinished runs", `SELECT `+rules.RunCols+` FROM runs
		WHERE status IN ('pending', 'running') ORDER BY created_at, n`)
}
