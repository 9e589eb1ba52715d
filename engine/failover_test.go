package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/testkit/agenttest"
	"github.com/drover-run/drover/runs"
)

// apiFake is a fake agent in front of a scripted model API: the answer
// depends on the credential (Env["API_KEY"]) and the model of the attempt.
type apiFake struct {
	mu    sync.Mutex
	seen  []drover.Options // every attempt's options, in order
	fails map[string]drover.ErrorCode
	// toolFirst makes a failing attempt run a tool before it fails.
	toolFirst  bool
	retryAfter int // ms, reported in the failure's metadata when > 0
}

// attempt is the fake's key for a credential and model: "KEY/MODEL".
func attemptKey(o drover.Options) string { return o.Env["API_KEY"] + "/" + o.Model }

func (f *apiFake) adapter(id string) *agenttest.Agent {
	caps := &drover.Capabilities{Tiers: drover.Tiers(), ConfigDir: true, Resume: true}
	return &agenttest.Agent{Name: id, Caps: caps, Fn: func(ctx context.Context, req drover.Request, y func(drover.Event, error) bool) {
		f.mu.Lock()
		f.seen = append(f.seen, req.Options)
		code := f.fails[id+":"+attemptKey(req.Options)]
		f.mu.Unlock()
		cost := 0.5
		if !y(ev(drover.TypeInit, drover.InitPayload{Model: req.Options.Model}), nil) {
			return
		}
		if code == "" {
			if y(text("answered by "+id+":"+attemptKey(req.Options)), nil) {
				y(ev(drover.TypeDone, drover.DonePayload{Status: drover.StatusSuccess, ResumeToken: "tok-" + id,
					Usage: drover.Usage{InputTokens: 10, OutputTokens: 5, TotalCostUSD: &cost}, DurationMs: 1}), nil)
			}
			return
		}
		if f.toolFirst {
			if !y(ev(drover.TypeToolUse, drover.ToolUsePayload{ToolName: "Bash", ToolUseID: "t1", Input: map[string]any{}}), nil) {
				return
			}
		}
		e := ev(drover.TypeError, drover.ErrorPayload{Code: code, Message: "scripted " + string(code)})
		if f.retryAfter > 0 {
			e.Metadata = map[string]any{drover.MetaRetryAfterMs: float64(f.retryAfter)}
		}
		if y(e, nil) {
			y(ev(drover.TypeDone, drover.DonePayload{Status: drover.StatusError,
				Usage: drover.Usage{InputTokens: 3, OutputTokens: 0}, DurationMs: 1}), nil)
		}
	}}
}

func (f *apiFake) attempts() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, o := range f.seen {
		out = append(out, attemptKey(o))
	}
	return out
}

func profiles(names ...string) []drover.Profile {
	var ps []drover.Profile
	for _, n := range names {
		ps = append(ps, drover.Profile{Name: n, Env: map[string]string{"API_KEY": "key-" + n}})
	}
	return ps
}

func recoverables(evs []drover.Event) []drover.Event {
	var out []drover.Event
	for _, e := range evs {
		if p, ok := e.Payload.(drover.ErrorPayload); ok && p.Recoverable {
			out = append(out, e)
		}
	}
	return out
}

func attemptsOf(t *testing.T, d drover.Event) []engine.AttemptRecord {
	t.Helper()
	a, ok := d.Metadata["attempts"].([]engine.AttemptRecord)
	if !ok {
		t.Fatalf("done metadata.attempts missing: %+v", d.Metadata)
	}
	return a
}

