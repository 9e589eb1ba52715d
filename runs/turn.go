package runs

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/store"
)

// turn folds a run's events, as they are recorded, into its turn record
// (LED-3) by reference: each message and tool call names the seqs of the
// events holding its content, which the ledger already has, so finishing
// a run copies no text or tool output (store.Message.Seq). It follows
// drover.Collect: a text is an assistant message; a tool_result is a tool
// message and ends the latest call with its tool use id, or is a call of
// its own when no tool_use announced it.
//
// Only error and done events are kept (for drover.Collect, whose status,
// usage and error come from those alone), so a run does not hold all its
// events in memory until it ends.
type turn struct {
	msgs    []int64 // seqs of the messages after the prompt
	calls   []callSeqs
	orphans map[int]store.ToolCall // calls known only from their result, by index in calls
	open    map[string]int         // tool use id → index in calls
	ends    []drover.Event         // error and done events
}

// callSeqs are the seqs of a tool call's tool_use and tool_result events
// (0 when none).
type callSeqs struct{ use, result int64 }

func (t *turn) add(ev drover.Event) {
	switch p := ev.Payload.(type) {
	case drover.TextPayload:
		t.msgs = append(t.msgs, ev.Seq)
	case drover.ToolUsePayload:
		if t.open == nil {
			t.open = map[string]int{}
		}
		t.open[p.ToolUseID] = len(t.calls)
		t.calls = append(t.calls, callSeqs{use: ev.Seq})
	case drover.ToolResultPayload:
		t.msgs = append(t.msgs, ev.Seq)
		i, ok := t.open[p.ToolUseID]
		if !ok {
			if t.open == nil {
				t.open = map[string]int{}
			}
			if t.orphans == nil {
				t.orphans = map[int]store.ToolCall{}
			}
			i = len(t.calls)
			t.open[p.ToolUseID] = i
			// Input "null", as encoding the call's absent input gives.
			t.orphans[i] = store.ToolCall{ID: p.ToolUseID, Name: p.ToolName, Input: json.RawMessage("null"),
				StartedAt: time.UnixMilli(ev.Timestamp)}
			t.calls = append(t.calls, callSeqs{})
		}
		t.calls[i].result = ev.Seq
	case drover.ErrorPayload, drover.DonePayload:
		t.ends = append(t.ends, ev)
	}
}

// result is drover.Collect's view of the run's end (status, usage, error).
func (t *turn) result() *drover.Result {
	return drover.Collect(slices.Values(t.ends))
}

// record returns the turn record: the prompt, then the messages and tool
// calls whose events the ledger has (seq ≤ durable). Events past durable
// were never recorded (the ledger failed), so nothing may refer to them.
func (t *turn) record(runID, prompt string, durable int64) ([]store.Message, []store.ToolCall) {
	msgs := make([]store.Message, 0, 1+len(t.msgs))
	msgs = append(msgs, store.Message{RunID: runID, Index: 0, Role: "user", Content: prompt})
	for _, seq := range t.msgs {
		if seq <= durable {
			msgs = append(msgs, store.Message{RunID: runID, Index: len(msgs), Seq: seq})
		}
	}
	calls := make([]store.ToolCall, 0, len(t.calls))
	for i, cs := range t.calls {
		if cs.use > durable {
			continue
		}
		c := t.orphans[i] // zero but for a call known only from its result
		c.RunID, c.Seq, c.ResultSeq = runID, cs.use, cs.result
		if c.ResultSeq > durable {
			c.ResultSeq = 0
		}
		if c.Seq == 0 && c.ResultSeq == 0 {
			continue // known only from a result the ledger lacks
		}
		calls = append(calls, c)
	}
	return msgs, calls
}
