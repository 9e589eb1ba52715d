// Package turnref is the turn record by reference (LED-3) as every ledger
// backend keeps it. A message or tool call whose content is in the run's
// events (store.Message.Seq, store.ToolCall.Seq, ResultSeq, PermissionSeq)
// is kept as the seqs of those events rather than as a copy: copying
// every text and tool output of a run at its end cost about as much as
// recording the events themselves. All of a run's references are two JSON
// arrays in one row: messages as [index, seq] pairs, or [index, seq, n]
// for n consecutive messages read from n consecutive events
// (store.Message.Span), tool calls as callRef objects. Entries without a
// reference are stored as given, in the backend's own tables; Merge* put
// the two kinds back together.
package turnref

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/store"
)

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

// Refs is the part of a Finish recorded by reference.
type Refs struct {
	Messages []byte // JSON, nil when there are none
	Calls    []byte
	MaxSeq   int64 // the highest seq referenced
}

// Empty reports whether there is nothing by reference.
func (r Refs) Empty() bool { return r.Messages == nil && r.Calls == nil }

// JSON returns the two arrays to store, "[]" for none.
func (r Refs) JSON() (messages, calls []byte) {
	messages, calls = r.Messages, r.Calls
	if messages == nil {
		messages = []byte("[]")
	}
	if calls == nil {
		calls = []byte("[]")
	}
	return messages, calls
}

// CheckLast fails with ErrConflict if the references name a seq past
// last, the run's last recorded event.
func (r Refs) CheckLast(last int64) error {
	if r.MaxSeq > last {
		return fmt.Errorf("turn record refers to seq %d, the run's last event is %d: %w", r.MaxSeq, last, store.ErrConflict)
	}
	return nil
}

// OrdCall is a tool call with its place in Finish.ToolCalls.
type OrdCall struct {
	Ord int
	store.ToolCall
}

