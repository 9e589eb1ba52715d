package engine_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/testkit/agenttest"
	"github.com/drover-run/drover/pricing"
)

func toolUse(id string) drover.Event {
	return ev(drover.TypeToolUse, drover.ToolUsePayload{ToolName: "shell", ToolUseID: id, Input: map[string]any{}})
}

func toolResult(id string) drover.Event {
	return ev(drover.TypeToolResult, drover.ToolResultPayload{ToolName: "shell", ToolUseID: id, Status: drover.ToolSuccess})
}

// looper is a scripted agent: init (model), then responses, each some
// text and tool calls whose results it yields only after "running" them
// (counted in ran), then a final text and done with usage.
type looper struct {
	model     string
	responses [][]string // tool ids per response
	usage     drover.Usage
	parallel  bool           // a response's tool calls all start before their results
	ran       atomic.Int32   // tools run
	began     atomic.Int32   // responses begun
	got       drover.Options // the options the adapter was given
}

// start yields the tool_use of id, or in parallel mode of every call of
// the response at once.
func (l *looper) start(y func(drover.Event, error) bool, tools []string, id string) bool {
	if !l.parallel {
		return y(toolUse(id), nil)
	}
	for _, id := range tools {
		if !y(toolUse(id), nil) {
			return false
		}
	}
	return true
}

func (l *looper) adapter(caps drover.Capabilities) *agenttest.Agent {
	caps.Tiers = drover.Tiers()
	return &agenttest.Agent{Name: "loop", Caps: &caps, Fn: func(ctx context.Context, req drover.Request, y func(drover.Event, error) bool) {
		l.got = req.Options
		if !y(ev(drover.TypeInit, drover.InitPayload{Model: l.model, Tools: []string{"shell"}}), nil) {
			return
		}
		for i, tools := range l.responses {
			l.began.Add(1)
			if !y(text("response "+string(rune('1'+i))), nil) {
				return
			}
			for i, id := range tools {
				if (!l.parallel || i == 0) && !l.start(y, tools, id) || ctx.Err() != nil {
					return
				}
				l.ran.Add(1)
				if !l.parallel && !y(toolResult(id), nil) {
					return
				}
			}
			for _, id := range tools {
				if l.parallel && !y(toolResult(id), nil) {
					return
				}
			}
		}
		if !y(text("end"), nil) {
			return
		}
		y(ev(drover.TypeDone, drover.DonePayload{Status: drover.StatusSuccess, Result: "end", Usage: l.usage, DurationMs: 1}), nil)
	}}
}

// TestLIM_MaxTurnsEnforced: with a limit of 2 on an agent that has none of
// its own, response 3 never starts: its tool does not run, the adapter is
// stopped and the run ends max_turns with the usage counted so far.
func TestLIM_MaxTurnsEnforced(t *testing.T) {
	l := &looper{model: "gpt-5", responses: [][]string{{"a", "b"}, {"c"}, {"d"}}, parallel: true}
	a := l.adapter(drover.Capabilities{})
	evs := runAll(t, engineWith(t, a), context.Background(), "loop", drover.Options{MaxTurns: 2})
	d := checkShape(t, evs)
	if d.Status != drover.StatusMaxTurns || d.Usage.Turns == nil || *d.Usage.Turns != 2 || d.Usage.ToolUses != 3 {
		t.Fatalf("done %+v (turns %v), want max_turns after 2 turns and 3 tool calls: %v", d, d.Usage.Turns, types(evs))
	}
	if n := l.ran.Load(); n != 3 {
		t.Fatalf("%d tools ran, want 3 (a, b, c; never d)", n)
	}
	// Stopped once turn 2's last call had its result: the agent was not
	// left to begin response 3.
	if n := l.began.Load(); n != 2 || evs[len(evs)-2].Type != drover.TypeToolResult {
		t.Fatalf("the agent began %d responses; events %v", n, types(evs))
	}
	if !a.Stopped.Load() || !a.Returned.Load() {
		t.Fatal("the adapter was not stopped")
	}
	if l.got.MaxTurns != 0 {
		t.Fatalf("the adapter was given maxTurns %d: the engine enforces it", l.got.MaxTurns)
	}
	for _, e := range evs {
		if p, ok := e.Payload.(drover.TextPayload); ok && p.Content == "response 3" {
			t.Fatal("response 3 was passed on")
		}
	}
	if caps := evs[0].Payload.(drover.InitPayload).Capabilities; caps == nil || !caps.MaxTurns || !caps.MaxBudget {
		t.Fatalf("init capabilities %+v: want maxTurns and maxBudget", caps)
	}
}

