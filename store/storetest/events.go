package storetest

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/store"
)

// LED-2: every event is stored with its run id and seq, in order, and can
// be read after any seq.
func testEvents(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, newRun("r1", at(0)))
	mustCreate(t, s, newRun("r2", at(time.Second)))

	if err := s.AppendEvents(ctx, nil); err != nil {
		t.Fatalf("AppendEvents(nil): %v", err)
	}
	if err := s.AppendEvents(ctx, events("r1", 1, 3)); err != nil {
		t.Fatalf("AppendEvents: %v", err)
	}
	// One batch may interleave runs, each continuing its own seq.
	mixed := []store.Event{event("r2", 1), event("r1", 4), event("r2", 2), event("r1", 5)}
	// An extension event keeps its type and raw payload.
	ext := store.Event{RunID: "r2", Seq: 3, Type: "claude:compact", Time: at(time.Minute),
		JSON: json.RawMessage(`{"type":"claude:compact","agent":"claude","timestamp":1,"sessionId":"s","payload":{"x": [1, 2.50, "é\u00e9"]},"runId":"r2","seq":3}`)}
	mixed = append(mixed, ext)
	if err := s.AppendEvents(ctx, mixed); err != nil {
		t.Fatalf("AppendEvents mixed: %v", err)
	}
	all1 := events("r1", 1, 5)
	all2 := append(events("r2", 1, 2), ext)

	for _, tc := range []struct {
		run   string
		after int64
		limit int
		want  []store.Event
	}{
		{"r1", 0, 0, all1},
		{"r2", 0, 0, all2},
		{"r1", 2, 0, all1[2:]},
		{"r1", 0, 2, all1[:2]},
		{"r1", 1, 3, all1[1:4]},
		{"r1", 4, 10, all1[4:]},
		{"r1", 5, 0, nil},
		{"r1", 99, 0, nil},
		{"r1", -1, 0, all1},
		{"nope", 0, 0, nil},
	} {
		got, err := s.Events(ctx, tc.run, tc.after, tc.limit)
		if err != nil {
			t.Fatalf("Events(%s, %d, %d): %v", tc.run, tc.after, tc.limit, err)
		}
		checkEvents(t, got, tc.want)
	}
	if r := mustGet(t, s, "r1"); r.LastSeq != 5 {
		t.Errorf("r1 LastSeq = %d, want 5", r.LastSeq)
	}
	if r := mustGet(t, s, "r2"); r.LastSeq != 3 {
		t.Errorf("r2 LastSeq = %d, want 3", r.LastSeq)
	}
}

// LED-2: seqs continue the run's last seq; a gap, a duplicate or an unknown
// run fails the whole batch and writes nothing of it.
func testSeqContinuity(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, newRun("r1", at(0)))
	mustCreate(t, s, newRun("r2", at(time.Second)))
	if err := s.AppendEvents(ctx, events("r1", 1, 3)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		batch []store.Event
		want  error
	}{
		{"gap", []store.Event{event("r1", 5)}, store.ErrConflict},
		{"gap after good", []store.Event{event("r1", 4), event("r1", 6)}, store.ErrConflict},
		{"duplicate", []store.Event{event("r1", 3)}, store.ErrConflict},
		{"duplicate in batch", []store.Event{event("r1", 4), event("r1", 4)}, store.ErrConflict},
		{"out of order", []store.Event{event("r1", 5), event("r1", 4)}, store.ErrConflict},
		{"restart at 1", []store.Event{event("r1", 1)}, store.ErrConflict},
		{"seq 0", []store.Event{event("r2", 0)}, store.ErrConflict},
		{"first not 1", []store.Event{event("r2", 2)}, store.ErrConflict},
		{"other run conflicts", []store.Event{event("r2", 1), event("r2", 2), event("r1", 9)}, store.ErrConflict},
		{"unknown run", []store.Event{event("r2", 1), event("nope", 1)}, store.ErrNotFound},
	} {
		wantErr(t, "AppendEvents "+tc.name, s.AppendEvents(ctx, tc.batch), tc.want)
		got1, err := s.Events(ctx, "r1", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		checkEvents(t, got1, events("r1", 1, 3))
		got2, err := s.Events(ctx, "r2", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got2) != 0 {
			t.Fatalf("%s: r2 has events %v after a failed batch", tc.name, seqs(got2))
		}
		if r := mustGet(t, s, "r1"); r.LastSeq != 3 {
			t.Fatalf("%s: r1 LastSeq = %d after a failed batch, want 3", tc.name, r.LastSeq)
		}
		if r := mustGet(t, s, "r2"); r.LastSeq != 0 {
			t.Fatalf("%s: r2 LastSeq = %d after a failed batch, want 0", tc.name, r.LastSeq)
		}
	}
	// The run goes on from where it was.
	if err := s.AppendEvents(ctx, events("r1", 4, 4)); err != nil {
		t.Fatalf("AppendEvents after conflicts: %v", err)
	}
}