// Split separates f's messages and tool calls recorded by reference from
// those recorded as given, and checks that no message Index appears twice
// (across both) and that every reference is a positive seq
// (ErrConflict). It returns the tool calls stored as given with their
// position in f.ToolCalls.
func Split(f store.Finish) (msgs []store.Message, calls []OrdCall, refs Refs, err error) {
	if err := uniqueIndexes(f.Messages); err != nil {
		return nil, nil, refs, err
	}
	var mbuf []byte
	for _, m := range f.Messages {
		if m.Seq == 0 {
			if m.Span > 1 {
				return nil, nil, refs, fmt.Errorf("message %d spans %d messages without a reference: %w", m.Index, m.Span, store.ErrConflict)
			}
			msgs = append(msgs, m)
			continue
		}
		if m.Seq < 0 || m.Span < 0 {
			return nil, nil, refs, fmt.Errorf("message %d refers to seq %d (span %d): %w", m.Index, m.Seq, m.Span, store.ErrConflict)
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
		if m.Span > 1 {
			mbuf = append(mbuf, ',')
			mbuf = strconv.AppendInt(mbuf, int64(m.Span), 10)
		}
		mbuf = append(mbuf, ']')
		refs.MaxSeq = max(refs.MaxSeq, m.Seq+int64(span(m))-1)
	}
	if mbuf != nil {
		refs.Messages = append(mbuf, ']')
	}
	var cbuf []byte
	for i, c := range f.ToolCalls {
		if c.Seq == 0 && c.ResultSeq == 0 && c.PermissionSeq == 0 {
			calls = append(calls, OrdCall{i, c})
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
		refs.MaxSeq = max(refs.MaxSeq, c.Seq, c.ResultSeq, c.PermissionSeq)
	}
	if cbuf != nil {
		refs.Calls = append(cbuf, ']')
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

// span is how many messages m stands for.
func span(m store.Message) int {
	if m.Seq != 0 && m.Span > 1 {
		return m.Span
	}
	return 1
}

// uniqueIndexes checks that no message index appears twice, a span
// counting for each index it stands for.
func uniqueIndexes(ms []store.Message) error {
	sorted := true
	for i := 1; i < len(ms); i++ {
		if ms[i].Index < ms[i-1].Index+span(ms[i-1]) {
			sorted = false
			break
		}
	}
	if sorted {
		return nil
	}
	byIndex := slices.Clone(ms)
	slices.SortFunc(byIndex, func(a, b store.Message) int { return cmp.Compare(a.Index, b.Index) })
	for i := 1; i < len(byIndex); i++ {
		if prev := byIndex[i-1]; byIndex[i].Index < prev.Index+span(prev) {
			return fmt.Errorf("message index %d appears twice: %w", byIndex[i].Index, store.ErrConflict)
		}
	}
	return nil
}

// unixNano is a time as the references keep it: Unix nanoseconds, 0 for
// the zero time.
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func nsTime(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// Part is what a turn record takes from a UES event: its type and time,
// and the fields of drover.TextPayload, ToolUsePayload, ToolResultPayload,
// SteerPayload and PermissionAnswerPayload. Input stays raw, so it comes
// back byte for byte as the event has it.
type Part struct {
	Type    drover.EventType `json:"-"`
	Time    time.Time        `json:"-"`
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

// NewPart decodes the event seq of type typ at t with JSON js.
func NewPart(seq int64, typ drover.EventType, t time.Time, js []byte) (*Part, error) {
	p := &Part{Type: typ, Time: t}
	if err := json.Unmarshal(js, p); err != nil {
		return nil, fmt.Errorf("event %d: %w", seq, err)
	}
	return p, nil
}

// Parts reads the run's events with the given seqs (sorted, each once)
// as Parts; seqs of no event are absent from the result.
type Parts func(seqs []int64) (map[int64]*Part, error)

// Messages returns the messages of runID recorded by reference in js (the
// stored messages array, "" or nil for none), content read from the
// events.
func Messages(runID string, js []byte, parts Parts) ([]store.Message, error) {
	if len(js) == 0 {
		return nil, nil
	}
	var entries [][]int64
	if err := json.Unmarshal(js, &entries); err != nil {
		return nil, fmt.Errorf("turn refs: %w", err)
	}
	// [index, seq] is one message, [index, seq, n] n of them.
	var pairs [][2]int64
	for _, e := range entries {
		switch {
		case len(e) == 2:
			pairs = append(pairs, [2]int64{e[0], e[1]})
		case len(e) == 3 && e[2] > 0:
			for k := range e[2] {
				pairs = append(pairs, [2]int64{e[0] + k, e[1] + k})
			}
		default:
			return nil, fmt.Errorf("turn refs: message entry %v is not [index, seq] or [index, seq, n]", e)
		}
	}
	seqs := make([]int64, len(pairs))
	for i, p := range pairs {
		seqs[i] = p[1]
	}
	ps, err := parts(sortedSet(seqs))
	if err != nil {
		return nil, err
	}
	out := make([]store.Message, len(pairs))
	for i, p := range pairs {
		m := store.Message{RunID: runID, Index: int(p[0]), Seq: p[1]}
		ev := ps[m.Seq]
		switch {
		case ev == nil:
			return nil, fmt.Errorf("message %d: no event %d", m.Index, m.Seq)
		case ev.Type == drover.TypeText:
			m.Role, m.Content = "assistant", ev.Payload.Content
		case ev.Type == drover.TypeToolResult:
			m.Role, m.Content, m.ToolUseID = "tool", ev.Payload.Output, ev.Payload.ToolUseID
		case ev.Type == drover.TypeSteer:
			m.Role, m.Content = "user", ev.Payload.Message
		default:
			return nil, fmt.Errorf("message %d: event %d is a %s, not a text, tool_result or drover:steer", m.Index, m.Seq, ev.Type)
		}
		out[i] = m
	}
	return out, nil
}

// Calls returns the tool calls of runID recorded by reference in js (the
// stored tool calls array, "" or nil for none) with their order, content
// read from the events.
func Calls(runID string, js []byte, parts Parts) ([]OrdCall, error) {
	if len(js) == 0 {
		return nil, nil
	}
	var refs []callRef
	if err := json.Unmarshal(js, &refs); err != nil {
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
	ps, err := parts(sortedSet(seqs))
	if err != nil {
		return nil, err
	}
	out := make([]OrdCall, len(refs))
	for i, r := range refs {
		c := store.ToolCall{RunID: runID, Seq: r.Seq, ResultSeq: r.ResultSeq, PermissionSeq: r.PermSeq,
			ID: r.ID, Name: r.Name, Input: r.Input, Status: drover.ToolStatus(r.Status), Output: r.Output,
			StartedAt: nsTime(r.StartedAt), EndedAt: nsTime(r.EndedAt)}
		if r.Seq != 0 {
			ev := ps[r.Seq]
			if ev == nil || ev.Type != drover.TypeToolUse {
				return nil, fmt.Errorf("tool call %d: event %d is not a tool_use", r.Ord, r.Seq)
			}
			c.ID, c.Name, c.Input, c.StartedAt = ev.Payload.ToolUseID, ev.Payload.ToolName, ev.Payload.Input, ev.Time
		}
		if r.ResultSeq != 0 {
			ev := ps[r.ResultSeq]
			if ev == nil || ev.Type != drover.TypeToolResult {
				return nil, fmt.Errorf("tool call %d: event %d is not a tool_result", r.Ord, r.ResultSeq)
			}
			c.Status, c.Output, c.EndedAt = drover.ToolStatus(ev.Payload.Status), ev.Payload.Output, ev.Time
		}
		if r.PermSeq != 0 {
			ev := ps[r.PermSeq]
			if ev == nil || ev.Type != drover.TypePermissionAnswer {
				return nil, fmt.Errorf("tool call %d: event %d is not a drover:permission_answer", r.Ord, r.PermSeq)
			}
			p := ev.Payload
			c.Permission = &store.ToolPermission{RequestID: p.RequestID, Behavior: p.Behavior, Message: p.Message,
				Always: p.Always, By: p.By, Detail: p.Detail,
				AskedAt: time.UnixMilli(p.AskedAt).UTC(), AnsweredAt: time.UnixMilli(p.AnsweredAt).UTC()}
		}
		out[i] = OrdCall{r.Ord, c}
	}
	return out, nil
}

func sortedSet(seqs []int64) []int64 {
	slices.Sort(seqs)
	return slices.Compact(seqs)
}

// Source is one run's turn record as a backend stores it, read inside one
// read transaction (so that all of it is one state of the ledger).
type Source interface {
	// Messages and Calls return the entries stored as given.
	Messages() ([]store.Message, error)
	Calls() ([]OrdCall, error)
	// Refs returns the stored array of references named "messages" or
	// "tool_calls", nil when the run has none.
	Refs(name string) ([]byte, error)
	// Parts reads events of the run (see Parts).
	Parts(seqs []int64) (map[int64]*Part, error)
}

// ReadMessages returns the run's messages, those stored as given and those
// by reference, by Index.
func ReadMessages(runID string, src Source) ([]store.Message, error) {
	return read(src, src.Messages, "messages", func(js []byte) ([]store.Message, error) { return Messages(runID, js, src.Parts) },
		func(m store.Message) int { return m.Index })
}

// ReadCalls returns the run's tool calls, those stored as given and those
// by reference, in the order FinishRun was given them.
func ReadCalls(runID string, src Source) ([]store.ToolCall, error) {
	all, err := read(src, src.Calls, "tool_calls", func(js []byte) ([]OrdCall, error) { return Calls(runID, js, src.Parts) },
		func(c OrdCall) int { return c.Ord })
	if err != nil {
		return nil, err
	}
	out := make([]store.ToolCall, len(all))
	for i, c := range all {
		out[i] = c.ToolCall
	}
	return out, nil
}

// read returns the entries stored as given and those by reference in the
// array name, sorted by key.
func read[T any](src Source, given func() ([]T, error), name string, byRef func([]byte) ([]T, error), key func(T) int) ([]T, error) {
	out, err := given()
	if err != nil {
		return nil, err
	}
	js, err := src.Refs(name)
	if err != nil {
		return nil, err
	}
	refs, err := byRef(js)
	if err != nil {
		return nil, err
	}
	out = append(out, refs...)
	slices.SortFunc(out, func(a, b T) int { return cmp.Compare(key(a), key(b)) })
	return out, nil
}