// TestLIM_UnderTheLimitSucceeds: the same script within its limit runs to
// the end.
func TestLIM_UnderTheLimitSucceeds(t *testing.T) {
	l := &looper{model: "gpt-5", responses: [][]string{{"a", "b"}, {"c"}}, parallel: true}
	evs := runAll(t, engineWith(t, l.adapter(drover.Capabilities{})), context.Background(), "loop", drover.Options{MaxTurns: 3})
	d := checkShape(t, evs)
	if d.Status != drover.StatusSuccess || l.ran.Load() != 3 {
		t.Fatalf("done %+v, ran %d: want success after 3 turns", d, l.ran.Load())
	}
}

// TestLIM_SequentialToolsCountAsTurns: a vendor that reports a response's
// tool calls one after another (call, result, call, result: Codex exec)
// does not say where its response ends, so each call after a result counts
// as a turn: drover's count errs on the strict side (docs/limits.md).
func TestLIM_SequentialToolsCountAsTurns(t *testing.T) {
	l := &looper{model: "gpt-5", responses: [][]string{{"a", "b"}}}
	evs := runAll(t, engineWith(t, l.adapter(drover.Capabilities{})), context.Background(), "loop", drover.Options{MaxTurns: 1})
	if d := checkShape(t, evs); d.Status != drover.StatusMaxTurns || *d.Usage.Turns != 1 || l.ran.Load() != 1 {
		t.Fatalf("done %+v, ran %d", d, l.ran.Load())
	}
}

// TestLIM_StopAtNextTurnWhenCallsStayOpen: when a call of the last
// allowed turn never gets its result (a vendor that reports some tools
// only when they start), drover stops at the first event of the next turn,
// which is not passed on.
func TestLIM_StopAtNextTurnWhenCallsStayOpen(t *testing.T) {
	a := &agenttest.Agent{Name: "open", Fn: func(_ context.Context, _ drover.Request, y func(drover.Event, error) bool) {
		for _, e := range []drover.Event{toolUse("a"), toolUse("b"), toolResult("a"), text("turn 2"), done(drover.StatusSuccess)} {
			if !y(e, nil) {
				return
			}
		}
	}}
	evs := runAll(t, engineWith(t, a), context.Background(), "open", drover.Options{MaxTurns: 1})
	d := checkShape(t, evs)
	if d.Status != drover.StatusMaxTurns || *d.Usage.Turns != 1 || d.Usage.ToolUses != 2 || len(evs) != 4 || !a.Stopped.Load() {
		t.Fatalf("done %+v: %v", d, types(evs))
	}
}

// TestLIM_SubagentResponsesAreNotTurns: the events of a vendor's own
// subagent (metadata.parentToolUseId) work inside the run's tool call and
// count no turn.
func TestLIM_SubagentResponsesAreNotTurns(t *testing.T) {
	nested := func(e drover.Event) drover.Event {
		e.Metadata = map[string]any{"parentToolUseId": "task"}
		return e
	}
	a := &agenttest.Agent{Name: "sub", Fn: func(_ context.Context, _ drover.Request, y func(drover.Event, error) bool) {
		for _, e := range []drover.Event{toolUse("task"), nested(toolUse("n1")), nested(toolResult("n1")), nested(text("sub says")),
			nested(toolUse("n2")), nested(toolResult("n2")), toolResult("task"), text("done"), done(drover.StatusSuccess)} {
			if !y(e, nil) {
				return
			}
		}
	}}
	evs := runAll(t, engineWith(t, a), context.Background(), "sub", drover.Options{MaxTurns: 2})
	if d := checkShape(t, evs); d.Status != drover.StatusSuccess {
		t.Fatalf("done %+v: %v", d, types(evs))
	}
}

