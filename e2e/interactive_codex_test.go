package e2e

// Live Codex runs (PERM-2, CTL-1, CTL-3): the pinned codex 0.169.0 driven
// through `codex app-server` by engine.New(builtin.Registry()).Run,
// offline against fakemodel. What the model received is read from
// fakemodel's request log.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/adaptertest"
	"github.com/drover-run/drover/adapter/codex"
	"github.com/drover-run/drover/builtin"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/fakemodel"
	"github.com/drover-run/drover/internal/testkit/uestest"
)

// cxWorld is one live Codex test's offline setup: claude_test.go's world
// (fakemodel with interactive_claude_test.go's liveScript, a workspace, a
// home) and the pinned codex.
type cxWorld struct {
	*world
	codexBin string
}

func newCXWorld(t *testing.T) *cxWorld {
	t.Helper()
	return &cxWorld{world: newWorld(t, liveScript), codexBin: vendorBin(t, "codex", codex.BinaryEnv)}
}

// codexOpts are a supervised live run's options: the world's (offline,
// isolated, no API retries) for codex; callers add the control.
func (w *cxWorld) codexOpts() runOpts {
	o := w.opts()
	o.Binary, o.Tier, o.ConfigDir = w.codexBin, drover.TierSupervised, filepath.Join(w.home, ".codex")
	return o
}

// answered returns codexOpts with every permission request answered d by
// a callback, and the count of its calls.
func (w *cxWorld) answered(d drover.PermissionDecision) (runOpts, *atomic.Int32) {
	var calls atomic.Int32
	o := w.codexOpts()
	o.CanUseTool = func(context.Context, drover.PermissionRequestPayload) (drover.PermissionDecision, error) {
		calls.Add(1)
		return d, nil
	}
	return o, &calls
}

// runCodex runs prompt through the engine with every built-in adapter,
// handing each event to on (when set) as it comes, and checks what every
// run must satisfy: exactly one done and last, valid events, and no
// process of the run left, in its workspace or its process group.
func (w *cxWorld) runCodex(ctx context.Context, prompt string, o runOpts, on func(drover.Event)) []drover.Event {
	w.t.Helper()
	var groups []int
	o.Observer = func(_, pgid int) { groups = append(groups, pgid) }
	events, err := o.start(ctx, builtin.Registry(), codex.ID, prompt)
	if err != nil {
		w.t.Fatal(err)
	}
	evs := slices.Collect(func(yield func(drover.Event) bool) {
		for ev := range events {
			if on != nil {
				on(ev)
			}
			if !yield(ev) {
				return
			}
		}
	})
	w.t.Logf("events: %v", typesOf(evs))
	doneOf(w.t, evs)
	for _, ev := range evs {
		if err := uestest.ValidateEvent(ev); err != nil {
			w.t.Errorf("invalid event: %v", err)
		}
	}
	adaptertest.NoProcessIn(w.t, w.cwd)
	for _, g := range groups {
		if err := syscall.Kill(-g, 0); !errors.Is(err, syscall.ESRCH) {
			w.t.Errorf("process group %d still exists after the run (%v)", g, err)
		}
	}
	return evs
}

// requests returns fakemodel's log of the rule named rule.
func (w *cxWorld) requests(rule string) []fakemodel.Request {
	var out []fakemodel.Request
	for _, r := range w.fake.Requests() {
		if r.Rule == rule {
			out = append(out, r)
		}
	}
	return out
}

func (w *cxWorld) exists(name string) bool {
	_, err := os.Stat(filepath.Join(w.cwd, name))
	return err == nil
}

// cxResults returns the tool_results of tool in evs.
func cxResults(evs []drover.Event, tool string) []drover.ToolResultPayload {
	var out []drover.ToolResultPayload
	for _, r := range payloads[drover.ToolResultPayload](evs) {
		if r.ToolName == tool {
			out = append(out, r)
		}
	}
	return out
}

func cxAnswers(evs []drover.Event) []drover.PermissionAnswerPayload {
	return payloads[drover.PermissionAnswerPayload](evs)
}