// turnRecord is a finished run's full record.
func turnRecord(run string) store.Finish {
	return store.Finish{
		RunID: run, Status: store.StatusCompleted, DoneStatus: drover.StatusSuccess, ResumeToken: "resume-" + run,
		Usage: drover.Usage{InputTokens: 1200, OutputTokens: 340, ToolUses: 2, TotalCostUSD: ptr(0.0123),
			CacheReadTokens: ptr(int64(800)), CacheWriteTokens: ptr(int64(0)), ReasoningTokens: ptr(int64(55)), Turns: ptr(int64(3))},
		DurationMs: 4321, EndedAt: at(10 * time.Second),
		Messages: []store.Message{
			{RunID: run, Index: 0, Role: "user", Content: "write hello.txt, then run ls"},
			{RunID: run, Index: 1, Role: "assistant", Content: "Creating the file."},
			{RunID: run, Index: 2, Role: "tool", Content: "File created", ToolUseID: "tu-1"},
			{RunID: run, Index: 3, Role: "tool", Content: "hello.txt\n", ToolUseID: "tu-2"},
			{RunID: run, Index: 4, Role: "assistant", Content: "Done: hello.txt exists."},
		},
		ToolCalls: []store.ToolCall{
			{RunID: run, ID: "tu-2", Name: "Bash", Input: json.RawMessage(`{"command":"ls"}`), Status: drover.ToolSuccess,
				Output: "hello.txt\n", StartedAt: at(3 * time.Second), EndedAt: at(4 * time.Second)},
			{RunID: run, ID: "tu-1", Name: "Write", Input: json.RawMessage(`{"file_path":"hello.txt","content":"hi"}`),
				Status: drover.ToolSuccess, Output: "File created", StartedAt: at(time.Second), EndedAt: at(2 * time.Second)},
			{RunID: run, ID: "tu-3", Name: "Bash", Input: json.RawMessage(`{"command":"rm -rf /"}`), Status: drover.ToolDenied,
				StartedAt: at(5 * time.Second)}, // never ended
			{RunID: run, ID: "tu-4", Name: "Task", StartedAt: at(6 * time.Second)}, // no input, no status
		},
	}
}

// LED-3: one FinishRun records status, usage, duration, messages and tool
// calls, read back as written (messages by Index, tool calls as given).
func testTurnRecord(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, newRun("r1", at(0)))
	if err := s.StartRun(ctx, "r1", 10, 10, at(time.Second)); err != nil {
		t.Fatal(err)
	}
	f := turnRecord("r1")
	// Messages are given out of order; they come back by Index.
	f.Messages[1], f.Messages[3] = f.Messages[3], f.Messages[1]
	if err := s.FinishRun(ctx, f); err != nil {
		t.Fatalf("FinishRun: %v", err)
	}
	want := turnRecord("r1")
	r := mustGet(t, s, "r1")
	if r.Status != want.Status || r.DoneStatus != want.DoneStatus || r.ResumeToken != want.ResumeToken ||
		r.DurationMs != want.DurationMs || !r.EndedAt.Equal(want.EndedAt) {
		t.Errorf("run after FinishRun: %+v", r)
	}
	if diff := cmp.Diff(want.Usage, r.Usage, opts); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	ms, err := s.Messages(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want.Messages, ms, opts); diff != "" {
		t.Errorf("Messages (-want +got):\n%s", diff)
	}
	tcs, err := s.ToolCalls(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want.ToolCalls, tcs, opts); diff != "" {
		t.Errorf("ToolCalls (-want +got):\n%s", diff)
	}
	for _, id := range []string{"nope"} {
		if ms, err := s.Messages(ctx, id); err != nil || len(ms) != 0 {
			t.Errorf("Messages(unknown) = %v, %v; want none", ms, err)
		}
		if tcs, err := s.ToolCalls(ctx, id); err != nil || len(tcs) != 0 {
			t.Errorf("ToolCalls(unknown) = %v, %v; want none", tcs, err)
		}
	}
}

