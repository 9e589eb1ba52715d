package runs_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
)

// LED-2, PRO-3: FollowLog from the live runs yields their events so far
// (no cursor), a marker, then every run's events as recorded, woken by
// the supervisor itself (Poll is an hour here, so nothing else could wake
// it); from a cursor it yields exactly what came after.
func TestFollowLog(t *testing.T) {
	f := newFixture(t, runs.Config{Poll: time.Hour}, hang(), quick(2))
	live := f.start(t, runs.StartRequest{Agent: "hang", Prompt: "p"})
	for {
		if r, err := f.st.GetRun(context.Background(), live); err == nil && r.LastSeq == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	next, stop := pull(ctx, f.sup, runs.FromLive)
	defer stop()
	if ev := next(t); ev.RunID != live || ev.Seq != 1 || ev.Cursor != 0 {
		t.Fatalf("catch-up: %+v, want %s/1 without a cursor", ev, live)
	}
	marker := next(t)
	if marker.RunID != "" || marker.Cursor <= 0 {
		t.Fatalf("marker %+v", marker)
	}
	q := f.start(t, runs.StartRequest{Agent: "quick", Prompt: "p"})
	var cursors []int64
	for seq := int64(1); seq <= 3; seq++ {
		ev := next(t)
		if ev.RunID != q || ev.Seq != seq || ev.Cursor <= marker.Cursor || (len(cursors) > 0 && ev.Cursor <= cursors[len(cursors)-1]) {
			t.Fatalf("tail: %+v after cursors %v", ev, cursors)
		}
		cursors = append(cursors, ev.Cursor)
	}
	stop()

	next, stop = pull(ctx, f.sup, cursors[0])
	defer stop()
	for _, want := range cursors[1:] {
		if ev := next(t); ev.Cursor != want {
			t.Fatalf("resumed: %+v, want cursor %d", ev, want)
		}
	}
}

// LED-2, PRO-1: FollowLog from the live runs starts where the log is when
// it is called, not when its iteration begins: a run that starts and ends
// in between (a subscription answered, then scheduled late) is yielded
// whole after the marker, before a run started later.
func TestLED2_FollowLogFromLiveStartsWhenCalled(t *testing.T) {
	f := newFixture(t, runs.Config{Poll: time.Hour}, quick(2))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := f.sup.FollowLog(ctx, runs.FromLive)
	q := f.start(t, runs.StartRequest{Agent: "quick", Prompt: "q"})
	f.await(t, q)
	var r string // started once the iteration is under way
	var got []string
	for ev, err := range log {
		if err != nil {
			t.Fatal(err)
		}
		if ev.RunID == "" {
			got = append(got, "marker")
			r = f.start(t, runs.StartRequest{Agent: "quick", Prompt: "r"})
			continue
		}
		got = append(got, fmt.Sprintf("%s/%d", ev.RunID, ev.Seq))
		if ev.RunID == r && ev.Seq == 3 {
			break
		}
	}
	want := []string{"marker", q + "/1", q + "/2", q + "/3", r + "/1", r + "/2", r + "/3"}
	if !slices.Equal(got, want) {
		t.Fatalf("yielded %v, want %v", got, want)
	}
}

// pull iterates FollowLog one event at a time.
func pull(ctx context.Context, sup *runs.Supervisor, from int64) (func(t *testing.T) store.Event, func()) {
	ctx, cancel := context.WithCancel(ctx)
	evs := make(chan store.Event)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev, err := range sup.FollowLog(ctx, from) {
			if err != nil {
				return
			}
			select {
			case evs <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	next := func(t *testing.T) store.Event {
		t.Helper()
		select {
		case ev := <-evs:
			return ev
		case <-done:
			t.Fatal("FollowLog ended")
		case <-ctx.Done():
			t.Fatal("timed out waiting for FollowLog")
		}
		return store.Event{}
	}
	return next, func() { cancel(); <-done }
}
