package engine

import (
	"testing"
	"time"

	"github.com/drover-run/drover"
)

// FAIL-1: a cooldown ends when its time has passed; a shorter one never
// shortens a longer one already running; the code that started it is kept.
func TestFAIL1_CooldownRegistry(t *testing.T) {
	now := time.Unix(1000, 0)
	c := NewCooldowns()
	c.now = func() time.Time { return now }
	if u, _ := c.Until("k"); !u.IsZero() {
		t.Fatalf("unknown key cooling until %v", u)
	}
	c.Cool("k", drover.CodeAuthFailed, time.Minute)
	c.Cool("k", drover.CodeRateLimited, time.Second)
	if u, code := c.Until("k"); !u.Equal(now.Add(time.Minute)) || code != drover.CodeAuthFailed {
		t.Errorf("until %v %s, want the longer cooldown", u, code)
	}
	c.Cool("k", drover.CodeRateLimited, 2*time.Minute)
	if u, code := c.Until("k"); !u.Equal(now.Add(2*time.Minute)) || code != drover.CodeRateLimited {
		t.Errorf("until %v %s, want the extended cooldown", u, code)
	}
	now = now.Add(2 * time.Minute)
	if u, _ := c.Until("k"); !u.IsZero() {
		t.Errorf("still cooling at its end: %v", u)
	}
	for code, want := range map[drover.ErrorCode]time.Duration{drover.CodeRateLimited: time.Minute, drover.CodeOverloaded: 30 * time.Second,
		drover.CodeServerError: 15 * time.Second, drover.CodeAuthFailed: 15 * time.Minute, drover.CodeBadRequest: 0} {
		if got := CooldownFor(code); got != want {
			t.Errorf("CooldownFor(%s) = %v, want %v", code, got, want)
		}
	}
}

// TestFAIL1_SummedCostKeepsEstimate: usage summed over attempts is an
// estimate when any attempt's cost was.
func TestFAIL1_SummedCostKeepsEstimate(t *testing.T) {
	c1, c2 := 0.5, 0.25
	sum := addUsage(drover.Usage{InputTokens: 1, TotalCostUSD: &c1}, drover.Usage{InputTokens: 2, TotalCostUSD: &c2, CostEstimated: true})
	if !sum.CostEstimated || sum.InputTokens != 3 || *sum.TotalCostUSD != 0.75 {
		t.Fatalf("sum %+v", sum)
	}
	if addUsage(drover.Usage{TotalCostUSD: &c1}, drover.Usage{TotalCostUSD: &c2}).CostEstimated {
		t.Fatal("two reported costs summed to an estimate")
	}
}
