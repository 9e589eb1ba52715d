package engine_test

import (
	"context"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/testkit/agenttest"
)

const benchEvents = 10000

// benchAdapter yields benchEvents text events, then done. It takes a tool
// filter, so that the engine's filter is on the measured path.
func benchAdapter() *agenttest.Agent {
	payload := drover.TextPayload{Content: "a typical assistant message of moderate length"}
	caps := drover.Capabilities{Tiers: drover.Tiers(), AllowedTools: true}
	return &agenttest.Agent{Name: "bench", Caps: &caps, Fn: func(_ context.Context, _ drover.Request, y func(drover.Event, error) bool) {
		for range benchEvents {
			if !y(drover.Event{Type: drover.TypeText, Agent: "bench", Timestamp: 1, Payload: payload}, nil) {
				return
			}
		}
		y(drover.Event{Type: drover.TypeDone, Agent: "bench", Timestamp: 1, Payload: drover.DonePayload{Status: drover.StatusSuccess}}, nil)
	}}
}

// BenchmarkEventPathRun measures events per second through Engine.Run with
// its guarantees (stamping, done handling, idle timer, tool filter).
func BenchmarkEventPathRun(b *testing.B) {
	e := engine.New(drover.NewRegistry())
	e.Registry().Register(benchAdapter())
	opts := drover.Options{IdleTimeout: 1 << 40, AllowedTools: []string{"Bash"}}
	b.ReportAllocs()
	for b.Loop() {
		events, _ := e.Run(context.Background(), "bench", "p", opts)
		n := 0
		for range events {
			n++
		}
		if n != benchEvents+1 {
			b.Fatalf("%d events", n)
		}
	}
	b.ReportMetric(float64(b.N*(benchEvents+1))/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkEventPathBaseline iterates the same adapter directly: the cost of
// producing the events, without the engine.
func BenchmarkEventPathBaseline(b *testing.B) {
	a := benchAdapter()
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		for range a.Run(context.Background(), drover.Request{}) {
			n++
		}
		if n != benchEvents+1 {
			b.Fatalf("%d events", n)
		}
	}
	b.ReportMetric(float64(b.N*(benchEvents+1))/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkEventPathParallel runs four such adapters through RunParallel.
func BenchmarkEventPathParallel(b *testing.B) {
	e := engine.New(drover.NewRegistry())
	e.Registry().Register(benchAdapter())
	specs := []engine.RunSpec{{Agent: "bench"}, {Agent: "bench"}, {Agent: "bench"}, {Agent: "bench"}}
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		for range e.RunParallel(context.Background(), specs) {
			n++
		}
		if n != 4*(benchEvents+1) {
			b.Fatalf("%d events", n)
		}
	}
	b.ReportMetric(float64(b.N*4*(benchEvents+1))/b.Elapsed().Seconds(), "events/s")
}
