package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/claude"
	"github.com/drover-run/drover/builtin"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/testkit/uestest"
)

// liveScript scripts the model of the interactive tests. Every prompt is
// one of its patterns, so that a queued steering message, which Claude
// takes as a prompt of its own, is scripted too.
const liveScript = `{"rules":[
 {"name":"touch","match":"^touch (\\S+)$","steps":[{"tools":[{"shell":"touch $1"}]},{"text":"touched $1"}]},
 {"name":"twice","match":"^twice (\\S+)$","steps":[{"tools":[{"shell":"touch $1"}]},{"tools":[{"shell":"touch $1"}]},{"text":"touched $1 twice"}]},
 {"name":"write","match":"^write (\\S+)$","steps":[{"tools":[{"write":"$1","content":"edited\n"}]},{"text":"wrote $1"}]},
 {"name":"nap","match":"^nap$","steps":[{"tools":[{"shell":"sleep 2 && echo rested"}]},{"text":"rested"}]},
 {"name":"think","match":"^think$","steps":[{"text":"thought it over","delayMs":2500}]},
 {"name":"slow","match":"^slow$","steps":[{"text":"finally","delayMs":60000}]},
 {"name":"echo","match":"","steps":[{"text":"heard: $0"}]}
]}`

// live runs prompt through drover's engine with the built-in adapters, as
// a library user would, calling on with each event as it arrives (to
// answer, steer, interrupt or cancel at the right moment); o is the run's
// options (w.opts() plus the test's). Every event must be valid UES, and
// no process may be left in the workspace.
func (w *world) live(ctx context.Context, prompt string, o runOpts, on func(drover.Event)) []drover.Event {
	w.t.Helper()
	events, err := o.start(ctx, builtin.Registry(), claude.Alias, prompt)
	if err != nil {
		w.t.Fatal(err)
	}
	var evs []drover.Event
	for ev := range events {
		if on != nil {
			on(ev)
		}
		evs = append(evs, ev)
	}
	w.t.Logf("events: %v", typesOf(evs))
	for _, ev := range evs {
		if err := uestest.ValidateEvent(ev); err != nil {
			w.t.Errorf("invalid event: %v", err)
		}
	}
	noClaudeIn(w.t, w.cwd)
	return evs
}

// supervised returns w's options in the supervised tier.
func (w *world) supervised() runOpts {
	o := w.opts()
	o.Tier = drover.TierSupervised
	return o
}

// answer is a CanUseTool that answers d and counts the calls.
func answer(d drover.PermissionDecision, calls *atomic.Int32) drover.PermissionFunc {
	return func(context.Context, drover.PermissionRequestPayload) (drover.PermissionDecision, error) {
		calls.Add(1)
		return d, nil
	}
}

func (w *world) exists(name string) bool {
	_, err := os.Stat(filepath.Join(w.cwd, name))
	return err == nil
}

func ofType[T any](evs []drover.Event) []T { return payloads[T](evs) }

// oneResult returns the run's only tool_result.
func oneResult(t *testing.T, evs []drover.Event) drover.ToolResultPayload {
	t.Helper()
	res := ofType[drover.ToolResultPayload](evs)
	if len(res) != 1 {
		t.Fatalf("tool results %+v, want one", res)
	}
	return res[0]
}

// TestPERM2_ClaudeAllowedCallRuns: in supervised, a shell command that
// writes asks first (permission_request with Claude's request id, the
// command, and Claude's description as the reason); allowed by the
// callback, it runs.
func TestPERM2_ClaudeAllowedCallRuns(t *testing.T) {
	w := newWorld(t, liveScript)
	var calls atomic.Int32
	o := w.supervised()
	o.CanUseTool = answer(drover.PermissionDecision{Behavior: drover.Allow}, &calls)
	save := w.tap("live_allow", &o)
	evs := w.live(context.Background(), "touch allowed.txt", o, nil)
	save(evs)
	if d := doneOf(t, evs); d.Status != drover.StatusSuccess {
		t.Fatalf("done %+v", d)
	}
	reqs := ofType[drover.PermissionRequestPayload](evs)
	if len(reqs) != 1 || calls.Load() != 1 {
		t.Fatalf("permission requests %+v, callback called %d times", reqs, calls.Load())
	}
	r := reqs[0]
	if r.RequestID == "" || r.ToolName != "Bash" || r.Input["command"] != "touch allowed.txt" || r.Reason == "" || r.ToolUseID == "" {
		t.Fatalf("permission request %+v", r)
	}
	if a := ofType[drover.PermissionAnswerPayload](evs); len(a) != 1 || a[0].RequestID != r.RequestID || a[0].By != drover.ByCallback {
		t.Fatalf("answers %+v", a)
	}
	if res := oneResult(t, evs); res.Status != drover.ToolSuccess || res.ToolUseID != r.ToolUseID {
		t.Fatalf("tool_result %+v", res)
	}
	if !w.exists("allowed.txt") {
		t.Fatal("the allowed command did not run")
	}
}

