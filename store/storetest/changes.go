package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-run/drover/store"
)

// changePatch is a change as git diff --binary writes it: a modified
// file, a rename, a new binary file (a GIT binary patch, base85), a
// deleted file, and a text file in Latin-1, not UTF-8 (git diffs it as
// text), with CRLF line ends. The ledger keeps it byte for byte.
const changePatch = `diff --git a/cmd/serve.go b/cmd/serve.go
index 3b18e51..a9c2f4d 100644
--- a/cmd/serve.go
+++ b/cmd/serve.go
@@ -12,7 +12,9 @@ func serve() error {
 	addr := flag.String("addr", ":8080", "listen address")
-	log.Printf("listening on %s", *addr)
+	log.Printf("listening on %s (tls: %v)", *addr, *tls)
+	if *tls {
+		return http.ListenAndServeTLS(*addr, "cert.pem", "key.pem", nil)
+	}
 	return http.ListenAndServe(*addr, nil)
 }
diff --git a/docs/old guide.md b/docs/guide.md
similarity index 91%
rename from docs/old guide.md
rename to docs/guide.md
index 8f0e7c1..0c4d2b9 100644
--- a/docs/old guide.md
+++ b/docs/guide.md
@@ -1,4 +1,4 @@
-# The old guide
+# Guide ✓
 
 Run ` + "`drover serve`" + ` and open the dashboard.
 
diff --git a/web/logo.png b/web/logo.png
new file mode 100644
index 0000000000000000000000000000000000000000..5c1b7a0e6f0c2f1d0e3b9e2d7a4b4c5d6e7f8091
GIT binary patch
literal 68
zcmeAS@N?(olHy` + "`" + `uVBq!ia0vp^j35l*(0|^HjSIRCX<TNlUtqLK=5#1w3DS2cRXN7YHzBbi3y8OD0~@
HLBj<3MmRT

literal 0
HcmV?d00001

diff --git a/old/unused.go b/old/unused.go
deleted file mode 100644
index 6d1e0b4..0000000
--- a/old/unused.go
+++ /dev/null
@@ -1,3 +0,0 @@
-package old
-
-func unused() {}
diff --git a/legacy/menu.txt b/legacy/menu.txt
index 1f2e3d4..5a6b7c8 100644
--- a/legacy/menu.txt
+++ b/legacy/menu.txt
@@ -1,2 +1,2 @@
-caf` + "\xe9\r" + `
+caf` + "\xe9 cr\xe8me br\xfbl\xe9e\r" + `
 th` + "\xe9\r" + `
\ No newline at end of file
`

// fullChange is a change with every field set (but Decisions), as a run
// in a workspace of its own records it when it ends.
func fullChange(run string, created time.Time) *store.Change {
	return &store.Change{
		RunID:     run,
		Repo:      "/home/ada/src/app",
		Base:      "3f786850e387550fdab836ed7e6dc881de23001b",
		Branch:    "drover/" + run,
		Workspace: "/home/ada/.local/state/drover/workspaces/" + run,
		Commit:    "89e6c98d92887913cadf06b2adb97f26cde4849b",
		Start:     "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
		Files: []store.ChangeFile{
			{Path: "cmd/serve.go", Kind: "modified", Added: 4, Removed: 1},
			{Path: "docs/guide.md", From: "docs/old guide.md", Kind: "renamed", Added: 1, Removed: 1},
			{Path: "web/logo.png", Kind: "added", Binary: true},
			{Path: "old/unused.go", Kind: "deleted", Removed: 3},
			{Path: "legacy/menu.txt", Kind: "modified", Added: 1, Removed: 1},
		},
		Patch: changePatch,
		Check: &store.ChangeCheck{
			Command: "go test ./...", Passed: false, ExitCode: 1, DurationMs: 4210,
			Output: "--- FAIL: TestServe (0.01s)\n    serve_test.go:31: got \"\x00\", want \"ok\" ✗\nFAIL\tgithub.com/ada/app/cmd\t0.412s\n",
		},
		State:     store.ChangePending,
		CreatedAt: created,
	}
}

func mustRecord(t *testing.T, s store.Store, c *store.Change) {
	t.Helper()
	if err := s.RecordChange(t.Context(), c); err != nil {
		t.Fatalf("RecordChange(%s): %v", c.RunID, err)
	}
}

