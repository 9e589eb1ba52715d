package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/internal/batch"
	"github.com/drover-run/drover/store/internal/turnref"
)

// appendTx is the one transaction that appends events, for AppendEvents
// (all: any event that does not continue its run fails the whole batch)
// and for the batched writer (not all: those that do are written, errs
// says which did not). It holds the events lock from its first statement
// to its commit (see the package doc, "The cursor: commit order").
func (s *Store) appendTx(ctx context.Context, evs []store.Event, all bool) (errs []error, err error) {
	ids := batch.RunIDs(evs)
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		// One round trip: the lock, then (a statement of its own, so its
		// snapshot is taken once the lock is held and sees every append
		// committed before) the runs' last seqs; NULL for a run without
		// events, no row for an unknown run.
		b := &pgx.Batch{}
		b.Queue(`SELECT pg_advisory_xact_lock($1)`, lockEvents)
		b.Queue(`SELECT pg_notify('` + chanEvents + `', '')`) // delivered at commit (notify.go)
		b.Queue(`SELECT id, (SELECT MAX(seq) FROM events WHERE run_id = runs.id) FROM runs WHERE id = ANY($1)`, ids)
		br := tx.SendBatch(ctx, b)
		for range 2 {
			if _, err := br.Exec(); err != nil {
				br.Close()
				return err
			}
		}
		last := make(map[string]int64, len(ids))
		var id string
		var seq *int64
		rows, err := br.Query()
		if err == nil {
			_, err = pgx.ForEachRow(rows, []any{&id, &seq}, func() error {
				last[id] = 0
				if seq != nil {
					last[id] = *seq
				}
				return nil
			})
		}
		if err := errors.Join(err, br.Close()); err != nil {
			return err
		}
		errs = batch.CheckSeqs(evs, last)
		if all {
			if err := batch.FirstError(errs); err != nil {
				return err
			}
		}
		good := batch.Good(evs, errs)
		if len(good) == 0 {
			return nil
		}
		return insertEvents(ctx, tx, good)
	})
	return errs, err
}

// insertEvents writes evs, already checked, in one statement: one array
// per column, unnested in order, so the cursors follow the order of evs.
func insertEvents(ctx context.Context, tx pgx.Tx, evs []store.Event) error {
	n := len(evs)
	runs, types := make([]string, n), make([]string, n)
	seqs := make([]int64, n)
	data := make([][]byte, n)
	at := make([]pgtype.Timestamptz, n)
	for i, ev := range evs {
		runs[i], seqs[i], types[i], data[i] = ev.RunID, ev.Seq, string(ev.Type), ev.JSON
		if data[i] == nil {
			data[i] = []byte{}
		}
		at[i] = pgtype.Timestamptz{Time: ev.Time, Valid: !ev.Time.IsZero()}
	}
	_, err := tx.Exec(ctx, `INSERT INTO events (run_id, seq, type, data, at)
		SELECT r, s, t, d, a FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bytea[], $5::timestamptz[])
			WITH ORDINALITY AS u(r, s, t, d, a, o)
		ORDER BY o`, runs, seqs, types, data, at)
	if isUniqueViolation(err) {
		return fmt.Errorf("append events: %w", store.ErrConflict)
	}
	return err
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
	_, err := s.appendTx(ctx, evs, true)
	return err
}

// writeBatch is the batched writer's transaction.
func (s *Store) writeBatch(evs []store.Event) ([]error, error) {
	// Not a caller's context: a batch holds many callers' events, and Close
	// must be able to flush after callers have given up.
	return s.appendTx(context.Background(), evs, false)
}

const eventCols = `cursor, run_id, seq, type, data, at`

