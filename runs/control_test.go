package runs_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/testkit/agenttest"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
)

// asker is agenttest.Asker.
func asker(steerable bool) *agenttest.Agent { return agenttest.Asker(steerable) }

// waitFor polls cond until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// CTL-1, LED-3: a run of this supervisor is answered through it; the
// answer, who gave it and when are in the run's events and turn record,
// and steering messages are user messages of the turn record.
func TestCTL1_RespondAndRecord(t *testing.T) {
	f := newFixture(t, runs.Config{}, asker(true))
	ctx := context.Background()
	id := f.start(t, runs.StartRequest{Agent: "asker", Prompt: "build", Options: drover.Options{ApprovalTimeout: time.Minute}})
	var pending []drover.PermissionRequestPayload
	waitFor(t, "the request", func() bool {
		pending, _ = f.sup.Pending(ctx, id)
		return len(pending) == 1
	})
	if pending[0].RequestID != "q1" || pending[0].Deadline == 0 {
		t.Fatalf("pending %+v", pending)
	}
	if err := f.sup.Respond(ctx, id, "q1", drover.PermissionDecision{Behavior: drover.Allow}, "test"); err != nil {
		t.Fatal(err)
	}
	if err := f.sup.Respond(ctx, id, "q1", drover.PermissionDecision{Behavior: drover.Deny}, "test"); !errors.Is(err, engine.ErrAlreadyAnswered) {
		t.Fatalf("second answer: %v", err)
	}
	if err := f.sup.Steer(ctx, id, "also lint", "test"); err != nil {
		t.Fatal(err)
	}
	if err := f.sup.Steer(ctx, id, "stop", "test"); err != nil {
		t.Fatal(err)
	}
	r := f.await(t, id)[0]
	if r.Status != store.StatusCompleted {
		t.Fatalf("run %+v", r)
	}
	calls, err := f.st.ToolCalls(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 || calls[0].Status != drover.ToolSuccess || calls[0].Permission == nil ||
		calls[0].Permission.By != drover.ByClient || calls[0].Permission.Detail != "test" || calls[0].Permission.Behavior != drover.Allow {
		t.Fatalf("tool calls %+v", calls)
	}
	msgs, _ := f.st.Messages(ctx, id)
	var users []string
	for _, m := range msgs {
		if m.Role == "user" {
			users = append(users, m.Content)
		}
	}
	if len(users) != 3 || users[1] != "also lint" {
		t.Fatalf("user messages %q: want the prompt and both steering messages", users)
	}
	if err := f.sup.Steer(ctx, id, "more", "test"); !errors.Is(err, engine.ErrNotLive) {
		t.Fatalf("steer after the end: %v", err)
	}
	if _, err := f.sup.Pending(ctx, "run_nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("pending of an unknown run: %v", err)
	}
}

// CTL-3: a run owned by another drover process is answered, steered and
// interrupted through the ledger, within its owner's poll; what cannot
// apply is refused up front.
func TestCTL3_FromAnotherProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "drover.db")
	owner := newFixtureOn(t, openStore(t, path), runs.Config{Owner: "a:1", Poll: 20 * time.Millisecond}, asker(true), hang())
	other := newFixtureOn(t, openStore(t, path), runs.Config{Owner: "b:2", Poll: 20 * time.Millisecond}, asker(true), hang())
	ctx := context.Background()
	id := owner.start(t, runs.StartRequest{Agent: "asker", Prompt: "build", Options: drover.Options{ApprovalTimeout: time.Minute}})
	waitFor(t, "the request in the ledger", func() bool {
		p, _ := other.sup.Pending(ctx, id)
		return len(p) == 1 && p[0].RequestID == "q1"
	})
	if err := other.sup.Respond(ctx, id, "nope", drover.PermissionDecision{Behavior: drover.Allow}, "b"); !errors.Is(err, engine.ErrRequestNotFound) {
		t.Fatalf("unknown request: %v", err)
	}
	if err := other.sup.Respond(ctx, "run_nope", "q1", drover.PermissionDecision{Behavior: drover.Allow}, "b"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown run: %v", err)
	}
	asked := time.Now()
	if err := other.sup.Respond(ctx, id, "q1", drover.PermissionDecision{Behavior: drover.Deny, Message: "not now"}, "drover deny"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the answer recorded", func() bool {
		p, _ := other.sup.Pending(ctx, id)
		return len(p) == 0
	})
	if waited := time.Since(asked); waited > time.Second {
		t.Errorf("the answer took %s to reach the owner, want within 1 s", waited)
	}
	if err := other.sup.Respond(ctx, id, "q1", drover.PermissionDecision{Behavior: drover.Allow}, "b"); !errors.Is(err, engine.ErrAlreadyAnswered) {
		t.Fatalf("answered request: %v", err)
	}
	if err := other.sup.Steer(ctx, id, "hurry", "b"); err != nil {
		t.Fatal(err)
	}
	if err := other.sup.Interrupt(ctx, id, "b"); err != nil {
		t.Fatal(err)
	}
	r := other.await(t, id)[0]
	if r.DoneStatus != drover.StatusInterrupted || r.ResumeToken != "tok" || r.Error != store.ReasonInterrupted {
		t.Fatalf("run %+v: want interrupted with its session kept", r)
	}
	var kinds []drover.EventType
	for _, ev := range eventsOf(t, other.st, id) {
		kinds = append(kinds, ev.Type)
		if a, ok := ev.Payload.(drover.PermissionAnswerPayload); ok && (a.By != drover.ByClient || a.Detail != "drover deny" || a.Message != "not now") {
			t.Errorf("answer %+v", a)
		}
	}
	want := []drover.EventType{drover.TypeToolUse, drover.TypePermissionRequest, drover.TypePermissionAnswer, drover.TypeToolResult,
		drover.TypeSteer, drover.TypeInterrupt, drover.TypeDone}
	if !slices.Equal(kinds, want) {
		t.Fatalf("events %v, want %v", kinds, want)
	}
	if err := other.sup.Interrupt(ctx, id, "b"); !errors.Is(err, engine.ErrNotLive) {
		t.Fatalf("interrupt after the end: %v", err)
	}
}

