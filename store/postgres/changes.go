package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drover-run/drover/store"
)

// Runs' changes (WS-2) and their decisions (WS-3): see
// migrations/0007_changes.sql.

// changeQuery is the SELECT of changes (aliased c), with their patches
// or empty ones in their place.
func changeQuery(patches bool) string {
	patch := `''::bytea`
	if patches {
		patch = `c.patch`
	}
	return `SELECT c.run_id, c.repo, c.base, c.branch, c.workspace, c.commit_id, c.start, c.files, ` + patch + `,
		c.truncated, c.check_result, c.state, c.created_at, c.updated_at FROM changes c`
}

func scanChange(row pgx.CollectableRow) (store.Change, error) {
	var (
		c                store.Change
		files, patch     []byte
		check            []byte
		created, updated time.Time
	)
	if err := row.Scan(&c.RunID, &c.Repo, &c.Base, &c.Branch, &c.Workspace, &c.Commit, &c.Start, &files, &patch,
		&c.Truncated, &check, &c.State, &created, &updated); err != nil {
		return c, err
	}
	if err := json.Unmarshal(files, &c.Files); err != nil {
		return c, fmt.Errorf("change of %s: files: %w", c.RunID, err)
	}
	if check != nil {
		c.Check = new(store.ChangeCheck)
		if err := json.Unmarshal(check, c.Check); err != nil {
			return c, fmt.Errorf("change of %s: check: %w", c.RunID, err)
		}
	}
	c.Patch = string(patch)
	c.CreatedAt, c.UpdatedAt = created.UTC(), updated.UTC()
	return c, nil
}

// changeJSON is the JSON of a change's files ([] for none) and of its
// check (NULL for none).
func changeJSON(c *store.Change) (files []byte, check any, err error) {
	fs := c.Files
	if fs == nil {
		fs = []store.ChangeFile{}
	}
	if files, err = json.Marshal(fs); err != nil {
		return nil, nil, fmt.Errorf("files: %w", err)
	}
	if c.Check != nil {
		cb, err := json.Marshal(c.Check)
		if err != nil {
			return nil, nil, fmt.Errorf("check: %w", err)
		}
		check = cb
	}
	return files, check, nil
}

// RecordChange creates or replaces the change of run c.RunID, keeping
// its decisions and the CreatedAt of its first record, in one statement
// that inserts only if the run exists (ErrNotFound if not). UpdatedAt is
// now; both are written back to c.
func (s *Store) RecordChange(ctx context.Context, c *store.Change) error {
	if c.State == "" {
		return fmt.Errorf("record change of %s: empty state", c.RunID)
	}
	files, check, err := changeJSON(c)
	if err != nil {
		return fmt.Errorf("record change of %s: %w", c.RunID, err)
	}
	at := now()
	created := c.CreatedAt
	if created.IsZero() {
		created = at
	}
	var stored time.Time
	err = s.pool.QueryRow(ctx, `INSERT INTO changes (run_id, repo, base, branch, workspace, commit_id, start,
			files, patch, truncated, check_result, state, created_at, updated_at)
		SELECT id, $2, $3, $4, $5, $6, $7, $8::jsonb, $9::bytea, $10, $11::json, $12, $13::timestamptz, $14::timestamptz
		FROM runs WHERE id = $1
		ON CONFLICT (run_id) DO UPDATE SET repo = excluded.repo, base = excluded.base, branch = excluded.branch,
			workspace = excluded.workspace, commit_id = excluded.commit_id, start = excluded.start,
			files = excluded.files, patch = excluded.patch, truncated = excluded.truncated,
			check_result = excluded.check_result, state = excluded.state, updated_at = excluded.updated_at
		RETURNING created_at`,
		c.RunID, c.Repo, c.Base, c.Branch, c.Workspace, c.Commit, c.Start, files, []byte(c.Patch), c.Truncated,
		check, string(c.State), created, at).Scan(&stored)
	if errors.Is(err, pgx.ErrNoRows) || pgCode(err) == "23503" { // no such run
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("record change of %s: %w", c.RunID, err)
	}
	c.CreatedAt, c.UpdatedAt = stored.UTC(), at
	return nil
}