// TestPERM2_CodexShellAskedAndAllowed: in supervised, a shell command is a
// permission_request (exec_command, the script as input, the run's
// toolUseId); allowed, it runs and its tool_result is success.
func TestPERM2_CodexShellAskedAndAllowed(t *testing.T) {
	w := newCXWorld(t)
	o, calls := w.answered(drover.PermissionDecision{Behavior: drover.Allow})
	evs := w.runCodex(context.Background(), "touch allowed.txt", o, nil)
	if d := doneOf(t, evs); d.Status != drover.StatusSuccess || d.Result != "touched allowed.txt" || !uuidLike(d.ResumeToken) {
		t.Fatalf("done %+v", d)
	}
	reqs := payloads[drover.PermissionRequestPayload](evs)
	if len(reqs) != 1 || reqs[0].ToolName != "exec_command" || reqs[0].Input["command"] != "touch allowed.txt" || reqs[0].RequestID == "" {
		t.Fatalf("permission requests %+v", reqs)
	}
	uses := payloads[drover.ToolUsePayload](evs)
	if len(uses) != 1 || uses[0].ToolUseID != reqs[0].ToolUseID {
		t.Fatalf("tool_use %+v, request for %q", uses, reqs[0].ToolUseID)
	}
	if !w.exists("allowed.txt") {
		t.Fatal("the allowed command did not run")
	}
	res := cxResults(evs, "exec_command")
	if len(res) != 1 || res[0].Status != drover.ToolSuccess {
		t.Fatalf("tool_result %+v", res)
	}
	if a := cxAnswers(evs); len(a) != 1 || a[0].By != drover.ByCallback || a[0].Behavior != drover.Allow {
		t.Fatalf("answers %+v", a)
	}
	if calls.Load() != 1 {
		t.Fatalf("callback called %d times", calls.Load())
	}
}

// TestPERM2_CodexShellDeniedWithMessage: denied with a message, nothing
// runs, the tool_result is denied, and the model is told both Codex's
// rejection and the message.
func TestPERM2_CodexShellDeniedWithMessage(t *testing.T) {
	w := newCXWorld(t)
	o, _ := w.answered(drover.PermissionDecision{Behavior: drover.Deny, Message: "use the staging database"})
	evs := w.runCodex(context.Background(), "touch denied.txt", o, nil)
	if d := doneOf(t, evs); d.Status != drover.StatusSuccess {
		t.Fatalf("done %+v", d)
	}
	if w.exists("denied.txt") {
		t.Fatal("a denied command ran")
	}
	if res := cxResults(evs, "exec_command"); len(res) != 1 || res[0].Status != drover.ToolDenied {
		t.Fatalf("tool_result %+v", res)
	}
	// The model's next request in the turn carries Codex's rejection as the
	// tool's output, then the message as the latest user text.
	told := w.requests("echo")
	if len(told) != 1 || told[0].Prompt != "exec_command was denied: use the staging database" {
		t.Fatalf("what the model was told: %s", cxLog(told))
	}
	if out := cxToolOutputs(t, told[0]); len(out) != 1 || !strings.Contains(out[0], "rejected by user") {
		t.Fatalf("the tool output the model got: %q", out)
	}
	if d := doneOf(t, evs); d.Result != "heard: exec_command was denied: use the staging database" {
		t.Fatalf("result %q", d.Result)
	}
}