func mustGetChange(t *testing.T, s store.Store, run string) *store.Change {
	t.Helper()
	c, err := s.GetChange(t.Context(), run)
	if err != nil {
		t.Fatalf("GetChange(%s): %v", run, err)
	}
	return c
}

func mustDecide(t *testing.T, s store.Store, run string, d store.ChangeDecision, from ...store.ChangeState) {
	t.Helper()
	if err := s.DecideChange(t.Context(), run, d, from...); err != nil {
		t.Fatalf("DecideChange(%s, %s, from %v): %v", run, d.Action, from, err)
	}
}

// checkNow fails unless got is a time the store took as now, between
// before and after (the store may keep whole microseconds only).
func checkNow(t *testing.T, what string, got, before, after time.Time) {
	t.Helper()
	if got.Before(before.Truncate(time.Microsecond)) || got.After(after) {
		t.Fatalf("%s = %v, want now (between %v and %v)", what, got, before, after)
	}
}

// WS-2: a run's change reads back with every field as recorded, its
// patch byte for byte; a change is recorded for a run that has ended too;
// unknown runs and runs without a change are ErrNotFound; a change
// without a state is refused.
func testChangeRoundTrip(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, newRun("r1", at(0)))
	mustCreate(t, s, newRun("r2", at(time.Second)))
	_, err := s.GetChange(ctx, "r1")
	wantErr(t, "GetChange of a run without a change", err, store.ErrNotFound)
	_, err = s.GetChange(ctx, "nope")
	wantErr(t, "GetChange of an unknown run", err, store.ErrNotFound)
	wantErr(t, "RecordChange of an unknown run", s.RecordChange(ctx, fullChange("nope", at(0))), store.ErrNotFound)
	_, err = s.GetChange(ctx, "nope")
	wantErr(t, "GetChange after a refused RecordChange", err, store.ErrNotFound)

	if err := s.FinishRun(ctx, store.Finish{RunID: "r1", Status: store.StatusCompleted, EndedAt: at(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	c := fullChange("r1", at(time.Minute))
	before := time.Now()
	mustRecord(t, s, c)
	checkNow(t, "UpdatedAt written back", c.UpdatedAt, before, time.Now())
	want := fullChange("r1", at(time.Minute))
	want.UpdatedAt = c.UpdatedAt
	if !c.CreatedAt.Equal(want.CreatedAt) {
		t.Errorf("CreatedAt written back = %v, want the one given, %v", c.CreatedAt, want.CreatedAt)
	}
	got := mustGetChange(t, s, "r1")
	if diff := cmp.Diff(want, got, opts); diff != "" {
		t.Errorf("GetChange (-want +got):\n%s", diff)
	}
	if got.Patch != changePatch {
		t.Errorf("the patch did not come back byte for byte:\n got %q\nwant %q", got.Patch, changePatch)
	}

	if err := s.RecordChange(ctx, &store.Change{RunID: "r2", Repo: "/home/ada/src/app"}); err == nil {
		t.Error("RecordChange without a state: no error")
	}
	_, err = s.GetChange(ctx, "r2")
	wantErr(t, "GetChange after a RecordChange without a state", err, store.ErrNotFound)

	// A run in place whose patch was over the limit: no branch,
	// workspace, commit, patch or check; no files is an empty list.
	c2 := &store.Change{RunID: "r2", Repo: "/home/ada/src/app", Base: "3f786850e387550fdab836ed7e6dc881de23001b",
		Start: "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567", Truncated: true, State: store.ChangeNone}
	mustRecord(t, s, c2)
	got2 := mustGetChange(t, s, "r2")
	if diff := cmp.Diff(c2, got2, opts); diff != "" {
		t.Errorf("GetChange of a sparse change (-want +got):\n%s", diff)
	}
	if got2.Check != nil || got2.Patch != "" || got2.Decisions != nil {
		t.Errorf("sparse change: check %+v, patch %q, decisions %+v; want none", got2.Check, got2.Patch, got2.Decisions)
	}
	if got2.CreatedAt.IsZero() || !got2.CreatedAt.Equal(c2.CreatedAt) || !got2.CreatedAt.Equal(got2.UpdatedAt) {
		t.Errorf("a zero CreatedAt: written back %v, read %v (updated %v); want now, as UpdatedAt", c2.CreatedAt, got2.CreatedAt, got2.UpdatedAt)
	}
}

// WS-2: recording a run's change again replaces every field but its
// decisions and CreatedAt (that of the first record, whatever the later
// ones say), and UpdatedAt is now each time.
func testRecordChangeReplaces(t *testing.T, s store.Store) {
	mustCreate(t, s, newRun("r1", at(0)))
	// Open when the run starts in its workspace.
	open := &store.Change{RunID: "r1", Repo: "/home/ada/src/app", Base: "3f786850e387550fdab836ed7e6dc881de23001b",
		Branch: "drover/r1", Workspace: "/home/ada/.local/state/drover/workspaces/r1", State: store.ChangeOpen}
	before := time.Now()
	mustRecord(t, s, open)
	checkNow(t, "CreatedAt of a first record without one", open.CreatedAt, before, time.Now())
	if !open.UpdatedAt.Equal(open.CreatedAt) {
		t.Errorf("first record: UpdatedAt %v, CreatedAt %v; want both now", open.UpdatedAt, open.CreatedAt)
	}
	if diff := cmp.Diff(open, mustGetChange(t, s, "r1"), opts); diff != "" {
		t.Errorf("open change (-want +got):\n%s", diff)
	}
	created := open.CreatedAt

	time.Sleep(2 * time.Millisecond)
	ended := fullChange("r1", at(time.Hour)) // a CreatedAt the store keeps no more
	before = time.Now()
	mustRecord(t, s, ended)
	checkNow(t, "UpdatedAt of a second record", ended.UpdatedAt, before, time.Now())
	if !ended.CreatedAt.Equal(created) {
		t.Errorf("CreatedAt written back by a second record = %v, want the first one's, %v", ended.CreatedAt, created)
	}
	want := fullChange("r1", created)
	want.UpdatedAt = ended.UpdatedAt
	if diff := cmp.Diff(want, mustGetChange(t, s, "r1"), opts); diff != "" {
		t.Errorf("replaced change (-want +got):\n%s", diff)
	}

	// Decisions stay; the state is the one recorded.
	mustDecide(t, s, "r1", store.ChangeDecision{Action: store.ChangeRevised, By: "drover revise", At: at(2 * time.Hour), Detail: "r2"}, store.ChangePending)
	time.Sleep(2 * time.Millisecond)
	again := fullChange("r1", time.Time{})
	again.Workspace, again.State, again.Files, again.Check = "", store.ChangeDiscarded, nil, nil
	mustRecord(t, s, again)
	want = fullChange("r1", created)
	want.Workspace, want.State, want.Files, want.Check = "", store.ChangeDiscarded, nil, nil
	want.UpdatedAt = again.UpdatedAt
	want.Decisions = []store.ChangeDecision{{Action: store.ChangeRevised, By: "drover revise", At: at(2 * time.Hour), Detail: "r2"}}
	if diff := cmp.Diff(want, mustGetChange(t, s, "r1"), opts); diff != "" {
		t.Errorf("change recorded after a decision (-want +got):\n%s", diff)
	}
	if !again.UpdatedAt.After(ended.UpdatedAt) {
		t.Errorf("UpdatedAt did not move: %v after %v", again.UpdatedAt, ended.UpdatedAt)
	}
}

// WS-3: a decision moves a change to its action's state and is kept,
// oldest first, with who took it, when and why; from names the states it
// may be taken in, any when empty.
func testDecideChange(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, newRun("r1", at(0)))
	mustCreate(t, s, newRun("bare", at(0)))
	d := store.ChangeDecision{Action: store.ChangeApplied, By: "drover apply", At: at(time.Minute)}
	wantErr(t, "DecideChange of an unknown run", s.DecideChange(ctx, "nope", d), store.ErrNotFound)
	wantErr(t, "DecideChange of a run without a change", s.DecideChange(ctx, "bare", d, store.ChangePending), store.ErrNotFound)
	if _, err := s.GetChange(ctx, "bare"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused decision made a change: %v", err)
	}

	c := fullChange("r1", at(0))
	mustRecord(t, s, c)
	before := time.Now()
	mustDecide(t, s, "r1", d, store.ChangePending, store.ChangeOpen)
	got := mustGetChange(t, s, "r1")
	checkNow(t, "UpdatedAt after a decision", got.UpdatedAt, before, time.Now())
	want := fullChange("r1", at(0))
	want.State, want.UpdatedAt, want.Decisions = store.ChangeApplied, got.UpdatedAt, []store.ChangeDecision{d}
	if diff := cmp.Diff(want, got, opts); diff != "" {
		t.Errorf("after apply (-want +got):\n%s", diff)
	}

	// Without from, any state; a zero At is now.
	before = time.Now()
	mustDecide(t, s, "r1", store.ChangeDecision{Action: store.ChangeMerged, By: "http", Detail: "merge commit 0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c"})
	after := time.Now()
	mustDecide(t, s, "r1", store.ChangeDecision{Action: store.ChangeDiscarded, By: "drover discard", At: at(3 * time.Minute)}, store.ChangeMerged)
	got = mustGetChange(t, s, "r1")
	if got.State != store.ChangeDiscarded || len(got.Decisions) != 3 {
		t.Fatalf("after three decisions: state %s, decisions %+v", got.State, got.Decisions)
	}
	checkNow(t, "At of a decision without one", got.Decisions[1].At, before, after)
	wantDs := []store.ChangeDecision{
		d,
		{Action: store.ChangeMerged, By: "http", At: got.Decisions[1].At, Detail: "merge commit 0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c"},
		{Action: store.ChangeDiscarded, By: "drover discard", At: at(3 * time.Minute)},
	}
	if diff := cmp.Diff(wantDs, got.Decisions, opts); diff != "" {
		t.Errorf("decisions, oldest first (-want +got):\n%s", diff)
	}
}

// WS-3: a decision taken from a state the change is not in is
// ErrConflict, and writes nothing: not the decision, not the state, not
// UpdatedAt; nor does a decision without an action.
func testDecideChangeConflict(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, newRun("r1", at(0)))
	mustRecord(t, s, fullChange("r1", at(0)))
	mustDecide(t, s, "r1", store.ChangeDecision{Action: store.ChangeApplied, By: "drover apply", At: at(time.Minute)}, store.ChangePending)
	was := mustGetChange(t, s, "r1")
	time.Sleep(2 * time.Millisecond)
	for _, from := range [][]store.ChangeState{{store.ChangePending}, {store.ChangeOpen, store.ChangePending, store.ChangeRevised}} {
		err := s.DecideChange(ctx, "r1", store.ChangeDecision{Action: store.ChangeDiscarded, By: "drover discard"}, from...)
		wantErr(t, fmt.Sprintf("DecideChange from %v of an applied change", from), err, store.ErrConflict)
	}
	if err := s.DecideChange(ctx, "r1", store.ChangeDecision{By: "drover discard"}); err == nil {
		t.Error("DecideChange without an action: no error")
	}
	if diff := cmp.Diff(was, mustGetChange(t, s, "r1"), opts); diff != "" {
		t.Errorf("a refused decision changed the change (-before +after):\n%s", diff)
	}
}

