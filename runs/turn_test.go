package runs

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/store"
)

// LED-3: a run's messages are held as spans of consecutive events, so a
// streamed turn of any length is one entry of the turn record; a tool
// call between two texts ends a span; a span stops at the last durable
// event.
func TestLED3_TurnRecordSpans(t *testing.T) {
	var tr turn
	add := func(seq int64, p any) { tr.add(drover.Event{Seq: seq, Payload: p}) }
	for seq := int64(1); seq <= 100_000; seq++ {
		add(seq, drover.TextPayload{Content: "x"})
	}
	add(100_001, drover.ToolUsePayload{ToolName: "Bash", ToolUseID: "t1"})
	add(100_002, drover.ToolResultPayload{ToolName: "Bash", ToolUseID: "t1", Output: "ok"})
	add(100_003, drover.TextPayload{Content: "done"})
	add(100_004, drover.SteerPayload{Message: "more"})
	add(100_005, drover.TextPayload{Content: "more done"})
	if len(tr.msgs) != 2 {
		t.Errorf("%d spans held, want 2: %v", len(tr.msgs), tr.msgs)
	}
	msgs, calls := tr.record("r", "prompt", 100_004)
	want := []store.Message{
		{RunID: "r", Index: 0, Role: "user", Content: "prompt"},
		{RunID: "r", Index: 1, Seq: 1, Span: 100_000},
		{RunID: "r", Index: 100_001, Seq: 100_002, Span: 3}, // 100_005 is not durable
	}
	if diff := cmp.Diff(want, msgs); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	if len(calls) != 1 || calls[0].Seq != 100_001 || calls[0].ResultSeq != 100_002 {
		t.Errorf("calls %+v", calls)
	}
}
