package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/store"
)

// ues returns a UES event of run as drover records it.
func ues(t *testing.T, run string, seq int64, typ drover.EventType, payload any) store.Event {
	t.Helper()
	ts := at(time.Duration(seq) * time.Second)
	ev := drover.Event{Type: typ, Agent: "claude", Timestamp: ts.UnixMilli(), SessionID: "s", Payload: payload, RunID: run, Seq: seq}
	js, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return store.Event{RunID: run, Seq: seq, Type: typ, JSON: js, Time: ts}
}

// refEvents are the events a turn record by reference names: texts, tool
// calls and results, one result without its call, one call without result.
func refEvents(t *testing.T, run string) []store.Event {
	return []store.Event{
		ues(t, run, 1, drover.TypeText, drover.TextPayload{Content: "Creating the file."}),
		ues(t, run, 2, drover.TypeToolUse, drover.ToolUsePayload{ToolName: "Write", ToolUseID: "tu-1",
			Input: map[string]any{"file_path": "hello.txt", "content": "hi"}}),
		ues(t, run, 3, drover.TypeToolResult, drover.ToolResultPayload{ToolUseID: "tu-1", ToolName: "Write",
			Status: drover.ToolSuccess, Output: "File created"}),
		ues(t, run, 4, drover.TypeToolUse, drover.ToolUsePayload{ToolName: "Bash", ToolUseID: "tu-2",
			Input: map[string]any{"command": "ls"}}),
		ues(t, run, 5, drover.TypeToolResult, drover.ToolResultPayload{ToolUseID: "tu-2", ToolName: "Bash",
			Status: drover.ToolError, Output: "ls: permission denied\n"}),
		ues(t, run, 6, drover.TypeToolResult, drover.ToolResultPayload{ToolUseID: "tu-9", ToolName: "Read",
			Status: drover.ToolSuccess, Output: "from nowhere"}),
		ues(t, run, 7, drover.TypeText, drover.TextPayload{Content: "Done: hello.txt exists. ✓"}),
		ues(t, run, 8, drover.TypeToolUse, drover.ToolUsePayload{ToolName: "Bash", ToolUseID: "tu-3",
			Input: map[string]any{"command": "rm -rf /"}}),
		ues(t, run, 9, drover.TypeDone, drover.DonePayload{Status: drover.StatusSuccess}),
	}
}

// LED-3: messages and tool calls recorded by reference (their Seq fields)
// come back with the content of the events they name, whatever the fields
// given to FinishRun said, mixed in order with those recorded as given.
func testTurnRecordByReference(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, newRun("r1", at(0)))
	if err := s.AppendEvents(ctx, refEvents(t, "r1")); err != nil {
		t.Fatal(err)
	}
	f := store.Finish{RunID: "r1", Status: store.StatusCompleted, DoneStatus: drover.StatusSuccess, EndedAt: at(time.Minute),
		Messages: []store.Message{
			{RunID: "r1", Index: 4, Seq: 5, Span: 2}, // messages 4 and 5: events 5 and 6
			{RunID: "r1", Index: 0, Role: "user", Content: "write hello.txt, then run ls"},
			{RunID: "r1", Index: 1, Seq: 1, Role: "tool", Content: "ignored"},
			{RunID: "r1", Index: 2, Seq: 3},
			{RunID: "r1", Index: 3, Role: "assistant", Content: "given, not referenced"},
			{RunID: "r1", Index: 7, Seq: 7, Span: 1},
		},
		ToolCalls: []store.ToolCall{
			{RunID: "r1", Seq: 4, ResultSeq: 5},
			{RunID: "r1", ID: "tu-0", Name: "Task", StartedAt: at(time.Second / 2)}, // as given
			{RunID: "r1", Seq: 2, ResultSeq: 3, ID: "ignored", Output: "ignored"},
			{RunID: "r1", ResultSeq: 6, ID: "tu-9", Name: "Read", StartedAt: at(6 * time.Second)},
			{RunID: "r1", Seq: 8, Status: drover.ToolDenied}, // no result event: the rest as given
		},
	}
	if err := s.FinishRun(ctx, f); err != nil {
		t.Fatalf("FinishRun: %v", err)
	}
	wantMsgs := []store.Message{
		{RunID: "r1", Index: 0, Role: "user", Content: "write hello.txt, then run ls"},
		{RunID: "r1", Index: 1, Seq: 1, Role: "assistant", Content: "Creating the file."},
		{RunID: "r1", Index: 2, Seq: 3, Role: "tool", Content: "File created", ToolUseID: "tu-1"},
		{RunID: "r1", Index: 3, Role: "assistant", Content: "given, not referenced"},
		{RunID: "r1", Index: 4, Seq: 5, Role: "tool", Content: "ls: permission denied\n", ToolUseID: "tu-2"},
		{RunID: "r1", Index: 5, Seq: 6, Role: "tool", Content: "from nowhere", ToolUseID: "tu-9"},
		{RunID: "r1", Index: 7, Seq: 7, Role: "assistant", Content: "Done: hello.txt exists. ✓"},
	}
	ms, err := s.Messages(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantMsgs, ms, opts); diff != "" {
		t.Errorf("Messages (-want +got):\n%s", diff)
	}
	wantCalls := []store.ToolCall{
		{RunID: "r1", Seq: 4, ResultSeq: 5, ID: "tu-2", Name: "Bash", Input: json.RawMessage(`{"command":"ls"}`),
			Status: drover.ToolError, Output: "ls: permission denied\n", StartedAt: at(4 * time.Second), EndedAt: at(5 * time.Second)},
		{RunID: "r1", ID: "tu-0", Name: "Task", StartedAt: at(time.Second / 2)},
		{RunID: "r1", Seq: 2, ResultSeq: 3, ID: "tu-1", Name: "Write", Input: json.RawMessage(`{"content":"hi","file_path":"hello.txt"}`),
			Status: drover.ToolSuccess, Output: "File created", StartedAt: at(2 * time.Second), EndedAt: at(3 * time.Second)},
		{RunID: "r1", ResultSeq: 6, ID: "tu-9", Name: "Read", Status: drover.ToolSuccess, Output: "from nowhere",
			StartedAt: at(6 * time.Second), EndedAt: at(6 * time.Second)},
		{RunID: "r1", Seq: 8, ID: "tu-3", Name: "Bash", Input: json.RawMessage(`{"command":"rm -rf /"}`),
			Status: drover.ToolDenied, StartedAt: at(8 * time.Second)},
	}
	tcs, err := s.ToolCalls(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantCalls, tcs, opts); diff != "" {
		t.Errorf("ToolCalls (-want +got):\n%s", diff)
	}
}