// FAIL-1: a rate limit on the first profile switches to the second, with
// one recoverable error naming the switch; usage is summed over both
// attempts and each attempt is in done's metadata.
func TestFAIL1_ProfileSwitchOnRateLimit(t *testing.T) {
	api := &apiFake{fails: map[string]drover.ErrorCode{"x:key-a/": drover.CodeRateLimited}}
	e := engineWith(t, api.adapter("x"))
	evs := runAll(t, e, context.Background(), "x", drover.Options{Failover: &drover.Failover{Profiles: profiles("a", "b")}})
	d := checkShape(t, evs)
	if d.Status != drover.StatusSuccess {
		t.Fatalf("status %s, want success: %v", d.Status, types(evs))
	}
	if got := api.attempts(); !slices.Equal(got, []string{"key-a/", "key-b/"}) {
		t.Errorf("attempts %v", got)
	}
	rec := recoverables(evs)
	if len(rec) != 1 {
		t.Fatalf("%d recoverable errors, want 1: %v", len(rec), types(evs))
	}
	p := rec[0].Payload.(drover.ErrorPayload)
	if p.Code != drover.CodeRateLimited || !strings.Contains(p.Message, "trying profile b") || !strings.Contains(p.Message, "profile a") {
		t.Errorf("switch event %+v", p)
	}
	if fo, _ := rec[0].Metadata["failover"].(map[string]any); fo == nil || fo["to"].(map[string]any)["profile"] != "b" {
		t.Errorf("switch metadata %+v", rec[0].Metadata)
	}
	for _, e := range evs {
		if p, ok := e.Payload.(drover.ErrorPayload); ok && !p.Recoverable {
			t.Errorf("unrecoverable error passed on: %+v", p)
		}
	}
	if d.Usage.InputTokens != 13 || d.Usage.OutputTokens != 5 || d.Usage.TotalCostUSD == nil || *d.Usage.TotalCostUSD != 0.5 {
		t.Errorf("usage %+v, want the attempts summed (13 in, 5 out, $0.5)", d.Usage)
	}
	att := attemptsOf(t, evs[len(evs)-1])
	if len(att) != 2 || att[0].Profile != "a" || att[0].Code != drover.CodeRateLimited || att[0].Status != drover.StatusError ||
		att[1].Profile != "b" || att[1].Status != drover.StatusSuccess || att[1].Usage.InputTokens != 10 {
		t.Errorf("attempts %+v", att)
	}
	// Every attempt's events are in the one stream, under one session.
	inits := 0
	for _, e := range evs {
		if e.Type == drover.TypeInit {
			inits++
		}
		if e.SessionID != evs[0].SessionID {
			t.Errorf("event in session %s, want %s", e.SessionID, evs[0].SessionID)
		}
	}
	if inits != 2 {
		t.Errorf("%d init events, want one per attempt", inits)
	}
}

// FAIL-1: a retryable failure after a tool ran is never retried: the run
// fails and says why.
func TestFAIL1_FailureAfterToolNotRetried(t *testing.T) {
	api := &apiFake{fails: map[string]drover.ErrorCode{"x:key-a/": drover.CodeRateLimited}, toolFirst: true}
	e := engineWith(t, api.adapter("x"))
	evs := runAll(t, e, context.Background(), "x", drover.Options{Failover: &drover.Failover{Profiles: profiles("a", "b")}})
	d := checkShape(t, evs)
	if d.Status != drover.StatusError {
		t.Fatalf("status %s, want error", d.Status)
	}
	if got := api.attempts(); len(got) != 1 {
		t.Errorf("attempts %v, want one", got)
	}
	if len(recoverables(evs)) != 0 {
		t.Errorf("a recoverable error: %v", recoverables(evs))
	}
	p := errorOf(t, evs)
	if p.Code != drover.CodeRateLimited || p.Recoverable || !strings.Contains(p.Message, "not retried: a tool had already run") {
		t.Errorf("error %+v", p)
	}
	if att := attemptsOf(t, evs[len(evs)-1]); len(att) != 1 {
		t.Errorf("attempts %+v", att)
	}
}

