package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/testkit/agenttest"
	"github.com/drover-run/drover/internal/testkit/uestest"
	"github.com/drover-run/drover/runs"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ev(t drover.EventType, p any) drover.Event { return drover.Event{Type: t, Payload: p} }

func text(s string) drover.Event { return ev(drover.TypeText, drover.TextPayload{Content: s}) }

func done(s drover.DoneStatus) drover.Event {
	return ev(drover.TypeDone, drover.DonePayload{Status: s, DurationMs: 1})
}

func engineWith(t *testing.T, adapters ...*agenttest.Agent) *engine.Engine {
	t.Helper()
	reg := drover.NewRegistry()
	for _, a := range adapters {
		if err := reg.Register(a); err != nil {
			t.Fatal(err)
		}
	}
	return engine.New(reg)
}

func runAll(t *testing.T, e *engine.Engine, ctx context.Context, agent string, opts drover.Options, h ...engine.Hooks) []drover.Event {
	t.Helper()
	req := engine.Request{Agent: agent, Prompt: "prompt", Options: opts}
	if len(h) > 0 {
		req.Hooks = h[0]
	}
	events, err := e.Start(ctx, req)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return slices.Collect(events)
}

// checkShape asserts ENG-006/ENG-007 (exactly one done, and it is last)
// and that the engine stamped every event.
func checkShape(t *testing.T, evs []drover.Event) drover.DonePayload {
	t.Helper()
	for i, e := range evs {
		if e.Agent == "" || e.SessionID == "" || e.Timestamp == 0 {
			t.Errorf("event %d not stamped: %+v", i, e)
		}
	}
	d, err := uestest.OneDoneLast(evs)
	if err != nil {
		t.Fatalf("%v: %v", err, types(evs))
	}
	return d
}

