package acp_test

import (
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/acp/acptest"
)

// TestACP1_UsageUpdateCost: the cost of the agent's usage_update (the
// session's cumulative cost) is the run's done.usage.totalCostUsd, less
// what the session had cost before the prompt (a resumed session's, here
// reported while session/load replays its history), as the vendor reported
// it (not estimated, even where drover knows a price); every usage_update
// is still an extension event. A cost in another currency, or none, leaves
// no cost (drover's estimate, where it knows a price).
func TestACP1_UsageUpdateCost(t *testing.T) {
	prices := map[string]drover.Price{"fake-model": {Input: 1, Output: 1}} // 20 in, 5 out: $0.000025
	for _, c := range []struct {
		name, prompt, resume string
		prices               map[string]drover.Price
		cost                 float64 // -1: none
		estimated            bool
		updates              int
		sessionCost          any // done metadata sessionCostUsd
	}{
		{name: "two updates", prompt: "cost 0.01 0.03", cost: 0.03, updates: 2},
		{name: "priced model", prompt: "cost 0.01 0.03", prices: prices, cost: 0.03, updates: 2},
		{name: "continued session", prompt: "cost 0.05", resume: acptest.KnownSession, cost: 0.02, updates: 1, sessionCost: 0.05},
		{name: "session started over", prompt: "cost 0.01", resume: acptest.KnownSession, cost: 0.01, updates: 1, sessionCost: 0.01},
		{name: "continued, nothing spent", prompt: "cost 0.03", resume: acptest.KnownSession, cost: 0, updates: 1, sessionCost: 0.03},
		{name: "not USD", prompt: "cost 0.01:EUR", cost: -1, updates: 1},
		{name: "USD then EUR", prompt: "cost 0.01 0.03:EUR", cost: -1, updates: 2},
		{name: "usd spelled lower", prompt: "cost 0.04:usd", cost: 0.04, updates: 1},
		{name: "no cost in the update", prompt: "cost -", cost: -1, updates: 1},
		{name: "no usage_update", prompt: "cost", cost: -1},
		{name: "no usage_update, priced", prompt: "cost", prices: prices, cost: 0.000025, estimated: true},
		{name: "continued, no usage_update", prompt: "cost", resume: acptest.KnownSession, cost: -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			evs := fake{}.run(t, c.prompt, drover.Options{Tier: drover.TierAutonomous, Resume: c.resume, Prices: c.prices})
			n := 0
			for _, ev := range evs {
				if ev.Type == "fake-acp:usage_update" {
					n++
				}
			}
			if n != c.updates {
				t.Errorf("%d fake-acp:usage_update events, want %d (those of the prompt; not the history's)", n, c.updates)
			}
			d, meta := doneOf(evs)
			if d.Status != drover.StatusSuccess || d.Usage.InputTokens != 20 || d.Usage.OutputTokens != 5 {
				t.Fatalf("done %+v", d)
			}
			switch got := d.Usage.TotalCostUSD; {
			case c.cost < 0 && got != nil:
				t.Errorf("totalCostUsd %v, want none", *got)
			case c.cost >= 0 && (got == nil || *got != c.cost):
				t.Errorf("totalCostUsd %v, want %v", ptrString(got), c.cost)
			}
			if d.Usage.CostEstimated != c.estimated {
				t.Errorf("costEstimated %v, want %v", d.Usage.CostEstimated, c.estimated)
			}
			if got := meta[drover.MetaSessionCostUSD]; got != c.sessionCost {
				t.Errorf("metadata %s %v, want %v", drover.MetaSessionCostUSD, got, c.sessionCost)
			}
		})
	}
}

func ptrString(f *float64) any {
	if f == nil {
		return "none"
	}
	return *f
}
