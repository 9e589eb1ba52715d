package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/store"
)

// RUN-1: a run is recorded with every field and read back as written.
func testCreateAndGet(t *testing.T, s store.Store) {
	ctx := t.Context()
	full := &store.Run{
		ID: "r-full", Agent: "codex", Prompt: "fix the tests", Status: store.StatusRunning,
		Error: "", ParentID: "r-parent", SessionID: "sess-1", ResumeToken: "tok-0",
		Options: json.RawMessage(`{"cwd":"/tmp/x","permissionMode":"acceptEdits"}`),
		Timeout: 5 * time.Minute, Owner: "box:77", Pid: 4242, Pgid: 4240,
		CreatedAt: at(0), StartedAt: at(time.Second),
		Usage: drover.Usage{InputTokens: 10, OutputTokens: 20, ToolUses: 1, TotalCostUSD: ptr(0.25),
			CacheReadTokens: ptr(int64(7))},
		LastSeq: 0, CancelRequested: true,
	}
	mustCreate(t, s, full)
	want := *full
	if diff := cmp.Diff(&want, mustGet(t, s, "r-full"), opts); diff != "" {
		t.Errorf("GetRun (-want +got):\n%s", diff)
	}

	// Defaults: status pending, a creation time.
	if err := s.CreateRun(ctx, &store.Run{ID: "r-min", Agent: "claude", Prompt: "hi"}); err != nil {
		t.Fatal(err)
	}
	got := mustGet(t, s, "r-min")
	if got.Status != store.StatusPending {
		t.Errorf("default status = %q, want pending", got.Status)
	}
	if got.CreatedAt.IsZero() {
		t.Error("CreatedAt not set by default")
	}
	if !got.StartedAt.IsZero() || !got.EndedAt.IsZero() {
		t.Errorf("StartedAt, EndedAt = %v, %v; want zero", got.StartedAt, got.EndedAt)
	}
	if got.Options != nil || got.Usage.TotalCostUSD != nil || got.Usage.Turns != nil {
		t.Errorf("unset fields came back set: options %q usage %+v", got.Options, got.Usage)
	}

	wantErr(t, "CreateRun duplicate", s.CreateRun(ctx, newRun("r-full", at(time.Hour))), store.ErrConflict)
	if diff := cmp.Diff(&want, mustGet(t, s, "r-full"), opts); diff != "" {
		t.Errorf("duplicate CreateRun changed the run (-want +got):\n%s", diff)
	}
	_, err := s.GetRun(ctx, "nope")
	wantErr(t, "GetRun unknown", err, store.ErrNotFound)
}

// RUN-1: pending → running → completed; every other move is refused.
func testLifecycle(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, newRun("r1", at(0)))

	wantErr(t, "StartRun unknown", s.StartRun(ctx, "nope", 1, 1, at(time.Second)), store.ErrNotFound)
	if err := s.StartRun(ctx, "r1", 100, 99, at(time.Second)); err != nil {
		t.Fatalf("StartRun: %v", err)
	}
	r := mustGet(t, s, "r1")
	if r.Status != store.StatusRunning || r.Pid != 100 || r.Pgid != 99 || !r.StartedAt.Equal(at(time.Second)) {
		t.Fatalf("after StartRun: status %s pid %d pgid %d started %v", r.Status, r.Pid, r.Pgid, r.StartedAt)
	}
	// A second process of the same run: its ids replace the first's, the
	// start time stays.
	if err := s.StartRun(ctx, "r1", 5, 6, at(2*time.Second)); err != nil {
		t.Fatalf("second StartRun: %v", err)
	}
	if r := mustGet(t, s, "r1"); r.Status != store.StatusRunning || r.Pid != 5 || r.Pgid != 6 || !r.StartedAt.Equal(at(time.Second)) {
		t.Errorf("after a second StartRun: status %s pid %d pgid %d started %v", r.Status, r.Pid, r.Pgid, r.StartedAt)
	}

	fin := store.Finish{RunID: "r1", Status: store.StatusCompleted, DoneStatus: drover.StatusSuccess,
		ResumeToken: "tok-1", Usage: drover.Usage{InputTokens: 1, OutputTokens: 2}, DurationMs: 1500, EndedAt: at(3 * time.Second)}
	wantErr(t, "FinishRun unknown", s.FinishRun(ctx, store.Finish{RunID: "nope", Status: store.StatusFailed, EndedAt: at(0)}), store.ErrNotFound)
	if err := s.FinishRun(ctx, fin); err != nil {
		t.Fatalf("FinishRun: %v", err)
	}
	r = mustGet(t, s, "r1")
	if r.Status != store.StatusCompleted || r.DoneStatus != drover.StatusSuccess || r.ResumeToken != "tok-1" ||
		r.DurationMs != 1500 || !r.EndedAt.Equal(at(3*time.Second)) || r.Error != "" {
		t.Fatalf("after FinishRun: %+v", r)
	}

	again := store.Finish{RunID: "r1", Status: store.StatusFailed, Error: store.ReasonTimeout,
		DoneStatus: drover.StatusError, Usage: drover.Usage{InputTokens: 999}, EndedAt: at(time.Hour),
		Messages: []store.Message{{RunID: "r1", Index: 0, Role: "user", Content: "late"}}}
	wantErr(t, "FinishRun twice", s.FinishRun(ctx, again), store.ErrConflict)
	if diff := cmp.Diff(r, mustGet(t, s, "r1"), opts); diff != "" {
		t.Errorf("second FinishRun changed the run (-first +now):\n%s", diff)
	}
	if ms, err := s.Messages(ctx, "r1"); err != nil || len(ms) != 0 {
		t.Errorf("second FinishRun wrote messages: %v, %v", ms, err)
	}
	wantErr(t, "StartRun after end", s.StartRun(ctx, "r1", 1, 1, at(time.Hour)), store.ErrConflict)
}