// TestLIM_NativeLimitsPassedOn: a vendor that enforces a limit itself gets
// it, and drover does not cut its run.
func TestLIM_NativeLimitsPassedOn(t *testing.T) {
	l := &looper{model: "unpriced-model", responses: [][]string{{"a"}, {"b"}, {"c"}}}
	caps := drover.Capabilities{NativeMaxTurns: true, NativeMaxBudget: true}
	evs := runAll(t, engineWith(t, l.adapter(caps)), context.Background(), "loop", drover.Options{MaxTurns: 1, MaxBudgetUSD: 0.5})
	if d := checkShape(t, evs); d.Status != drover.StatusSuccess || l.got.MaxTurns != 1 || l.got.MaxBudgetUSD != 0.5 {
		t.Fatalf("done %+v, adapter got %d turns and $%g", d, l.got.MaxTurns, l.got.MaxBudgetUSD)
	}
}

// TestLIM_BudgetAndEstimatedCost: a vendor that reports tokens and no cost
// gets drover's estimate (marked), and a budget it reaches ends the run
// max_budget with the usage; a larger budget lets it succeed.
func TestLIM_BudgetAndEstimatedCost(t *testing.T) {
	cr := int64(100_000)
	usage := drover.Usage{InputTokens: 200_000, OutputTokens: 50_000, CacheReadTokens: &cr}
	// gpt-5: 0.2 M × $1.25 + 0.05 M × $10 + 0.1 M × $0.125 = $0.7625
	const want = 0.7625
	for _, c := range []struct {
		budget float64
		status drover.DoneStatus
	}{{0, drover.StatusSuccess}, {0.5, drover.StatusMaxBudget}, {want, drover.StatusMaxBudget}, {1, drover.StatusSuccess}} {
		l := &looper{model: "gpt-5-2025-08-07", responses: [][]string{{"a"}}, usage: usage}
		evs := runAll(t, engineWith(t, l.adapter(drover.Capabilities{})), context.Background(), "loop", drover.Options{MaxBudgetUSD: c.budget})
		d := checkShape(t, evs)
		if d.Status != c.status || d.Usage.TotalCostUSD == nil || math.Abs(*d.Usage.TotalCostUSD-want) > 1e-9 ||
			!d.Usage.CostEstimated || d.Usage.InputTokens != usage.InputTokens {
			t.Errorf("budget %g: done %+v (cost %v), want %s at $%g estimated", c.budget, d, d.Usage.TotalCostUSD, c.status, want)
		}
		if l.got.MaxBudgetUSD != 0 {
			t.Errorf("the adapter was given a budget of %g", l.got.MaxBudgetUSD)
		}
	}
}

// TestLIM_VendorCostNotEstimated: a cost the vendor reports is kept, not
// marked estimated; a cost of 0 for tokens is replaced by a known price.
func TestLIM_VendorCostNotEstimated(t *testing.T) {
	cost := 0.25
	l := &looper{model: "gpt-5", usage: drover.Usage{InputTokens: 10, OutputTokens: 10, TotalCostUSD: &cost}}
	d := checkShape(t, runAll(t, engineWith(t, l.adapter(drover.Capabilities{})), context.Background(), "loop", drover.Options{MaxBudgetUSD: 0.2}))
	if d.Status != drover.StatusMaxBudget || *d.Usage.TotalCostUSD != cost || d.Usage.CostEstimated {
		t.Fatalf("done %+v", d)
	}
	zero := 0.0
	l = &looper{model: "drover/default", usage: drover.Usage{InputTokens: 1_000_000, TotalCostUSD: &zero}}
	d = checkShape(t, runAll(t, engineWith(t, l.adapter(drover.Capabilities{})), context.Background(), "loop",
		drover.Options{MaxBudgetUSD: 0.5, Prices: map[string]drover.Price{"default": {Input: 1}}}))
	if d.Status != drover.StatusMaxBudget || *d.Usage.TotalCostUSD != 1 || !d.Usage.CostEstimated {
		t.Fatalf("vendor cost 0: done %+v", d)
	}
}

