package engine

import (
	"github.com/drover-run/drover"
	"github.com/drover-run/drover/pricing"
)

// limiter is one run's guard of Options.MaxTurns and MaxBudgetUSD where
// the vendor does not enforce them itself (Capabilities.NativeMaxTurns,
// NativeMaxBudget), and the cost estimate of a run whose vendor reports
// none (docs/limits.md).
//
// A turn is one model response: it begins with the run's first assistant
// event (text, text_delta, thinking or tool_use) and again with the first
// assistant event after a tool_result, the model answering what its tools
// returned. That is what Claude's --max-turns and Gemini's
// model.maxSessionTurns limit (measured: with a limit of N, the N-th
// response's tools run, and the run ends before response N+1): drover ends
// the run as soon as the last tool call of response N has its result, the
// vendor then asking the model for response N+1, or at the latest when
// response N+1 begins, before any of its events is passed on; it stops
// the vendor's process group, so no tool of response N+1 runs. Why not an
// interrupt where the vendor takes one (which would keep its session and
// report its usage): an interrupt lands asynchronously, and a fast model's
// response N+1 could start a tool before it does.
type limiter struct {
	maxTurns int     // enforced by drover; 0: not
	budget   float64 // enforced by drover; 0: not
	prices   []map[string]drover.Price
	model    string // the run's model: Options.Model, or init's

	turns     int64
	toolUses  int64
	afterTool bool                // a tool_result came after the last assistant event
	open      map[string]struct{} // tool calls of this turn without a result yet
}

// newLimiter is the guard of limits l of one attempt with model (its
// Options.Model, "" when the vendor picks it).
func newLimiter(l limits, model string) *limiter {
	return &limiter{maxTurns: l.maxTurns, budget: l.budget, prices: l.prices, model: model, open: map[string]struct{}{}}
}

func (l *limiter) price() (drover.Price, bool) { return pricing.Lookup(l.model, l.prices...) }

// observe counts ev and reports the status that ends the run before ev is
// passed on (StatusMaxTurns), or an error that ends it (an init naming a
// model with no price under a budget); "" and nil let ev through.
func (l *limiter) observe(ev drover.Event) (drover.DoneStatus, error) {
	switch ev.Type {
	case drover.TypeInit:
		if p, ok := ev.Payload.(drover.InitPayload); ok && p.Model != "" {
			if _, known := pricing.Lookup(p.Model, l.prices...); known || l.model == "" {
				l.model = p.Model
			}
		}
		if l.budget > 0 {
			if _, ok := l.price(); !ok {
				return "", noPrice(l.model)
			}
		}
	case drover.TypeText, drover.TypeTextDelta, drover.TypeThinking, drover.TypeToolUse, drover.TypeToolResult:
		if _, nested := ev.Metadata["parentToolUseId"]; nested {
			// A vendor's own subagent (UES-5) works inside one tool call
			// of the run's turn: its responses are not the run's turns.
			return "", nil
		}
	}
	switch ev.Type {
	case drover.TypeText, drover.TypeTextDelta, drover.TypeThinking, drover.TypeToolUse:
		if l.turns == 0 || l.afterTool {
			if l.maxTurns > 0 && l.turns >= int64(l.maxTurns) {
				return drover.StatusMaxTurns, nil
			}
			l.turns++
			l.afterTool = false
		}
		if p, ok := ev.Payload.(drover.ToolUsePayload); ok {
			l.toolUses++
			l.open[p.ToolUseID] = struct{}{}
		}
	case drover.TypeToolResult:
		l.afterTool = true
		if p, ok := ev.Payload.(drover.ToolResultPayload); ok {
			delete(l.open, p.ToolUseID)
		}
	}
	return "", nil
}

// reached reports, after an event was passed on, that the run is to end
// now: its last allowed turn's tool calls all have their results, so all
// the vendor can do next is begin a turn past the limit.
func (l *limiter) reached() drover.DoneStatus {
	if l.maxTurns > 0 && l.turns >= int64(l.maxTurns) && l.afterTool && len(l.open) == 0 {
		return drover.StatusMaxTurns
	}
	return ""
}

// finish completes the vendor's own done: the cost estimated from its
// tokens when it reports none (CostEstimated), and max_budget when a
// budget drover enforces was reached. Turns stay the vendor's (absent
// when it reports none): drover's count is only a limit's.
func (l *limiter) finish(d *drover.DonePayload) {
	u := &d.Usage
	// A cost of 0 for tokens is a vendor that could not price the model
	// (OpenCode's catalogue has no price for a custom endpoint's model);
	// a price drover knows is better then.
	if tokens := u.InputTokens + u.OutputTokens; tokens > 0 && (u.TotalCostUSD == nil || *u.TotalCostUSD == 0) {
		if p, ok := l.price(); ok {
			if c := p.Cost(*u); u.TotalCostUSD == nil || c > 0 {
				u.TotalCostUSD, u.CostEstimated = &c, true
			}
		}
	}
	if l.budget > 0 && u.TotalCostUSD != nil && *u.TotalCostUSD >= l.budget && d.Status == drover.StatusSuccess {
		d.Status = drover.StatusMaxBudget
	}
}

// limited is the done of a run drover ended at a limit: the usage it
// counted so far (turns, tool calls; tokens the vendor had not reported).
func (l *limiter) limited(status drover.DoneStatus, durationMs int64) drover.DonePayload {
	n := l.turns
	return drover.DonePayload{Status: status, DurationMs: durationMs, Usage: drover.Usage{Turns: &n, ToolUses: l.toolUses}}
}
