package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/store"
)

// The turn record by reference (LED-3, migrations/0002_turn_refs.sql).
// turn_refs.messages is a JSON array of [index, seq] pairs; tool_calls a
// JSON array of callRef objects.

// callRef is a tool call recorded by reference. The fields of a half
// without a reference (no tool_use event, or no tool_result yet) are kept
// as given.
type callRef struct {
	Ord       int             `json:"ord"`
	Seq       int64           `json:"seq,omitempty"`
	ResultSeq int64           `json:"resultSeq,omitempty"`
	PermSeq   int64           `json:"permSeq,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	Status    string          `json:"status,omitempty"`
	Output    string          `json:"output,omitempty"`
	StartedAt int64           `json:"startedAt,omitempty"` // Unix ns
	EndedAt   int64           `json:"endedAt,omitempty"`
}

// turnRefs is the part of a Finish recorded by reference.
type turnRefs struct {
	messages []byte // JSON, nil when there are none
	calls    []byte
	maxSeq   int64 // the highest seq referenced
}

func (t turnRefs) empty() bool { return t.messages == nil && t.calls == nil }

// splitTurn separates f's messages and tool calls recorded by reference from
// those recorded as given, and checks that no message Index appears twice
// (across both) and that every reference is a positive seq. It returns the
// tool calls stored as given with their position in f.ToolCalls.
func splitTurn(f store.Finish) (msgs []store.Message, calls []ordCall, refs turnRefs, err error) {
	if err := uniqueIndexes(f.Messages); err != nil {
		return nil, nil, refs, err
	}
	var mbuf []byte
	for _, m := range f.Messages {
		if m.Seq == 0 {
			msgs = append(msgs, m)
			continue
		}
		if m.Seq < 0 {
			return nil, nil, refs, fmt.Errorf("message %d refers to seq %d: %w", m.Index, m.Seq, store.ErrConflict)
		}
		if mbuf == nil {
			mbuf = append(make([]byte, 0, 16*len(f.Messages)), '[')
		} else {
			mbuf = append(mbuf, ',')
		}
		mbuf = append(mbuf, '[')
		mbuf = strconv.AppendInt(mbuf, int64(m.Index), 10)
		mbuf = append(mbuf, ',')
		mbuf = strconv.AppendInt(mbuf, m.Seq, 10)
		mbuf = append(mbuf, ']')
		refs.maxSeq = max(refs.maxSeq, m.Seq)
	}
	if mbuf != nil {
		refs.messages = append(mbuf, ']')
	}
	var cbuf []byte
	for i, c := range f.ToolCalls {
		if c.Seq == 0 && c.ResultSeq == 0 && c.PermissionSeq == 0 {
			calls = append(calls, ordCall{i, c})
			continue
		}
		if c.Seq < 0 || c.ResultSeq < 0 || c.PermissionSeq < 0 {
			return nil, nil, refs, fmt.Errorf("tool call %d refers to seqs %d, %d, %d: %w", i, c.Seq, c.ResultSeq, c.PermissionSeq, store.ErrConflict)
		}
		r := callRef{Ord: i, Seq: c.Seq, ResultSeq: c.ResultSeq, PermSeq: c.PermissionSeq}
		if c.Seq == 0 {
			r.ID, r.Name, r.Input, r.StartedAt = c.ID, c.Name, c.Input, unixNano(c.StartedAt)
		}
		if c.ResultSeq == 0 {
			r.Status, r.Output, r.EndedAt = string(c.Status), c.Output, unixNano(c.EndedAt)
		}
		if cbuf == nil {
			cbuf = append(make([]byte, 0, 40*len(f.ToolCalls)), '[')
		} else {
			cbuf = append(cbuf, ',')
		}
		if cbuf, err = r.appendJSON(cbuf); err != nil {
			return nil, nil, refs, err
		}
		refs.maxSeq = max(refs.maxSeq, c.Seq, c.ResultSeq, c.PermissionSeq)
	}
	if cbuf != nil {
		refs.calls = append(cbuf, ']')
	}
	return msgs, calls, refs, nil
}

// appendJSON appends r's JSON to b: by hand for a call whose halves are
// both references or absent (the common case, a few thousand per long
// run), with encoding/json otherwise.
func (r callRef) appendJSON(b []byte) ([]byte, error) {
	if r.ID != "" || r.Name != "" || r.Input != nil || r.Status != "" || r.Output != "" || r.StartedAt != 0 || r.EndedAt != 0 {
		js, err := json.Marshal(r)
		return append(b, js...), err
	}
	b = append(b, `{"ord":`...)
	b = strconv.AppendInt(b, int64(r.Ord), 10)
	if r.Seq != 0 {
		b = append(b, `,"seq":`...)
		b = strconv.AppendInt(b, r.Seq, 10)
	}
	if r.ResultSeq != 0 {
		b = append(b, `,"resultSeq":`...)
		b = strconv.AppendInt(b, r.ResultSeq, 10)
	}
	if r.PermSeq != 0 {
		b = append(b, `,"permSeq":`...)
		b = strconv.AppendInt(b, r.PermSeq, 10)
	}
	return append(b, '}'), nil
}

type ordCall struct {
	ord int
	store.ToolCall
}

func uniqueIndexes(ms []store.Message) error {
	sorted := true
	for i := 1; i < len(ms); i++ {
		if ms[i].Index <= ms[i-1].Index {
			sorted = false
			break
		}
	}
	if sorted {
		return nil
	}
	idx := make([]int, len(ms))
	for i, m := range ms {
		idx[i] = m.Index
	}
	slices.Sort(idx)
	for i := 1; i < len(idx); i++ {
		if idx[i] == idx[i-1] {
			return fmt.Errorf("message index %d appears twice: %w", idx[i], store.ErrConflict)
		}
	}
	return nil
}

// unixNano is a time as turn_refs keeps it: Unix nanoseconds, 0 for the
// zero time.
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// writeTurnRefs stores refs for f.RunID inside tx, after checking that
// every seq they name has been recorded.
func writeTurnRefs(ctx context.Context, tx *sql.Tx, runID string, refs turnRefs) error {
	if refs.empty() {
		return nil
	}
	var last int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = ?`, runID).Scan(&last); err != nil {
		return err
	}
	if refs.maxSeq > last {
		return fmt.Errorf("turn record refers to seq %d, the run's last event is %d: %w", refs.maxSeq, last, store.ErrConflict)
	}
	msgs, calls := refs.messages, refs.calls
	if msgs == nil {
		msgs = []byte("[]")
	}
	if calls == nil {
		calls = []byte("[]")
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO turn_refs (run_id, messages, tool_calls) VALUES (?, ?, ?)`,
		runID, string(msgs), string(calls))
	return err
}

// eventPart is what a turn record takes from a UES event: the fields of
// drover.TextPayload, ToolUsePayload, ToolResultPayload, SteerPayload and
// PermissionAnswerPayload. Input stays raw, so it comes back byte for byte
// as the event has it.
type eventPart struct {
	typ     drover.EventType
	time    sql.NullInt64
	Payload struct {
		Content   string          `json:"content"`
		ToolName  string          `json:"toolName"`
		ToolUseID string          `json:"toolUseId"`
		Input     json.RawMessage `json:"input"`
		Status    string          `json:"status"`
		Output    string          `json:"output"`
		// drover:steer, drover:permission_answer
		Message    string              `json:"message"`
		RequestID  string              `json:"requestId"`
		Behavior   drover.Behavior     `json:"behavior"`
		Always     bool                `json:"always"`
		By         drover.AnswerSource `json:"by"`
		Detail     string              `json:"detail"`
		AskedAt    int64               `json:"askedAt"`
		AnsweredAt int64               `json:"answeredAt"`
	} `json:"payload"`
}

// eventParts reads and decodes the events of run with the given seqs,
// which must be sorted; seqs of no event are absent from the result.
func eventParts(ctx context.Context, tx *sql.Tx, runID string, seqs []int64) (map[int64]*eventPart, error) {
	out := make(map[int64]*eventPart, len(seqs))
	if len(seqs) == 0 {
		return out, nil
	}
	// One range scan of the run's events, skipping those not asked for:
	// references are dense in a run's events, so this beats a seek each.
	rows, err := tx.QueryContext(ctx, `SELECT seq, type, json, time FROM events
		WHERE run_id = ? AND seq >= ? AND seq <= ? ORDER BY seq`, runID, seqs[0], seqs[len(seqs)-1])
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	i := 0
	for rows.Next() {
		var seq int64
		var raw sql.RawBytes
		p := &eventPart{}
		if err := rows.Scan(&seq, &p.typ, &raw, &p.time); err != nil {
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
		if err := json.Unmarshal(raw, p); err != nil {
			return nil, fmt.Errorf("event %d: %w", seq, err)
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

// refsJSON returns the turn_refs column col of runID, "" when the run has
// no references.
func refsJSON(ctx context.Context, tx *sql.Tx, runID, col string) (string, error) {
	var v string
	err := tx.QueryRowContext(ctx, `SELECT `+col+` FROM turn_refs WHERE run_id = ?`, runID).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return v, err
}

// messageRefs returns the messages of runID recorded by reference, content
// read from the events.
func messageRefs(ctx context.Context, tx *sql.Tx, runID string) ([]store.Message, error) {
	js, err := refsJSON(ctx, tx, runID, "messages")
	if err != nil || js == "" {
		return nil, err
	}
	var pairs [][2]int64
	if err := json.Unmarshal([]byte(js), &pairs); err != nil {
		return nil, fmt.Errorf("turn refs: %w", err)
	}
	seqs := make([]int64, len(pairs))
	for i, p := range pairs {
		seqs[i] = p[1]
	}
	slices.Sort(seqs)
	parts, err := eventParts(ctx, tx, runID, seqs)
	if err != nil {
		return nil, err
	}
	out := make([]store.Message, len(pairs))
	for i, p := range pairs {
		m := store.Message{RunID: runID, Index: int(p[0]), Seq: p[1]}
		ev := parts[m.Seq]
		switch {
		case ev == nil:
			return nil, fmt.Errorf("message %d: no event %d", m.Index, m.Seq)
		case ev.typ == drover.TypeText:
			m.Role, m.Content = "assistant", ev.Payload.Content
		case ev.typ == drover.TypeToolResult:
			m.Role, m.Content, m.ToolUseID = "tool", ev.Payload.Output, ev.Payload.ToolUseID
		case ev.typ == drover.TypeSteer:
			m.Role, m.Content = "user", ev.Payload.Message
		default:
			return nil, fmt.Errorf("message %d: event %d is a %s, not a text, tool_result or drover:steer", m.Index, m.Seq, ev.typ)
		}
		out[i] = m
	}
	return out, nil
}

// callRefs returns the tool calls of runID recorded by reference with
// their order, content read from the events.
func callRefs(ctx context.Context, tx *sql.Tx, runID string) ([]ordCall, error) {
	js, err := refsJSON(ctx, tx, runID, "tool_calls")
	if err != nil || js == "" {
		return nil, err
	}
	var refs []callRef
	if err := json.Unmarshal([]byte(js), &refs); err != nil {
		return nil, fmt.Errorf("turn refs: %w", err)
	}
	var seqs []int64
	for _, r := range refs {
		for _, seq := range []int64{r.Seq, r.ResultSeq, r.PermSeq} {
			if seq != 0 {
				seqs = append(seqs, seq)
			}
		}
	}
	slices.Sort(seqs)
	parts, err := eventParts(ctx, tx, runID, seqs)
	if err != nil {
		return nil, err
	}
	out := make([]ordCall, len(refs))
	for i, r := range refs {
		c := store.ToolCall{RunID: runID, Seq: r.Seq, ResultSeq: r.ResultSeq, PermissionSeq: r.PermSeq,
			ID: r.ID, Name: r.Name, Input: r.Input, Status: drover.ToolStatus(r.Status), Output: r.Output,
			StartedAt: timeVal(sql.NullInt64{Int64: r.StartedAt, Valid: r.StartedAt != 0}),
			EndedAt:   timeVal(sql.NullInt64{Int64: r.EndedAt, Valid: r.EndedAt != 0})}
		if r.Seq != 0 {
			ev := parts[r.Seq]
			if ev == nil || ev.typ != drover.TypeToolUse {
				return nil, fmt.Errorf("tool call %d: event %d is not a tool_use", r.Ord, r.Seq)
			}
			c.ID, c.Name, c.Input, c.StartedAt = ev.Payload.ToolUseID, ev.Payload.ToolName, ev.Payload.Input, timeVal(ev.time)
		}
		if r.ResultSeq != 0 {
			ev := parts[r.ResultSeq]
			if ev == nil || ev.typ != drover.TypeToolResult {
				return nil, fmt.Errorf("tool call %d: event %d is not a tool_result", r.Ord, r.ResultSeq)
			}
			c.Status, c.Output, c.EndedAt = drover.ToolStatus(ev.Payload.Status), ev.Payload.Output, timeVal(ev.time)
		}
		if r.PermSeq != 0 {
			ev := parts[r.PermSeq]
			if ev == nil || ev.typ != drover.TypePermissionAnswer {
				return nil, fmt.Errorf("tool call %d: event %d is not a drover:permission_answer", r.Ord, r.PermSeq)
			}
			p := ev.Payload
			c.Permission = &store.ToolPermission{RequestID: p.RequestID, Behavior: p.Behavior, Message: p.Message,
				Always: p.Always, By: p.By, Detail: p.Detail,
				AskedAt: time.UnixMilli(p.AskedAt).UTC(), AnsweredAt: time.UnixMilli(p.AnsweredAt).UTC()}
		}
		out[i] = ordCall{r.Ord, c}
	}
	return out, nil
}
