package runs_test

import (
	"context"
	"math"
	"sync"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/testkit/agenttest"
	"github.com/drover-run/drover/runs"
)

// A resumed run whose vendor reports the conversation's running cost total
// (done metadata sessionCostUsd, as Claude Code does) records its own
// share, in its record and its done event, so that the session's runs add
// up to the conversation's total.
func TestLED3_ResumedRunRecordsItsOwnCost(t *testing.T) {
	totals := []float64{0.3, 0.5, 0.9} // the vendor's running total after each run
	var mu sync.Mutex
	n := 0
	vendor := &agenttest.Agent{Name: "cum", Fn: func(_ context.Context, req drover.Request, y func(drover.Event, error) bool) {
		mu.Lock()
		total := totals[n]
		n++
		mu.Unlock()
		d := drover.Event{Type: drover.TypeDone, Payload: drover.DonePayload{Status: drover.StatusSuccess, ResumeToken: "conv-1",
			Usage: drover.Usage{TotalCostUSD: &total}}}
		if req.Options.Resume != "" {
			d.Metadata = map[string]any{"sessionCostUsd": total}
		}
		y(d, nil)
	}}
	f := newFixture(t, runs.Config{}, vendor)
	first := f.await(t, f.start(t, runs.StartRequest{Agent: "cum", Prompt: "one"}))[0]
	var costs []float64
	costs = append(costs, *first.Usage.TotalCostUSD)
	for _, p := range []string{"two", "three"} {
		id := f.start(t, runs.StartRequest{Agent: "cum", Prompt: p, Options: drover.Options{SessionID: first.SessionID}})
		r := f.await(t, id)[0]
		costs = append(costs, *r.Usage.TotalCostUSD)
		evs := eventsOf(t, f.st, id)
		if d, _ := evs[len(evs)-1].Done(); math.Abs(*d.Usage.TotalCostUSD-*r.Usage.TotalCostUSD) > 1e-9 {
			t.Fatalf("done event says %v, the record %v", *d.Usage.TotalCostUSD, *r.Usage.TotalCostUSD)
		}
	}
	want := []float64{0.3, 0.2, 0.4}
	var sum float64
	for i, c := range costs {
		sum += c
		if math.Abs(c-want[i]) > 1e-9 {
			t.Fatalf("run costs %v, want %v", costs, want)
		}
	}
	if math.Abs(sum-0.9) > 1e-9 {
		t.Fatalf("the session's runs add up to %v, the conversation cost 0.9", sum)
	}
}