// WS-3: changes are listed newest UpdatedAt first, with their decisions,
// without their patches unless asked; run ids, states and Before filter,
// together too.
func testListChanges(t *testing.T, s store.Store) {
	ctx := t.Context()
	list := func(f store.ChangeFilter) []store.Change {
		t.Helper()
		cs, err := s.ListChanges(ctx, f)
		if err != nil {
			t.Fatalf("ListChanges(%+v): %v", f, err)
		}
		return cs
	}
	runIDs := func(cs []store.Change) []string {
		out := make([]string, len(cs))
		for i, c := range cs {
			out[i] = c.RunID
		}
		return out
	}
	if cs := list(store.ChangeFilter{}); len(cs) != 0 {
		t.Fatalf("ListChanges on an empty ledger = %+v", cs)
	}
	states := map[string]store.ChangeState{"r1": store.ChangePending, "r2": store.ChangeNone, "r3": store.ChangePending, "r4": store.ChangeOpen}
	for i, id := range []string{"r1", "r2", "r3", "r4", "r5"} {
		mustCreate(t, s, newRun(id, at(time.Duration(i)*time.Second)))
		if id == "r5" {
			continue // a run without a change
		}
		c := fullChange(id, at(time.Duration(i)*time.Second))
		c.State = states[id]
		mustRecord(t, s, c)
		time.Sleep(2 * time.Millisecond) // UpdatedAt is now: one apart
	}
	mustDecide(t, s, "r1", store.ChangeDecision{Action: store.ChangeApplied, By: "drover apply", At: at(time.Hour)}, store.ChangePending)

	all := list(store.ChangeFilter{Patches: true})
	if diff := cmp.Diff([]string{"r1", "r4", "r3", "r2"}, runIDs(all)); diff != "" {
		t.Fatalf("ListChanges, newest UpdatedAt first (-want +got):\n%s", diff)
	}
	for _, c := range all {
		if diff := cmp.Diff(mustGetChange(t, s, c.RunID), &c, opts); diff != "" {
			t.Errorf("listed with patches, %s (-GetChange +listed):\n%s", c.RunID, diff)
		}
	}
	if len(all[0].Decisions) != 1 || all[0].Decisions[0].Action != store.ChangeApplied {
		t.Errorf("r1 listed with decisions %+v, want its apply", all[0].Decisions)
	}
	for i, c := range list(store.ChangeFilter{}) {
		if c.Patch != "" {
			t.Errorf("%s listed with its patch without Patches", c.RunID)
		}
		c.Patch = all[i].Patch
		if diff := cmp.Diff(all[i], c, opts); diff != "" {
			t.Errorf("listed without patches, %s (-with +without):\n%s", c.RunID, diff)
		}
	}

	r3 := mustGetChange(t, s, "r3")
	for _, tc := range []struct {
		name string
		f    store.ChangeFilter
		want []string
	}{
		{"run ids", store.ChangeFilter{RunIDs: []string{"r2", "r3", "r5", "nope"}}, []string{"r3", "r2"}},
		{"one state", store.ChangeFilter{States: []store.ChangeState{store.ChangePending}}, []string{"r3"}},
		{"states", store.ChangeFilter{States: []store.ChangeState{store.ChangeApplied, store.ChangePending, store.ChangeMerged}}, []string{"r1", "r3"}},
		{"before", store.ChangeFilter{Before: r3.UpdatedAt}, []string{"r2"}},
		{"before, just after", store.ChangeFilter{Before: r3.UpdatedAt.Add(time.Microsecond)}, []string{"r3", "r2"}},
		{"all three", store.ChangeFilter{RunIDs: []string{"r1", "r2", "r3"}, States: []store.ChangeState{store.ChangeNone, store.ChangeApplied, store.ChangePending},
			Before: r3.UpdatedAt.Add(time.Microsecond)}, []string{"r3", "r2"}},
		{"no match", store.ChangeFilter{States: []store.ChangeState{store.ChangeRevised}}, nil},
	} {
		if diff := cmp.Diff(tc.want, runIDs(list(tc.f)), opts); diff != "" {
			t.Errorf("ListChanges, %s (-want +got):\n%s", tc.name, diff)
		}
	}
}