// FAIL-1: the chain goes profile by profile, then model by model, then
// agent by agent; a fallback agent starts a new conversation in its own
// configuration home; a profile for another agent is not used.
func TestFAIL1_ChainOrder(t *testing.T) {
	fails := map[string]drover.ErrorCode{}
	for _, k := range []string{"key-a/", "key-b/", "key-a/m2", "key-b/m2"} {
		fails["x:"+k] = drover.CodeOverloaded
	}
	api := &apiFake{fails: fails}
	e := engineWith(t, api.adapter("x"), api.adapter("y"))
	ps := profiles("a", "b")
	ps[0].Agent, ps[1].Agent = "x", "x"
	ps = append(ps, drover.Profile{Name: "c", Agent: "y", Env: map[string]string{"API_KEY": "key-c"}})
	home := t.TempDir()
	evs := runAll(t, e, context.Background(), "x", drover.Options{Resume: "old", ConfigDir: home,
		Failover: &drover.Failover{Profiles: ps, Models: []string{"m2"}, Agents: []string{"y"}}})
	d := checkShape(t, evs)
	if d.Status != drover.StatusSuccess || d.ResumeToken != "tok-y" {
		t.Fatalf("done %+v", d)
	}
	want := []string{"key-a/", "key-b/", "key-a/m2", "key-b/m2", "key-c/"}
	if got := api.attempts(); !slices.Equal(got, want) {
		t.Errorf("attempts %v, want %v", got, want)
	}
	var msgs []string
	for _, e := range recoverables(evs) {
		msgs = append(msgs, e.Payload.(drover.ErrorPayload).Message)
	}
	wantSwitch := []string{"trying profile b", "trying model m2 with a", "trying profile b", "trying agent y with profile c"}
	if len(msgs) != len(wantSwitch) {
		t.Fatalf("switches %q", msgs)
	}
	for i, w := range wantSwitch {
		if !strings.Contains(msgs[i], w) {
			t.Errorf("switch %d: %q, want it to say %q", i, msgs[i], w)
		}
	}
	api.mu.Lock()
	last := api.seen[len(api.seen)-1]
	first := api.seen[0]
	api.mu.Unlock()
	if last.Resume != "" || last.ConfigDir != home+"/y" || first.Resume != "old" || first.ConfigDir != home {
		t.Errorf("fallback agent options: resume %q home %q; first: resume %q home %q", last.Resume, last.ConfigDir, first.Resume, first.ConfigDir)
	}
	if att := attemptsOf(t, evs[len(evs)-1]); len(att) != 5 || att[4].Agent != "y" || att[2].Model != "m2" {
		t.Errorf("attempts %+v", att)
	}
}

// FAIL-1: cooldowns are shared by the runs of an engine: a profile a run
// found rate limited is skipped by the next run until it has cooled down,
// for as long as the vendor's retry-after says when it says.
func TestFAIL1_CooldownSharedAndRetryAfter(t *testing.T) {
	api := &apiFake{fails: map[string]drover.ErrorCode{"x:key-a/": drover.CodeRateLimited}}
	e := engineWith(t, api.adapter("x"))
	opts := drover.Options{Failover: &drover.Failover{Profiles: profiles("a", "b")}}
	runAll(t, e, context.Background(), "x", opts)
	evs := runAll(t, e, context.Background(), "x", opts)
	if d := checkShape(t, evs); d.Status != drover.StatusSuccess {
		t.Fatalf("second run: %s", d.Status)
	}
	if got := api.attempts(); !slices.Equal(got, []string{"key-a/", "key-b/", "key-b/"}) {
		t.Errorf("attempts %v: the second run should skip cooling profile a", got)
	}
	if len(recoverables(evs)) != 0 {
		t.Errorf("second run switched: %v", recoverables(evs))
	}

	// A retry-after of 1 ms: once it has passed, profile a is tried again.
	api2 := &apiFake{fails: map[string]drover.ErrorCode{"x:key-a/": drover.CodeRateLimited}, retryAfter: 1}
	e2 := engineWith(t, api2.adapter("x"))
	evs = runAll(t, e2, context.Background(), "x", opts)
	if fo := recoverables(evs)[0].Metadata["failover"].(map[string]any); fo["cooldownMs"] != int64(1) {
		t.Errorf("cooldown %v, want the retry-after's 1 ms", fo["cooldownMs"])
	}
	time.Sleep(20 * time.Millisecond)
	runAll(t, e2, context.Background(), "x", opts)
	if got := api2.attempts(); !slices.Equal(got, []string{"key-a/", "key-b/", "key-a/", "key-b/"}) {
		t.Errorf("attempts %v", got)
	}
}

