package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/drover-run/drover/store"
)

// Runs' changes (WS-2) and their decisions (WS-3): see
// migrations/0008_changes.sql.

// changeQuery is the SELECT of changes (aliased c), with their patches
// or empty ones in their place.
func changeQuery(patches bool) string {
	patch := `''`
	if patches {
		patch = `c.patch`
	}
	return `SELECT c.run_id, c.repo, c.base, c.branch, c.workspace, c.commit_id, c.start, c.files, ` + patch + `,
		c.truncated, c.check_result, c.state, c.created_at, c.updated_at FROM changes c`
}

func scanChange(sc scanner) (store.Change, error) {
	var (
		c                store.Change
		files            string
		check            sql.NullString
		created, updated sql.NullInt64
	)
	if err := sc.Scan(&c.RunID, &c.Repo, &c.Base, &c.Branch, &c.Workspace, &c.Commit, &c.Start, &files, &c.Patch,
		&c.Truncated, &check, &c.State, &created, &updated); err != nil {
		return c, err
	}
	if err := json.Unmarshal([]byte(files), &c.Files); err != nil {
		return c, fmt.Errorf("change of %s: files: %w", c.RunID, err)
	}
	if check.Valid {
		c.Check = new(store.ChangeCheck)
		if err := json.Unmarshal([]byte(check.String), c.Check); err != nil {
			return c, fmt.Errorf("change of %s: check: %w", c.RunID, err)
		}
	}
	c.CreatedAt, c.UpdatedAt = timeVal(created), timeVal(updated)
	return c, nil
}

// changeJSON is the JSON of a change's files ([] for none) and of its
// check (NULL for none).
func changeJSON(c *store.Change) (files string, check any, err error) {
	fs := c.Files
	if fs == nil {
		fs = []store.ChangeFile{}
	}
	b, err := json.Marshal(fs)
	if err != nil {
		return "", nil, fmt.Errorf("files: %w", err)
	}
	if c.Check != nil {
		cb, err := json.Marshal(c.Check)
		if err != nil {
			return "", nil, fmt.Errorf("check: %w", err)
		}
		check = string(cb)
	}
	return string(b), check, nil
}

// RecordChange creates or replaces the change of run c.RunID, keeping
// its decisions and the CreatedAt of its first record; ErrNotFound for an
// unknown run. UpdatedAt is now; both are written back to c.
func (s *Store) RecordChange(ctx context.Context, c *store.Change) error {
	if c.State == "" {
		return fmt.Errorf("record change of %s: empty state", c.RunID)
	}
	files, check, err := changeJSON(c)
	if err != nil {
		return fmt.Errorf("record change of %s: %w", c.RunID, err)
	}
	now := time.Now()
	created := c.CreatedAt
	if created.IsZero() {
		created = now
	}
	var stored sql.NullInt64
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := runStatus(ctx, tx, c.RunID); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `INSERT INTO changes (run_id, repo, base, branch, workspace, commit_id, start,
				files, patch, truncated, check_result, state, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (run_id) DO UPDATE SET repo = excluded.repo, base = excluded.base, branch = excluded.branch,
				workspace = excluded.workspace, commit_id = excluded.commit_id, start = excluded.start,
				files = excluded.files, patch = excluded.patch, truncated = excluded.truncated,
				check_result = excluded.check_result, state = excluded.state, updated_at = excluded.updated_at
			RETURNING created_at`,
			c.RunID, c.Repo, c.Base, c.Branch, c.Workspace, c.Commit, c.Start, files, c.Patch, c.Truncated,
			check, string(c.State), timeArg(created), timeArg(now)).Scan(&stored)
	})
	if err != nil {
		return fmt.Errorf("record change of %s: %w", c.RunID, err)
	}
	c.CreatedAt, c.UpdatedAt = timeVal(stored), now
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

