package runs

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/store"
)

// turn folds a run's events, as they are recorded, into its turn record
// (LED-3) by reference: each message and tool call names the seqs of the
// events holding its content, which the ledger already has, so finishing
// a run copies no text or tool output (store.Message.Seq). It follows
// engine.Collect: a text is an assistant message; a tool_result is a tool
// message and ends the latest call with its tool use id, or is a call of
// its own when no tool_use announced it. A steering message is a user
// message; a permission answer is part of its call (a call of its own when
// no tool_use announced it).
//
// Only error and done events are kept (for engine.Collect, whose status,
// usage and error come from those alone), so a run does not hold all its
// events in memory until it ends.
type turn struct {
	msgs    []seqSpan // the messages after the prompt, as runs of consecutive seqs
	calls   []callSeqs
	orphans map[int]store.ToolCall                     // calls known only from their result or answer, by index in calls
	open    map[string]int                             // tool use id → index in calls
	asked   map[string]drover.PermissionRequestPayload // permission requests by tool use id
	ends    []drover.Event                             // error and done events
	allowed int                                        // permission requests allowed
}

// denied counts the tool calls denied: by their permission's answer or
// by their result.
func (t *turn) denied() int {
	n := 0
	for _, c := range t.calls {
		if c.denied || c.refused {
			n++
		}
	}
	return n
}

// seqSpan is n messages read from the events seq, seq+1, …: a streamed
// turn's texts follow one another, so a run of a million messages is
// held as one span, not a million seqs.
type seqSpan struct{ seq, n int64 }

// message adds the message of the event seq.
func (t *turn) message(seq int64) {
	if n := len(t.msgs); n > 0 && t.msgs[n-1].seq+t.msgs[n-1].n == seq {
		t.msgs[n-1].n++
		return
	}
	t.msgs = append(t.msgs, seqSpan{seq, 1})
}

// callSeqs are the seqs of a tool call's tool_use, tool_result and
// drover:permission_answer events (0 when none).
type callSeqs struct {
	use, result, perm int64
	denied            bool // its permission request was denied
	refused           bool // its result says denied (the vendor's own refusal too)
}

func (t *turn) add(ev drover.Event) {
	switch p := ev.Payload.(type) {
	case drover.TextPayload:
		t.message(ev.Seq)
	case drover.ToolUsePayload:
		if t.open == nil {
			t.open = map[string]int{}
		}
		t.open[p.ToolUseID] = len(t.calls)
		t.calls = append(t.calls, callSeqs{use: ev.Seq})
	case drover.ToolResultPayload:
		t.message(ev.Seq)
		i := t.call(p.ToolUseID, p.ToolName, ev)
		t.calls[i].result, t.calls[i].refused = ev.Seq, p.Status == drover.ToolDenied
	case drover.SteerPayload:
		t.message(ev.Seq)
	case drover.PermissionRequestPayload:
		if t.asked == nil {
			t.asked = map[string]drover.PermissionRequestPayload{}
		}
		t.asked[p.ToolUseID] = p
	case drover.PermissionAnswerPayload:
		i := t.call(p.ToolUseID, p.ToolName, ev)
		t.calls[i].perm, t.calls[i].denied = ev.Seq, p.Behavior == drover.Deny
		if p.Behavior == drover.Allow {
			t.allowed++
		}
	case drover.ErrorPayload, drover.DonePayload:
		t.ends = append(t.ends, ev)
	}
}

// call returns the index of the latest call with toolUseID, making one
// known only from ev (a result or an answer) when no tool_use announced it.
func (t *turn) call(toolUseID, name string, ev drover.Event) int {
	if i, ok := t.open[toolUseID]; ok {
		return i
	}
	if t.open == nil {
		t.open = map[string]int{}
	}
	if t.orphans == nil {
		t.orphans = map[int]store.ToolCall{}
	}
	i := len(t.calls)
	t.open[toolUseID] = i
	// Input "null", as encoding the call's absent input gives, unless the
	// call's permission request showed it.
	input := json.RawMessage("null")
	if req, ok := t.asked[toolUseID]; ok {
		if b, err := json.Marshal(req.Input); err == nil {
			input = b
		}
	}
	t.orphans[i] = store.ToolCall{ID: toolUseID, Name: name, Input: input, StartedAt: time.UnixMilli(ev.Timestamp)}
	t.calls = append(t.calls, callSeqs{})
	return i
}

// result is engine.Collect's view of the run's end (status, usage, error).
func (t *turn) result() *engine.Result {
	return engine.Collect(slices.Values(t.ends))
}

// record returns the turn record: the prompt, then the messages and tool
// calls whose events the ledger has (seq ≤ durable). Events past durable
// were never recorded (the ledger failed), so nothing may refer to them.
func (t *turn) record(runID, prompt string, durable int64) ([]store.Message, []store.ToolCall) {
	msgs := make([]store.Message, 0, 1+len(t.msgs))
	msgs = append(msgs, store.Message{RunID: runID, Index: 0, Role: "user", Content: prompt})
	next := 1
	for _, s := range t.msgs {
		if n := min(s.n, durable-s.seq+1); n > 0 {
			msgs = append(msgs, store.Message{RunID: runID, Index: next, Seq: s.seq, Span: int(n)})
			next += int(n)
		}
	}
	calls := make([]store.ToolCall, 0, len(t.calls))
	for i, cs := range t.calls {
		if cs.use > durable {
			continue
		}
		c := t.orphans[i] // zero but for a call known only from its result or answer
		c.RunID, c.Seq, c.ResultSeq, c.PermissionSeq = runID, cs.use, cs.result, cs.perm
		if c.ResultSeq > durable {
			c.ResultSeq = 0
		}
		if c.ResultSeq == 0 && cs.denied {
			c.Status = drover.ToolDenied // denied before it ran: no result may follow
		}
		if c.PermissionSeq > durable {
			c.PermissionSeq = 0
		}
		if c.Seq == 0 && c.ResultSeq == 0 && c.PermissionSeq == 0 {
			continue // known only from events the ledger lacks
		}
		calls = append(calls, c)
	}
	return msgs, calls
}