// memCooldowns is a CooldownStore in memory that can be made to fail: the
// seam for what Cooldowns does with a shared store. The ledgers' own are
// tested on SQLite and PostgreSQL (runs, worker, storetest).
type memCooldowns struct {
	mu    sync.Mutex
	left  map[string]time.Duration
	codes map[string]drover.ErrorCode
	down  bool
}

func (m *memCooldowns) CoolDown(_ context.Context, key string, code drover.ErrorCode, d time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return errors.New("ledger down")
	}
	m.left[key], m.codes[key] = d, code
	return nil
}

func (m *memCooldowns) CooldownLeft(_ context.Context, key string) (time.Duration, drover.ErrorCode, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return 0, "", errors.New("ledger down")
	}
	return m.left[key], m.codes[key], nil
}

// FAIL-1: engines sharing a CooldownStore (processes on one ledger) skip
// what any of them found rate limited; when the store fails, each goes on
// with what it knows itself, and says so.
func TestFAIL1_CooldownsSharedThroughStore(t *testing.T) {
	shared := &memCooldowns{left: map[string]time.Duration{}, codes: map[string]drover.ErrorCode{}}
	api := &apiFake{fails: map[string]drover.ErrorCode{"x:key-a/": drover.CodeRateLimited}}
	var reported []error
	var mu sync.Mutex
	report := func(err error) { mu.Lock(); reported = append(reported, err); mu.Unlock() }
	e1, e2 := engineWith(t, api.adapter("x")), engineWith(t, api.adapter("x"))
	e1.Cooldowns().Share(shared, report)
	e2.Cooldowns().Share(shared, report)
	opts := drover.Options{Failover: &drover.Failover{Profiles: profiles("a", "b")}}
	runAll(t, e1, context.Background(), "x", opts)
	if d := checkShape(t, runAll(t, e2, context.Background(), "x", opts)); d.Status != drover.StatusSuccess {
		t.Fatalf("second engine's run: %s", d.Status)
	}
	if got := api.attempts(); !slices.Equal(got, []string{"key-a/", "key-b/", "key-b/"}) {
		t.Errorf("attempts %v: the second engine should skip profile a, cooled by the first", got)
	}
	if shared.codes["profile:a|x|"] != drover.CodeRateLimited || shared.left["profile:a|x|"] != time.Minute {
		t.Errorf("shared store holds %v %v", shared.codes, shared.left)
	}

	shared.mu.Lock()
	shared.down = true
	shared.mu.Unlock()
	e3 := engineWith(t, api.adapter("x"))
	e3.Cooldowns().Share(shared, report)
	runAll(t, e3, context.Background(), "x", opts) // a, b: nothing known to cool
	evs := runAll(t, e3, context.Background(), "x", opts)
	if d := checkShape(t, evs); d.Status != drover.StatusSuccess {
		t.Fatalf("run with the store down: %s", d.Status)
	}
	if got := api.attempts()[3:]; !slices.Equal(got, []string{"key-a/", "key-b/", "key-b/"}) {
		t.Errorf("attempts with the store down %v: the engine's own cooldown should still hold", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reported) == 0 || !strings.Contains(reported[0].Error(), "ledger down") {
		t.Errorf("store failures reported: %v", reported)
	}
}

// FAIL-1: when every link is cooling, the run fails at once naming the
// cooldown; when the chain is exhausted, with the last failure.
func TestFAIL1_ChainExhaustedAndAllCooling(t *testing.T) {
	api := &apiFake{fails: map[string]drover.ErrorCode{"x:key-a/": drover.CodeAuthFailed, "x:key-b/": drover.CodeRateLimited}}
	e := engineWith(t, api.adapter("x"))
	opts := drover.Options{Failover: &drover.Failover{Profiles: profiles("a", "b")}}
	evs := runAll(t, e, context.Background(), "x", opts)
	if d := checkShape(t, evs); d.Status != drover.StatusError {
		t.Fatalf("status %s", d.Status)
	}
	var last drover.ErrorPayload
	for _, e := range evs {
		if p, ok := e.Payload.(drover.ErrorPayload); ok && !p.Recoverable {
			last = p
		}
	}
	if last.Code != drover.CodeRateLimited || !strings.Contains(last.Message, "failover chain exhausted after 2 attempts") {
		t.Errorf("final error %+v", last)
	}
	evs = runAll(t, e, context.Background(), "x", opts)
	checkShape(t, evs)
	if p := errorOf(t, evs); p.Code != drover.CodeAuthFailed || !strings.Contains(p.Message, "cooling down") {
		t.Errorf("all cooling: %+v", p)
	}
	if n := len(api.attempts()); n != 2 {
		t.Errorf("%d attempts, want none in the second run", n)
	}
}

// FAIL-1: only rate limits, overload, server errors and refused
// credentials fail over; cancellation ends the run without a retry.
func TestFAIL1_NotRetried(t *testing.T) {
	api := &apiFake{fails: map[string]drover.ErrorCode{"x:key-a/": drover.CodeBadRequest}}
	e := engineWith(t, api.adapter("x"))
	opts := drover.Options{Failover: &drover.Failover{Profiles: profiles("a", "b")}}
	evs := runAll(t, e, context.Background(), "x", opts)
	if d := checkShape(t, evs); d.Status != drover.StatusError || len(api.attempts()) != 1 {
		t.Errorf("status %s after %v", d.Status, api.attempts())
	}

	ctx, cancel := context.WithCancel(context.Background())
	blocked := &agenttest.Agent{Name: "b", Fn: func(ctx context.Context, req drover.Request, y func(drover.Event, error) bool) {
		cancel()
		blockUntilCancelled(ctx, req, y)
	}}
	e = engineWith(t, blocked)
	evs = runAll(t, e, ctx, "b", opts)
	if d := checkShape(t, evs); d.Status != drover.StatusInterrupted || blocked.Calls.Load() != 1 {
		t.Errorf("cancelled: %s after %d calls", d.Status, blocked.Calls.Load())
	}
}

// FAIL-1: a chain naming an agent nobody registered, or options invalid
// for it, fails the run before anything starts.
func TestFAIL1_BadChain(t *testing.T) {
	api := &apiFake{}
	e := engineWith(t, api.adapter("x"))
	evs := runAll(t, e, context.Background(), "x", drover.Options{Failover: &drover.Failover{Agents: []string{"nope"}}})
	checkShape(t, evs)
	if p := errorOf(t, evs); !strings.Contains(p.Message, `unknown agent "nope"`) {
		t.Errorf("error %+v", p)
	}
	if len(api.attempts()) != 0 {
		t.Errorf("attempts %v", api.attempts())
	}
	limited := &agenttest.Agent{Name: "z", Caps: &drover.Capabilities{}, Fn: func(context.Context, drover.Request, func(drover.Event, error) bool) {}}
	e = engineWith(t, api.adapter("x"), limited)
	evs = runAll(t, e, context.Background(), "x", drover.Options{Failover: &drover.Failover{Agents: []string{"z"}}})
	if p := errorOf(t, evs); p.Code != drover.CodeUnsupportedOption || !strings.Contains(p.Message, "failover agent z") {
		t.Errorf("fallback agent that cannot honour the options: %+v", p)
	}
	for _, bad := range []drover.Failover{{Profiles: []drover.Profile{{}}}, {Profiles: profiles("a", "a")}, {Models: []string{""}}} {
		if _, err := e.Run(context.Background(), "x", "p", drover.Options{Failover: &bad}); err == nil || drover.CodeOf(err, "") != drover.CodeValidation {
			t.Errorf("%+v: %v, want a validation error", bad, err)
		}
	}
}

// SEC-3: a profile's secrets never appear in redacted options (what the
// ledger records and clients see), whatever the variable's name.
func TestSEC3_ProfileSecretsRedacted(t *testing.T) {
	o := drover.Options{Failover: &drover.Failover{Profiles: []drover.Profile{
		{Name: "a", Agent: "claude", Env: map[string]string{"ANTHROPIC_API_KEY": "sk-secret-1", "ODDLY_NAMED": "sk-secret-2"}}}}}
	b, err := json.Marshal(runs.Redact(o))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "sk-secret") || !strings.Contains(string(b), `"name":"a"`) {
		t.Errorf("redacted options: %s", b)
	}
	if o.Failover.Profiles[0].Env["ANTHROPIC_API_KEY"] != "sk-secret-1" {
		t.Error("Redacted changed the options it was called on")
	}
	var back drover.Options
	if err := json.Unmarshal(b, &back); err != nil || back.Failover == nil || back.Failover.Profiles[0].Agent != "claude" {
		t.Errorf("round trip: %v %+v", err, back.Failover)
	}

}

