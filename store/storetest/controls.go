package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/drover-run/drover/store"
)

// testControls: control messages queue per run, come back oldest first with
// their fields, are taken once, and are refused for unknown and ended runs
// (whose untaken messages FinishRun discards).
func testControls(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, newRun("r1", at(0)))
	mustCreate(t, s, newRun("r2", at(time.Second)))
	post := func(run, kind, payload string) *store.ControlMessage {
		t.Helper()
		m := &store.ControlMessage{RunID: run, Kind: kind, By: "test"}
		if payload != "" {
			m.Payload = json.RawMessage(payload)
		}
		if err := s.PostControl(ctx, m); err != nil {
			t.Fatalf("PostControl(%s, %s): %v", run, kind, err)
		}
		if m.ID <= 0 || m.CreatedAt.IsZero() {
			t.Fatalf("posted %+v: want an id and a time", m)
		}
		return m
	}
	a := post("r1", store.ControlRespond, `{"requestId":"q1","behavior":"allow"}`)
	b := post("r2", store.ControlSteer, `{"message":"hi"}`)
	c := post("r1", store.ControlInterrupt, "")
	if !(a.ID < b.ID && b.ID < c.ID) {
		t.Fatalf("ids %d, %d, %d: want increasing", a.ID, b.ID, c.ID)
	}
	got, err := s.TakeControls(ctx, []string{"r1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != a.ID || got[1].ID != c.ID {
		t.Fatalf("took %+v, want r1's two messages oldest first", got)
	}
	if m := got[0]; m.RunID != "r1" || m.Kind != store.ControlRespond || m.By != "test" || !jsonEqual(m.Payload, a.Payload) || !m.CreatedAt.Equal(a.CreatedAt) {
		t.Fatalf("took %+v, want %+v", m, a)
	}
	if got[1].Payload != nil {
		t.Fatalf("an empty payload came back as %s", got[1].Payload)
	}
	if again, err := s.TakeControls(ctx, []string{"r1"}); err != nil || len(again) != 0 {
		t.Fatalf("taken twice: %+v %v", again, err)
	}
	if none, err := s.TakeControls(ctx, nil); err != nil || len(none) != 0 {
		t.Fatalf("no runs: %+v %v", none, err)
	}
	if err := s.PostControl(ctx, &store.ControlMessage{RunID: "nope", Kind: store.ControlSteer}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown run: %v", err)
	}
	if err := s.FinishRun(ctx, store.Finish{RunID: "r2", Status: store.StatusCompleted, EndedAt: at(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if left, err := s.TakeControls(ctx, []string{"r2"}); err != nil || len(left) != 0 {
		t.Fatalf("an ended run's messages: %+v %v", left, err)
	}
	if err := s.PostControl(ctx, &store.ControlMessage{RunID: "r2", Kind: store.ControlSteer}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("ended run: %v", err)
	}
}

// testControlsTakenOnce: takers racing over one queue never see a message
// twice and lose none.
func testControlsTakenOnce(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, newRun("r", at(0)))
	const n = 60
	var posted sync.WaitGroup
	posted.Go(func() {
		for i := range n {
			if err := s.PostControl(ctx, &store.ControlMessage{RunID: "r", Kind: store.ControlSteer,
				Payload: json.RawMessage(fmt.Sprintf(`{"message":"m%d"}`, i))}); err != nil {
				t.Errorf("post: %v", err)
				return
			}
		}
	})
	seen := make(chan int64, n)
	stop := make(chan struct{})
	var takers sync.WaitGroup
	for range 3 {
		takers.Go(func() {
			for {
				ms, err := s.TakeControls(ctx, []string{"r"})
				if err != nil {
					t.Errorf("take: %v", err)
					return
				}
				for _, m := range ms {
					seen <- m.ID
				}
				select {
				case <-stop:
					if len(ms) == 0 {
						return
					}
				default:
				}
			}
		})
	}
	posted.Wait()
	close(stop)
	takers.Wait()
	close(seen)
	ids := map[int64]bool{}
	for id := range seen {
		if ids[id] {
			t.Fatalf("message %d taken twice", id)
		}
		ids[id] = true
	}
	if len(ids) != n {
		t.Fatalf("took %d messages, want %d", len(ids), n)
	}
}
