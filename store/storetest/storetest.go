// Package storetest is the contract suite of [store.Store] (LED-6): every
// ledger backend — SQLite, PostgreSQL — runs the same tests, so the engine
// can use any of them unchanged.
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store {
//			s, err := mybackend.Open(...) // a new, empty ledger
//			if err != nil {
//				t.Fatal(err)
//			}
//			return s
//		})
//	}
//
// Times the suite writes are whole microseconds, so a backend must keep at
// least microsecond precision; times compare with time.Time.Equal, so any
// location may come back. JSON the suite stores as options or tool input
// compares as JSON values (a backend may reformat it); event JSON must come
// back byte for byte.
//
// Besides the doc comments of store.Store, the suite pins these behaviours
// (a backend must agree so callers can rely on them):
//   - AppendEvents for a run that does not exist is ErrNotFound, and a seq
//     ≤ 0 or out of order within one batch is ErrConflict.
//   - FinishRun is allowed from pending as well as running; StartRun of a
//     running run replaces its process ids, of an ended run is
//     ErrConflict.
//   - Events, Messages, ToolCalls and Children of an unknown run are empty,
//     not an error.
//   - Optional usage fields that are nil stay nil; a pointer to zero stays
//     a pointer to zero.
//   - CreateRun gives a run with a zero CreatedAt the current time.
//   - A FinishRun that fails part way (two messages with one Index) is an
//     error and writes nothing.
//   - A message or tool call recorded by reference reads back with its
//     Seq fields and the event's content; its other fields given to
//     FinishRun are ignored.
//   - Events and EventsAfter give each event the same Cursor; a follower
//     of EventsAfter with concurrent writers sees every event once.
//   - AdvanceSession from a session with no head adds nothing to Heads, and
//     concurrent advances are never lost.
//   - RecordChange of a run that has ended is allowed; a change's patch
//     comes back byte for byte (it need not be UTF-8), and its files, when
//     none were given, as an empty list.
package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/store"
)

// Run runs the contract suite. newStore must return a new, empty store each
// time it is called; the suite closes every store it gets (newStore may
// register t.Cleanup for whatever else it made, such as a file).
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"RUN1_CreateAndGet", testCreateAndGet},
		{"RUN1_Lifecycle", testLifecycle},
		{"RUN1_FinishFromPending", testFinishFromPending},
		{"RUN3_RequestCancel", testRequestCancel},
		{"CTL1_Controls", testControls},
		{"CTL1_ControlsTakenOnce", testControlsTakenOnce},
		{"LED5_ListRuns", testListRuns},
		{"LED5_Children", testChildren},
		{"LED2_Events", testEvents},
		{"LED2_SeqContinuity", testSeqContinuity},
		{"LED2_EventsAfter", testEventsAfter},
		{"LED2_EventsAfterFollow", testEventsAfterFollow},
		{"LED3_TurnRecord", testTurnRecord},
		{"LED3_FinishAtomic", testFinishAtomic},
		{"LED3_TurnRecordByReference", testTurnRecordByReference},
		{"LED3_TurnRecordControl", testTurnRecordControl},
		{"LED3_TurnRecordBadReference", testTurnRecordBadReference},
		{"LED3_UsageOptionalNil", testUsageOptional},
		{"LED4_Sessions", testSessions},
		{"LED4_ListSessions", testListSessions},
		{"LED3_FinishAdvancesSession", testFinishAdvancesSession},
		{"RUN6_Unfinished", testUnfinished},
		{"FAIL1_Cooldowns", testCooldowns},
		{"WS2_ChangeRoundTrip", testChangeRoundTrip},
		{"WS2_RecordChangeReplaces", testRecordChangeReplaces},
		{"WS3_DecideChange", testDecideChange},
		{"WS3_DecideChangeConflict", testDecideChangeConflict},
		{"WS3_ListChanges", testListChanges},
		{"WS3_DecideChangeOnce", testDecideChangeOnce},
		{"Concurrency", testConcurrency},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tc.fn(t, s)
		})
	}
	t.Run("Close", func(t *testing.T) { testClose(t, newStore(t)) })
}

// base is the suite's clock: whole microseconds, UTC.
var base = time.Date(2026, 3, 14, 15, 9, 26, 535897000, time.UTC)

func at(d time.Duration) time.Time { return base.Add(d) }

// opts compares store values: times by instant, JSON (other than event
// JSON, checked separately) by value, empty and nil slices alike.
var opts = cmp.Options{
	cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) }),
	cmp.Comparer(jsonEqual),
	cmp.FilterPath(func(p cmp.Path) bool { return p.Last().Type() != reflect.TypeFor[json.RawMessage]() },
		cmpopts.EquateEmpty()),
}

func jsonEqual(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(x, y)
}

func ptr[T any](v T) *T { return &v }

// newRun returns a pending run with every field a caller sets at creation.
func newRun(id string, created time.Time) *store.Run {
	return &store.Run{
		ID: id, Agent: "claude", Prompt: "write hello.txt, then run ls",
		Status:    store.StatusPending,
		Options:   json.RawMessage(`{"model":"sonnet","maxTurns":3}`),
		Timeout:   90 * time.Second,
		Owner:     "host:1234",
		CreatedAt: created,
	}
}

func mustCreate(t *testing.T, s store.Store, r *store.Run) {
	t.Helper()
	if err := s.CreateRun(t.Context(), r); err != nil {
		t.Fatalf("CreateRun(%s): %v", r.ID, err)
	}
}

func mustGet(t *testing.T, s store.Store, id string) *store.Run {
	t.Helper()
	r, err := s.GetRun(t.Context(), id)
	if err != nil {
		t.Fatalf("GetRun(%s): %v", id, err)
	}
	return r
}

// event returns the seq-th event of run, its JSON shaped like drover's
// (about 300 bytes).
func event(run string, seq int64) store.Event {
	ts := at(time.Duration(seq) * time.Millisecond)
	js := fmt.Sprintf(`{"type":"text","agent":"claude","timestamp":%d,"sessionId":"5f0c4b1e-3a43-4c1e-9d5e-0a6f2b8e7c11",`+
		`"payload":{"content":"Event %d of %s: I'll create hello.txt with the requested content and then list the directory."},`+
		`"metadata":{"vendor":"claude"},"runId":%q,"seq":%d}`, ts.UnixMilli(), seq, run, run, seq)
	return store.Event{RunID: run, Seq: seq, Type: drover.TypeText, JSON: json.RawMessage(js), Time: ts}
}

func events(run string, from, to int64) []store.Event {
	var evs []store.Event
	for seq := from; seq <= to; seq++ {
		evs = append(evs, event(run, seq))
	}
	return evs
}

// checkEvents compares got with want, event JSON byte for byte.
func checkEvents(t *testing.T, got, want []store.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d events %v, want %d %v", len(got), seqs(got), len(want), seqs(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.RunID != w.RunID || g.Seq != w.Seq || g.Type != w.Type || !g.Time.Equal(w.Time) || !bytes.Equal(g.JSON, w.JSON) {
			t.Fatalf("event %d:\n got %s/%d %s %v %s\nwant %s/%d %s %v %s", i,
				g.RunID, g.Seq, g.Type, g.Time, g.JSON, w.RunID, w.Seq, w.Type, w.Time, w.JSON)
		}
	}
}

func seqs(evs []store.Event) []int64 {
	out := make([]int64, len(evs))
	for i, ev := range evs {
		out[i] = ev.Seq
	}
	return out
}

func ids(rs []store.Run) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}

func testClose(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, newRun("r1", at(0)))
	if err := s.AppendEvents(ctx, events("r1", 1, 3)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}