// compacting is a fake agent whose vendor compacts a session when asked
// with "/compact" (drover.Compacter); its turns overflow the context until
// the session has been compacted, as often as overflowAfterCompact says.
type compacting struct {
	*agenttest.Agent
	mu        sync.Mutex
	calls     []string // prompt@resume of every turn
	compacted int
	// stillOverflows makes turns overflow even after a compaction.
	stillOverflows bool
	toolFirst      bool
	// cannotCompact makes "/compact" end well without compacting.
	cannotCompact bool
	spent         float64 // the session's running cost
}

func (c *compacting) CompactPrompt() string { return "/compact" }

func newCompacting() *compacting {
	c := &compacting{}
	c.Agent = &agenttest.Agent{Name: "cx", Caps: &drover.Capabilities{Tiers: drover.Tiers(), Resume: true}, Fn: func(ctx context.Context, req drover.Request, yield func(drover.Event, error) bool) {
		c.mu.Lock()
		c.calls = append(c.calls, req.Prompt+"@"+req.Options.Resume)
		if req.Prompt == "/compact" && !c.cannotCompact {
			c.compacted++
		}
		overflow := req.Prompt != "/compact" && (c.compacted == 0 || c.stillOverflows)
		// Each turn costs $1; a resumed turn reports the session's
		// running total, as Claude Code does.
		c.spent++
		cost, meta := 1.0, map[string]any(nil)
		if req.Options.Resume != "" {
			cost, meta = c.spent, map[string]any{drover.MetaSessionCostUSD: c.spent}
		}
		c.mu.Unlock()
		y := func(e drover.Event, err error) bool {
			if d, ok := e.Payload.(drover.DonePayload); ok {
				d.Usage.TotalCostUSD = &cost
				e.Payload, e.Metadata = d, meta
			}
			return yield(e, err)
		}
		if !y(ev(drover.TypeInit, drover.InitPayload{}), nil) {
			return
		}
		switch {
		case req.Prompt == "/compact" && c.cannotCompact:
			if y(text("Not enough messages to compact."), nil) {
				y(ev(drover.TypeDone, drover.DonePayload{Status: drover.StatusSuccess, ResumeToken: "s1", DurationMs: 1}), nil)
			}
		case req.Prompt == "/compact":
			if y(ev("cx:compact", map[string]any{"pre_tokens": 1000, "post_tokens": 100}), nil) {
				y(ev(drover.TypeDone, drover.DonePayload{Status: drover.StatusSuccess, ResumeToken: "s1", Usage: drover.Usage{InputTokens: 7}, DurationMs: 1}), nil)
			}
		case overflow:
			if c.toolFirst && !y(ev(drover.TypeToolUse, drover.ToolUsePayload{ToolName: "Bash", ToolUseID: "t1", Input: map[string]any{}}), nil) {
				return
			}
			if y(ev(drover.TypeError, drover.ErrorPayload{Code: drover.CodeContextOverflow, Message: "prompt is too long"}), nil) {
				y(ev(drover.TypeDone, drover.DonePayload{Status: drover.StatusError, ResumeToken: "s1", Usage: drover.Usage{InputTokens: 5}, DurationMs: 1}), nil)
			}
		default:
			if y(text("fits now"), nil) {
				y(ev(drover.TypeDone, drover.DonePayload{Status: drover.StatusSuccess, ResumeToken: "s1", Usage: drover.Usage{InputTokens: 3}, DurationMs: 1}), nil)
			}
		}
	}}
	return c
}

