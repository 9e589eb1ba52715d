package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/drover-run/drover/store"
)

// LED-3, LED-4: FinishRun with a SessionID moves the session's head in the
// run's own transaction: a FinishRun that fails moves nothing, one that
// succeeds moves it as AdvanceSession would; an unknown session is no
// error and the run's end is recorded.
func testFinishAdvancesSession(t *testing.T, s store.Store) {
	ctx := t.Context()
	if err := s.PutSession(ctx, &store.Session{ID: "s1", Agent: "claude", Heads: []string{}, CreatedAt: at(0), UpdatedAt: at(0)}); err != nil {
		t.Fatal(err)
	}
	if err := s.AdvanceSession(ctx, "s1", "r0", "tok-0", at(time.Minute)); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, newRun("r1", at(0)))
	f := turnRecord("r1")
	f.SessionID, f.ResumeToken, f.EndedAt = "s1", "tok-1", at(time.Hour)
	bad := f
	bad.Messages = append(slices.Clone(f.Messages), store.Message{RunID: "r1", Index: 2, Role: "assistant", Content: "again"})
	if err := s.FinishRun(ctx, bad); err == nil {
		t.Fatal("FinishRun with a duplicate message index succeeded")
	}
	if ss := mustSession(t, s, "s1"); ss.HeadRunID != "r0" || ss.ResumeToken != "tok-0" {
		t.Fatalf("a failed FinishRun moved the session to %s (%s)", ss.HeadRunID, ss.ResumeToken)
	}
	if err := s.FinishRun(ctx, f); err != nil {
		t.Fatalf("FinishRun: %v", err)
	}
	ss := mustSession(t, s, "s1")
	if ss.HeadRunID != "r1" || ss.ResumeToken != "tok-1" || !slices.Equal(ss.Heads, []string{"r0"}) || !ss.UpdatedAt.Equal(at(time.Hour)) {
		t.Errorf("after FinishRun: head %s, token %s, heads %v, updated %v; want r1, tok-1, [r0], %v",
			ss.HeadRunID, ss.ResumeToken, ss.Heads, ss.UpdatedAt, at(time.Hour))
	}

	mustCreate(t, s, newRun("r2", at(0)))
	g := turnRecord("r2")
	g.SessionID, g.ResumeToken = "nope", "tok-2"
	if err := s.FinishRun(ctx, g); err != nil {
		t.Fatalf("FinishRun with an unknown session: %v", err)
	}
	if r := mustGet(t, s, "r2"); !r.Status.Terminal() {
		t.Errorf("run r2 is %s after FinishRun", r.Status)
	}
	if _, err := s.GetSession(ctx, "nope"); err == nil {
		t.Error("FinishRun created the unknown session")
	}
}

func mustSession(t *testing.T, s store.Store, id string) *store.Session {
	t.Helper()
	ss, err := s.GetSession(t.Context(), id)
	if err != nil {
		t.Fatalf("GetSession(%s): %v", id, err)
	}
	return ss
}