// listChanges reads the changes f selects and their decisions in one read
// transaction: the decisions are those of the states read.
func (s *Store) listChanges(ctx context.Context, f store.ChangeFilter) ([]store.Change, error) {
	where, args, err := changeWhere(f)
	if err != nil {
		return nil, err
	}
	var out []store.Change
	err = s.readTx(ctx, func(tx *sql.Tx) error {
		out = nil
		rows, err := tx.QueryContext(ctx, changeQuery(f.Patches)+where+` ORDER BY c.updated_at DESC, c.run_id DESC`, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		at := map[string]int{}
		for rows.Next() {
			c, err := scanChange(rows)
			if err != nil {
				return err
			}
			at[c.RunID] = len(out)
			out = append(out, c)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(out) == 0 {
			return nil
		}
		rows, err = tx.QueryContext(ctx, `SELECT d.run_id, d.action, d.decided_by, d.at, d.detail
			FROM change_decisions d WHERE d.run_id IN (SELECT c.run_id FROM changes c`+where+`)
			ORDER BY d.run_id, d.n`, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				id   string
				d    store.ChangeDecision
				when sql.NullInt64
			)
			if err := rows.Scan(&id, &d.Action, &d.By, &when, &d.Detail); err != nil {
				return err
			}
			d.At = timeVal(when)
			if i, ok := at[id]; ok {
				out[i].Decisions = append(out[i].Decisions, d)
			}
		}
		return rows.Err()
	})
	return out, err
}

// changeWhere is the WHERE clause (or "") of the changes (aliased c) f
// selects, and its arguments. Lists of run ids and states are one JSON
// argument each, however long.
func changeWhere(f store.ChangeFilter) (string, []any, error) {
	var where []string
	var args []any
	if len(f.RunIDs) > 0 {
		b, err := json.Marshal(f.RunIDs)
		if err != nil {
			return "", nil, err
		}
		where = append(where, `c.run_id IN (SELECT value FROM json_each(?))`)
		args = append(args, string(b))
	}
	if len(f.States) > 0 {
		b, err := json.Marshal(f.States)
		if err != nil {
			return "", nil, err
		}
		where = append(where, `c.state IN (SELECT value FROM json_each(?))`)
		args = append(args, string(b))
	}
	if !f.Before.IsZero() {
		where = append(where, `c.updated_at < ?`)
		args = append(args, timeArg(f.Before))
	}
	if len(where) == 0 {
		return "", nil, nil
	}
	return ` WHERE ` + strings.Join(where, ` AND `), args, nil
}

// DecideChange records d on a run's change and moves it to d.Action, in
// one write transaction (BEGIN IMMEDIATE: it holds the file's write lock
// from the start, so two deciders, in any processes, take turns and the
// second sees the first one's state). ErrConflict, with nothing written,
// when from is not empty and the change's state is not in it;
// ErrNotFound when the run has no change. A zero d.At is now.
func (s *Store) DecideChange(ctx context.Context, runID string, d store.ChangeDecision, from ...store.ChangeState) error {
	if d.Action == "" {
		return fmt.Errorf("decide change of %s: empty action", runID)
	}
	now := time.Now()
	if d.At.IsZero() {
		d.At = now
	}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var st store.ChangeState
		err := tx.QueryRowContext(ctx, `SELECT state FROM changes WHERE run_id = ?`, runID).Scan(&st)
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		if len(from) > 0 && !slices.Contains(from, st) {
			return fmt.Errorf("change is %s: %w", st, store.ErrConflict)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO change_decisions (run_id, n, action, decided_by, at, detail)
			VALUES (?, (SELECT COALESCE(MAX(n), 0) + 1 FROM change_decisions WHERE run_id = ?), ?, ?, ?, ?)`,
			runID, runID, string(d.Action), d.By, timeArg(d.At), d.Detail); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE changes SET state = ?, updated_at = ? WHERE run_id = ?`,
			string(d.Action), timeArg(now), runID)
		return err
	})
	if err != nil {
		return fmt.Errorf("decide change of %s: %w", runID, err)
	}
	return nil
}
