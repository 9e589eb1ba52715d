// Package rules holds what every ledger backend decides the same way
// before and around its SQL: the defaults a Store fills in, and which
// moves of a run's status are allowed (RUN-1). A backend reads the state
// under its own locks and asks here.
package rules

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/internal/turnref"
)

// The runs table has the same columns in every backend: RunInsertCols are
// those CreateRun writes, RunCols what a query reads, LastSeq coming from
// the run's events (one index seek).
const (
	RunInsertCols = `id, agent, prompt, status, error, parent_id, session_id, resume_token,
	options, timeout_ns, owner, pid, pgid, created_at, started_at, ended_at, done_status,
	input_tokens, output_tokens, tool_uses, total_cost_usd, cache_read_tokens,
	cache_write_tokens, reasoning_tokens, turns, duration_ms, cancel_requested, allowed, denied`
	RunCols = RunInsertCols + `, (SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = runs.id)`
)

// Default sets *t to now if it is the zero time: the time a Store takes
// for an event the caller did not date.
func Default(t *time.Time, now time.Time) {
	if t.IsZero() {
		*t = now
	}
}

// Found is the error of a read of kind id ("run", "session") that
// returned err, noRows being the driver's error for no row: ErrNotFound
// then, else err wrapped; nil for nil.
func Found(kind, id string, err, noRows error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, noRows):
		return fmt.Errorf("%s %s: %w", kind, id, store.ErrNotFound)
	}
	return fmt.Errorf("get %s %s: %w", kind, id, err)
}

// ListRuns returns the query of store.Store.ListRuns for f: the runs
// matching f, newest first (by created_at, then by order, the column of
// insertion order), at most f.Limit. The backend gives its dialect's n-th
// parameter (param, n from 1) and the value it stores for a time.
func ListRuns(f store.RunFilter, order string, param func(n int) string, timeArg func(time.Time) any) (string, []any) {
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return param(len(args))
	}
	if len(f.Status) > 0 {
		ps := make([]string, len(f.Status))
		for i, st := range f.Status {
			ps[i] = arg(string(st))
		}
		where = append(where, `status IN (`+strings.Join(ps, ", ")+`)`)
	}
	if f.Agent != "" {
		where = append(where, `agent = `+arg(f.Agent))
	}
	// The "<> ''" terms let the database use the partial indexes.
	if f.SessionID != "" {
		where = append(where, `session_id = `+arg(f.SessionID)+` AND session_id <> ''`)
	}
	if f.ParentID != "" {
		where = append(where, `parent_id = `+arg(f.ParentID)+` AND parent_id <> ''`)
	}
	if !f.Since.IsZero() {
		where = append(where, `created_at >= `+arg(timeArg(f.Since)))
	}
	q := `SELECT ` + RunCols + ` FROM runs`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	q += ` ORDER BY created_at DESC, ` + order + ` DESC`
	if f.Limit > 0 {
		q += ` LIMIT ` + arg(f.Limit)
	}
	return q, args
}

// NewRun checks r for CreateRun and fills in its defaults: status pending,
// CreatedAt now.
func NewRun(r *store.Run, now time.Time) error {
	if r.ID == "" {
		return errors.New("create run: empty id")
	}
	if r.Status == "" {
		r.Status = store.StatusPending
	}
	switch r.Status {
	case store.StatusPending, store.StatusRunning, store.StatusCompleted, store.StatusFailed:
	default:
		return fmt.Errorf("create run %s: unknown status %q", r.ID, r.Status)
	}
	Default(&r.CreatedAt, now)
	return nil
}

// Start says what StartRun does to a run whose status read returned st
// and err: first (a pending run: set its start time as well as its
// process ids), or only replace the process ids (a running run). An ended
// run is ErrConflict; err (ErrNotFound for an unknown run) passes.
func Start(st store.RunStatus, err error) (first bool, _ error) {
	if err != nil {
		return false, err
	}
	switch st {
	case store.StatusPending:
		return true, nil
	case store.StatusRunning:
		return false, nil
	}
	return false, fmt.Errorf("run is %s: %w", st, store.ErrConflict)
}

// Live fails unless a run whose status read returned st and err is still
// pending or running: err (ErrNotFound for an unknown run) passes, an
// ended run is ErrConflict. FinishRun and PostControl need a live run.
func Live(st store.RunStatus, err error) error {
	if err != nil {
		return err
	}
	if st.Terminal() {
		return fmt.Errorf("run already %s: %w", st, store.ErrConflict)
	}
	return nil
}

// Finish checks f for FinishRun, fills in EndedAt (now when zero) and
// splits its turn record into what is stored as given and what by
// reference (turnref.Split).
func Finish(f *store.Finish, now time.Time) ([]store.Message, []turnref.OrdCall, turnref.Refs, error) {
	if !f.Status.Terminal() {
		return nil, nil, turnref.Refs{}, fmt.Errorf("status %q is not completed or failed", f.Status)
	}
	Default(&f.EndedAt, now)
	return turnref.Split(*f)
}

// NewSession checks ss for PutSession and fills in its defaults:
// CreatedAt and UpdatedAt now.
func NewSession(ss *store.Session, now time.Time) error {
	if ss.ID == "" {
		return errors.New("put session: empty id")
	}
	Default(&ss.CreatedAt, now)
	Default(&ss.UpdatedAt, now)
	return nil
}
