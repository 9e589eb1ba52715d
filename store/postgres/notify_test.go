package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/postgres/pgtest"
)

// DIST-3: a process is woken when another one, on its own connections,
// records events, ends a run, or posts a control message or cancel.
func TestDIST3_NotifyWakesOtherProcesses(t *testing.T) {
	u := pgtest.NewDatabase(t)
	writer, reader := open(t, u), open(t, u)
	ctx := context.Background()
	mkRuns(t, writer, "r1")
	within := func(what string, ch <-chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("no wake-up for %s", what)
		}
	}
	// The first wait also starts listening; wait for that to settle.
	within("listening", reader.EventsChanged())

	events, controls := reader.EventsChanged(), reader.ControlsChanged()
	if err := writer.AppendEvents(ctx, []store.Event{ev("r1", 1)}); err != nil {
		t.Fatal(err)
	}
	within("appended events", events)
	select {
	case <-controls:
		t.Fatal("controls woken by events")
	default:
	}

	controls = reader.ControlsChanged()
	if err := writer.RequestCancel(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	within("a cancel request", controls)

	controls = reader.ControlsChanged()
	if err := writer.PostControl(ctx, &store.ControlMessage{RunID: "r1", Kind: store.ControlInterrupt}); err != nil {
		t.Fatal(err)
	}
	within("a control message", controls)

	events = reader.EventsChanged()
	if err := writer.FinishRun(ctx, store.Finish{RunID: "r1", Status: store.StatusCompleted, EndedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	within("a run's end", events)
}