func types(evs []drover.Event) []drover.EventType {
	out := make([]drover.EventType, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

func errorOf(t *testing.T, evs []drover.Event) drover.ErrorPayload {
	t.Helper()
	for _, e := range evs {
		if p, ok := e.Payload.(drover.ErrorPayload); ok {
			return p
		}
	}
	t.Fatalf("no error event in %v", types(evs))
	return drover.ErrorPayload{}
}

func TestENG001_Registry(t *testing.T) {
	reg := drover.NewRegistry()
	a, b := &agenttest.Agent{Name: "a"}, &agenttest.Agent{Name: "b"}
	if err := reg.Register(a, "alpha"); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(&agenttest.Agent{Name: "a"}); !errors.Is(err, drover.ErrAgentExists) {
		t.Fatalf("duplicate id: err = %v, want ErrAgentExists", err)
	}
	if err := reg.Register(&agenttest.Agent{Name: "c"}, "alpha"); !errors.Is(err, drover.ErrAgentExists) {
		t.Fatalf("duplicate alias: err = %v, want ErrAgentExists", err)
	}
	if _, ok := reg.Get("c"); ok {
		t.Fatal("a failed Register must register nothing")
	}
	if err := reg.Register(b); err != nil {
		t.Fatal(err)
	}
	if got, ok := reg.Get("alpha"); !ok || got != a {
		t.Fatalf("Get(alias) = %v, %v", got, ok)
	}
	if got := reg.List(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("List = %v", got)
	}
	if !reg.Unregister("a") || reg.Unregister("a") {
		t.Fatal("Unregister must report true once, then false")
	}
	if _, ok := reg.Get("alpha"); ok {
		t.Fatal("alias survived Unregister")
	}
	if err := reg.Register(&agenttest.Agent{Name: "x"}, "alpha"); err != nil {
		t.Fatalf("alias should be free again: %v", err)
	}
}

func TestENG002_EventHelpers(t *testing.T) {
	before := time.Now().UnixMilli()
	e := drover.NewEvent(drover.TypeText, "claude-code", "s1", drover.TextPayload{Content: "hi"})
	if e.Type != drover.TypeText || e.Agent != "claude-code" || e.SessionID != "s1" || e.Timestamp < before {
		t.Fatalf("NewEvent = %+v", e)
	}
	if !drover.IsAgentEvent(e) || !drover.IsAgentEvent(&e) {
		t.Fatal("IsAgentEvent rejects a valid event")
	}
	seen := map[string]bool{}
	for range 10000 {
		id := drover.NewSessionID()
		if len(id) != 36 || id[14] != '4' || seen[id] {
			t.Fatalf("NewSessionID = %q (dup %v)", id, seen[id])
		}
		seen[id] = true
	}
	bad := map[string]any{
		"nil":                  nil,
		"no agent":             drover.Event{Type: drover.TypeText, Timestamp: 1, Payload: drover.TextPayload{}},
		"no timestamp":         drover.Event{Type: drover.TypeText, Agent: "a", Payload: drover.TextPayload{}},
		"unknown type":         drover.Event{Type: "bogus", Agent: "a", Timestamp: 1},
		"core without payload": drover.Event{Type: drover.TypeDone, Agent: "a", Timestamp: 1},
		"wrong payload":        drover.Event{Type: drover.TypeDone, Agent: "a", Timestamp: 1, Payload: drover.TextPayload{}},
		"bad done status":      drover.Event{Type: drover.TypeDone, Agent: "a", Timestamp: 1, Payload: drover.DonePayload{Status: "meh"}},
		"string":               "hello",
		"map bad type":         map[string]any{"type": 3, "agent": "a", "timestamp": 1},
	}
	for name, v := range bad {
		if drover.IsAgentEvent(v) {
			t.Errorf("%s: IsAgentEvent = true, want false", name)
		}
	}
	good := map[string]any{"type": "codex:plan_update", "agent": "codex", "timestamp": 5, "sessionId": "x", "payload": map[string]any{"a": 1}}
	if !drover.IsAgentEvent(good) {
		t.Error("decoded extension event rejected")
	}
}

func TestENG003_UnknownAgent(t *testing.T) {
	e := engineWith(t, &agenttest.Agent{Name: "a"})
	_, err := e.Run(context.Background(), "nope", "p", drover.Options{})
	if !errors.Is(err, drover.ErrUnknownAgent) {
		t.Fatalf("err = %v, want ErrUnknownAgent", err)
	}
}

func TestENG004_AdapterFailure(t *testing.T) {
	cases := map[string]func(context.Context, drover.Request, func(drover.Event, error) bool){
		"yields error": func(_ context.Context, _ drover.Request, y func(drover.Event, error) bool) {
			if y(text("partial"), nil) {
				y(drover.Event{}, errors.New("boom"))
			}
		},
		"panics": func(_ context.Context, _ drover.Request, y func(drover.Event, error) bool) {
			y(text("partial"), nil)
			panic("kaboom")
		},
	}
	for name, run := range cases {
		t.Run(name, func(t *testing.T) {
			e := engineWith(t, &agenttest.Agent{Name: "a", Fn: run})
			evs := runAll(t, e, context.Background(), "a", drover.Options{})
			d := checkShape(t, evs)
			if d.Status != drover.StatusError {
				t.Fatalf("done status %s, want error", d.Status)
			}
			p := errorOf(t, evs)
			if p.Code != drover.CodeAdapterError || p.Recoverable {
				t.Fatalf("error = %+v, want ADAPTER_ERROR non-recoverable", p)
			}
			if !slices.Equal(types(evs), []drover.EventType{"text", "error", "done"}) {
				t.Fatalf("types = %v", types(evs))
			}
		})
	}
	t.Run("typed error keeps its code", func(t *testing.T) {
		e := engineWith(t, &agenttest.Agent{Name: "a", Fn: func(_ context.Context, _ drover.Request, y func(drover.Event, error) bool) {
			y(drover.Event{}, &drover.Error{Code: drover.CodeUnsupportedOption, Message: "no"})
		}})
		evs := runAll(t, e, context.Background(), "a", drover.Options{})
		checkShape(t, evs)
		if p := errorOf(t, evs); p.Code != drover.CodeUnsupportedOption {
			t.Fatalf("code = %s", p.Code)
		}
	})
	t.Run("failure after done is swallowed", func(t *testing.T) {
		for _, after := range []string{"error", "panic"} {
			e := engineWith(t, &agenttest.Agent{Name: "a", Fn: func(_ context.Context, _ drover.Request, y func(drover.Event, error) bool) {
				y(done(drover.StatusSuccess), nil)
				if after == "panic" {
					panic("late")
				}
				y(drover.Event{}, errors.New("late"))
			}})
			evs := runAll(t, e, context.Background(), "a", drover.Options{})
			if d := checkShape(t, evs); d.Status != drover.StatusSuccess || len(evs) != 1 {
				t.Fatalf("%s after done: %v", after, types(evs))
			}
		}
	})
}

func blockUntilCancelled(ctx context.Context, _ drover.Request, y func(drover.Event, error) bool) {
	if !y(text("working"), nil) {
		return
	}
	<-ctx.Done()
	// A misbehaving adapter may still talk after cancellation; the engine ignores it.
	y(done(drover.StatusSuccess), nil)
}

func TestENG005_Cancellation(t *testing.T) {
	t.Run("mid-run", func(t *testing.T) {
		f := &agenttest.Agent{Name: "a", Fn: blockUntilCancelled}
		e := engineWith(t, f)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		events, err := e.Run(ctx, "a", "p", drover.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var evs []drover.Event
		for ev := range events {
			evs = append(evs, ev)
			if ev.Type == drover.TypeText {
				cancel()
			}
		}
		if d := checkShape(t, evs); d.Status != drover.StatusInterrupted {
			t.Fatalf("status %s, want interrupted", d.Status)
		}
		if !f.Returned.Load() || !f.Stopped.Load() {
			t.Fatal("adapter was not stopped")
		}
	})
	t.Run("already cancelled", func(t *testing.T) {
		f := &agenttest.Agent{Name: "a", Fn: blockUntilCancelled}
		e := engineWith(t, f)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		evs := runAll(t, e, ctx, "a", drover.Options{})
		if d := checkShape(t, evs); d.Status != drover.StatusInterrupted || len(evs) != 1 {
			t.Fatalf("events %v", types(evs))
		}
		if f.Calls.Load() != 0 {
			t.Fatal("adapter was called with a cancelled context")
		}
	})
}

func TestENG006_NothingAfterDone(t *testing.T) {
	var stoppedBeforeConsumerSawDone atomic.Bool
	f := &agenttest.Agent{Name: "a"}
	f.Fn = func(_ context.Context, _ drover.Request, y func(drover.Event, error) bool) {
		y(text("a"), nil)
		if y(done(drover.StatusSuccess), nil) {
			t.Error("yield of done returned true: the engine must stop the adapter at done")
		}
		y(text("after"), nil)
		y(done(drover.StatusError), nil)
	}
	e := engineWith(t, f)
	events, _ := e.Run(context.Background(), "a", "p", drover.Options{})
	var evs []drover.Event
	for ev := range events {
		if ev.Type == drover.TypeDone {
			stoppedBeforeConsumerSawDone.Store(f.Returned.Load())
		}
		evs = append(evs, ev)
	}
	if d := checkShape(t, evs); d.Status != drover.StatusSuccess || len(evs) != 2 {
		t.Fatalf("events %v", types(evs))
	}
	if !stoppedBeforeConsumerSawDone.Load() {
		t.Fatal("adapter still running when the consumer received done")
	}
}

func TestENG007_ExactlyOneDone(t *testing.T) {
	runs := map[string]func(context.Context, drover.Request, func(drover.Event, error) bool){
		"normal": func(_ context.Context, _ drover.Request, y func(drover.Event, error) bool) {
			y(text("x"), nil)
			y(done(drover.StatusSuccess), nil)
		},
		"two": func(_ context.Context, _ drover.Request, y func(drover.Event, error) bool) {
			y(done(drover.StatusSuccess), nil)
			y(done(drover.StatusSuccess), nil)
		},
		"none":  func(_ context.Context, _ drover.Request, y func(drover.Event, error) bool) { y(text("x"), nil) },
		"empty": func(context.Context, drover.Request, func(drover.Event, error) bool) {},
		"error": func(_ context.Context, _ drover.Request, y func(drover.Event, error) bool) {
			y(drover.Event{}, errors.New("e"))
		},
		"timeout": func(ctx context.Context, _ drover.Request, _ func(drover.Event, error) bool) { <-ctx.Done() },
	}
	for name, run := range runs {
		t.Run(name, func(t *testing.T) {
			e := engineWith(t, &agenttest.Agent{Name: "a", Fn: run})
			checkShape(t, runAll(t, e, context.Background(), "a", drover.Options{Timeout: 50 * time.Millisecond}))
		})
	}
}

func TestENG008_MissingDone(t *testing.T) {
	e := engineWith(t, &agenttest.Agent{Name: "a", Fn: func(_ context.Context, _ drover.Request, y func(drover.Event, error) bool) {
		y(text("bye"), nil)
	}})
	evs := runAll(t, e, context.Background(), "a", drover.Options{})
	if d := checkShape(t, evs); d.Status != drover.StatusError {
		t.Fatalf("status %s", d.Status)
	}
	if p := errorOf(t, evs); p.Code != drover.CodeMissingDone || p.Recoverable {
		t.Fatalf("error %+v", p)
	}
}

func TestENG009_SynthesizedDone(t *testing.T) {
	e := engineWith(t, &agenttest.Agent{Name: "a", Fn: func(context.Context, drover.Request, func(drover.Event, error) bool) {
		time.Sleep(60 * time.Millisecond)
	}}, &agenttest.Agent{Name: "b", Fn: func(_ context.Context, _ drover.Request, y func(drover.Event, error) bool) {
		cost := 0.5
		y(ev(drover.TypeDone, drover.DonePayload{Status: drover.StatusSuccess, DurationMs: 1234,
			Usage: drover.Usage{InputTokens: 7, OutputTokens: 3, TotalCostUSD: &cost}}), nil)
	}})
	d := checkShape(t, runAll(t, e, context.Background(), "a", drover.Options{}))
	if d.Usage != (drover.Usage{}) {
		t.Fatalf("synthesized usage %+v, want zero", d.Usage)
	}
	if d.DurationMs < 60 {
		t.Fatalf("durationMs %d, want ≥ 60 (measured from adapter start)", d.DurationMs)
	}
	d = checkShape(t, runAll(t, e, context.Background(), "b", drover.Options{}))
	if d.DurationMs != 1234 || d.Usage.InputTokens != 7 || *d.Usage.TotalCostUSD != 0.5 {
		t.Fatalf("adapter's own done did not win: %+v", d)
	}
}

func TestENG010_ParallelInterleaves(t *testing.T) {
	bSeen := make(chan struct{})
	a := &agenttest.Agent{Name: "a", Fn: func(ctx context.Context, _ drover.Request, y func(drover.Event, error) bool) {
		y(text("a1"), nil)
		select { // a cannot finish until the consumer has seen b's first event
		case <-bSeen:
		case <-ctx.Done():
			return
		}
		y(done(drover.StatusSuccess), nil)
	}}
	b := &agenttest.Agent{Name: "b", Fn: func(_ context.Context, _ drover.Request, y func(drover.Event, error) bool) {
		y(text("b1"), nil)
		y(done(drover.StatusSuccess), nil)
	}}
	e := engineWith(t, a, b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	per := map[string][]drover.Event{}
	for ev := range e.RunParallel(ctx, []engine.RunSpec{{ID: "1", Agent: "a"}, {ID: "2", Agent: "b"}}) {
		per[ev.RunID] = append(per[ev.RunID], ev)
		if p, ok := ev.Payload.(drover.TextPayload); ok && p.Content == "b1" {
			close(bSeen)
		}
	}
	for id, evs := range per {
		if d := checkShape(t, evs); d.Status != drover.StatusSuccess {
			t.Fatalf("run %s ended %s (events not yielded as they arrive?)", id, d.Status)
		}
	}
	if len(per) != 2 {
		t.Fatalf("runs seen: %v", per)
	}
}

func TestENG011_ParallelFailureIsolated(t *testing.T) {
	good := &agenttest.Agent{Name: "good", Fn: func(_ context.Context, _ drover.Request, y func(drover.Event, error) bool) {
		time.Sleep(20 * time.Millisecond)
		y(text("fine"), nil)
		y(done(drover.StatusSuccess), nil)
	}}
	bad := &agenttest.Agent{Name: "bad", Fn: func(_ context.Context, _ drover.Request, y func(drover.Event, error) bool) {
		y(drover.Event{}, errors.New("exploded"))
	}}
	e := engineWith(t, good, bad)
	per := map[string][]drover.Event{}
	for ev := range e.RunParallel(context.Background(), []engine.RunSpec{
		{ID: "g", Agent: "good"}, {ID: "b", Agent: "bad"}, {ID: "u", Agent: "missing"},
		{ID: "v", Agent: "good", Options: drover.Options{MaxTurns: -1}},
	}) {
		per[ev.RunID] = append(per[ev.RunID], ev)
	}
	if d := checkShape(t, per["g"]); d.Status != drover.StatusSuccess {
		t.Fatalf("good run: %s", d.Status)
	}
	for id, code := range map[string]drover.ErrorCode{"b": drover.CodeAdapterError, "u": drover.CodeUnknownAgent, "v": drover.CodeValidation} {
		if d := checkShape(t, per[id]); d.Status != drover.StatusError {
			t.Fatalf("run %s: %s", id, d.Status)
		}
		if p := errorOf(t, per[id]); p.Code != code {
			t.Fatalf("run %s code %s, want %s", id, p.Code, code)
		}
	}
}

func TestENG012_ParallelCancelStopsAll(t *testing.T) {
	fs := []*agenttest.Agent{{Name: "a", Fn: blockUntilCancelled}, {Name: "b", Fn: blockUntilCancelled}, {Name: "c", Fn: blockUntilCancelled}}
	e := engineWith(t, fs...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	per := map[string][]drover.Event{}
	started := 0
	for ev := range e.RunParallel(ctx, []engine.RunSpec{{ID: "a", Agent: "a"}, {ID: "b", Agent: "b"}, {ID: "c", Agent: "c"}}) {
		per[ev.RunID] = append(per[ev.RunID], ev)
		if ev.Type == drover.TypeText {
			if started++; started == 3 {
				cancel()
			}
		}
	}
	for id, evs := range per {
		if d := checkShape(t, evs); d.Status != drover.StatusInterrupted {
			t.Fatalf("run %s: %s", id, d.Status)
		}
	}
	for _, f := range fs {
		if !f.Returned.Load() {
			t.Fatalf("adapter %s still running", f.Name)
		}
	}
}

func TestENG012_ParallelConsumerBreakStopsAll(t *testing.T) {
	fs := []*agenttest.Agent{{Name: "a", Fn: blockUntilCancelled}, {Name: "b", Fn: blockUntilCancelled}}
	e := engineWith(t, fs...)
	for range e.RunParallel(context.Background(), []engine.RunSpec{{Agent: "a"}, {Agent: "b"}}) {
		break
	}
	for _, f := range fs {
		if f.Calls.Load() == 1 && !f.Returned.Load() {
			t.Fatalf("adapter %s outlived the loop", f.Name)
		}
	}
}

func TestENG013_ToolFiltering(t *testing.T) {
	// Layered policies: disallowed removes from allowed, it is no error.
	o := drover.Options{AllowedTools: []string{"Read", "Bash", "Write"}, DisallowedTools: []string{"Bash"}}
	if err := o.Validate(); err != nil {
		t.Fatalf("allowed and disallowed overlap: %v", err)
	}
	if got := o.FilterTools([]string{"Bash", "Read", "Write"}); !slices.Equal(got, []string{"Read", "Write"}) {
		t.Fatalf("disallowed must remove from allowed: %v", got)
	}
	o = drover.Options{AllowedTools: []string{"Read", "Write"}}
	if got := o.FilterTools([]string{"Bash", "Read", "Write", "read"}); !slices.Equal(got, []string{"Read", "Write"}) {
		t.Fatalf("allowed filter = %v (exact names)", got)
	}
	o = drover.Options{DisallowedTools: []string{"Bash"}}
	if got := o.FilterTools([]string{"Bash", "Read"}); !slices.Equal(got, []string{"Read"}) {
		t.Fatalf("disallowed filter = %v", got)
	}

	initWith := func(tools ...string) drover.Event {
		return ev(drover.TypeInit, drover.InitPayload{Tools: tools})
	}
	result := func(tool string, st drover.ToolStatus) drover.Event {
		return ev(drover.TypeToolResult, drover.ToolResultPayload{ToolUseID: "t1", ToolName: tool, Status: st})
	}
	cases := []struct {
		name   string
		events []drover.Event
		opts   drover.Options
		want   drover.DoneStatus
	}{
		{"init within filter", []drover.Event{initWith("Read")}, drover.Options{AllowedTools: []string{"Read"}}, drover.StatusSuccess},
		{"init offers extra tool", []drover.Event{initWith("Read", "Bash")}, drover.Options{AllowedTools: []string{"Read"}}, drover.StatusError},
		{"init offers disallowed", []drover.Event{initWith("Read", "Bash")}, drover.Options{DisallowedTools: []string{"Bash"}}, drover.StatusError},
		{"disallowed tool denied by vendor", []drover.Event{initWith("Read"), result("Bash", drover.ToolError)}, drover.Options{DisallowedTools: []string{"Bash"}}, drover.StatusSuccess},
		{"disallowed tool ran", []drover.Event{initWith("Read"), result("Bash", drover.ToolSuccess)}, drover.Options{DisallowedTools: []string{"Bash"}}, drover.StatusError},
		{"no filter", []drover.Event{initWith("Read", "Bash"), result("Bash", drover.ToolSuccess)}, drover.Options{}, drover.StatusSuccess},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			filters := drover.Capabilities{Tiers: drover.Tiers(), AllowedTools: true, DisallowedTools: true}
			e := engineWith(t, &agenttest.Agent{Name: "a", Caps: &filters, Fn: func(_ context.Context, _ drover.Request, y func(drover.Event, error) bool) {
				for _, e := range c.events {
					if !y(e, nil) {
						return
					}
				}
				y(done(drover.StatusSuccess), nil)
			}})
			evs := runAll(t, e, context.Background(), "a", c.opts)
			if d := checkShape(t, evs); d.Status != c.want {
				t.Fatalf("status %s, want %s (%v)", d.Status, c.want, types(evs))
			}
			if c.want == drover.StatusError {
				if p := errorOf(t, evs); p.Code != drover.CodeToolFilter {
					t.Fatalf("code %s", p.Code)
				}
			}
		})
	}
}

func TestADP6_Timeouts(t *testing.T) {
	hang := func(ctx context.Context, _ drover.Request, y func(drover.Event, error) bool) {
		y(text("started"), nil)
		<-ctx.Done()
	}
	chatty := func(ctx context.Context, _ drover.Request, y func(drover.Event, error) bool) {
		for range 6 { // 6 × 30 ms > the 100 ms idle timeout, but never idle that long
			time.Sleep(30 * time.Millisecond)
			if !y(drover.Event{Type: drover.TypeTextDelta, Payload: drover.TextDeltaPayload{Delta: "."}}, nil) {
				return
			}
		}
		y(done(drover.StatusSuccess), nil)
	}
	e := engineWith(t, &agenttest.Agent{Name: "hang", Fn: hang}, &agenttest.Agent{Name: "chatty", Fn: chatty})
	evs := runAll(t, e, context.Background(), "hang", drover.Options{Timeout: 80 * time.Millisecond})
	if d := checkShape(t, evs); d.Status != drover.StatusError || errorOf(t, evs).Code != drover.CodeTimeout {
		t.Fatalf("timeout: %v", types(evs))
	}
	evs = runAll(t, e, context.Background(), "hang", drover.Options{IdleTimeout: 80 * time.Millisecond})
	if d := checkShape(t, evs); d.Status != drover.StatusError || errorOf(t, evs).Code != drover.CodeIdleTimeout {
		t.Fatalf("idle: %v", types(evs))
	}
	evs = runAll(t, e, context.Background(), "chatty", drover.Options{IdleTimeout: 150 * time.Millisecond})
	if d := checkShape(t, evs); d.Status != drover.StatusSuccess {
		t.Fatalf("chatty agent hit the idle timeout: %v", types(evs))
	}
}

func TestENG005_ConsumerBreakStopsAdapter(t *testing.T) {
	f := &agenttest.Agent{Name: "a", Fn: blockUntilCancelled}
	e := engineWith(t, f)
	events, _ := e.Run(context.Background(), "a", "p", drover.Options{})
	for range events {
		break
	}
	if !f.Returned.Load() || !f.Stopped.Load() {
		t.Fatal("adapter not stopped when the consumer broke out of the loop")
	}
}

func TestENG004_ConsumerPanicIsNotAnAdapterError(t *testing.T) {
	e := engineWith(t, &agenttest.Agent{Name: "a", Fn: func(_ context.Context, _ drover.Request, y func(drover.Event, error) bool) {
		y(text("x"), nil)
	}})
	defer func() {
		if r := recover(); r != "consumer bug" {
			t.Fatalf("recovered %v, want the consumer's own panic", r)
		}
	}()
	events, _ := e.Run(context.Background(), "a", "p", drover.Options{})
	for range events {
		panic("consumer bug")
	}
}

// The process observer reaches the adapter with the request, and the
// request's session id is the one stamped on the run's events.
func TestProcessObserverAndSessionReachTheAdapter(t *testing.T) {
	var got [2]int
	var sid string
	a := &agenttest.Agent{Name: "a", Fn: func(_ context.Context, req drover.Request, y func(drover.Event, error) bool) {
		sid = req.Options.SessionID
		req.ProcessStarted(42, 43)
		y(done(drover.StatusSuccess), nil)
	}}
	evs := runAll(t, engineWith(t, a), context.Background(), "a", drover.Options{},
		engine.Hooks{Observer: func(pid, pgid int) { got = [2]int{pid, pgid} }})
	if got != [2]int{42, 43} {
		t.Fatalf("observer got %v", got)
	}
	if sid == "" || evs[len(evs)-1].SessionID != sid {
		t.Fatalf("adapter saw session %q, done has %q", sid, evs[len(evs)-1].SessionID)
	}
	drover.Request{}.ProcessStarted(1, 1) // no observer: no-op
}

// Options travel as JSON with durations as strings, accept milliseconds,
// and refuse unknown fields.
func TestOptionsJSON(t *testing.T) {
	o := drover.Options{Tier: drover.TierDryRun, Timeout: 90 * time.Second, SessionID: "ses_1"}
	data, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"tier":"dry-run","sessionId":"ses_1","timeout":"1m30s"}`; string(data) != want {
		t.Fatalf("got %s, want %s", data, want)
	}
	var back drover.Options
	if err := json.Unmarshal([]byte(`{"timeout":1500,"idleTimeout":"2m","maxTurns":3}`), &back); err != nil {
		t.Fatal(err)
	}
	if back.Timeout != 1500*time.Millisecond || back.IdleTimeout != 2*time.Minute || back.MaxTurns != 3 {
		t.Fatalf("decoded %+v", back)
	}
	for _, bad := range []string{`{"maxTurn":3}`, `{"timeout":"soon"}`, `{"timeout":true}`} {
		if err := json.Unmarshal([]byte(bad), &back); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// errors.Is matches an *Error by its code against a bare code.
func TestErrorIsByCode(t *testing.T) {
	err := fmt.Errorf("start: %w", &drover.Error{Code: drover.CodeValidation, Message: "bad tier"})
	if !errors.Is(err, drover.ErrValidation) {
		t.Fatal("a VALIDATION_ERROR is not ErrValidation")
	}
	if errors.Is(err, drover.ErrUnsupportedOption) {
		t.Fatal("a VALIDATION_ERROR is ErrUnsupportedOption")
	}
	if errors.Is(err, &drover.Error{Code: drover.CodeValidation, Message: "other"}) {
		t.Fatal("a target with a message matched")
	}
}

// MCP-2: an MCP server names one transport and what it needs; an agent
// refuses a transport it cannot take (ADP-3).
func TestMCP2_ServersValidatedAndRefused(t *testing.T) {
	for name, m := range map[string]drover.MCPServer{
		"no command":     {Type: "stdio"},
		"both":           {Command: "x", URL: "http://127.0.0.1:1"},
		"unknown type":   {Type: "carrier-pigeon", URL: "http://127.0.0.1:1"},
		"sse no url":     {Type: "sse"},
		"http and args?": {Type: "http", Command: "x"},
	} {
		if err := (drover.Options{MCPServers: map[string]drover.MCPServer{"s": m}}).Validate(); !errors.Is(err, drover.ErrValidation) {
			t.Errorf("%s: %v", name, err)
		}
	}
	ok := drover.Options{MCPServers: map[string]drover.MCPServer{
		"tracker": {Command: "tracker-mcp", Args: []string{"--stdio"}},
		"docs":    {URL: "https://docs.example/mcp", Headers: map[string]string{"Authorization": "Bearer x"}},
	}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	caps := drover.Capabilities{Tiers: drover.Tiers(), MCPTransports: []string{"stdio"}}
	if err := caps.Unsupported(ok); !errors.Is(err, drover.ErrUnsupportedOption) || !strings.Contains(err.Error(), `"docs"`) {
		t.Fatalf("an http server on a stdio-only agent: %v", err)
	}
	caps.MCPTransports = append(caps.MCPTransports, "http")
	if err := caps.Unsupported(ok); err != nil {
		t.Fatal(err)
	}
}

// SEC-3: what is recorded of a run's options has no credential in it.
func TestSEC3_OptionsRedacted(t *testing.T) {
	o := drover.Options{Endpoint: &drover.Endpoint{BaseURL: "http://127.0.0.1:1", APIKey: "sk-endpoint"},
		Env: map[string]string{"OPENAI_API_KEY": "sk-env", "GITHUB_TOKEN": "ghp-x", "GIT_AUTHOR_NAME": "Ada", "FOO": "bar"},
		MCPServers: map[string]drover.MCPServer{
			"docs":    {URL: "https://docs.example/mcp", Headers: map[string]string{"Authorization": "Bearer sk-mcp", "X-Trace": "1"}},
			"tracker": {Command: "tracker", Env: map[string]string{"TRACKER_PASSWORD": "hunter2"}},
		}}
	data, err := json.Marshal(runs.Redact(o))
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"sk-endpoint", "sk-env", "ghp-x", "sk-mcp", "hunter2"} {
		if strings.Contains(string(data), secret) {
			t.Errorf("redacted options hold %q: %s", secret, data)
		}
	}
	for _, kept := range []string{`"GIT_AUTHOR_NAME":"Ada"`, `"FOO":"bar"`, `"X-Trace":"1"`, `"baseUrl":"http://127.0.0.1:1"`} {
		if !strings.Contains(string(data), kept) {
			t.Errorf("redacted options lost %s: %s", kept, data)
		}
	}
	if o.Endpoint.APIKey != "sk-endpoint" || o.Env["OPENAI_API_KEY"] != "sk-env" || o.MCPServers["docs"].Headers["Authorization"] != "Bearer sk-mcp" {
		t.Fatal("Redacted changed the options it was called on")
	}
}

// UES-2: init says what the run can do (capabilities), answers, steering
// and interrupts only when this run gets them.
func TestUES2_InitCapabilities(t *testing.T) {
	caps := drover.Capabilities{Tiers: drover.Tiers(), Resume: true, Fork: true, Permissions: true, Steer: true, Interrupt: true}
	a := &agenttest.Agent{Name: "a", Caps: &caps, Fn: func(_ context.Context, _ drover.Request, y func(drover.Event, error) bool) {
		_ = y(ev(drover.TypeInit, drover.InitPayload{Model: "m", Tools: []string{}}), nil) && y(done(drover.StatusSuccess), nil)
	}}
	for _, c := range []struct {
		hooks engine.Hooks
		live  bool
	}{{engine.Hooks{}, false}, {engine.Hooks{Control: engine.NewControl()}, true}} {
		evs := runAll(t, engineWith(t, a), context.Background(), "a", drover.Options{}, c.hooks)
		p := evs[0].Payload.(drover.InitPayload)
		if p.Capabilities == nil || !p.Capabilities.Resume || !p.Capabilities.Fork || p.Capabilities.Permissions != c.live ||
			p.Capabilities.Steer != c.live || p.Capabilities.Interrupt != c.live {
			t.Fatalf("live %v: init capabilities %+v", c.live, p.Capabilities)
		}
		if err := uestest.ValidateEvent(evs[0]); err != nil {
			t.Fatal(err)
		}
	}
}