// LED-3: the turn record is one transaction: a FinishRun that fails part
// way (two messages with one Index) leaves the run as it was.
func testFinishAtomic(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, newRun("r1", at(0)))
	if err := s.StartRun(ctx, "r1", 10, 10, at(time.Second)); err != nil {
		t.Fatal(err)
	}
	before := mustGet(t, s, "r1")
	f := turnRecord("r1")
	f.Messages = append(f.Messages, store.Message{RunID: "r1", Index: 2, Role: "assistant", Content: "again"})
	if err := s.FinishRun(ctx, f); err == nil {
		t.Fatal("FinishRun with a duplicate message index succeeded")
	}
	if diff := cmp.Diff(before, mustGet(t, s, "r1"), opts); diff != "" {
		t.Errorf("failed FinishRun changed the run (-before +after):\n%s", diff)
	}
	if ms, _ := s.Messages(ctx, "r1"); len(ms) != 0 {
		t.Errorf("failed FinishRun left %d messages", len(ms))
	}
	if tcs, _ := s.ToolCalls(ctx, "r1"); len(tcs) != 0 {
		t.Errorf("failed FinishRun left %d tool calls", len(tcs))
	}
	// The run can still be finished properly.
	if err := s.FinishRun(ctx, turnRecord("r1")); err != nil {
		t.Fatalf("FinishRun after a failed one: %v", err)
	}
	if ms, _ := s.Messages(ctx, "r1"); len(ms) != len(turnRecord("r1").Messages) {
		t.Errorf("got %d messages, want %d", len(ms), len(turnRecord("r1").Messages))
	}
}

// LED-3 with drover.Usage: optional fields the vendor did not report stay
// nil — never an invented zero — and a reported zero stays zero.
func testUsageOptional(t *testing.T, s store.Store) {
	ctx := t.Context()
	for i, u := range []drover.Usage{
		{InputTokens: 5, OutputTokens: 6}, // nothing optional
		{TotalCostUSD: ptr(0.0), CacheReadTokens: ptr(int64(0)), CacheWriteTokens: ptr(int64(0)),
			ReasoningTokens: ptr(int64(0)), Turns: ptr(int64(0))}, // all reported as zero
		{ToolUses: 3, TotalCostUSD: ptr(1.5), Turns: ptr(int64(2))}, // some
	} {
		id := string(rune('a' + i))
		mustCreate(t, s, newRun(id, at(time.Duration(i)*time.Second)))
		if err := s.FinishRun(ctx, store.Finish{RunID: id, Status: store.StatusCompleted, Usage: u, EndedAt: at(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		got := mustGet(t, s, id).Usage
		if diff := cmp.Diff(u, got); diff != "" { // exact: nil ≠ pointer to 0
			t.Errorf("usage %d (-want +got):\n%s", i, diff)
		}
		listed, err := s.ListRuns(ctx, store.RunFilter{Limit: 1})
		if err != nil || len(listed) != 1 {
			t.Fatalf("ListRuns: %v %v", ids(listed), err)
		}
		if diff := cmp.Diff(u, listed[0].Usage); diff != "" {
			t.Errorf("listed usage %d (-want +got):\n%s", i, diff)
		}
	}
	// A run that has not ended reports no optional usage either.
	mustCreate(t, s, newRun("live", at(time.Hour)))
	if u := mustGet(t, s, "live").Usage; !slices.Equal([]any{u.TotalCostUSD, u.CacheReadTokens, u.CacheWriteTokens, u.ReasoningTokens, u.Turns},
		[]any{(*float64)(nil), (*int64)(nil), (*int64)(nil), (*int64)(nil), (*int64)(nil)}) {
		t.Errorf("live run usage = %+v, want optional fields nil", u)
	}
}