// RUN-1, RUN-6: a run that never started can still be failed (cancelled
// while queued, or left pending by a dead engine).
func testFinishFromPending(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, newRun("r1", at(0)))
	err := s.FinishRun(ctx, store.Finish{RunID: "r1", Status: store.StatusFailed, Error: store.ReasonEngineRestart,
		DoneStatus: drover.StatusError, EndedAt: at(time.Second)})
	if err != nil {
		t.Fatalf("FinishRun from pending: %v", err)
	}
	r := mustGet(t, s, "r1")
	if r.Status != store.StatusFailed || r.Error != store.ReasonEngineRestart || !r.StartedAt.IsZero() {
		t.Errorf("got status %s error %q started %v", r.Status, r.Error, r.StartedAt)
	}
}

// RUN-3: cancel is idempotent; unknown or ended runs are not an error.
func testRequestCancel(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, newRun("r1", at(0)))
	mustCreate(t, s, newRun("r2", at(time.Second)))
	if mustGet(t, s, "r1").CancelRequested {
		t.Fatal("new run has CancelRequested")
	}
	for range 2 {
		if err := s.RequestCancel(ctx, "r1"); err != nil {
			t.Fatalf("RequestCancel: %v", err)
		}
		if !mustGet(t, s, "r1").CancelRequested {
			t.Fatal("CancelRequested not set")
		}
	}
	if mustGet(t, s, "r2").CancelRequested {
		t.Error("RequestCancel(r1) marked r2")
	}
	if err := s.RequestCancel(ctx, "nope"); err != nil {
		t.Errorf("RequestCancel unknown: %v", err)
	}
	if err := s.FinishRun(ctx, store.Finish{RunID: "r2", Status: store.StatusCompleted, EndedAt: at(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := s.RequestCancel(ctx, "r2"); err != nil {
		t.Errorf("RequestCancel ended run: %v", err)
	}
	if r := mustGet(t, s, "r2"); r.Status != store.StatusCompleted {
		t.Errorf("RequestCancel changed an ended run's status to %s", r.Status)
	}

	// An owner polls its runs in one query.
	mustCreate(t, s, newRun("r3", at(2*time.Second)))
	for _, c := range []struct {
		ids  []string
		want []string
	}{
		{[]string{"r1", "r2", "r3", "nope"}, []string{"r1"}},
		{[]string{"r3"}, nil},
		{nil, nil},
	} {
		got, err := s.CancelsRequested(ctx, c.ids)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("CancelsRequested(%q) = %q, %v; want %q", c.ids, got, err, c.want)
		}
	}
	if err := s.RequestCancel(ctx, "r3"); err != nil {
		t.Fatal(err)
	}
	many := []string{"r3"}
	for i := range 1200 { // more ids than one statement takes at a time
		many = append(many, fmt.Sprintf("unknown-%d", i))
	}
	many = append(many, "r1")
	got, err := s.CancelsRequested(ctx, many)
	slices.Sort(got)
	if err != nil || !slices.Equal(got, []string{"r1", "r3"}) {
		t.Errorf("CancelsRequested(1202 ids) = %q, %v; want r1 and r3", got, err)
	}
}

// LED-5: list runs by status, agent, session, parent and time, newest first.
func testListRuns(t *testing.T, s store.Store) {
	ctx := t.Context()
	type spec struct {
		id, agent, session, parent string
		status                     store.RunStatus
	}
	specs := []spec{
		{"a", "claude", "s1", "", store.StatusPending},
		{"b", "codex", "s1", "", store.StatusRunning},
		{"c", "claude", "s2", "a", store.StatusCompleted},
		{"d", "gemini", "", "a", store.StatusFailed},
		{"e", "claude", "", "b", store.StatusRunning},
		{"f", "codex", "s2", "", store.StatusPending},
	}
	for i, sp := range specs {
		r := newRun(sp.id, at(time.Duration(i)*time.Minute))
		r.Agent, r.SessionID, r.ParentID, r.Status = sp.agent, sp.session, sp.parent, sp.status
		mustCreate(t, s, r)
	}
	for _, tc := range []struct {
		name string
		f    store.RunFilter
		want []string
	}{
		{"all", store.RunFilter{}, []string{"f", "e", "d", "c", "b", "a"}},
		{"status", store.RunFilter{Status: []store.RunStatus{store.StatusRunning}}, []string{"e", "b"}},
		{"statuses", store.RunFilter{Status: []store.RunStatus{store.StatusPending, store.StatusFailed}}, []string{"f", "d", "a"}},
		{"agent", store.RunFilter{Agent: "claude"}, []string{"e", "c", "a"}},
		{"session", store.RunFilter{SessionID: "s2"}, []string{"f", "c"}},
		{"parent", store.RunFilter{ParentID: "a"}, []string{"d", "c"}},
		{"since inclusive", store.RunFilter{Since: at(3 * time.Minute)}, []string{"f", "e", "d"}},
		{"limit", store.RunFilter{Limit: 2}, []string{"f", "e"}},
		{"combined", store.RunFilter{Agent: "claude", Status: []store.RunStatus{store.StatusRunning, store.StatusCompleted}, Since: at(time.Minute)}, []string{"e", "c"}},
		{"combined limit", store.RunFilter{SessionID: "s1", Agent: "codex", Limit: 5}, []string{"b"}},
		{"none", store.RunFilter{Agent: "opencode"}, nil},
		{"since future", store.RunFilter{Since: at(time.Hour)}, nil},
	} {
		got, err := s.ListRuns(ctx, tc.f)
		if err != nil {
			t.Fatalf("%s: ListRuns: %v", tc.name, err)
		}
		if diff := cmp.Diff(tc.want, ids(got), opts); diff != "" {
			t.Errorf("%s: ListRuns(%+v) ids (-want +got):\n%s", tc.name, tc.f, diff)
		}
	}
	// Listed runs are whole runs.
	got, err := s.ListRuns(ctx, store.RunFilter{Agent: "gemini"})
	if err != nil || len(got) != 1 {
		t.Fatalf("ListRuns gemini: %v %v", ids(got), err)
	}
	if diff := cmp.Diff(mustGet(t, s, "d"), &got[0], opts); diff != "" {
		t.Errorf("listed run differs from GetRun (-get +list):\n%s", diff)
	}
}

// LED-5: a run's children, oldest first, without grandchildren.
func testChildren(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, newRun("p", at(0)))
	for i, id := range []string{"c2", "c1", "c3"} {
		r := newRun(id, at(time.Duration(10-i)*time.Second)) // c3 oldest
		r.ParentID = "p"
		mustCreate(t, s, r)
	}
	g := newRun("g", at(time.Minute))
	g.ParentID = "c1"
	mustCreate(t, s, g)
	got, err := s.Children(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"c3", "c1", "c2"}, ids(got)); diff != "" {
		t.Errorf("Children(p) (-want +got):\n%s", diff)
	}
	if got, err := s.Children(ctx, "c1"); err != nil || !slices.Equal(ids(got), []string{"g"}) {
		t.Errorf("Children(c1) = %v, %v; want [g]", ids(got), err)
	}
	if got, err := s.Children(ctx, "nope"); err != nil || len(got) != 0 {
		t.Errorf("Children(unknown) = %v, %v; want none", ids(got), err)
	}
	if got, err := s.Children(ctx, "g"); err != nil || len(got) != 0 {
		t.Errorf("Children(leaf) = %v, %v; want none", ids(got), err)
	}
}

// RUN-6: runs left pending or running are found at start-up.
func testUnfinished(t *testing.T, s store.Store) {
	ctx := t.Context()
	for i, st := range []store.RunStatus{store.StatusPending, store.StatusRunning, store.StatusCompleted, store.StatusFailed, store.StatusRunning} {
		r := newRun(string(rune('a'+i)), at(time.Duration(i)*time.Second))
		r.Status = st
		mustCreate(t, s, r)
	}
	got, err := s.Unfinished(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gotIDs := ids(got)
	slices.Sort(gotIDs)
	if diff := cmp.Diff([]string{"a", "b", "e"}, gotIDs); diff != "" {
		t.Errorf("Unfinished (-want +got):\n%s", diff)
	}
	if err := s.FinishRun(ctx, store.Finish{RunID: "b", Status: store.StatusFailed, Error: store.ReasonEngineRestart, EndedAt: at(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	got, err = s.Unfinished(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gotIDs = ids(got)
	slices.Sort(gotIDs)
	if diff := cmp.Diff([]string{"a", "e"}, gotIDs); diff != "" {
		t.Errorf("Unfinished after finishing b (-want +got):\n%s", diff)
	}
}
