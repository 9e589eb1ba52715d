package runs

import (
	"context"
	"fmt"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/store"
)

// TreeUsage is what a run and all its descendants used together (MCP-1's
// cost roll-up): the runs it started, the runs those started, and so on.
type TreeUsage struct {
	// Usage sums the usage of every run of the tree. An optional count
	// (cache, reasoning, turns) or the cost is the sum of the runs that
	// report it, absent when none does.
	Usage drover.Usage `json:"usage"`
	// Runs is the number of runs summed, the root included.
	Runs int `json:"runs"`
	// WithoutCost counts the runs whose agent reported no cost: Usage's
	// cost leaves them out.
	WithoutCost int `json:"withoutCost,omitempty"`
}

// SumTree returns the usage of run id and its descendants, as the ledger
// has them now: a run still going counts with what it has recorded so far
// (nothing, until it ends). store.ErrNotFound for an unknown id.
func SumTree(ctx context.Context, st store.Store, id string) (TreeUsage, error) {
	root, err := st.GetRun(ctx, id)
	if err != nil {
		return TreeUsage{}, fmt.Errorf("run %s: %w", id, err)
	}
	var t TreeUsage
	seen := map[string]bool{}
	for queue := []store.Run{*root}; len(queue) > 0; queue = queue[1:] {
		r := queue[0]
		if seen[r.ID] {
			continue // a ledger cannot hold a cycle, but a loop must not hang
		}
		seen[r.ID] = true
		t.add(r.Usage)
		children, err := st.Children(ctx, r.ID)
		if err != nil {
			return TreeUsage{}, fmt.Errorf("children of run %s: %w", r.ID, err)
		}
		queue = append(queue, children...)
	}
	return t, nil
}

func (t *TreeUsage) add(u drover.Usage) {
	t.Runs++
	s := &t.Usage
	s.InputTokens += u.InputTokens
	s.OutputTokens += u.OutputTokens
	s.ToolUses += u.ToolUses
	addOptional(&s.CacheReadTokens, u.CacheReadTokens)
	addOptional(&s.CacheWriteTokens, u.CacheWriteTokens)
	addOptional(&s.ReasoningTokens, u.ReasoningTokens)
	addOptional(&s.Turns, u.Turns)
	if u.TotalCostUSD == nil {
		t.WithoutCost++
	}
	addOptional(&s.TotalCostUSD, u.TotalCostUSD)
}

// addOptional adds *v to *sum when v is set, making the sum present.
func addOptional[T int64 | float64](sum **T, v *T) {
	if v == nil {
		return
	}
	if *sum == nil {
		*sum = new(T)
	}
	**sum += *v
}