// LED-3: a reference past the run's last event is ErrConflict and nothing
// is written; a reference to an event of the wrong type makes reading the
// turn record fail.
func testTurnRecordBadReference(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, newRun("r1", at(0)))
	if err := s.AppendEvents(ctx, refEvents(t, "r1")); err != nil {
		t.Fatal(err)
	}
	before := mustGet(t, s, "r1")
	for _, f := range []store.Finish{
		{Messages: []store.Message{{Index: 1, Seq: 10}}},
		{ToolCalls: []store.ToolCall{{Seq: 2, ResultSeq: 10}}},
		{ToolCalls: []store.ToolCall{{Seq: 10}}},
		{Messages: []store.Message{{Index: 0, Role: "user", Content: "p"}, {Index: 1, Seq: 1}, {Index: 0, Seq: 3}}}, // one Index twice
		{Messages: []store.Message{{Index: 1, Seq: 5, Span: 6}}},                                                    // a span past the last event
		{Messages: []store.Message{{Index: 1, Seq: 1, Span: 3}, {Index: 3, Seq: 5}}},                                // index 3 in a span and on its own
		{Messages: []store.Message{{Index: 5, Seq: 5}, {Index: 1, Seq: 1, Span: 5}}},                                // the same, out of order
		{Messages: []store.Message{{Index: 1, Role: "assistant", Content: "x", Span: 2}}},                           // a span without a reference
		{Messages: []store.Message{{Index: 1, Seq: 1, Span: -1}}},
	} {
		f.RunID, f.Status, f.EndedAt = "r1", store.StatusCompleted, at(time.Minute)
		wantErr(t, "FinishRun with a bad reference", s.FinishRun(ctx, f), store.ErrConflict)
		if diff := cmp.Diff(before, mustGet(t, s, "r1"), opts); diff != "" {
			t.Fatalf("failed FinishRun changed the run (-before +after):\n%s", diff)
		}
		if ms, _ := s.Messages(ctx, "r1"); len(ms) != 0 {
			t.Fatalf("failed FinishRun left %d messages", len(ms))
		}
		if tcs, _ := s.ToolCalls(ctx, "r1"); len(tcs) != 0 {
			t.Fatalf("failed FinishRun left %d tool calls", len(tcs))
		}
	}

	mustCreate(t, s, newRun("r2", at(time.Second)))
	if err := s.AppendEvents(ctx, refEvents(t, "r2")); err != nil {
		t.Fatal(err)
	}
	err := s.FinishRun(ctx, store.Finish{RunID: "r2", Status: store.StatusCompleted, EndedAt: at(time.Minute),
		Messages:  []store.Message{{Index: 1, Seq: 2}},       // a tool_use is no message
		ToolCalls: []store.ToolCall{{Seq: 1, ResultSeq: 3}}}) // a text is no tool_use
	if err != nil {
		t.Fatalf("FinishRun: %v", err)
	}
	if ms, err := s.Messages(ctx, "r2"); err == nil {
		t.Errorf("Messages with a reference to a tool_use = %+v, want an error", ms)
	}
	if tcs, err := s.ToolCalls(ctx, "r2"); err == nil {
		t.Errorf("ToolCalls with a reference to a text = %+v, want an error", tcs)
	}
}

