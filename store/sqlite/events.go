package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"strings"
	"unsafe"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/internal/batch"
	"github.com/drover-run/drover/store/internal/turnref"
)

// insertChunk is the most rows one INSERT statement carries (5 parameters
// each, far below SQLite's limit of 32766).
const insertChunk = 128

// seqChunk is the most run ids one last-seq query takes.
const seqChunk = 64

// stmts are the write connection's prepared statements for events: INSERTs
// of 1, 2, 4, … insertChunk rows, and last-seq queries for 1, 2, 4, …
// seqChunk runs. Preparing a 128-row INSERT costs about as much as running
// it, so they are prepared once, at Open. Why at Open: database/sql cannot
// prepare on the DB while a transaction holds its only write connection.
type stmts struct {
	inserts  []*sql.Stmt // inserts[k] has 1<<k rows
	lastSeqs []*sql.Stmt // lastSeqs[k] takes 1<<k run ids
}

func (c *stmts) prepare(ctx context.Context, db *sql.DB) error {
	for n := 1; n <= insertChunk; n *= 2 {
		// OR FAIL: see the events table in migrations/0001_init.sql. The
		// transaction is rolled back on any error anyway.
		st, err := db.PrepareContext(ctx, `INSERT OR FAIL INTO events (run_id, seq, type, json, time) VALUES `+
			strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?), ", n), ", "))
		if err != nil {
			return err
		}
		c.inserts = append(c.inserts, st)
	}
	for n := 1; n <= seqChunk; n *= 2 {
		// NULL when the run has no events; no row when it does not exist.
		st, err := db.PrepareContext(ctx, `SELECT id, (SELECT MAX(seq) FROM events WHERE run_id = runs.id)
			FROM runs WHERE id IN (`+placeholders(n)+`)`)
		if err != nil {
			return err
		}
		c.lastSeqs = append(c.lastSeqs, st)
	}
	return nil
}

// pick returns the largest statement of list for at most n items, and its
// item count (list[k] takes 1<<k).
func pick(list []*sql.Stmt, n int) (*sql.Stmt, int) {
	k := min(bits.Len(uint(n))-1, len(list)-1)
	return list[k], 1 << k
}

func (c *stmts) close() {
	for _, st := range append(c.inserts, c.lastSeqs...) {
		st.Close()
	}
}

// lastSeqs returns the last seq of each existing run of ids (0 when it has
// no events yet); unknown runs are absent.
func (s *Store) lastSeqs(ctx context.Context, tx *sql.Tx, ids []string) (map[string]int64, error) {
	last := make(map[string]int64, len(ids))
	args := make([]any, 0, min(len(ids), seqChunk))
	for len(ids) > 0 {
		stmt, n := pick(s.stmts.lastSeqs, len(ids))
		args = args[:0]
		for _, id := range ids[:n] {
			args = append(args, id)
		}
		ids = ids[n:]
		rows, err := tx.StmtContext(ctx, stmt).QueryContext(ctx, args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var id string
			var seq sql.NullInt64
			if err := rows.Scan(&id, &seq); err != nil {
				rows.Close()
				return nil, err
			}
			last[id] = seq.Int64
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, err
		}
	}
	return last, nil
}

// checkSeqs checks that each event continues its run (see
// batch.CheckSeqs) against known, runs' last seqs the caller has (nil for
// none), and for the other runs of ids (the runs evs name, batch.RunIDs)
// their last seqs read inside tx (which holds the write lock, so no other
// writer can move them). It returns known with those read, advanced past
// the events that pass.
func (s *Store) checkSeqs(ctx context.Context, tx *sql.Tx, evs []store.Event, ids []string, known map[string]int64) ([]error, map[string]int64, error) {
	var missing []string
	for _, id := range ids {
		if _, ok := known[id]; !ok {
			missing = append(missing, id)
		}
	}
	if known == nil {
		known = make(map[string]int64, len(missing))
	}
	if len(missing) > 0 {
		read, err := s.lastSeqs(ctx, tx, missing)
		if err != nil {
			return nil, nil, err
		}
		maps.Copy(known, read)
	}
	return batch.CheckSeqs(evs, known), known, nil
}

// insertEvents writes evs, already checked, with as few statements as
// their number allows.
func (s *Store) insertEvents(ctx context.Context, tx *sql.Tx, evs []store.Event) error {
	args := make([]any, 0, 5*min(len(evs), insertChunk))
	// A batch holds few runs and types: each becomes an interface value
	// (an allocation) once, not once per event. Allocations made while
	// recording bring on garbage collections that slow the runs.
	var runID, typ string
	var runArg, typArg any
	for len(evs) > 0 {
		stmt, n := pick(s.stmts.inserts, len(evs))
		args = args[:0]
		for _, ev := range evs[:n] {
			if runArg == nil || ev.RunID != runID {
				runID, runArg = ev.RunID, ev.RunID
			}
			if typArg == nil || string(ev.Type) != typ {
				typ, typArg = string(ev.Type), string(ev.Type)
			}
			args = append(args, runArg, ev.Seq, typArg, jsonText(ev.JSON), timeArg(ev.Time))
		}
		if _, err := tx.StmtContext(ctx, stmt).ExecContext(ctx, args...); err != nil {
			if isUniqueViolation(err) {
				return fmt.Errorf("append events: %w", store.ErrConflict)
			}
			return err
		}
		evs = evs[n:]
	}
	return nil
}

