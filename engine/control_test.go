package engine_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/testkit/agenttest"
)

// vendor is a fake interactive agent: it asks for the calls in asks (one
// permission request each, all at once, or one after the other's answer
// with sequential), passes every live input on (it
// records them in got and yields their events), runs an allowed call
// (tool_result success) and reports a denied one (tool_result denied), and
// ends once every call has its answer (with exit set: when exit is closed),
// or at an interrupt.
type vendor struct {
	caps  drover.Capabilities
	asks  []drover.PermissionRequestPayload
	seq   bool          // sequential: ask the next call once the last is answered
	exit  chan struct{} // closed: end at once, requests open or not
	mu    sync.Mutex
	got   []drover.LiveInput
	input []map[string]any // the input each allowed call ran with
}

// adapter is v as the fake adapter of the tests, named "vendor".
func (v *vendor) adapter() *agenttest.Agent {
	return &agenttest.Agent{Name: "vendor", Caps: &v.caps, Fn: v.run}
}

func (v *vendor) run(ctx context.Context, req drover.Request, yield func(drover.Event, error) bool) {
	next := 0
	ask := func() bool {
		ok := yield(drover.Event{Type: drover.TypePermissionRequest, Payload: v.asks[next]}, nil)
		next++
		return ok
	}
	for next < len(v.asks) && (!v.seq || next == 0) {
		if !ask() {
			return
		}
	}
	open := len(v.asks)
	for open > 0 || v.exit != nil {
		if req.Live == nil { // not interactive: wait for the end only
			select {
			case <-ctx.Done():
			case <-v.exit:
			}
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-v.exit:
			yield(drover.Event{Type: drover.TypeDone, Payload: drover.DonePayload{Status: drover.StatusSuccess}}, nil)
			return
		case <-req.Live.Ready():
		}
		for _, in := range req.Live.Take() {
			v.mu.Lock()
			v.got = append(v.got, in)
			v.mu.Unlock()
			if !yield(in.Event(), nil) {
				return
			}
			switch {
			case in.Answer != nil:
				open--
				st := drover.ToolDenied
				if in.Answer.Behavior == drover.Allow {
					st = drover.ToolSuccess
					in := in.Answer.UpdatedInput
					v.mu.Lock()
					v.input = append(v.input, in)
					v.mu.Unlock()
				}
				if !yield(drover.Event{Type: drover.TypeToolResult, Payload: drover.ToolResultPayload{
					ToolUseID: in.Answer.ToolUseID, ToolName: in.Answer.ToolName, Status: st}}, nil) {
					return
				}
				if v.seq && next < len(v.asks) && !ask() {
					return
				}
			case in.Interrupt != nil:
				yield(drover.Event{Type: drover.TypeDone, Payload: drover.DonePayload{Status: drover.StatusInterrupted, ResumeToken: "tok"}}, nil)
				return
			}
		}
	}
	yield(drover.Event{Type: drover.TypeDone, Payload: drover.DonePayload{Status: drover.StatusSuccess}}, nil)
}

func ask(id, tool, command string) drover.PermissionRequestPayload {
	return drover.PermissionRequestPayload{RequestID: id, ToolName: tool, ToolUseID: "tu-" + id,
		Input: map[string]any{"command": command}}
}

var interactive = drover.Capabilities{Tiers: drover.Tiers(), Permissions: true, Steer: true, Interrupt: true}

// start starts v with opts and hooks h and returns a function that collects the rest of
// the stream.
func start(t *testing.T, v *vendor, opts drover.Options, h engine.Hooks) (collect func() []drover.Event) {
	t.Helper()
	reg := drover.NewRegistry()
	if err := reg.Register(v.adapter()); err != nil {
		t.Fatal(err)
	}
	events, err := engine.New(reg).Start(context.Background(), engine.Request{Agent: "vendor", Prompt: "p", Options: opts, Hooks: h})
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan []drover.Event, 1)
	go func() { ch <- slices.Collect(events) }()
	return func() []drover.Event {
		select {
		case evs := <-ch:
			return evs
		case <-time.After(10 * time.Second):
			t.Fatal("the run did not end")
			return nil
		}
	}
}

