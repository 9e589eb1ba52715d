package protocol_test

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/protocol"
	"github.com/drover-run/drover/store"
)

// connect runs Serve over in-memory pipes and returns a client of it;
// served reports Serve's result once the client closed.
func (f *fixture) connect(t *testing.T) (*protocol.Client, chan error) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() {
		err := protocol.Serve(context.Background(), f.srv, inR, outW)
		outW.Close()
		served <- err
	}()
	c := protocol.NewClient(outR, inW)
	t.Cleanup(func() {
		c.Close()
		<-served
	})
	return c, served
}

func TestClient_RunSubscribeAwaitGetListEvents(t *testing.T) {
	f := newFixture(t, protocol.Config{})
	c, _ := f.connect(t)
	ctx := context.Background()
	run, err := c.Run(ctx, api.RunParams{Agent: "quick", Prompt: "5", Options: &drover.Options{Tier: drover.TierDryRun, IdleTimeout: time.Minute, Timeout: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := c.Subscribe(ctx, protocol.SubscribeParams{Runs: []string{run.RunID}})
	if err != nil {
		t.Fatal(err)
	}
	var seq int64
	for ev := range sub.Events() {
		if ev.Lagged != nil {
			continue
		}
		if ev.Event.RunID != run.RunID || ev.Event.Seq != seq+1 {
			t.Fatalf("event %+v after seq %d", ev.Event, seq)
		}
		seq = ev.Event.Seq
		if ev.Event.Type == drover.TypeDone {
			break
		}
	}
	if seq != 6 {
		t.Fatalf("%d events, want 6", seq)
	}
	if err := sub.Unsubscribe(ctx); err != nil {
		t.Fatal(err)
	}
	for range sub.Events() { // closed after Unsubscribe
	}
	rs, err := awaitIDs(ctx, c, run.RunID)
	if err != nil || rs[0].Status != store.StatusCompleted || rs[0].Timeout != time.Minute {
		t.Fatalf("await %+v %v", rs, err)
	}
	got, err := c.Get(ctx, api.GetParams{RunID: run.RunID})
	if err != nil || got.Run.ID != run.RunID || len(got.Messages) != 6 {
		t.Fatalf("get %+v %v", got, err)
	}
	list, err := listRuns(ctx, c, api.ListParams{Agent: "quick"})
	if err != nil || len(list) != 1 {
		t.Fatalf("list %+v %v", list, err)
	}
	evs, err := c.Events(ctx, api.EventsParams{RunID: run.RunID, AfterSeq: 4})
	if err != nil || len(evs.Events) != 2 {
		t.Fatalf("events %+v %v", evs, err)
	}
}

func TestClient_Errors(t *testing.T) {
	f := newFixture(t, protocol.Config{})
	c, _ := f.connect(t)
	ctx := context.Background()
	var pe *api.Error
	if _, err := c.Get(ctx, api.GetParams{RunID: "run_nope"}); !errors.As(err, &pe) || pe.Code != api.CodeNotFound {
		t.Errorf("get unknown: %v", err)
	}
	if _, err := c.Run(ctx, api.RunParams{Agent: "nosuch", Prompt: "x"}); !errors.As(err, &pe) || pe.Code != api.CodeValidation {
		t.Errorf("unknown agent: %v", err)
	}
	if err := cancelID(ctx, c, "run_nope"); err != nil {
		t.Errorf("cancel unknown: %v", err)
	}
	// A call abandoned by its context does not disturb later ones.
	hang, _ := c.Run(ctx, api.RunParams{Agent: "hang", Prompt: "x"})
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := awaitIDs(short, c, hang.RunID); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("await with deadline: %v", err)
	}
	if err := cancelID(ctx, c, hang.RunID); err != nil {
		t.Fatal(err)
	}
	if rs, err := awaitIDs(ctx, c, hang.RunID); err != nil || rs[0].Error != store.ReasonCancelled {
		t.Fatalf("await %+v %v", rs, err)
	}
}

// Concurrent calls are multiplexed by id.
func TestClient_Concurrent(t *testing.T) {
	f := newFixture(t, protocol.Config{})
	c, _ := f.connect(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			run, err := c.Run(ctx, api.RunParams{Agent: "quick", Prompt: "2"})
			if err != nil {
				t.Error(err)
				return
			}
			rs, err := awaitIDs(ctx, c, run.RunID)
			if err != nil || rs[0].ID != run.RunID || rs[0].Status != store.StatusCompleted {
				t.Errorf("await %s: %+v %v", run.RunID, rs, err)
			}
		})
	}
	wg.Wait()
}

// Close ends the connection: the server cancels the runs it started,
// calls fail with ErrClientClosed, subscriptions' channels close.
func TestClient_CloseCancelsRuns(t *testing.T) {
	f := newFixture(t, protocol.Config{})
	c, served := f.connect(t)
	ctx := context.Background()
	run, err := c.Run(ctx, api.RunParams{Agent: "hang", Prompt: "x"})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := c.Subscribe(ctx, protocol.SubscribeParams{All: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for range sub.Events() {
	}
	err = <-served
	served <- err // for the cleanup
	if err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if rs := await(t, f.sup, run.RunID); rs[0].Error != store.ReasonCancelled {
		t.Fatalf("run %+v", rs[0])
	}
	if _, err := listRuns(ctx, c, api.ListParams{}); !errors.Is(err, protocol.ErrClientClosed) {
		t.Fatalf("call after Close: %v", err)
	}
}

// PRO-1: the Go client of an all-runs subscription gets the synced notice,
// then events with increasing cursors, and resumes with AfterCursor.
func TestClient_SubscribeAllCursor(t *testing.T) {
	f := newFixture(t, protocol.Config{})
	c, _ := f.connect(t)
	ctx := context.Background()
	sub, err := c.Subscribe(ctx, protocol.SubscribeParams{All: true})
	if err != nil {
		t.Fatal(err)
	}
	first := <-sub.Events()
	if first.Synced == nil {
		t.Fatalf("first: %+v, want the synced notice", first)
	}
	run, err := c.Run(ctx, api.RunParams{Agent: "quick", Prompt: "2"})
	if err != nil {
		t.Fatal(err)
	}
	var cursors []int64
	for ev := range sub.Events() {
		if ev.Event.RunID != run.RunID || ev.Cursor <= 0 || (len(cursors) > 0 && ev.Cursor <= cursors[len(cursors)-1]) {
			t.Fatalf("event %+v after cursors %v", ev, cursors)
		}
		cursors = append(cursors, ev.Cursor)
		if ev.Event.Type == drover.TypeDone {
			break
		}
	}
	if err := sub.Unsubscribe(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := c.Subscribe(ctx, protocol.SubscribeParams{All: true, AfterCursor: &cursors[0]})
	if err != nil {
		t.Fatal(err)
	}
	ev := <-again.Events()
	if ev.Cursor != cursors[1] || ev.Event.Seq != 2 {
		t.Fatalf("resumed after %d: %+v, want cursor %d (seq 2)", cursors[0], ev, cursors[1])
	}
	if err := again.Unsubscribe(ctx); err != nil {
		t.Fatal(err)
	}
}