// TestPERM2_CodexNoAnswerDeniedAtDeadline: a request nobody answers is
// denied at its deadline, and the run goes on.
func TestPERM2_CodexNoAnswerDeniedAtDeadline(t *testing.T) {
	w := newCXWorld(t)
	o := w.codexOpts()
	o.Control = engine.NewControl()
	o.ApprovalTimeout = 1500 * time.Millisecond
	start := time.Now()
	evs := w.runCodex(context.Background(), "touch late.txt", o, nil)
	if d := doneOf(t, evs); d.Status != drover.StatusSuccess {
		t.Fatalf("done %+v", d)
	}
	if time.Since(start) < o.ApprovalTimeout {
		t.Fatal("the run ended before the deadline")
	}
	reqs := payloads[drover.PermissionRequestPayload](evs)
	if len(reqs) != 1 || reqs[0].Deadline == 0 {
		t.Fatalf("requests %+v", reqs)
	}
	if a := cxAnswers(evs); len(a) != 1 || a[0].By != drover.ByDeadline || a[0].Behavior != drover.Deny {
		t.Fatalf("answers %+v", a)
	}
	if w.exists("late.txt") {
		t.Fatal("an unanswered command ran")
	}
	if res := cxResults(evs, "exec_command"); len(res) != 1 || res[0].Status != drover.ToolDenied {
		t.Fatalf("tool_result %+v", res)
	}
}

// TestCTL1_CodexAlwaysNotAskedAgain: allowed "for the rest of the session",
// a second identical command is not asked again (Codex's acceptForSession).
func TestCTL1_CodexAlwaysNotAskedAgain(t *testing.T) {
	w := newCXWorld(t)
	o, calls := w.answered(drover.PermissionDecision{Behavior: drover.Allow, Always: true})
	evs := w.runCodex(context.Background(), "twice twice.txt", o, nil)
	if d := doneOf(t, evs); d.Status != drover.StatusSuccess || d.Result != "touched twice.txt twice" {
		t.Fatalf("done %+v", d)
	}
	if n := len(payloads[drover.PermissionRequestPayload](evs)); n != 1 || calls.Load() != 1 {
		t.Fatalf("%d permission requests, %d callback calls; want 1", n, calls.Load())
	}
	res := cxResults(evs, "exec_command")
	if len(res) != 2 || res[0].Status != drover.ToolSuccess || res[1].Status != drover.ToolSuccess {
		t.Fatalf("tool_results %+v", res)
	}
	if !w.exists("twice.txt") {
		t.Fatal("the allowed command did not run")
	}
}

// TestPERM1_CodexLiveSupervisedEdits: in a live supervised run an edit in
// the workspace is made without asking; one outside it is asked for, and
// denied leaves no file.
func TestPERM1_CodexLiveSupervisedEdits(t *testing.T) {
	w := newCXWorld(t)
	o, _ := w.answered(drover.PermissionDecision{Behavior: drover.Deny})
	evs := w.runCodex(context.Background(), "write inside.txt", o, nil)
	if n := len(payloads[drover.PermissionRequestPayload](evs)); n != 0 {
		t.Fatalf("an edit in the workspace was asked for (%d requests)", n)
	}
	if b, _ := os.ReadFile(filepath.Join(w.cwd, "inside.txt")); string(b) != "edited\n" {
		t.Fatalf("inside.txt = %q", b)
	}
	if res := cxResults(evs, "apply_patch"); len(res) != 1 || res[0].Status != drover.ToolSuccess {
		t.Fatalf("tool_result %+v", res)
	}

	outside := filepath.Join(t.TempDir(), "outside.txt")
	evs = w.runCodex(context.Background(), "write "+outside, o, nil)
	reqs := payloads[drover.PermissionRequestPayload](evs)
	if len(reqs) != 1 || reqs[0].ToolName != "apply_patch" || reqs[0].Input["path"] != outside {
		t.Fatalf("requests %+v", reqs)
	}
	if _, err := os.Stat(outside); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a denied edit outside the workspace was made: %v", err)
	}
	if res := cxResults(evs, "apply_patch"); len(res) != 1 || res[0].Status != drover.ToolDenied {
		t.Fatalf("tool_result %+v", res)
	}
}