// answers returns the answer events of evs, by request id.
func answers(t *testing.T, evs []drover.Event) map[string]drover.PermissionAnswerPayload {
	t.Helper()
	out := map[string]drover.PermissionAnswerPayload{}
	for _, ev := range evs {
		if ev.Type != drover.TypePermissionAnswer {
			continue
		}
		a, ok := ev.Payload.(drover.PermissionAnswerPayload)
		if !ok {
			t.Fatalf("answer payload %T", ev.Payload)
		}
		if _, dup := out[a.RequestID]; dup {
			t.Fatalf("request %s answered twice", a.RequestID)
		}
		out[a.RequestID] = a
	}
	return out
}

// waitPending waits until ctl has n open requests.
func waitPending(t *testing.T, ctl *engine.Control, n int) []drover.PermissionRequestPayload {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if p := ctl.Pending(); len(p) == n {
			return p
		}
	}
	t.Fatalf("pending requests %v, want %d", ctl.Pending(), n)
	return nil
}

// PERM-2: with nobody to approve, a request is denied at once, and the
// answer is recorded right after the request.
func TestPERM2_NoApproverDeniesAtOnce(t *testing.T) {
	v := &vendor{caps: interactive, asks: []drover.PermissionRequestPayload{ask("r1", "Bash", "make")}}
	evs := start(t, v, drover.Options{}, engine.Hooks{Control: engine.NewControl()})()
	types := types(evs)
	if want := []drover.EventType{drover.TypePermissionRequest, drover.TypePermissionAnswer, drover.TypeToolResult, drover.TypeDone}; !slices.Equal(types, want) {
		t.Fatalf("events %v, want %v", types, want)
	}
	a := answers(t, evs)["r1"]
	if a.Behavior != drover.Deny || a.By != drover.ByDefault || a.ToolUseID != "tu-r1" || a.Message == "" {
		t.Fatalf("answer %+v", a)
	}
	if p := evs[0].Payload.(drover.PermissionRequestPayload); p.Deadline != 0 || p.Description != "Using Bash" {
		t.Fatalf("request %+v: no deadline without an approver, a description always (the adapter's, else Using NAME)", p)
	}
}

// CTL-2: rules decide without asking; a deny rule wins over an allow rule.
func TestCTL2_Rules(t *testing.T) {
	v := &vendor{caps: interactive, asks: []drover.PermissionRequestPayload{
		ask("r1", "Bash", "git status --short"), ask("r2", "Bash", "rm -rf build"), ask("r3", "Read", "x"), ask("r4", "Bash", "make")}}
	rules := []drover.PermissionRule{}
	for _, s := range []string{"allow:Bash(git status*)", "allow:Bash", "deny:Bash(rm *)", "allow:Read"} {
		r, err := drover.ParsePermissionRule(s)
		if err != nil {
			t.Fatal(err)
		}
		rules = append(rules, r)
	}
	got := answers(t, start(t, v, drover.Options{PermissionRules: rules}, engine.Hooks{})())
	for id, want := range map[string]string{"r1": "allow:Bash(git status*)", "r2": "deny:Bash(rm *)", "r3": "allow:Read", "r4": "allow:Bash"} {
		a := got[id]
		if a.By != drover.ByRule || a.Detail != want || string(a.Behavior) != strings.Split(want, ":")[0] {
			t.Errorf("%s: %+v, want decided by %s", id, a, want)
		}
	}
	for _, bad := range []string{"", "maybe:Bash", "allow:", "allow:Bash(x", "Bash"} {
		if _, err := drover.ParsePermissionRule(bad); err == nil {
			t.Errorf("rule %q accepted", bad)
		}
	}
}