func compactingEngine(t *testing.T, c *compacting) *engine.Engine {
	t.Helper()
	reg := drover.NewRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	return engine.New(reg)
}

// FAIL-1 (context overflow): a run that overflows its context compacts
// the session with the vendor's own compaction and retries once in it,
// visibly: a recoverable CONTEXT_OVERFLOW, the compaction's own events,
// and every turn in done's metadata.attempts.
func TestFAIL1_ContextOverflowCompactsAndRetries(t *testing.T) {
	c := newCompacting()
	evs := runAll(t, compactingEngine(t, c), context.Background(), "cx", drover.Options{})
	d := checkShape(t, evs)
	if d.Status != drover.StatusSuccess || d.Usage.InputTokens != 15 || d.Usage.TotalCostUSD == nil || *d.Usage.TotalCostUSD != 3 {
		t.Fatalf("done %+v: want success with the three turns' usage summed, $3 (each turn's own share of the session's running total)", d)
	}
	if want := []string{"prompt@", "/compact@s1", "prompt@s1"}; !slices.Equal(c.calls, want) {
		t.Errorf("turns %v, want %v", c.calls, want)
	}
	rec := recoverables(evs)
	if len(rec) != 1 || rec[0].Payload.(drover.ErrorPayload).Code != drover.CodeContextOverflow ||
		!strings.Contains(rec[0].Payload.(drover.ErrorPayload).Message, "compacting its session (/compact) and retrying once") {
		t.Fatalf("recoverable errors %+v", rec)
	}
	if !slices.Contains(types(evs), "cx:compact") {
		t.Errorf("the compaction's event is not in the stream: %v", types(evs))
	}
	att := attemptsOf(t, evs[len(evs)-1])
	if len(att) != 3 || att[0].Code != drover.CodeContextOverflow || att[1].Kind != "compaction" || att[2].Status != drover.StatusSuccess {
		t.Errorf("attempts %+v", att)
	}
}

