package runs

import (
	"context"
	"encoding/json"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/store"
)

// Cost of runs that continue a vendor conversation. Some vendors (Claude
// Code) report a resumed run's cost as the whole conversation's running
// total; such a run's done event says so in metadata "sessionCostUsd". A
// run records its own share — the total minus what the conversation had
// cost by the end of the run it continues — so that summing runs' costs
// (a session, a dashboard, a tree) is honest.

// sessionCostKey is the done metadata naming the vendor's running total.
const sessionCostKey = "sessionCostUsd"

// conversationCost returns what the vendor conversation had cost by the end
// of run id: its done event's running total when it has one, else its
// recorded cost (a first run's cost is the conversation's so far). nil when
// unknown.
func conversationCost(ctx context.Context, st store.Store, id string) *float64 {
	r, err := st.GetRun(ctx, id)
	if err != nil || r.LastSeq == 0 {
		return nil
	}
	evs, err := st.Events(ctx, id, r.LastSeq-1, 1)
	if err == nil && len(evs) == 1 && evs[0].Type == drover.TypeDone {
		var ev drover.Event
		if json.Unmarshal(evs[0].JSON, &ev) == nil {
			if v, ok := ev.Metadata[sessionCostKey].(float64); ok {
				return &v
			}
		}
	}
	return r.Usage.TotalCostUSD
}

// ownShare rewrites a done event whose cost is a conversation's running
// total to the run's own share, given what the conversation had cost
// before the run (before); other events are returned as they are.
func ownShare(ev drover.Event, before *float64) drover.Event {
	d, ok := ev.Done()
	if !ok || before == nil || d.Usage.TotalCostUSD == nil {
		return ev
	}
	total, ok := ev.Metadata[sessionCostKey].(float64)
	if !ok || *d.Usage.TotalCostUSD != total {
		// No running total, or the adapter found the run's own cost
		// (Claude's per-result model usage): that is the run's share,
		// even when the conversation was continued outside this session.
		return ev
	}
	share := max(total-*before, 0)
	d.Usage.TotalCostUSD = &share
	ev.Payload = d
	return ev
}