// PERM-2: the callback decides, can change the input, and a failing or
// panicking callback denies.
func TestPERM2_Callback(t *testing.T) {
	v := &vendor{caps: interactive, asks: []drover.PermissionRequestPayload{ask("ok", "Bash", "make"), ask("err", "Bash", "x"), ask("panic", "Bash", "y")}}
	cb := func(_ context.Context, req drover.PermissionRequestPayload) (drover.PermissionDecision, error) {
		switch req.RequestID {
		case "ok":
			return drover.PermissionDecision{Behavior: drover.Allow, UpdatedInput: map[string]any{"command": "make -n"}}, nil
		case "err":
			return drover.PermissionDecision{}, errors.New("policy service down")
		}
		panic("bug")
	}
	evs := start(t, v, drover.Options{}, engine.Hooks{CanUseTool: cb})()
	got := answers(t, evs)
	if a := got["ok"]; a.Behavior != drover.Allow || a.By != drover.ByCallback {
		t.Errorf("ok: %+v", a)
	}
	if len(v.input) != 1 || v.input[0]["command"] != "make -n" {
		t.Errorf("the allowed call ran with %v, want the updated input", v.input)
	}
	if a := got["err"]; a.Behavior != drover.Deny || !strings.Contains(a.Message, "policy service down") {
		t.Errorf("err: %+v", a)
	}
	if a := got["panic"]; a.Behavior != drover.Deny || !strings.Contains(a.Message, "panicked") {
		t.Errorf("panic: %+v", a)
	}
	if p := evs[0].Payload.(drover.PermissionRequestPayload); p.Deadline <= evs[0].Timestamp {
		t.Errorf("a request with a callback has no deadline: %+v", p)
	}
}

// CTL-1: a client answers by request id, two open requests in any order;
// the first answer wins, an unknown id is not found, and an answer after
// the run ended finds no live run.
func TestCTL1_ClientAnswers(t *testing.T) {
	ctl := engine.NewControl()
	v := &vendor{caps: interactive, asks: []drover.PermissionRequestPayload{ask("a", "Bash", "one"), ask("b", "Bash", "two")}}
	collect := start(t, v, drover.Options{ApprovalTimeout: time.Minute}, engine.Hooks{Control: ctl})
	if p := waitPending(t, ctl, 2); p[0].RequestID != "a" || p[1].RequestID != "b" {
		t.Fatalf("pending %+v, want a then b", p)
	}
	if err := ctl.Respond("nope", drover.PermissionDecision{Behavior: drover.Allow}, "test"); !errors.Is(err, engine.ErrRequestNotFound) {
		t.Fatalf("unknown request: %v", err)
	}
	if err := ctl.Respond("b", drover.PermissionDecision{Behavior: drover.Deny, Message: "not that"}, "test"); err != nil {
		t.Fatal(err)
	}
	if err := ctl.Respond("b", drover.PermissionDecision{Behavior: drover.Allow}, "late"); !errors.Is(err, engine.ErrAlreadyAnswered) {
		t.Fatalf("second answer: %v", err)
	}
	if err := ctl.Respond("a", drover.PermissionDecision{Behavior: "maybe"}, "test"); !errors.Is(err, drover.ErrValidation) {
		t.Fatalf("bad behavior: %v", err)
	}
	if err := ctl.Respond("a", drover.PermissionDecision{Behavior: drover.Allow}, "test"); err != nil {
		t.Fatal(err)
	}
	got := answers(t, collect())
	if a := got["b"]; a.Behavior != drover.Deny || a.By != drover.ByClient || a.Detail != "test" || a.Message != "not that" {
		t.Errorf("b: %+v", a)
	}
	if a := got["a"]; a.Behavior != drover.Allow || a.By != drover.ByClient || a.AnsweredAt < a.AskedAt {
		t.Errorf("a: %+v", a)
	}
	if err := ctl.Respond("a", drover.PermissionDecision{Behavior: drover.Allow}, "test"); !errors.Is(err, engine.ErrNotLive) {
		t.Fatalf("after the run: %v", err)
	}
}

// PERM-2: no answer by the deadline denies; an answer after it is refused.
func TestPERM2_DeadlineDenies(t *testing.T) {
	ctl := engine.NewControl()
	v := &vendor{caps: interactive, asks: []drover.PermissionRequestPayload{ask("r", "Bash", "make")}}
	evs := start(t, v, drover.Options{ApprovalTimeout: 50 * time.Millisecond, IdleTimeout: 20 * time.Millisecond}, engine.Hooks{Control: ctl})()
	a := answers(t, evs)["r"]
	if a.Behavior != drover.Deny || a.By != drover.ByDeadline || a.AnsweredAt-a.AskedAt < 50 {
		t.Fatalf("answer %+v, want a denial at the deadline", a)
	}
	// The idle timeout (20 ms) did not end a run that waited for a person.
	if d, _ := evs[len(evs)-1].Done(); d.Status != drover.StatusSuccess {
		t.Fatalf("run ended %s: the idle timeout fired while a request was open", d.Status)
	}
}