// TestPERM2_ClaudeDeniedCallWithMessage: denied with a message, the
// command does not run, its tool_result is denied, and the model is told
// the message.
func TestPERM2_ClaudeDeniedCallWithMessage(t *testing.T) {
	w := newWorld(t, liveScript)
	var calls atomic.Int32
	o := w.supervised()
	const msg = "not in this repository; use the Makefile"
	o.CanUseTool = answer(drover.PermissionDecision{Behavior: drover.Deny, Message: msg}, &calls)
	save := w.tap("live_deny", &o)
	evs := w.live(context.Background(), "touch denied.txt", o, nil)
	save(evs)
	doneOf(t, evs)
	if res := oneResult(t, evs); res.Status != drover.ToolDenied {
		t.Fatalf("tool_result %+v", res)
	}
	if w.exists("denied.txt") {
		t.Fatal("a denied command ran")
	}
	told := false
	for _, r := range w.fake.Requests() {
		for _, tr := range r.ToolResults {
			told = told || tr.IsError && tr.Content == msg
		}
	}
	if !told {
		t.Fatalf("the model never got the denial message %q", msg)
	}
}

// TestPERM2_ClaudeUnansweredDeniedAtDeadline: a question nobody answers
// is denied at the approval timeout; nothing runs and the run ends.
func TestPERM2_ClaudeUnansweredDeniedAtDeadline(t *testing.T) {
	w := newWorld(t, liveScript)
	o := w.supervised()
	o.Control = engine.NewControl()
	o.ApprovalTimeout = time.Second
	save := w.tap("live_deadline", &o)
	evs := w.live(context.Background(), "touch late.txt", o, nil)
	save(evs)
	if d := doneOf(t, evs); d.Status != drover.StatusSuccess {
		t.Fatalf("done %+v", d)
	}
	if a := ofType[drover.PermissionAnswerPayload](evs); len(a) != 1 || a[0].By != drover.ByDeadline || a[0].Behavior != drover.Deny {
		t.Fatalf("answers %+v, want one denial at the deadline", a)
	}
	if res := oneResult(t, evs); res.Status != drover.ToolDenied {
		t.Fatalf("tool_result %+v", res)
	}
	if w.exists("late.txt") {
		t.Fatal("an unanswered command ran")
	}
}

// TestCTL1_ClaudeAlwaysIsNotAskedAgain: a call allowed "always" is not
// asked again when the model repeats it: Claude got the session rule, and
// asks nothing the second time.
func TestCTL1_ClaudeAlwaysIsNotAskedAgain(t *testing.T) {
	w := newWorld(t, liveScript)
	var calls atomic.Int32
	o := w.supervised()
	o.CanUseTool = answer(drover.PermissionDecision{Behavior: drover.Allow, Always: true}, &calls)
	save := w.tap("live_always", &o)
	evs := w.live(context.Background(), "twice again.txt", o, nil)
	save(evs)
	if d := doneOf(t, evs); d.Status != drover.StatusSuccess || d.Result != "touched again.txt twice" {
		t.Fatalf("done %+v", d)
	}
	if n := len(ofType[drover.PermissionRequestPayload](evs)); n != 1 || calls.Load() != 1 {
		t.Fatalf("%d permission requests, callback called %d times; want the second call not asked", n, calls.Load())
	}
	res := ofType[drover.ToolResultPayload](evs)
	if len(res) != 2 || res[0].Status != drover.ToolSuccess || res[1].Status != drover.ToolSuccess {
		t.Fatalf("tool results %+v", res)
	}
}

// TestPERM1_ClaudeLiveWorkspaceEditNotAsked: an interactive supervised run
// asks nothing for an edit in the workspace, as the headless tier allows
// it without asking.
func TestPERM1_ClaudeLiveWorkspaceEditNotAsked(t *testing.T) {
	w := newWorld(t, liveScript)
	var calls atomic.Int32
	o := w.supervised()
	o.CanUseTool = answer(drover.PermissionDecision{Behavior: drover.Deny, Message: "should not be asked"}, &calls)
	evs := w.live(context.Background(), "write edited.txt", o, nil)
	if d := doneOf(t, evs); d.Status != drover.StatusSuccess {
		t.Fatalf("done %+v", d)
	}
	if calls.Load() != 0 || len(ofType[drover.PermissionRequestPayload](evs)) != 0 {
		t.Fatalf("a workspace edit was asked: %v", typesOf(evs))
	}
	if data, err := os.ReadFile(filepath.Join(w.cwd, "edited.txt")); err != nil || string(data) != "edited\n" {
		t.Fatalf("edited.txt: %q %v", data, err)
	}
}