// WS-3: deciders racing over one pending change, in one process or
// several: exactly one decision taken from pending is recorded, the
// others are ErrConflict; decisions taken from any state are all kept.
func testDecideChangeOnce(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, newRun("r1", at(0)))
	mustRecord(t, s, fullChange("r1", at(0)))
	const n = 20
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = s.DecideChange(ctx, "r1", store.ChangeDecision{Action: store.ChangeApplied, By: fmt.Sprint("decider ", i)}, store.ChangePending)
		})
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("deciders %d and %d both applied the change", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, store.ErrConflict):
			t.Fatalf("decider %d: %v, want ErrConflict", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no decider applied the change")
	}
	got := mustGetChange(t, s, "r1")
	if got.State != store.ChangeApplied || len(got.Decisions) != 1 || got.Decisions[0].By != fmt.Sprint("decider ", winner) {
		t.Fatalf("after the race: state %s, decisions %+v; want the winner's (%d) alone", got.State, got.Decisions, winner)
	}

	for i := range n {
		wg.Go(func() {
			errs[i] = s.DecideChange(ctx, "r1", store.ChangeDecision{Action: store.ChangeDiscarded, By: fmt.Sprint("any ", i)})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("decider %d from any state: %v", i, err)
		}
	}
	got = mustGetChange(t, s, "r1")
	seen := map[string]bool{}
	for _, d := range got.Decisions[1:] {
		seen[d.By] = true
	}
	if len(got.Decisions) != 1+n || len(seen) != n || got.State != store.ChangeDiscarded {
		t.Fatalf("after %d concurrent decisions from any state: state %s, %d decisions (%d distinct); want %d, none lost",
			n, got.State, len(got.Decisions), len(seen), 1+n)
	}
}