// PERM-2: "always" allows the same call for the rest of the run without
// asking; a different call is still asked; the next run asks again.
func TestPERM2_Always(t *testing.T) {
	ctl := engine.NewControl()
	v := &vendor{caps: interactive, seq: true, asks: []drover.PermissionRequestPayload{
		ask("1", "Bash", "make test"), ask("2", "Bash", "make test"), ask("3", "Bash", "make lint")}}
	collect := start(t, v, drover.Options{ApprovalTimeout: time.Minute}, engine.Hooks{Control: ctl})
	waitPending(t, ctl, 1)
	if err := ctl.Respond("1", drover.PermissionDecision{Behavior: drover.Allow, Always: true}, "test"); err != nil {
		t.Fatal(err)
	}
	if p := waitPending(t, ctl, 1); p[0].RequestID != "3" {
		t.Fatalf("pending %+v: the repeated call was asked again", p)
	}
	if err := ctl.Respond("3", drover.PermissionDecision{Behavior: drover.Deny}, "test"); err != nil {
		t.Fatal(err)
	}
	got := answers(t, collect())
	if a := got["2"]; a.Behavior != drover.Allow || a.By != drover.ByRule || !strings.Contains(a.Detail, "always") {
		t.Fatalf("the repeated call: %+v", a)
	}
	// The next run with the same Control: the grant was for that run only.
	v2 := &vendor{caps: interactive, asks: []drover.PermissionRequestPayload{ask("1", "Bash", "make test")}}
	if a := answers(t, start(t, v2, drover.Options{ApprovalTimeout: 30 * time.Millisecond}, engine.Hooks{Control: ctl})())["1"]; a.By != drover.ByDeadline {
		t.Fatalf("a new run inherited an always grant: %+v", a)
	}
}