// TestCTL3_ClaudeSteerWhileToolRuns: a message sent while a tool runs
// reaches the model within the same turn, and the run goes on to its
// result.
func TestCTL3_ClaudeSteerWhileToolRuns(t *testing.T) {
	w := newWorld(t, liveScript)
	ctl := engine.NewControl()
	o := w.supervised()
	o.Control = ctl
	const msg = "also mention the weather"
	save := w.tap("live_steer_tool", &o)
	evs := w.live(context.Background(), "nap", o, func(ev drover.Event) {
		if ev.Type == drover.TypeToolUse {
			if err := ctl.Steer(msg, "test"); err != nil {
				t.Error(err)
			}
		}
	})
	save(evs)
	if d := doneOf(t, evs); d.Status != drover.StatusSuccess || d.Result != "rested" {
		t.Fatalf("done %+v", d)
	}
	if s := ofType[drover.SteerPayload](evs); len(s) != 1 || s[0].Message != msg {
		t.Fatalf("steering recorded %+v", s)
	}
	reached := false
	for _, r := range w.fake.Requests() {
		reached = reached || slices.Contains(r.UserTexts, msg)
	}
	if !reached {
		t.Fatalf("the steering message never reached the model: %+v", w.fake.Requests())
	}
}

// TestCTL3_ClaudeSteerQueuedIsATurnThatCanAsk: a message sent while the
// model answers becomes a turn of its own after the first result; Claude's
// stdin stays open for it, so a call in that turn is asked and runs.
func TestCTL3_ClaudeSteerQueuedIsATurnThatCanAsk(t *testing.T) {
	w := newWorld(t, liveScript)
	ctl := engine.NewControl()
	var calls atomic.Int32
	o := w.supervised()
	o.Control = ctl
	o.CanUseTool = answer(drover.PermissionDecision{Behavior: drover.Allow}, &calls)
	save := w.tap("live_steer_queued", &o)
	evs := w.live(context.Background(), "think", o, func(ev drover.Event) {
		if ev.Type == drover.TypeInit {
			if err := ctl.Steer("touch queued.txt", "test"); err != nil {
				t.Error(err)
			}
		}
	})
	save(evs)
	if d := doneOf(t, evs); d.Status != drover.StatusSuccess || d.Result != "touched queued.txt" {
		t.Fatalf("done %+v: want the steered turn's result", d)
	}
	if texts := ofType[drover.TextPayload](evs); len(texts) < 2 || texts[0].Content != "thought it over" {
		t.Fatalf("texts %+v: want the first turn's answer, then the second's", texts)
	}
	if calls.Load() != 1 || !w.exists("queued.txt") {
		t.Fatalf("the queued turn's call: asked %d times, file exists %v", calls.Load(), w.exists("queued.txt"))
	}
}

// TestCTL3_ClaudeInterruptKeepsSession: an interrupt ends the turn with
// done{interrupted} and a resume token; a new run resuming it continues
// the same conversation.
func TestCTL3_ClaudeInterruptKeepsSession(t *testing.T) {
	w := newWorld(t, liveScript)
	ctl := engine.NewControl()
	o := w.supervised()
	o.Control = ctl
	save := w.tap("live_interrupt", &o)
	evs := w.live(context.Background(), "slow", o, func(ev drover.Event) {
		if ev.Type == drover.TypeInit {
			time.Sleep(300 * time.Millisecond) // let claude send its request
			if err := ctl.Interrupt("test"); err != nil {
				t.Error(err)
			}
		}
	})
	save(evs)
	d := doneOf(t, evs)
	if d.Status != drover.StatusInterrupted || d.ResumeToken == "" {
		t.Fatalf("done %+v, want interrupted with a resume token", d)
	}
	if len(ofType[drover.InterruptPayload](evs)) != 1 {
		t.Fatalf("interrupt not recorded: %v", typesOf(evs))
	}
	for _, ev := range evs {
		if ev.Type == drover.TypeError {
			t.Fatalf("an interrupt is not an error: %+v", ev)
		}
	}

	o = w.supervised()
	o.Control = engine.NewControl()
	o.Resume = d.ResumeToken
	evs = w.live(context.Background(), "after the break", o, nil)
	if d2 := doneOf(t, evs); d2.Status != drover.StatusSuccess || d2.Result != "heard: after the break" || d2.ResumeToken != d.ResumeToken {
		t.Fatalf("resumed done %+v", d2)
	}
	// Claude merges the interrupted prompt, its interruption marker and the
	// new prompt into one user message ("slow\n" being its first block).
	reqs := w.fake.Requests()
	if last := reqs[len(reqs)-1]; !slices.ContainsFunc(last.UserTexts, func(s string) bool { return strings.TrimSpace(s) == "slow" }) {
		t.Fatalf("the resumed request lacks the interrupted turn: %q", last.UserTexts)
	}
}