// TestCTL3_CodexSteerReachesModel: a message steered into a running turn
// reaches the model (fakemodel's log), which answers it in the same run.
func TestCTL3_CodexSteerReachesModel(t *testing.T) {
	w := newCXWorld(t)
	o := w.codexOpts()
	o.Control = engine.NewControl()
	evs := w.runCodex(context.Background(), "think", o, atTurnStart(t, func() error {
		return o.Control.Steer("look at the tests first", "test")
	}))
	d := doneOf(t, evs)
	if d.Status != drover.StatusSuccess || d.Result != "heard: look at the tests first" {
		t.Fatalf("done %+v", d)
	}
	if s := payloads[drover.SteerPayload](evs); len(s) != 1 || s[0].By != "test" {
		t.Fatalf("steer events %+v", s)
	}
	got := w.requests("echo")
	if len(got) != 1 || got[0].Prompt != "look at the tests first" || !slices.Contains(got[0].UserTexts, "think") {
		t.Fatalf("the model did not get the steering message in the turn: %s", cxLog(got))
	}
}

// TestCTL3_CodexInterruptThenResume: an interrupt ends the turn (done
// interrupted, with the thread as resume token, the process gone); a new
// run resuming it continues the thread.
func TestCTL3_CodexInterruptThenResume(t *testing.T) {
	w := newCXWorld(t)
	o := w.codexOpts()
	o.Control = engine.NewControl()
	start := time.Now()
	evs := w.runCodex(context.Background(), "slow", o, atTurnStart(t, func() error {
		return o.Control.Interrupt("test")
	}))
	d := doneOf(t, evs)
	if d.Status != drover.StatusInterrupted || !uuidLike(d.ResumeToken) {
		t.Fatalf("done %+v", d)
	}
	if time.Since(start) > time.Minute {
		t.Fatal("the interrupt did not end the turn")
	}
	if n := len(payloads[drover.InterruptPayload](evs)); n != 1 {
		t.Fatalf("%d interrupt events", n)
	}

	o2 := w.codexOpts()
	o2.Resume = d.ResumeToken
	o2.Control = engine.NewControl()
	evs = w.runCodex(context.Background(), "continue", o2, nil)
	d2 := doneOf(t, evs)
	if d2.Status != drover.StatusSuccess || d2.Result != "heard: continue" || d2.ResumeToken != d.ResumeToken {
		t.Fatalf("resumed done %+v (first %s)", d2, d.ResumeToken)
	}
	got := w.requests("echo")
	if len(got) != 1 || !slices.Equal(got[0].UserTexts, []string{"slow", "continue"}) {
		t.Fatalf("the resumed thread lost its history: %s", cxLog(got))
	}
}

// TestCTL3_CodexCancelWhilePending: cancelling the run while a permission
// request waits ends it (done interrupted), the command never runs, and no
// codex process is left.
func TestCTL3_CodexCancelWhilePending(t *testing.T) {
	w := newCXWorld(t)
	o := w.codexOpts()
	o.Control = engine.NewControl()
	o.ApprovalTimeout = time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	evs := w.runCodex(ctx, "touch never.txt", o, func(ev drover.Event) {
		if ev.Type == drover.TypePermissionRequest {
			cancel()
		}
	})
	if d := doneOf(t, evs); d.Status != drover.StatusInterrupted {
		t.Fatalf("done %+v", d)
	}
	if a := cxAnswers(evs); len(a) != 1 || a[0].By != drover.ByRunEnd {
		t.Fatalf("answers %+v", a)
	}
	if w.exists("never.txt") {
		t.Fatal("the pending command ran")
	}
}

// atTurnStart returns an event handler that calls act once, when the
// turn has started, failing t if act fails.
func atTurnStart(t *testing.T, act func() error) func(drover.Event) {
	done := false
	return func(ev drover.Event) {
		if ev.Type == "codex:turn_started" && !done {
			done = true
			if err := act(); err != nil {
				t.Errorf("at turn start: %v", err)
			}
		}
	}
}

// cxLog shows what the model received in reqs (not the request bodies).
func cxLog(reqs []fakemodel.Request) string {
	var b strings.Builder
	for _, r := range reqs {
		fmt.Fprintf(&b, "\n  rule %s step %d: prompt %q, user texts %q, tool results %+v", r.Rule, r.Step, r.Prompt, r.UserTexts, r.ToolResults)
	}
	return b.String()
}

