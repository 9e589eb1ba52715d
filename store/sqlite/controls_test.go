package sqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/sqlite"
)

// A supervisor's poll for control messages (CTL-1, CTL-3) with none
// queued only reads: it goes through while another process holds the
// ledger's write lock, instead of waiting for it (and making that
// process's writer wait for it, the rest of the time). A queued message
// is still taken in a write transaction, and only once.
func TestCTL3_IdlePollTakesNoWriteLock(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s, path := openTemp(t, sqlite.WithBusyTimeout(300*time.Millisecond))
	createRuns(t, s, "r1")

	other, err := rawDB(t, path).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	got, err := s.TakeControls(ctx, []string{"r1"})
	if err != nil || len(got) != 0 {
		t.Fatalf("with nothing queued and the write lock held elsewhere: %v, %v; want nothing, no error", got, err)
	}
	if _, err := other.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}

	if err := s.PostControl(ctx, &store.ControlMessage{RunID: "r1", Kind: store.ControlInterrupt, By: "test"}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	// Queued: taking it needs the write lock, which is held.
	if got, err := s.TakeControls(ctx, []string{"r1"}); err == nil {
		t.Fatalf("took %v while another connection held the write lock", got)
	}
	if _, err := other.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	got, err = s.TakeControls(ctx, []string{"r1"})
	if err != nil || len(got) != 1 || got[0].Kind != store.ControlInterrupt {
		t.Fatalf("took %v, %v; want the interrupt", got, err)
	}
	if again, err := s.TakeControls(ctx, []string{"r1"}); err != nil || len(again) != 0 {
		t.Fatalf("took %v, %v again", again, err)
	}
}