// TestCTL3_ClaudeSteerAndInterruptEveryTier: steering and interrupting
// work in the tiers that ask nothing too. A message sent while the model
// answers is queued; the interrupt then ends the answering turn, and the
// queued message is answered as a turn of its own.
func TestCTL3_ClaudeSteerAndInterruptEveryTier(t *testing.T) {
	for _, tier := range []drover.Tier{drover.TierSandbox, drover.TierDryRun, drover.TierAutonomous} {
		t.Run(string(tier), func(t *testing.T) {
			w := newWorld(t, liveScript)
			ctl := engine.NewControl()
			o := w.opts()
			o.Tier = tier
			o.Control = ctl
			save := w.tap("live_steer_interrupt_"+strings.ReplaceAll(string(tier), "-", "_"), &o)
			evs := w.live(context.Background(), "slow", o, func(ev drover.Event) {
				if ev.Type == drover.TypeInit && ev.Payload.(drover.InitPayload).Model != "" {
					time.Sleep(300 * time.Millisecond) // let claude send its request
					if err := ctl.Steer("are you there?", "test"); err != nil {
						t.Error(err)
					}
					if err := ctl.Interrupt("test"); err != nil {
						t.Error(err)
					}
				}
			})
			save(evs)
			if d := doneOf(t, evs); d.Status != drover.StatusSuccess || d.Result != "heard: are you there?" {
				t.Fatalf("done %+v, want the queued message's answer", d)
			}
			if len(ofType[drover.InterruptPayload](evs)) != 1 || len(ofType[drover.SteerPayload](evs)) != 1 {
				t.Fatalf("inputs not recorded: %v", typesOf(evs))
			}
			for _, p := range ofType[drover.TextPayload](evs) {
				if p.Content == "finally" {
					t.Fatal("the interrupted answer was given anyway")
				}
			}
		})
	}
}

// TestCTL3_ClaudeInterruptWhileAsked: an interrupt while Claude waits for
// an answer ends the turn; Claude withdraws its question
// (control_cancel_request), so the request is answered at once, denied by
// the agent, and the call never runs.
func TestCTL3_ClaudeInterruptWhileAsked(t *testing.T) {
	w := newWorld(t, liveScript)
	ctl := engine.NewControl()
	o := w.supervised()
	o.Control = ctl
	o.ApprovalTimeout = time.Minute
	save := w.tap("live_interrupt_asked", &o)
	evs := w.live(context.Background(), "touch never.txt", o, func(ev drover.Event) {
		if ev.Type == drover.TypePermissionRequest {
			if err := ctl.Interrupt("test"); err != nil {
				t.Error(err)
			}
		}
	})
	save(evs)
	if d := doneOf(t, evs); d.Status != drover.StatusInterrupted {
		t.Fatalf("done %+v", d)
	}
	if res := oneResult(t, evs); res.Status != drover.ToolDenied {
		t.Fatalf("tool_result %+v", res)
	}
	if a := ofType[drover.PermissionAnswerPayload](evs); len(a) != 1 || a[0].By != drover.ByAgent || a[0].Behavior != drover.Deny {
		t.Fatalf("answers %+v, want the request denied as withdrawn by the agent", a)
	}
	if w.exists("never.txt") {
		t.Fatal("the command ran")
	}
}

// TestCTL3_ClaudeCancelWhileAsked: cancelling a run whose question is open
// ends it interrupted, and no claude process is left (live checks).
func TestCTL3_ClaudeCancelWhileAsked(t *testing.T) {
	w := newWorld(t, liveScript)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := w.supervised()
	o.Control = engine.NewControl()
	o.ApprovalTimeout = time.Minute
	var pid atomic.Int64
	o.Observer = func(p, _ int) { pid.Store(int64(p)) }
	evs := w.live(ctx, "touch cancelled.txt", o, func(ev drover.Event) {
		if ev.Type == drover.TypePermissionRequest {
			cancel()
		}
	})
	if d := doneOf(t, evs); d.Status != drover.StatusInterrupted {
		t.Fatalf("done %+v", d)
	}
	if pid.Load() == 0 || processAlive(int(pid.Load())) {
		t.Fatalf("claude (pid %d) is still alive", pid.Load())
	}
	if w.exists("cancelled.txt") {
		t.Fatal("the command ran")
	}
}

// processAlive reports whether pid names a live process (not a zombie).
func processAlive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	fields := strings.Fields(string(stat))
	return len(fields) < 3 || fields[2] != "Z"
}