// CTL-3: steering and interrupting reach the adapter and are recorded; an
// agent that cannot take them refuses; after the run nothing is live.
func TestCTL3_SteerAndInterrupt(t *testing.T) {
	ctl := engine.NewControl()
	v := &vendor{caps: interactive, exit: make(chan struct{})}
	collect := start(t, v, drover.Options{}, engine.Hooks{Control: ctl})
	for ctl.Steer("also run the linter", "test") == engine.ErrNotLive {
		time.Sleep(time.Millisecond)
	}
	if err := ctl.Steer("", "test"); !errors.Is(err, drover.ErrValidation) {
		t.Fatalf("empty steer: %v", err)
	}
	for {
		v.mu.Lock()
		n := len(v.got)
		v.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err := ctl.Interrupt("test"); err != nil {
		t.Fatal(err)
	}
	evs := collect()
	if types := types(evs); !slices.Equal(types, []drover.EventType{drover.TypeSteer, drover.TypeInterrupt, drover.TypeDone}) {
		t.Fatalf("events %v", types)
	}
	if s := evs[0].Payload.(drover.SteerPayload); s.Message != "also run the linter" || s.By != "test" {
		t.Fatalf("steer %+v", s)
	}
	if d, _ := evs[2].Done(); d.Status != drover.StatusInterrupted || d.ResumeToken == "" {
		t.Fatalf("done %+v: an interrupt keeps the session", d)
	}
	if err := ctl.Steer("more", "test"); !errors.Is(err, engine.ErrNotLive) {
		t.Fatalf("steer after the run: %v", err)
	}

	plain := &vendor{caps: drover.Capabilities{Tiers: drover.Tiers()}, exit: make(chan struct{})}
	ctl = engine.NewControl()
	collect = start(t, plain, drover.Options{}, engine.Hooks{Control: ctl})
	for ctl.Interrupt("test") == engine.ErrNotLive {
		time.Sleep(time.Millisecond)
	}
	if err := ctl.Steer("x", "test"); !errors.Is(err, engine.ErrNotSupported) {
		t.Fatalf("steer on an agent without the channel: %v", err)
	}
	if err := ctl.Interrupt("test"); !errors.Is(err, engine.ErrNotSupported) {
		t.Fatalf("interrupt on an agent without the channel: %v", err)
	}
	close(plain.exit)
	collect()
}

// PERM-2: a vendor that exits with a request open, and a run cancelled
// while one is open, record the request denied at the run's end; nobody
// waits on it.
func TestPERM2_RunEndsWithRequestOpen(t *testing.T) {
	ctl := engine.NewControl()
	v := &vendor{caps: interactive, asks: []drover.PermissionRequestPayload{ask("r", "Bash", "make")}, exit: make(chan struct{})}
	collect := start(t, v, drover.Options{ApprovalTimeout: time.Minute}, engine.Hooks{Control: ctl})
	waitPending(t, ctl, 1)
	close(v.exit)
	evs := collect()
	if types := types(evs); !slices.Equal(types, []drover.EventType{drover.TypePermissionRequest, drover.TypePermissionAnswer, drover.TypeDone}) {
		t.Fatalf("events %v", types)
	}
	if a := answers(t, evs)["r"]; a.Behavior != drover.Deny || a.By != drover.ByRunEnd {
		t.Fatalf("answer %+v", a)
	}

	reg := drover.NewRegistry()
	v = &vendor{caps: interactive, asks: []drover.PermissionRequestPayload{ask("r", "Bash", "make")}}
	reg.Register(v.adapter())
	ctx, cancel := context.WithCancel(context.Background())
	ctl = engine.NewControl()
	events, _ := engine.New(reg).Start(ctx, engine.Request{Agent: "vendor", Prompt: "p", Hooks: engine.Hooks{Control: ctl, CanUseTool: func(ctx context.Context, _ drover.PermissionRequestPayload) (drover.PermissionDecision, error) {
		cancel() // the person walks away: the run is cancelled while asking
		<-ctx.Done()
		return drover.PermissionDecision{Behavior: drover.Allow}, nil
	}}})
	evs = slices.Collect(events)
	if d, _ := evs[len(evs)-1].Done(); d.Status != drover.StatusInterrupted {
		t.Fatalf("done %+v", d)
	}
	if a := answers(t, evs)["r"]; a.Behavior != drover.Deny || a.By != drover.ByRunEnd {
		t.Fatalf("answer %+v: the callback's late allow must not count", a)
	}
}

// One Control serves one run at a time; options without an adapter that
// can be asked are refused before it starts (ADP-3).
func TestCTL1_ControlAndCapabilities(t *testing.T) {
	ctl := engine.NewControl()
	v := &vendor{caps: interactive, exit: make(chan struct{})}
	collect := start(t, v, drover.Options{}, engine.Hooks{Control: ctl})
	for ctl.Pending() == nil && ctl.Steer("x", "t") == engine.ErrNotLive {
		time.Sleep(time.Millisecond)
	}
	second := &vendor{caps: interactive}
	evs := start(t, second, drover.Options{}, engine.Hooks{Control: ctl})()
	if types := types(evs); !slices.Equal(types, []drover.EventType{drover.TypeError, drover.TypeDone}) {
		t.Fatalf("a second run on a busy Control: %v", types)
	}
	close(v.exit)
	collect()

	plain := &vendor{caps: drover.Capabilities{Tiers: drover.Tiers()}}
	reg := drover.NewRegistry()
	if err := reg.Register(plain.adapter()); err != nil {
		t.Fatal(err)
	}
	for name, req := range map[string]engine.Request{
		"callback": {Hooks: engine.Hooks{CanUseTool: func(context.Context, drover.PermissionRequestPayload) (drover.PermissionDecision, error) {
			return drover.PermissionDecision{}, nil
		}}},
		"rules":   {Options: drover.Options{PermissionRules: []drover.PermissionRule{{Behavior: drover.Allow, Tool: "Read"}}}},
		"timeout": {Options: drover.Options{ApprovalTimeout: time.Minute}},
	} {
		req.Agent = "vendor"
		if _, err := engine.New(reg).Resolve(req); !errors.Is(err, drover.ErrUnsupportedOption) {
			t.Errorf("%s on an agent that cannot ask: %v", name, err)
		}
	}
}

// PERM-2: a request the agent withdraws is answered at once (deny, by the
// agent), not left to its deadline; the withdrawal itself is not an event.
func TestPERM2_WithdrawnRequest(t *testing.T) {
	ctl := engine.NewControl()
	a := &agenttest.Agent{Name: "w", Fn: func(ctx context.Context, req drover.Request, y func(drover.Event, error) bool) {
		if !y(drover.Event{Type: drover.TypePermissionRequest, Payload: ask("r1", "Bash", "make")}, nil) ||
			!y(drover.Event{Type: drover.TypePermissionWithdrawn, Payload: drover.PermissionWithdrawnPayload{RequestID: "r1", Reason: "turn ended"}}, nil) {
			return
		}
		select {
		case <-req.Live.Ready():
			for _, in := range req.Live.Take() {
				y(in.Event(), nil)
			}
		case <-time.After(5 * time.Second):
		}
		y(done(drover.StatusInterrupted), nil)
	}}
	reg := drover.NewRegistry()
	a.Caps = &interactive
	if err := reg.Register(a); err != nil {
		t.Fatal(err)
	}
	events, _ := engine.New(reg).Start(context.Background(), engine.Request{Agent: "w", Prompt: "p", Options: drover.Options{ApprovalTimeout: time.Hour}, Hooks: engine.Hooks{Control: ctl}})
	evs := slices.Collect(events)
	if got := types(evs); !slices.Equal(got, []drover.EventType{drover.TypePermissionRequest, drover.TypePermissionAnswer, drover.TypeDone}) {
		t.Fatalf("events %v", got)
	}
	if a := answers(t, evs)["r1"]; a.Behavior != drover.Deny || a.By != drover.ByAgent || a.Detail != "turn ended" {
		t.Fatalf("answer %+v", a)
	}
}

// SUP-1: in the supervised tier a read-only command runs without asking
// (the built-in read-only rule, the same on every vendor); a command a
// `;`, `&&` or redirection extends asks; an explicit deny rule still wins.
func TestSUP1_ReadOnlyCommandsRunWithoutAsking(t *testing.T) {
	asks := func() []drover.PermissionRequestPayload {
		return []drover.PermissionRequestPayload{ask("ls", "Bash", "ls -la"), ask("git", "exec_command", "git status"),
			ask("chain", "Bash", "ls; rm -rf x"), ask("and", "Bash", "ls && touch y"), ask("redir", "Bash", "ls > out"),
			ask("argv", "shell", ""), ask("denied", "Bash", "cat secrets.txt")}
	}
	v := &vendor{caps: interactive, asks: asks()}
	v.asks[5].Input = map[string]any{"command": []any{"bash", "-lc", "rg -n TODO"}}
	deny, err := drover.ParsePermissionRule("deny:Bash(cat *)")
	if err != nil {
		t.Fatal(err)
	}
	evs := start(t, v, drover.Options{Tier: drover.TierSupervised, PermissionRules: []drover.PermissionRule{deny}}, engine.Hooks{})()
	got := answers(t, evs)
	for id, allowed := range map[string]bool{"ls": true, "git": true, "argv": true, "chain": false, "and": false, "redir": false} {
		a := got[id]
		switch {
		case allowed && (a.Behavior != drover.Allow || a.By != drover.ByRule || a.Detail != engine.ReadOnlyRule):
			t.Errorf("%s: %+v, want allowed by the read-only rule", id, a)
		case !allowed && (a.Behavior != drover.Deny || a.By != drover.ByDefault):
			t.Errorf("%s: %+v, want asked (denied by default: nobody to ask)", id, a)
		}
	}
	if a := got["denied"]; a.Behavior != drover.Deny || a.Detail != "deny:Bash(cat *)" {
		t.Errorf("a deny rule lost to the read-only rule: %+v", a)
	}
	for _, ev := range evs {
		if p, ok := ev.Payload.(drover.PermissionRequestPayload); ok && p.RequestID == "ls" && (p.AnsweredBy != drover.ByRule || p.Deadline != 0) {
			t.Errorf("the request event of a call answered as asked: %+v", p)
		}
	}
}