// TestLIM_UnknownModelRefused: a budget drover must enforce on a model it
// has no price for fails before the agent starts (a named model) or at
// its init (the vendor's default model), never a run without a limit.
func TestLIM_UnknownModelRefused(t *testing.T) {
	l := &looper{model: "mystery-9", responses: [][]string{{"a"}}}
	a := l.adapter(drover.Capabilities{})
	evs := runAll(t, engineWith(t, a), context.Background(), "loop", drover.Options{Model: "mystery-9", MaxBudgetUSD: 1})
	if d := checkShape(t, evs); d.Status != drover.StatusError || errorOf(t, evs).Code != drover.CodeUnsupportedOption || a.Calls.Load() != 0 {
		t.Fatalf("named model: %v %+v, adapter called %d times", types(evs), errorOf(t, evs), a.Calls.Load())
	}
	evs = runAll(t, engineWith(t, a), context.Background(), "loop", drover.Options{MaxBudgetUSD: 1})
	if d := checkShape(t, evs); d.Status != drover.StatusError || errorOf(t, evs).Code != drover.CodeUnsupportedOption || l.ran.Load() != 0 {
		t.Fatalf("default model: %v %+v, %d tools ran", types(evs), errorOf(t, evs), l.ran.Load())
	}
	// Without a budget an unpriced model is no error: its cost is unknown.
	l.usage = drover.Usage{InputTokens: 5, OutputTokens: 5}
	d := checkShape(t, runAll(t, engineWith(t, a), context.Background(), "loop", drover.Options{}))
	if d.Status != drover.StatusSuccess || d.Usage.TotalCostUSD != nil || d.Usage.CostEstimated {
		t.Fatalf("no budget: %+v", d)
	}
}

// TestLIM_PriceOverrides: Options.Prices win over the DROVER_PRICES file,
// which wins over the built-in table; a bad file is a clear error.
func TestLIM_PriceOverrides(t *testing.T) {
	file := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(file, []byte(`{"mystery-9": {"input": 2, "output": 0}, "gpt-5": {"input": 3, "output": 0}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(pricing.Env, file)
	usage := drover.Usage{InputTokens: 1_000_000}
	for _, c := range []struct {
		model  string
		prices map[string]drover.Price
		want   float64
	}{
		{"mystery-9", nil, 2},
		{"gpt-5", nil, 3},
		{"gpt-5", map[string]drover.Price{"gpt-5": {Input: 7}}, 7},
		{"mystery-9-turbo", map[string]drover.Price{"mystery": {Input: 9}}, 9},
		{"gpt-4o", nil, 2.5},
	} {
		l := &looper{model: c.model, usage: usage}
		d := checkShape(t, runAll(t, engineWith(t, l.adapter(drover.Capabilities{})), context.Background(), "loop",
			drover.Options{Model: c.model, Prices: c.prices, MaxBudgetUSD: 100}))
		if d.Status != drover.StatusSuccess || d.Usage.TotalCostUSD == nil || *d.Usage.TotalCostUSD != c.want {
			t.Errorf("%s %v: done %+v (cost %v), want $%g", c.model, c.prices, d, d.Usage.TotalCostUSD, c.want)
		}
	}
	if err := os.WriteFile(file, []byte(`{"m": {"input": -1}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	l := &looper{model: "gpt-5"}
	evs := runAll(t, engineWith(t, l.adapter(drover.Capabilities{})), context.Background(), "loop", drover.Options{})
	if p := errorOf(t, evs); p.Code != drover.CodeValidation {
		t.Fatalf("bad prices file: %+v", p)
	}
	if _, err := engine.New(drover.NewRegistry()).Run(context.Background(), "x", "p", drover.Options{Prices: map[string]drover.Price{"m": {Output: -2}}}); err == nil {
		t.Fatal("a negative price was accepted")
	}
}

func TestLIM_LookupPrice(t *testing.T) {
	for model, want := range map[string]float64{
		"gpt-5":                    1.25,
		"gpt-5-2025-08-07":         1.25,
		"openai/gpt-5-mini":        0.25,
		"GPT-5-MINI-2025-08-07":    0.25,
		"gpt-5.5":                  -1,
		"claude-opus-4-5-20251101": 5,
		"claude-opus-4-20250514":   15,
		"models/gemini-2.5-flash":  0.3,
		"gemini-2.5-flash-lite":    0.1,
		"gemini-2.5-flashy":        -1,
		"":                         -1,
	} {
		p, ok := pricing.Lookup(model, pricing.Builtin())
		if got := map[bool]float64{true: p.Input, false: -1}[ok]; got != want {
			t.Errorf("%q: input price %g, want %g", model, got, want)
		}
	}
}