// GetChange returns a run's change with its patch and decisions, read in
// one transaction; ErrNotFound when none is recorded.
func (s *Store) GetChange(ctx context.Context, runID string) (*store.Change, error) {
	cs, err := s.listChanges(ctx, store.ChangeFilter{RunIDs: []string{runID}, Patches: true})
	if err != nil {
		return nil, fmt.Errorf("get change of %s: %w", runID, err)
	}
	if len(cs) == 0 {
		return nil, fmt.Errorf("change of %s: %w", runID, store.ErrNotFound)
	}
	return &cs[0], nil
}

// ListChanges returns the changes f selects, newest UpdatedAt first (then
// by run id, descending), with their decisions; patches only when
// f.Patches.
func (s *Store) ListChanges(ctx context.Context, f store.ChangeFilter) ([]store.Change, error) {
	cs, err := s.listChanges(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("list changes: %w", err)
	}
	return cs, nil
}

// listChanges reads the changes f selects and their decisions in one
// read-only repeatable-read transaction: the decisions are those of the
// states read.
func (s *Store) listChanges(ctx context.Context, f store.ChangeFilter) ([]store.Change, error) {
	where, args := changeWhere(f)
	var out []store.Change
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, changeQuery(f.Patches)+where+` ORDER BY c.updated_at DESC, c.run_id DESC`, args...)
		if err != nil {
			return err
		}
		if out, err = pgx.CollectRows(rows, scanChange); err != nil || len(out) == 0 {
			return err
		}
		at := make(map[string]int, len(out))
		for i, c := range out {
			at[c.RunID] = i
		}
		rows, err = tx.Query(ctx, `SELECT d.run_id, d.action, d.decided_by, d.at, d.detail
			FROM change_decisions d WHERE d.run_id IN (SELECT c.run_id FROM changes c`+where+`)
			ORDER BY d.run_id, d.n`, args...)
		if err != nil {
			return err
		}
		var (
			id string
			d  store.ChangeDecision
		)
		_, err = pgx.ForEachRow(rows, []any{&id, &d.Action, &d.By, &d.At, &d.Detail}, func() error {
			d.At = d.At.UTC()
			if i, ok := at[id]; ok {
				out[i].Decisions = append(out[i].Decisions, d)
			}
			return nil
		})
		return err
	})
	return out, err
}

// changeWhere is the WHERE clause (or "") of the changes (aliased c) f
// selects, and its arguments.
func changeWhere(f store.ChangeFilter) (string, []any) {
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if len(f.RunIDs) > 0 {
		where = append(where, `c.run_id = ANY(`+arg(f.RunIDs)+`::text[])`)
	}
	if len(f.States) > 0 {
		states := make([]string, len(f.States))
		for i, st := range f.States {
			states[i] = string(st)
		}
		where = append(where, `c.state = ANY(`+arg(states)+`::text[])`)
	}
	if !f.Before.IsZero() {
		where = append(where, `c.updated_at < `+arg(f.Before))
	}
	if len(where) == 0 {
		return "", nil
	}
	return ` WHERE ` + strings.Join(where, ` AND `), args
}

// DecideChange records d on a run's change and moves it to d.Action, in
// one transaction that locks the change's row before it reads its state:
// two deciders, in any processes, take turns, and the second sees the
// first one's state. ErrConflict, with nothing written, when from is not
// empty and the change's state is not in it; ErrNotFound when the run has
// no change. A zero d.At is now.
func (s *Store) DecideChange(ctx context.Context, runID string, d store.ChangeDecision, from ...store.ChangeState) error {
	if d.Action == "" {
		return fmt.Errorf("decide change of %s: empty action", runID)
	}
	at := now()
	if d.At.IsZero() {
		d.At = at
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var st store.ChangeState
		err := tx.QueryRow(ctx, `SELECT state FROM changes WHERE run_id = $1 FOR NO KEY UPDATE`, runID).Scan(&st)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		if len(from) > 0 && !slices.Contains(from, st) {
			return fmt.Errorf("change is %s: %w", st, store.ErrConflict)
		}
		// The row lock keeps n: every decision of the run is written
		// under it.
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO change_decisions (run_id, n, action, decided_by, at, detail)
			SELECT $1, COALESCE(MAX(n), 0) + 1, $2, $3, $4, $5 FROM change_decisions WHERE run_id = $1`,
			runID, string(d.Action), d.By, d.At, d.Detail)
		b.Queue(`UPDATE changes SET state = $2, updated_at = $3 WHERE run_id = $1`, runID, string(d.Action), at)
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return fmt.Errorf("decide change of %s: %w", runID, err)
	}
	return nil
}