// jsonText is event JSON as a TEXT argument, without a copy: the driver
// copies it into SQLite anyway, and the bytes are not modified while the
// statement runs (AppendEvents' caller is waiting for it; the Writer's
// callers hand their events over, see Writer.Append).
func jsonText(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// AppendEvents records evs in one transaction (LED-2). Within each run the
// events must continue the run's last seq in order (last+1, last+2, …);
// events of several runs may be interleaved. A gap, a duplicate or a seq
// ≤ 0 is ErrConflict, a run that does not exist ErrNotFound, and then
// nothing of evs is written.
func (s *Store) AppendEvents(ctx context.Context, evs []store.Event) error {
	if err := batch.ValidateAll(evs); err != nil || len(evs) == 0 {
		return err
	}
	// Read from the ledger, not the writer's cache, and dropped from it:
	// the writer reads these runs again.
	ids := batch.RunIDs(evs)
	defer s.seqs.forget(ids...)
	return s.inTx(ctx, func(tx *sql.Tx) error {
		errs, _, err := s.checkSeqs(ctx, tx, evs, ids, nil)
		if err != nil {
			return fmt.Errorf("append events: %w", err)
		}
		if err := batch.FirstError(errs); err != nil {
			return err
		}
		if err := s.insertEvents(ctx, tx, evs); err != nil {
			return fmt.Errorf("append events: %w", err)
		}
		return nil
	})
}

// Events returns a run's events with seq > afterSeq in seq order, at most
// limit (0 = all); none for an unknown run.
func (s *Store) Events(ctx context.Context, runID string, afterSeq int64, limit int) ([]store.Event, error) {
	q := `SELECT rowid, run_id, seq, type, json, time FROM events WHERE run_id = ? AND seq > ? ORDER BY seq`
	args := []any{runID, afterSeq}
	if limit > 0 {
		q += ` LIMIT ?`
		args = append(args, limit)
	}
	evs, err := s.queryEvents(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("events of %s: %w", runID, err)
	}
	return evs, nil
}

// EventsAfter returns the events of all runs after cursor in commit
// order. The cursor is the events table's rowid: rows are only ever
// inserted, by one writing transaction at a time (SQLite's write lock,
// also across processes), each taking the next rowid, so rowid order is
// commit order and a committed rowid is never followed by a smaller one.
func (s *Store) EventsAfter(ctx context.Context, cursor int64, limit int) ([]store.Event, error) {
	q := `SELECT rowid, run_id, seq, type, json, time FROM events WHERE rowid > ? ORDER BY rowid`
	args := []any{cursor}
	if limit > 0 {
		q += ` LIMIT ?`
		args = append(args, limit)
	}
	evs, err := s.queryEvents(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("events after cursor %d: %w", cursor, err)
	}
	return evs, nil
}

// LastCursor returns the rowid of the last event, 0 if none.
func (s *Store) LastCursor(ctx context.Context) (int64, error) {
	var c sql.NullInt64
	if err := s.r.QueryRowContext(ctx, `SELECT max(rowid) FROM events`).Scan(&c); err != nil {
		return 0, fmt.Errorf("last cursor: %w", err)
	}
	return c.Int64, nil
}

func (s *Store) queryEvents(ctx context.Context, q string, args ...any) ([]store.Event, error) {
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Event
	for rows.Next() {
		var ev store.Event
		var typ string
		var data []byte
		var t sql.NullInt64
		if err := rows.Scan(&ev.Cursor, &ev.RunID, &ev.Seq, &typ, &data, &t); err != nil {
			return nil, err
		}
		ev.Type = drover.EventType(typ)
		if len(data) > 0 {
			ev.JSON = data
		}
		ev.Time = timeVal(t)
		out = append(out, ev)
	}
	return out, rows.Err()
}

// Messages returns a run's messages by Index; none for an unknown run.
func (s *Store) Messages(ctx context.Context, runID string) (out []store.Message, err error) {
	err = s.readTx(ctx, func(tx *sql.Tx) (err error) {
		out, err = turnref.ReadMessages(runID, turnSource{ctx, tx, runID})
		return err
	})
	return out, wrapErr(err, "messages of "+runID)
}

// ToolCalls returns a run's tool calls in the order FinishRun was given
// them; none for an unknown run.
func (s *Store) ToolCalls(ctx context.Context, runID string) (out []store.ToolCall, err error) {
	err = s.readTx(ctx, func(tx *sql.Tx) (err error) {
		out, err = turnref.ReadCalls(runID, turnSource{ctx, tx, runID})
		return err
	})
	return out, wrapErr(err, "tool calls of "+runID)
}

// wrapErr is err with what was being done, nil for nil.
func wrapErr(err error, what string) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