// LED-3, CTL-1: a tool call's permission answer and a steering message are
// part of the turn record by reference: who answered, how and when, and
// the user message sent into the live run.
func testTurnRecordControl(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, newRun("r1", at(0)))
	// The answer event keeps Unix milliseconds.
	asked, answered := at(2*time.Second).Truncate(time.Millisecond), at(3*time.Second).Truncate(time.Millisecond)
	evs := []store.Event{
		ues(t, "r1", 1, drover.TypeToolUse, drover.ToolUsePayload{ToolName: "Bash", ToolUseID: "tu-1", Input: map[string]any{"command": "make"}}),
		ues(t, "r1", 2, drover.TypePermissionRequest, drover.PermissionRequestPayload{RequestID: "q1", ToolName: "Bash", ToolUseID: "tu-1",
			Input: map[string]any{"command": "make"}}),
		ues(t, "r1", 3, drover.TypePermissionAnswer, drover.PermissionAnswerPayload{RequestID: "q1", ToolName: "Bash", ToolUseID: "tu-1",
			PermissionDecision: drover.PermissionDecision{Behavior: drover.Allow, Always: true}, By: drover.ByClient, Detail: "dashboard",
			AskedAt: asked.UnixMilli(), AnsweredAt: answered.UnixMilli()}),
		ues(t, "r1", 4, drover.TypeToolResult, drover.ToolResultPayload{ToolUseID: "tu-1", ToolName: "Bash", Status: drover.ToolSuccess, Output: "ok"}),
		ues(t, "r1", 5, drover.TypeSteer, drover.SteerPayload{Message: "also run the linter", By: "http"}),
		ues(t, "r1", 6, drover.TypePermissionAnswer, drover.PermissionAnswerPayload{RequestID: "q2", ToolName: "Bash", ToolUseID: "tu-2",
			PermissionDecision: drover.PermissionDecision{Behavior: drover.Deny, Message: "denied: no answer within 5m0s"}, By: drover.ByDeadline,
			AskedAt: asked.UnixMilli(), AnsweredAt: answered.UnixMilli()}),
	}
	if err := s.AppendEvents(ctx, evs); err != nil {
		t.Fatal(err)
	}
	f := store.Finish{RunID: "r1", Status: store.StatusCompleted, DoneStatus: drover.StatusSuccess, EndedAt: at(time.Minute),
		Messages: []store.Message{{RunID: "r1", Index: 0, Role: "user", Content: "build it"}, {RunID: "r1", Index: 1, Seq: 4}, {RunID: "r1", Index: 2, Seq: 5}},
		ToolCalls: []store.ToolCall{
			{RunID: "r1", Seq: 1, ResultSeq: 4, PermissionSeq: 3},
			{RunID: "r1", PermissionSeq: 6, ID: "tu-2", Name: "Bash", Input: json.RawMessage(`{"command":"rm -rf build"}`),
				Status: drover.ToolDenied, StartedAt: asked},
		},
	}
	if err := s.FinishRun(ctx, f); err != nil {
		t.Fatalf("FinishRun: %v", err)
	}
	ms, err := s.Messages(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 3 || ms[2].Role != "user" || ms[2].Content != "also run the linter" || ms[2].Seq != 5 {
		t.Fatalf("messages %+v: want the steering message as a user message", ms)
	}
	tcs, err := s.ToolCalls(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	want := []store.ToolCall{
		{RunID: "r1", Seq: 1, ResultSeq: 4, PermissionSeq: 3, ID: "tu-1", Name: "Bash", Input: json.RawMessage(`{"command":"make"}`),
			Status: drover.ToolSuccess, Output: "ok", StartedAt: at(time.Second), EndedAt: at(4 * time.Second),
			Permission: &store.ToolPermission{RequestID: "q1", Behavior: drover.Allow, Always: true, By: drover.ByClient, Detail: "dashboard",
				AskedAt: asked, AnsweredAt: answered}},
		{RunID: "r1", PermissionSeq: 6, ID: "tu-2", Name: "Bash", Input: json.RawMessage(`{"command":"rm -rf build"}`),
			Status: drover.ToolDenied, StartedAt: asked,
			Permission: &store.ToolPermission{RequestID: "q2", Behavior: drover.Deny, Message: "denied: no answer within 5m0s",
				By: drover.ByDeadline, AskedAt: asked, AnsweredAt: answered}},
	}
	if diff := cmp.Diff(want, tcs, opts); diff != "" {
		t.Errorf("ToolCalls (-want +got):\n%s", diff)
	}
	// A permission reference to an event of another type fails the read.
	mustCreate(t, s, newRun("r2", at(0)))
	if err := s.AppendEvents(ctx, refEvents(t, "r2")); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishRun(ctx, store.Finish{RunID: "r2", Status: store.StatusCompleted, EndedAt: at(time.Minute),
		ToolCalls: []store.ToolCall{{RunID: "r2", Seq: 2, PermissionSeq: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ToolCalls(ctx, "r2"); err == nil {
		t.Fatal("a permission reference to a text event read back")
	}
}