// FAIL-1 (context overflow): only one compaction per run; a turn that had
// run tools is continued, not asked again; a vendor that cannot compact
// fails as it did, its done untouched.
func TestFAIL1_ContextOverflowOnce(t *testing.T) {
	c := newCompacting()
	c.stillOverflows, c.toolFirst = true, true
	evs := runAll(t, compactingEngine(t, c), context.Background(), "cx", drover.Options{})
	if d := checkShape(t, evs); d.Status != drover.StatusError {
		t.Fatalf("status %s", d.Status)
	}
	if len(c.calls) != 3 || c.calls[1] != "/compact@s1" || !strings.HasPrefix(c.calls[2], "Continue the task") {
		t.Errorf("turns %q", c.calls)
	}
	var last drover.ErrorPayload
	for _, p := range payloadsOf[drover.ErrorPayload](evs) {
		last = p
	}
	if last.Code != drover.CodeContextOverflow || last.Recoverable {
		t.Errorf("final error %+v", last)
	}

	c = newCompacting()
	c.cannotCompact = true
	evs = runAll(t, compactingEngine(t, c), context.Background(), "cx", drover.Options{})
	if d := checkShape(t, evs); d.Status != drover.StatusError || len(c.calls) != 2 {
		t.Errorf("nothing compacted: %s after %q", d.Status, c.calls)
	}
	if p := payloadsOf[drover.ErrorPayload](evs); len(p) != 2 || p[1].Code != drover.CodeContextOverflow || !strings.Contains(p[1].Message, "reported no compaction") {
		t.Errorf("errors %+v", p)
	}

	api := &apiFake{fails: map[string]drover.ErrorCode{"x:/": drover.CodeContextOverflow}}
	evs = runAll(t, engineWith(t, api.adapter("x")), context.Background(), "x", drover.Options{})
	if d := checkShape(t, evs); d.Status != drover.StatusError || len(api.attempts()) != 1 || evs[len(evs)-1].Metadata != nil {
		t.Errorf("no compaction: %s after %v, metadata %v", d.Status, api.attempts(), evs[len(evs)-1].Metadata)
	}
}

func payloadsOf[T any](evs []drover.Event) []T {
	var out []T
	for _, e := range evs {
		if p, ok := e.Payload.(T); ok {
			out = append(out, p)
		}
	}
	return out
}