// cxToolOutputs returns the tool outputs anywhere in a Responses request's
// input (fakemodel's ToolResults has only those after the prompt).
func cxToolOutputs(t *testing.T, r fakemodel.Request) []string {
	t.Helper()
	var body struct {
		Input []struct {
			Type   string          `json:"type"`
			Output json.RawMessage `json:"output"`
		} `json:"input"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatalf("request body: %v", err)
	}
	var out []string
	for _, it := range body.Input {
		if strings.HasSuffix(it.Type, "_output") {
			var s string
			if json.Unmarshal(it.Output, &s) != nil {
				s = string(it.Output)
			}
			out = append(out, s)
		}
	}
	return out
}

// uuidLike reports whether s looks like a Codex thread id.
func uuidLike(s string) bool {
	parts := strings.Split(s, "-")
	if len(parts) != 5 {
		return false
	}
	for _, p := range parts {
		if _, err := strconv.ParseUint(p, 16, 64); err != nil {
			return false
		}
	}
	return true
}

// TestBND2_CodexApprovedCommandStaysInside: below autonomous no shell
// command Codex runs writes outside the run's boundary, approved or not.
// In a live supervised run a person approves `touch` of a file outside the
// workspace: it runs once, contained, the kernel refuses the write, and
// Codex neither asks again nor reruns it. Where Codex keeps its own
// sandbox (live dry-run, headless supervised) its approval policy is
// "never": nothing is asked, and the refused command is not rerun. The
// uncontained live run shows what containment prevents, and that the
// scenario can fail: Codex's sandbox refuses the approved command, and
// Codex reruns it outside the sandbox, unasked; the file is made.
func TestBND2_CodexApprovedCommandStaysInside(t *testing.T) {
	no := false
	for _, c := range []struct {
		name    string
		tier    drover.Tier
		live    bool
		contain *bool
		meta    map[string]any // the done metadata wanted
		asked   int32
		status  drover.ToolStatus
		escapes bool
	}{
		{"live supervised", drover.TierSupervised, true, nil, map[string]any{"contained": true}, 1, drover.ToolError, false},
		{"live dry-run", drover.TierDryRun, true, nil, map[string]any{"contained": false, "containment": "vendor sandbox"}, 0, drover.ToolDenied, false},
		{"headless supervised", drover.TierSupervised, false, nil, map[string]any{"contained": false, "containment": "vendor sandbox"}, 0, drover.ToolDenied, false},
		{"live supervised uncontained", drover.TierSupervised, true, &no, map[string]any{"contained": false, "containment": "off"}, 1, drover.ToolSuccess, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newCXWorld(t)
			outside := filepath.Join(t.TempDir(), "outside.txt")
			o, calls := w.answered(drover.PermissionDecision{Behavior: drover.Allow})
			o.Tier, o.Contain = c.tier, c.contain
			if !c.live {
				o.CanUseTool = nil
			}
			evs := w.runCodex(context.Background(), "touch "+outside, o, nil)
			d := doneOf(t, evs)
			if d.Status != drover.StatusSuccess || d.Result != "touched "+outside {
				t.Fatalf("done %+v", d)
			}
			if md := evs[len(evs)-1].Metadata; md["contained"] != c.meta["contained"] || md["containment"] != c.meta["containment"] {
				t.Errorf("done metadata %v, want %v", md, c.meta)
			}
			reqs := payloads[drover.PermissionRequestPayload](evs)
			if int32(len(reqs)) != c.asked || calls.Load() != c.asked || c.asked > 0 && reqs[0].Input["command"] != "touch "+outside {
				t.Fatalf("permission requests %+v, callback called %d times; want the command asked %d times", reqs, calls.Load(), c.asked)
			}
			if _, err := os.Stat(outside); c.escapes != (err == nil) {
				t.Fatalf("the file outside the workspace: %v, want made %v", err, c.escapes)
			}
			res := cxResults(evs, "exec_command")
			if len(res) != 1 || res[0].Status != c.status {
				t.Fatalf("tool_result %+v, want one %s", res, c.status)
			}
		})
	}
}
