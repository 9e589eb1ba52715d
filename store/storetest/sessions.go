package storetest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-run/drover/store"
)

// LED-4: a session keeps its resume token and head, and the history of
// former heads as it advances.
func testSessions(t *testing.T, s store.Store) {
	ctx := t.Context()
	_, err := s.GetSession(ctx, "nope")
	wantErr(t, "GetSession unknown", err, store.ErrNotFound)
	wantErr(t, "AdvanceSession unknown", s.AdvanceSession(ctx, "nope", "r1", "tok", at(0)), store.ErrNotFound)

	ss := &store.Session{ID: "s1", Agent: "claude", Heads: []string{}, CreatedAt: at(0), UpdatedAt: at(0)}
	if err := s.PutSession(ctx, ss); err != nil {
		t.Fatalf("PutSession: %v", err)
	}
	get := func() *store.Session {
		t.Helper()
		got, err := s.GetSession(ctx, "s1")
		if err != nil {
			t.Fatalf("GetSession: %v", err)
		}
		return got
	}
	if diff := cmp.Diff(ss, get(), opts); diff != "" {
		t.Errorf("GetSession (-want +got):\n%s", diff)
	}

	steps := []struct{ run, tok string }{{"r1", "tok-1"}, {"r2", "tok-2"}, {"r3", "tok-3"}}
	for i, st := range steps {
		if err := s.AdvanceSession(ctx, "s1", st.run, st.tok, at(time.Duration(i+1)*time.Minute)); err != nil {
			t.Fatalf("AdvanceSession(%s): %v", st.run, err)
		}
	}
	want := &store.Session{ID: "s1", Agent: "claude", ResumeToken: "tok-3", HeadRunID: "r3",
		Heads: []string{"r1", "r2"}, CreatedAt: at(0), UpdatedAt: at(3 * time.Minute)}
	if diff := cmp.Diff(want, get(), opts); diff != "" {
		t.Errorf("after three advances (-want +got):\n%s", diff)
	}

	// PutSession replaces the whole session.
	repl := &store.Session{ID: "s1", Agent: "codex", ResumeToken: "t", HeadRunID: "r9",
		Heads: []string{"r7", "r8"}, CreatedAt: at(time.Hour), UpdatedAt: at(2 * time.Hour)}
	if err := s.PutSession(ctx, repl); err != nil {
		t.Fatalf("PutSession replace: %v", err)
	}
	if diff := cmp.Diff(repl, get(), opts); diff != "" {
		t.Errorf("after replace (-want +got):\n%s", diff)
	}
	if err := s.AdvanceSession(ctx, "s1", "r10", "t10", at(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := get(); !cmp.Equal(got.Heads, []string{"r7", "r8", "r9"}) || got.HeadRunID != "r10" {
		t.Errorf("after replace and advance: head %s heads %v", got.HeadRunID, got.Heads)
	}
}

// LED-4, LED-5: sessions are listed most recently updated first.
func testListSessions(t *testing.T, s store.Store) {
	ctx := t.Context()
	if got, err := s.ListSessions(ctx, 0); err != nil || len(got) != 0 {
		t.Fatalf("ListSessions on an empty ledger = %v, %v", got, err)
	}
	for i, id := range []string{"s1", "s2", "s3"} {
		ss := &store.Session{ID: id, Agent: "claude", Heads: []string{}, CreatedAt: at(time.Duration(i) * time.Minute),
			UpdatedAt: at(time.Duration(i) * time.Minute)}
		if err := s.PutSession(ctx, ss); err != nil {
			t.Fatal(err)
		}
	}
	// Advancing s1 makes it the most recent.
	if err := s.AdvanceSession(ctx, "s1", "r1", "tok", at(time.Hour)); err != nil {
		t.Fatal(err)
	}
	list := func(limit int) []string {
		t.Helper()
		got, err := s.ListSessions(ctx, limit)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, ss := range got {
			out = append(out, ss.ID)
		}
		return out
	}
	if diff := cmp.Diff([]string{"s1", "s3", "s2"}, list(0)); diff != "" {
		t.Errorf("ListSessions(0) (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"s1", "s3"}, list(2)); diff != "" {
		t.Errorf("ListSessions(2) (-want +got):\n%s", diff)
	}
	got, err := s.ListSessions(ctx, 1)
	if err != nil || len(got) != 1 {
		t.Fatal(got, err)
	}
	if got[0].HeadRunID != "r1" || got[0].ResumeToken != "tok" {
		t.Errorf("listed session = %+v", got[0])
	}
}