// CTL-3: an agent without the channel cannot be steered or interrupted,
// whether its run is owned here or elsewhere.
func TestCTL3_NotSupported(t *testing.T) {
	path := filepath.Join(t.TempDir(), "drover.db")
	owner := newFixtureOn(t, openStore(t, path), runs.Config{Owner: "a:1", Poll: 20 * time.Millisecond}, asker(false))
	other := newFixtureOn(t, openStore(t, path), runs.Config{Owner: "b:2", Poll: 20 * time.Millisecond}, asker(false))
	ctx := context.Background()
	id := owner.start(t, runs.StartRequest{Agent: "asker", Prompt: "build", Options: drover.Options{ApprovalTimeout: time.Minute}})
	waitFor(t, "the run running", func() bool {
		r, err := other.st.GetRun(ctx, id)
		return err == nil && r.Status == store.StatusRunning
	})
	for name, sup := range map[string]*runs.Supervisor{"owner": owner.sup, "other": other.sup} {
		if err := sup.Steer(ctx, id, "x", "t"); !errors.Is(err, engine.ErrNotSupported) {
			t.Errorf("%s: steer: %v", name, err)
		}
		if err := sup.Interrupt(ctx, id, "t"); !errors.Is(err, engine.ErrNotSupported) {
			t.Errorf("%s: interrupt: %v", name, err)
		}
	}
	if err := owner.sup.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	owner.await(t, id)
}

// Config.DefaultApprovalTimeout reaches the runs of agents that can be
// asked, and only those (an agent that cannot would refuse the option).
func TestCTL1_DefaultApprovalTimeout(t *testing.T) {
	f := newFixture(t, runs.Config{DefaultApprovalTimeout: time.Minute}, asker(true), quick(1))
	ctx := context.Background()
	id := f.start(t, runs.StartRequest{Agent: "asker", Prompt: "build"})
	var p []drover.PermissionRequestPayload
	waitFor(t, "the request", func() bool {
		p, _ = f.sup.Pending(ctx, id)
		return len(p) == 1
	})
	if left := time.Until(time.UnixMilli(p[0].Deadline)); left < 50*time.Second || left > time.Minute {
		t.Fatalf("deadline in %s, want about a minute", left)
	}
	if err := f.sup.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	plain := &agenttest.Agent{Name: "plain", Fn: quick(1).Fn, Caps: &drover.Capabilities{Tiers: drover.Tiers()}}
	g := newFixture(t, runs.Config{DefaultApprovalTimeout: time.Minute}, plain)
	if r := g.await(t, g.start(t, runs.StartRequest{Agent: "plain", Prompt: "x"}))[0]; r.Status != store.StatusCompleted {
		t.Fatalf("a run of an agent that cannot be asked: %+v", r)
	}
	f.await(t, id)
}