// Events returns a run's events with seq > afterSeq in seq order, at most
// limit (0 = all); none for an unknown run.
func (s *Store) Events(ctx context.Context, runID string, afterSeq int64, limit int) ([]store.Event, error) {
	evs, err := s.queryEvents(ctx, `SELECT `+eventCols+` FROM events WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
		runID, afterSeq, limitArg(limit))
	if err != nil {
		return nil, fmt.Errorf("events of %s: %w", runID, err)
	}
	return evs, nil
}

// EventsAfter returns the events of all runs after cursor in commit order
// (the package doc says why cursor order is commit order).
func (s *Store) EventsAfter(ctx context.Context, cursor int64, limit int) ([]store.Event, error) {
	evs, err := s.queryEvents(ctx, `SELECT `+eventCols+` FROM events WHERE cursor > $1 ORDER BY cursor LIMIT $2`,
		cursor, limitArg(limit))
	if err != nil {
		return nil, fmt.Errorf("events after cursor %d: %w", cursor, err)
	}
	return evs, nil
}

// LastCursor returns the cursor of the last committed event, 0 if none.
func (s *Store) LastCursor(ctx context.Context) (int64, error) {
	var c int64
	if err := s.pool.QueryRow(ctx, `SELECT COALESCE(MAX(cursor), 0) FROM events`).Scan(&c); err != nil {
		return 0, fmt.Errorf("last cursor: %w", err)
	}
	return c, nil
}

func (s *Store) queryEvents(ctx context.Context, q string, args ...any) ([]store.Event, error) {
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Event, error) {
		var ev store.Event
		var typ string
		var at *time.Time
		if err := row.Scan(&ev.Cursor, &ev.RunID, &ev.Seq, &typ, &ev.JSON, &at); err != nil {
			return ev, err
		}
		ev.Type, ev.Time = drover.EventType(typ), timeVal(at)
		if len(ev.JSON) == 0 {
			ev.JSON = nil
		}
		return ev, nil
	})
}

// turnSource is runID's turn record inside tx.
type turnSource struct {
	ctx   context.Context
	tx    pgx.Tx
	runID string
}

func (t turnSource) Messages() ([]store.Message, error) {
	rows, err := t.tx.Query(t.ctx, `SELECT idx, role, content, tool_use_id FROM messages WHERE run_id = $1 ORDER BY idx`, t.runID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Message, error) {
		m := store.Message{RunID: t.runID}
		return m, row.Scan(&m.Index, &m.Role, &m.Content, &m.ToolUseID)
	})
}

func (t turnSource) Calls() ([]turnref.OrdCall, error) {
	rows, err := t.tx.Query(t.ctx, `SELECT ord, id, name, input, status, output, started_at, ended_at
		FROM tool_calls WHERE run_id = $1 ORDER BY ord`, t.runID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (turnref.OrdCall, error) {
		c := turnref.OrdCall{ToolCall: store.ToolCall{RunID: t.runID}}
		var started, ended *time.Time
		if err := row.Scan(&c.Ord, &c.ID, &c.Name, &c.Input, &c.Status, &c.Output, &started, &ended); err != nil {
			return c, err
		}
		if len(c.Input) == 0 {
			c.Input = nil
		}
		c.StartedAt, c.EndedAt = timeVal(started), timeVal(ended)
		return c, nil
	})
}

// Refs returns the turn_refs column name of the run, nil when the run has
// no references.
func (t turnSource) Refs(name string) ([]byte, error) {
	rows, err := t.tx.Query(t.ctx, `SELECT `+name+` FROM turn_refs WHERE run_id = $1`, t.runID)
	if err != nil {
		return nil, err
	}
	js, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil || len(js) == 0 {
		return nil, err
	}
	return js[0], nil
}

// Parts reads the events of the run a turn record names.
func (t turnSource) Parts(seqs []int64) (map[int64]*turnref.Part, error) {
	out := make(map[int64]*turnref.Part, len(seqs))
	rows, err := t.tx.Query(t.ctx, `SELECT seq, type, data, at FROM events WHERE run_id = $1 AND seq = ANY($2)`, t.runID, seqs)
	if err != nil {
		return nil, err
	}
	var seq int64
	var typ string
	var data []byte
	var at *time.Time
	_, err = pgx.ForEachRow(rows, []any{&seq, &typ, &data, &at}, func() error {
		p, err := turnref.NewPart(seq, drover.EventType(typ), timeVal(at), data)
		out[seq] = p
		return err
	})
	return out, err
}

// readTurn runs read on runID's turn record in one read-only
// repeatable-read transaction: all of it is one state of the ledger.
func (s *Store) readTurn(ctx context.Context, runID, what string, read func(turnref.Source) error) error {
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error { return read(turnSource{ctx, tx, runID}) })
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, runID, err)
	}
	return nil
}

// Messages returns a run's messages by Index; none for an unknown run.
func (s *Store) Messages(ctx context.Context, runID string) (out []store.Message, err error) {
	err = s.readTurn(ctx, runID, "messages of", func(src turnref.Source) (err error) {
		out, err = turnref.ReadMessages(runID, src)
		return err
	})
	return out, err
}

// ToolCalls returns a run's tool calls in the order FinishRun was given
// them; none for an unknown run.
func (s *Store) ToolCalls(ctx context.Context, runID string) (out []store.ToolCall, err error) {
	err = s.readTurn(ctx, runID, "tool calls of", func(src turnref.Source) (err error) {
		out, err = turnref.ReadCalls(runID, src)
		return err
	})
	return out, err
}
