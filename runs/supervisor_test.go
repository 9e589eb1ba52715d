package runs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/proc"
	"github.com/drover-run/drover/internal/testkit/agenttest"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/sqlite"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func text(s string) drover.Event {
	return drover.Event{Type: drover.TypeText, Payload: drover.TextPayload{Content: s}}
}

func done(token string) drover.Event {
	return drover.Event{Type: drover.TypeDone, Payload: drover.DonePayload{Status: drover.StatusSuccess, ResumeToken: token,
		Usage: drover.Usage{InputTokens: 3, OutputTokens: 2}}}
}

// quick emits n texts and done.
func quick(n int) *agenttest.Agent {
	return &agenttest.Agent{Name: "quick", Fn: func(_ context.Context, req drover.Request, y func(drover.Event, error) bool) {
		for i := range n {
			if !y(text(fmt.Sprintf("%s #%d", req.Prompt, i)), nil) {
				return
			}
		}
		y(done("tok-"+req.Prompt), nil)
	}}
}

// hang emits one text and waits for cancellation.
func hang() *agenttest.Agent {
	return &agenttest.Agent{Name: "hang", Fn: func(ctx context.Context, _ drover.Request, y func(drover.Event, error) bool) {
		if y(text("working"), nil) {
			<-ctx.Done()
		}
	}}
}

type fixture struct {
	st  store.Store
	sup *runs.Supervisor
	eng *engine.Engine
}

func newFixture(t *testing.T, cfg runs.Config, agents ...*agenttest.Agent) *fixture {
	t.Helper()
	st := openStore(t, filepath.Join(t.TempDir(), "drover.db"))
	return newFixtureOn(t, st, cfg, agents...)
}

func newFixtureOn(t *testing.T, st store.Store, cfg runs.Config, agents ...*agenttest.Agent) *fixture {
	t.Helper()
	reg := drover.NewRegistry()
	for _, a := range agents {
		if err := reg.Register(a); err != nil {
			t.Fatal(err)
		}
	}
	eng := engine.New(reg)
	sup, err := runs.New(context.Background(), eng, st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sup.Close() })
	return &fixture{st: st, sup: sup, eng: eng}
}

func (f *fixture) start(t *testing.T, req runs.StartRequest) string {
	t.Helper()
	started, err := f.sup.Start(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	id := started.RunID
	return id
}

func (f *fixture) await(t *testing.T, ids ...string) []*store.Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs, err := f.sup.Await(ctx, ids...)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func eventsOf(t *testing.T, st store.Store, id string) []drover.Event {
	t.Helper()
	evs, err := st.Events(context.Background(), id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]drover.Event, len(evs))
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("run %s: event %d has seq %d", id, i, e.Seq)
		}
		if err := json.Unmarshal(e.JSON, &out[i]); err != nil {
			t.Fatal(err)
		}
		if out[i].RunID != id || out[i].Seq != e.Seq {
			t.Fatalf("stored event lacks runId/seq: %s", e.JSON)
		}
	}
	return out
}

func TestRUN1_StartAtOnceAndStatusMoves(t *testing.T) {
	release := make(chan struct{})
	gated := &agenttest.Agent{Name: "gated", Fn: func(ctx context.Context, req drover.Request, y func(drover.Event, error) bool) {
		req.ProcessStarted(4242, 4242)
		if !y(text("started"), nil) {
			return
		}
		select {
		case <-release:
			y(done("tok"), nil)
		case <-ctx.Done():
		}
	}}
	f := newFixture(t, runs.Config{}, gated)
	id := f.start(t, runs.StartRequest{Agent: "gated", Prompt: "p"})
	r, err := f.st.GetRun(context.Background(), id)
	if err != nil || (r.Status != store.StatusPending && r.Status != store.StatusRunning) {
		t.Fatalf("right after Start: %+v %v", r, err)
	}
	for r.Status != store.StatusRunning {
		time.Sleep(5 * time.Millisecond)
		r, _ = f.st.GetRun(context.Background(), id)
	}
	if r.Pid != 4242 || r.Pgid != 4242 || r.StartedAt.IsZero() {
		t.Fatalf("running run lacks its process: %+v", r)
	}
	close(release)
	got := f.await(t, id)[0]
	if got.Status != store.StatusCompleted || got.Error != "" || got.DoneStatus != drover.StatusSuccess || got.EndedAt.IsZero() {
		t.Fatalf("ended run %+v", got)
	}
}

func TestRUN2_AwaitManyWaitersAndOldRuns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "drover.db")
	st := openStore(t, path)
	f := newFixtureOn(t, st, runs.Config{}, quick(3))
	id := f.start(t, runs.StartRequest{Agent: "quick", Prompt: "p"})
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			if r := f.await(t, id)[0]; r.Status != store.StatusCompleted {
				t.Errorf("waiter saw %s", r.Status)
			}
		})
	}
	wg.Wait()
	// A new supervisor (a later drover) answers for the run that ended long ago.
	other := newFixtureOn(t, st, runs.Config{Owner: "other:1"}, quick(1))
	if r := other.await(t, id)[0]; r.Status != store.StatusCompleted {
		t.Fatalf("old run: %s", r.Status)
	}
	if _, err := other.sup.Await(context.Background(), "run_nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
}

func TestRUN3_CancelIdempotent(t *testing.T) {
	f := newFixture(t, runs.Config{}, hang())
	ctx := context.Background()
	if err := f.sup.Cancel(ctx, "run_unknown"); err != nil {
		t.Fatalf("cancel unknown: %v", err)
	}
	id := f.start(t, runs.StartRequest{Agent: "hang", Prompt: "p"})
	for range 3 {
		if err := f.sup.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	r := f.await(t, id)[0]
	if r.Status != store.StatusFailed || r.Error != store.ReasonCancelled || r.DoneStatus != drover.StatusInterrupted {
		t.Fatalf("cancelled run %+v", r)
	}
	if err := f.sup.Cancel(ctx, id); err != nil {
		t.Fatalf("cancel finished: %v", err)
	}
}

func TestRUN4_Timeouts(t *testing.T) {
	f := newFixture(t, runs.Config{DefaultTimeout: 150 * time.Millisecond}, hang())
	byDefault := f.start(t, runs.StartRequest{Agent: "hang", Prompt: "p"})
	explicit := f.start(t, runs.StartRequest{Agent: "hang", Prompt: "p", Options: drover.Options{Timeout: 50 * time.Millisecond}})
	for _, r := range f.await(t, byDefault, explicit) {
		if r.Status != store.StatusFailed || r.Error != store.ReasonTimeout {
			t.Fatalf("run %s: %s %q", r.ID, r.Status, r.Error)
		}
	}
	last := eventsOf(t, f.st, explicit)
	if p, ok := last[len(last)-2].Payload.(drover.ErrorPayload); !ok || p.Code != drover.CodeTimeout {
		t.Fatalf("no TIMEOUT error event: %+v", last)
	}
}

func TestRUN5_ParentCascade(t *testing.T) {
	f := newFixture(t, runs.Config{}, hang())
	parent := f.start(t, runs.StartRequest{Agent: "hang", Prompt: "parent"})
	c1 := f.start(t, runs.StartRequest{Agent: "hang", Prompt: "c1", ParentID: parent})
	c2 := f.start(t, runs.StartRequest{Agent: "hang", Prompt: "c2", ParentID: parent})
	grandchild := f.start(t, runs.StartRequest{Agent: "hang", Prompt: "g", ParentID: c1})
	if err := f.sup.Cancel(context.Background(), parent); err != nil {
		t.Fatal(err)
	}
	rs := f.await(t, parent, c1, c2, grandchild)
	if rs[0].Status != store.StatusFailed || rs[0].Error != store.ReasonCancelled {
		t.Fatalf("parent %+v", rs[0])
	}
	for _, r := range rs[1:] {
		if r.Status != store.StatusFailed || r.Error != store.ReasonParentEnded {
			t.Fatalf("child %s: %s %q", r.ID, r.Status, r.Error)
		}
		if !r.EndedAt.After(time.Time{}) || r.EndedAt.After(rs[0].EndedAt) {
			t.Fatalf("child %s ended after its parent", r.ID)
		}
	}
	kids, err := f.st.Children(context.Background(), parent)
	if err != nil || len(kids) != 2 {
		t.Fatalf("children %v %v", kids, err)
	}
	// A parent that ends on its own ends its children too.
	q := newFixture(t, runs.Config{}, quick(1), hang())
	gate := q.start(t, runs.StartRequest{Agent: "hang", Prompt: "gate"})
	child := q.start(t, runs.StartRequest{Agent: "hang", Prompt: "c", ParentID: gate})
	q.sup.Cancel(context.Background(), gate)
	if r := q.await(t, child)[0]; r.Error != store.ReasonParentEnded {
		t.Fatalf("child %+v", r)
	}
	if _, err := q.sup.Start(context.Background(), runs.StartRequest{Agent: "quick", Prompt: "x", ParentID: gate}); !errors.Is(err, runs.ErrParentEnded) {
		t.Fatalf("child of an ended parent: %v", err)
	}
}

// TestRUN6_Reconcile: runs left running by a dead drover are failed "engine
// restart" and their process groups killed.
func TestRUN6_Reconcile(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "drover.db"))
	sleeper := exec.Command("sleep", "300")
	sleeper.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	reaped := make(chan struct{})
	go func() { sleeper.Wait(); close(reaped) }()
	defer func() { proc.KillGroup(sleeper.Process.Pid); <-reaped }()

	host, _ := os.Hostname()
	ctx := context.Background()
	dead := &store.Run{ID: "run_dead", Agent: "quick", Status: store.StatusPending, Owner: host + ":999999999", CreatedAt: time.Now(), SessionID: "s"}
	if err := st.CreateRun(ctx, dead); err != nil {
		t.Fatal(err)
	}
	if err := st.StartRun(ctx, dead.ID, sleeper.Process.Pid, sleeper.Process.Pid, time.Now()); err != nil {
		t.Fatal(err)
	}
	alive := &store.Run{ID: "run_alive", Agent: "quick", Status: store.StatusPending, Owner: host + ":" + fmt.Sprint(os.Getppid()), CreatedAt: time.Now(), SessionID: "s"}
	if err := st.CreateRun(ctx, alive); err != nil {
		t.Fatal(err)
	}
	newFixtureOn(t, st, runs.Config{}, quick(1))
	r, _ := st.GetRun(ctx, "run_dead")
	if r.Status != store.StatusFailed || r.Error != store.ReasonEngineRestart {
		t.Fatalf("dead run %+v", r)
	}
	select {
	case <-reaped:
	case <-time.After(10 * time.Second):
		t.Fatal("the dead run's process group was not killed")
	}
	if r, _ := st.GetRun(ctx, "run_alive"); r.Status != store.StatusPending {
		t.Fatalf("a live owner's run was touched: %+v", r)
	}
}

// TestRUN7_QueueOrder: with a limit, runs past it wait as pending and start
// in the order they were started.
func TestRUN7_QueueOrder(t *testing.T) {
	const n, limit = 8, 2
	var mu sync.Mutex
	var order []string
	started := make(chan string, n)
	release := map[string]chan struct{}{}
	for i := range n {
		release[fmt.Sprint(i)] = make(chan struct{})
	}
	gated := &agenttest.Agent{Name: "gated", Fn: func(ctx context.Context, req drover.Request, y func(drover.Event, error) bool) {
		mu.Lock()
		order = append(order, req.Prompt)
		mu.Unlock()
		started <- req.Prompt
		select {
		case <-release[req.Prompt]:
			y(done("t"), nil)
		case <-ctx.Done():
		}
	}}
	f := newFixture(t, runs.Config{Limit: limit}, gated)
	var ids []string
	for i := range n {
		ids = append(ids, f.start(t, runs.StartRequest{Agent: "gated", Prompt: fmt.Sprint(i)}))
	}
	running := []string{<-started, <-started}
	slices.Sort(running)
	if !slices.Equal(running, []string{"0", "1"}) {
		t.Fatalf("first runs %v", running)
	}
	for i := range n - limit {
		if r, _ := f.st.GetRun(context.Background(), ids[i+limit]); r.Status != store.StatusPending {
			t.Fatalf("run %d should wait as pending: %s", i+limit, r.Status)
		}
		close(release[fmt.Sprint(i)]) // free one slot; the oldest pending takes it
		if got := <-started; got != fmt.Sprint(i+limit) {
			t.Fatalf("slot went to run %s, want %d", got, i+limit)
		}
	}
	for i := n - limit; i < n; i++ {
		close(release[fmt.Sprint(i)])
	}
	f.await(t, ids...)
}

// TestRUN7_FiftyRunsLimitEight: 50 concurrent runs of a fast agent through
// one supervisor with a limit of 8 all complete, none lost, events
// complete and in order, never more than 8 at once.
func TestRUN7_FiftyRunsLimitEight(t *testing.T) {
	var cur, peak atomic.Int32
	fast := &agenttest.Agent{Name: "fast", Fn: func(_ context.Context, req drover.Request, y func(drover.Event, error) bool) {
		if c := cur.Add(1); c > peak.Load() {
			peak.Store(c)
		}
		defer cur.Add(-1)
		for i := range 20 {
			if !y(text(fmt.Sprint(i)), nil) {
				return
			}
			time.Sleep(time.Millisecond)
		}
		y(done("t"), nil)
	}}
	f := newFixture(t, runs.Config{Limit: 8}, fast)
	var ids []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			id := f.start(t, runs.StartRequest{Agent: "fast", Prompt: fmt.Sprint(i)})
			mu.Lock()
			ids = append(ids, id)
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, r := range f.await(t, ids...) {
		if r.Status != store.StatusCompleted {
			t.Fatalf("run %s: %s %s", r.ID, r.Status, r.Error)
		}
		evs := eventsOf(t, f.st, r.ID)
		if len(evs) != 21 || evs[20].Type != drover.TypeDone {
			t.Fatalf("run %s: %d events", r.ID, len(evs))
		}
		for i, ev := range evs[:20] {
			if ev.Payload.(drover.TextPayload).Content != fmt.Sprint(i) {
				t.Fatalf("run %s: events out of order", r.ID)
			}
		}
	}
	if p := peak.Load(); p > 8 {
		t.Fatalf("%d runs at once, limit 8", p)
	}
}

// TestLED4_Sessions: a run continues a drover session; drover passes the
// vendor's resume token underneath and moves the session head.
func TestLED4_Sessions(t *testing.T) {
	var tokens []string
	var mu sync.Mutex
	echo := &agenttest.Agent{Name: "echo", Fn: func(_ context.Context, req drover.Request, y func(drover.Event, error) bool) {
		mu.Lock()
		tokens = append(tokens, req.Options.Resume)
		mu.Unlock()
		y(done("vendor-"+req.Prompt), nil)
	}}
	f := newFixture(t, runs.Config{}, echo)
	first := f.start(t, runs.StartRequest{Agent: "echo", Prompt: "one"})
	r1 := f.await(t, first)[0]
	second := f.start(t, runs.StartRequest{Agent: "echo", Prompt: "two", Options: drover.Options{SessionID: r1.SessionID}})
	r2 := f.await(t, second)[0]
	if r2.SessionID != r1.SessionID || !slices.Equal(tokens, []string{"", "vendor-one"}) {
		t.Fatalf("session %s/%s, resume tokens passed %q", r1.SessionID, r2.SessionID, tokens)
	}
	s, err := f.st.GetSession(context.Background(), r1.SessionID)
	if err != nil || s.HeadRunID != second || s.ResumeToken != "vendor-two" || !slices.Contains(s.Heads, first) {
		t.Fatalf("session %+v %v", s, err)
	}
	// Every event carries its run's session: the one the run continues,
	// and the one a new conversation's run recorded.
	for _, id := range []string{first, second} {
		for _, ev := range eventsOf(t, f.st, id) {
			if ev.SessionID != r1.SessionID {
				t.Fatalf("an event of run %s carries session %q, not %q", id, ev.SessionID, r1.SessionID)
			}
		}
	}
	if _, err := f.sup.Start(context.Background(), runs.StartRequest{Agent: "echo", Prompt: "x", Options: drover.Options{SessionID: "nope"}}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown session: %v", err)
	}
}

// TestLED4_Fork: a fork starts a new session from an earlier run's end,
// passing its resume token with Fork set; the original session is untouched.
func TestLED4_Fork(t *testing.T) {
	var seen []drover.Options
	var mu sync.Mutex
	forker := &agenttest.Agent{Name: "forker", Fn: func(_ context.Context, req drover.Request, y func(drover.Event, error) bool) {
		mu.Lock()
		seen = append(seen, req.Options)
		mu.Unlock()
		y(done("vendor-"+req.Prompt), nil)
	}}
	f := newFixture(t, runs.Config{}, forker)
	first := f.await(t, f.start(t, runs.StartRequest{Agent: "forker", Prompt: "one"}))[0]
	fork := f.await(t, f.start(t, runs.StartRequest{Agent: "forker", Prompt: "two", ForkFrom: first.ID}))[0]
	if fork.SessionID == first.SessionID || !seen[1].Fork || seen[1].Resume != "vendor-one" {
		t.Fatalf("fork %+v, options %+v", fork, seen[1])
	}
	for _, ev := range eventsOf(t, f.st, fork.ID) {
		if ev.SessionID != fork.SessionID {
			t.Fatalf("an event of the fork carries session %q, not its own %q", ev.SessionID, fork.SessionID)
		}
	}
	orig, _ := f.st.GetSession(context.Background(), first.SessionID)
	if orig.HeadRunID != first.ID {
		t.Fatalf("the original session moved: %+v", orig)
	}
	if _, err := f.sup.Start(context.Background(), runs.StartRequest{Agent: "forker", Prompt: "x", ForkFrom: "run_nope"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("fork of unknown run: %v", err)
	}
}

// TestLED4_CheckRefusesMixedContinuations: what a run continues is named
// once (a session, a fork or a resume token), a session continues only
// its own agent's conversation, and an agent that cannot resume is refused
// once a session's token would be passed to it. Nothing is recorded.
func TestLED4_CheckRefusesMixedContinuations(t *testing.T) {
	echo := &agenttest.Agent{Name: "echo", Fn: func(_ context.Context, req drover.Request, y func(drover.Event, error) bool) {
		y(done("vendor-"+req.Prompt), nil)
	}}
	oneShot := &agenttest.Agent{Name: "oneshot", Fn: echo.Fn, Caps: &drover.Capabilities{Tiers: drover.Tiers()}} // cannot resume
	reg := drover.NewRegistry()
	for _, a := range []drover.Adapter{echo, oneShot} {
		if err := reg.Register(a); err != nil {
			t.Fatal(err)
		}
	}
	f := newFixtureOn(t, openStore(t, filepath.Join(t.TempDir(), "drover.db")), runs.Config{}, echo)
	first := f.await(t, f.start(t, runs.StartRequest{Agent: "echo", Prompt: "one"}))[0]
	sess, err := f.st.GetSession(context.Background(), first.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		req  runs.StartRequest
		want error
	}{
		"fork and session":  {runs.StartRequest{Agent: "echo", ForkFrom: first.ID, Options: drover.Options{SessionID: sess.ID}}, drover.ErrValidation},
		"fork and resume":   {runs.StartRequest{Agent: "echo", ForkFrom: first.ID, Options: drover.Options{Resume: "tok"}}, drover.ErrValidation},
		"session and token": {runs.StartRequest{Agent: "echo", Options: drover.Options{SessionID: sess.ID, Resume: "tok"}}, drover.ErrValidation},
		"another's session": {runs.StartRequest{Agent: "oneshot", Options: drover.Options{SessionID: sess.ID}}, drover.ErrValidation},
		"unknown agent":     {runs.StartRequest{Agent: "nosuch"}, drover.ErrUnknownAgent},
	} {
		var fork *store.Run
		if c.req.ForkFrom != "" {
			fork = first
		}
		var s *store.Session
		if c.req.Options.SessionID != "" {
			s = sess
		}
		if _, err := runs.Check(engine.New(reg), c.req, fork, s, engine.Defaults{}); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
	// The session's token is passed on, and checked against what the agent
	// can do: oneshot cannot resume.
	got, err := runs.Check(engine.New(reg), runs.StartRequest{Agent: "echo", Options: drover.Options{SessionID: sess.ID}}, nil, sess, engine.Defaults{})
	if err != nil || got.Options().Resume != "vendor-one" {
		t.Fatalf("continuing: %+v %v", got, err)
	}
	sess.Agent = "oneshot"
	if _, err := runs.Check(engine.New(reg), runs.StartRequest{Agent: "oneshot", Options: drover.Options{SessionID: sess.ID}}, nil, sess, engine.Defaults{}); !errors.Is(err, drover.ErrUnsupportedOption) {
		t.Fatalf("resume through a session on an agent that cannot resume: %v", err)
	}
	if rs, _ := f.st.ListRuns(context.Background(), store.RunFilter{}); len(rs) != 1 {
		t.Fatalf("%d runs recorded, want only the first", len(rs))
	}
}

// TestLED3_TurnRecord: the run's messages and tool calls are recorded when
// it ends.
func TestLED3_TurnRecord(t *testing.T) {
	tool := &agenttest.Agent{Name: "tool", Fn: func(_ context.Context, _ drover.Request, y func(drover.Event, error) bool) {
		y(drover.Event{Type: drover.TypeToolUse, Payload: drover.ToolUsePayload{ToolName: "Bash", ToolUseID: "t1", Input: map[string]any{"command": "ls"}}}, nil)
		y(drover.Event{Type: drover.TypeToolResult, Payload: drover.ToolResultPayload{ToolUseID: "t1", ToolName: "Bash", Status: drover.ToolSuccess, Output: "a.go"}}, nil)
		y(text("listed"), nil)
		y(done("t"), nil)
	}}
	f := newFixture(t, runs.Config{}, tool)
	id := f.start(t, runs.StartRequest{Agent: "tool", Prompt: "list files"})
	r := f.await(t, id)[0]
	if r.Usage.InputTokens != 3 || r.ResumeToken != "t" {
		t.Fatalf("run %+v", r)
	}
	msgs, _ := f.st.Messages(context.Background(), id)
	calls, _ := f.st.ToolCalls(context.Background(), id)
	if len(msgs) != 3 || msgs[0].Role != "user" || msgs[0].Content != "list files" || msgs[2].Content != "listed" {
		t.Fatalf("messages %+v", msgs)
	}
	if len(calls) != 1 || calls[0].Name != "Bash" || calls[0].Status != drover.ToolSuccess || calls[0].Output != "a.go" {
		t.Fatalf("tool calls %+v", calls)
	}
}

// TestFollowAcrossSupervisors: a second supervisor on the same ledger (as
// another drover process would) follows a live run to its end and cancels it.
func TestFollowAndCancelAcrossSupervisors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "drover.db")
	a := newFixtureOn(t, openStore(t, path), runs.Config{Owner: "a:1", Poll: 50 * time.Millisecond}, hang())
	b := newFixtureOn(t, openStore(t, path), runs.Config{Owner: "b:2", Poll: 50 * time.Millisecond}, hang())
	id := a.start(t, runs.StartRequest{Agent: "hang", Prompt: "p"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var seen []drover.EventType
	for ev, err := range b.sup.Follow(ctx, id, 0) {
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, ev.Type)
		if len(seen) == 1 {
			if err := b.sup.Cancel(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !slices.Equal(seen, []drover.EventType{drover.TypeText, drover.TypeDone}) {
		t.Fatalf("followed %v", seen)
	}
	if r := a.await(t, id)[0]; r.Error != store.ReasonCancelled {
		t.Fatalf("run %+v", r)
	}
}

// mixed emits every kind of event the turn record takes: texts, tool calls
// with and without results, a result without its call, and noise.
func mixed() *agenttest.Agent {
	return &agenttest.Agent{Name: "mixed", Fn: func(_ context.Context, _ drover.Request, y func(drover.Event, error) bool) {
		for _, ev := range []drover.Event{
			{Type: drover.TypeInit, Payload: drover.InitPayload{Model: "m"}},
			text("looking"),
			{Type: drover.TypeToolUse, Payload: drover.ToolUsePayload{ToolName: "Bash", ToolUseID: "t1", Input: map[string]any{"command": "ls", "n": 2.5}}},
			{Type: drover.TypeThinking, Payload: drover.ThinkingPayload{Summary: "hm"}},
			{Type: drover.TypeToolUse, Payload: drover.ToolUsePayload{ToolName: "Read", ToolUseID: "t2"}},
			{Type: drover.TypeToolResult, Payload: drover.ToolResultPayload{ToolUseID: "t2", ToolName: "Read", Status: drover.ToolSuccess, Output: "<file>"}},
			{Type: drover.TypeToolResult, Payload: drover.ToolResultPayload{ToolUseID: "t9", ToolName: "Grep", Status: drover.ToolError, Output: "orphan"}},
			{Type: drover.TypeToolResult, Payload: drover.ToolResultPayload{ToolUseID: "t1", ToolName: "Bash", Status: drover.ToolSuccess, Output: "a.go\nb.go\n"}},
			{Type: drover.TypeError, Payload: drover.ErrorPayload{Code: drover.CodeRateLimited, Message: "slow down", Recoverable: true}},
			{Type: drover.TypeToolUse, Payload: drover.ToolUsePayload{ToolName: "Bash", ToolUseID: "t3", Input: map[string]any{}}},
			text("two files, \"quoted\" <b>"),
			done("tok"),
		} {
			if !y(ev, nil) {
				return
			}
		}
	}}
}

// TestLED3_TurnRecordMatchesCollect: the turn record the supervisor keeps
// by reference to the run's events reads back as engine.Collect folds
// those events (with the prompt first).
func TestLED3_TurnRecordMatchesCollect(t *testing.T) {
	f := newFixture(t, runs.Config{}, mixed())
	id := f.start(t, runs.StartRequest{Agent: "mixed", Prompt: "list files"})
	if r := f.await(t, id)[0]; r.Status != store.StatusCompleted {
		t.Fatalf("run %+v", r)
	}
	ctx := context.Background()
	recorded, err := f.st.Events(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	evs := make([]drover.Event, len(recorded))
	for i, e := range recorded {
		if err := json.Unmarshal(e.JSON, &evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	res := engine.Collect(slices.Values(evs))
	var wantMsgs []store.Message
	wantMsgs = append(wantMsgs, store.Message{Role: "user", Content: "list files"})
	for _, m := range res.Messages {
		wantMsgs = append(wantMsgs, store.Message{Role: m.Role, Content: m.Content, ToolUseID: m.ToolUseID})
	}
	var wantCalls []store.ToolCall
	for _, c := range res.ToolCalls {
		input, _ := json.Marshal(c.Input)
		wantCalls = append(wantCalls, store.ToolCall{ID: c.ID, Name: c.Name, Input: input, Status: c.Status,
			Output: c.Output, StartedAt: c.StartedAt, EndedAt: c.EndedAt})
	}
	msgs, err := f.st.Messages(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	calls, err := f.st.ToolCalls(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for i := range msgs {
		if msgs[i].Index != i || msgs[i].RunID != id {
			t.Errorf("message %d: index %d run %s", i, msgs[i].Index, msgs[i].RunID)
		}
		msgs[i].Index, msgs[i].RunID, msgs[i].Seq = 0, "", 0
	}
	for i := range calls {
		calls[i].RunID, calls[i].Seq, calls[i].ResultSeq = "", 0, 0
	}
	if diff := cmp.Diff(wantMsgs, msgs); diff != "" {
		t.Errorf("messages (-collect +recorded):\n%s", diff)
	}
	if diff := cmp.Diff(wantCalls, calls); diff != "" {
		t.Errorf("tool calls (-collect +recorded):\n%s", diff)
	}
}

// TestLED3_TurnRecordAfterLedgerFailure: a run whose events the ledger
// stops taking is stopped and failed, and its turn record refers only to
// the events the ledger has.
func TestLED3_TurnRecordAfterLedgerFailure(t *testing.T) {
	const failAt = 6
	st := openStore(t, filepath.Join(t.TempDir(), "drover.db"))
	st = failingAppender{Store: st.(*sqlite.Store), failAt: failAt}
	loop := &agenttest.Agent{Name: "loop", Fn: func(ctx context.Context, req drover.Request, y func(drover.Event, error) bool) {
		for i := 0; ctx.Err() == nil; i++ {
			id := fmt.Sprint("t", i)
			if !y(drover.Event{Type: drover.TypeToolUse, Payload: drover.ToolUsePayload{ToolName: "Bash", ToolUseID: id}}, nil) ||
				!y(drover.Event{Type: drover.TypeToolResult, Payload: drover.ToolResultPayload{ToolUseID: id, ToolName: "Bash", Output: "x"}}, nil) ||
				!y(text("again"), nil) {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}}
	f := newFixtureOn(t, st, runs.Config{}, loop)
	id := f.start(t, runs.StartRequest{Agent: "loop", Prompt: "p"})
	r := f.await(t, id)[0]
	if r.Status != store.StatusFailed || !strings.HasPrefix(r.Error, "ledger: ") || r.LastSeq != failAt-1 {
		t.Fatalf("run %+v", r)
	}
	msgs, err := f.st.Messages(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	calls, err := f.st.ToolCalls(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	// Seqs 1-5: t0 use, t0 result, text, t1 use, t1 result (6, the text, failed).
	if len(msgs) != 4 || msgs[3].Seq != 5 || len(calls) != 2 || calls[1].Seq != 4 || calls[1].ResultSeq != 5 {
		t.Fatalf("turn record: %+v\n%+v", msgs, calls)
	}
}

// RUN-6: a run that starts a second process (the resume fallback does)
// has the live process's ids in the ledger, so reconciliation stops the
// right group; a run with no process is running from its first event.
func TestRUN6_SecondProcessRecorded(t *testing.T) {
	release := make(chan struct{})
	second := make(chan struct{})
	twice := &agenttest.Agent{Name: "twice", Fn: func(ctx context.Context, req drover.Request, y func(drover.Event, error) bool) {
		req.ProcessStarted(4242, 4242)
		if !y(text("first process"), nil) {
			return
		}
		req.ProcessStarted(4343, 4344)
		close(second)
		if !y(text("second process"), nil) {
			return
		}
		select {
		case <-release:
			y(done("tok"), nil)
		case <-ctx.Done():
		}
	}}
	noProc := &agenttest.Agent{Name: "noproc", Fn: func(ctx context.Context, _ drover.Request, y func(drover.Event, error) bool) {
		if y(text("in-process"), nil) {
			<-release
			y(done("tok"), nil)
		}
	}}
	f := newFixture(t, runs.Config{}, twice, noProc)
	id := f.start(t, runs.StartRequest{Agent: "twice", Prompt: "p"})
	np := f.start(t, runs.StartRequest{Agent: "noproc", Prompt: "p"})
	<-second
	waitFor := func(id string, ok func(*store.Run) bool) *store.Run {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			r, err := f.st.GetRun(context.Background(), id)
			if err == nil && ok(r) {
				return r
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %+v %v", id, r, err)
			}
		}
	}
	r := waitFor(id, func(r *store.Run) bool { return r.LastSeq >= 2 })
	if r.Status != store.StatusRunning || r.Pid != 4343 || r.Pgid != 4344 {
		t.Fatalf("after the second process: %s pid %d pgid %d, want running 4343/4344", r.Status, r.Pid, r.Pgid)
	}
	r = waitFor(np, func(r *store.Run) bool { return r.LastSeq >= 1 })
	if r.Status != store.StatusRunning || r.StartedAt.IsZero() || r.Pid != 0 {
		t.Fatalf("a run without a process after its first event: %+v", r)
	}
	close(release)
	for _, got := range f.await(t, id, np) {
		if got.Status != store.StatusCompleted {
			t.Fatalf("ended run %+v", got)
		}
	}
}

// failingAppender is a ledger whose batched writer fails the event of one
// seq, as a full disk would.
type failingAppender struct {
	*sqlite.Store
	failAt int64
}

func (f failingAppender) AppendAsync(ev store.Event) <-chan error {
	if ev.Seq == f.failAt {
		res := make(chan error, 1)
		res <- errors.New("disk full")
		return res
	}
	return f.Store.AppendAsync(ev)
}

// TestLIM_StartRefusesUnpricedBudget: a budget drover must count on a
// model it has no price for is refused by Start before anything is
// recorded (every client: protocol, HTTP, drover mcp), and a priced one
// is accepted.
func TestLIM_StartRefusesUnpricedBudget(t *testing.T) {
	echo := &agenttest.Agent{Name: "echo", Fn: func(_ context.Context, req drover.Request, y func(drover.Event, error) bool) {
		y(done("ok"), nil)
	}}
	f := newFixture(t, runs.Config{}, echo)
	ctx := context.Background()
	_, err := f.sup.Start(ctx, runs.StartRequest{Agent: "echo", Prompt: "x",
		Options: drover.Options{Model: "no-such-model-9", MaxBudgetUSD: 1}})
	if !errors.Is(err, drover.ErrUnsupportedOption) || !strings.Contains(err.Error(), "no-such-model-9") {
		t.Fatalf("unpriced budget: %v", err)
	}
	if rs, _ := f.st.ListRuns(ctx, store.RunFilter{}); len(rs) != 0 {
		t.Fatalf("%d runs recorded for a refused start", len(rs))
	}
	priced := drover.Options{Model: "no-such-model-9", MaxBudgetUSD: 1,
		Prices: map[string]drover.Price{"no-such-model-9": {Input: 1, Output: 2}}}
	if _, err := f.sup.Start(ctx, runs.StartRequest{Agent: "echo", Prompt: "x", Options: priced}); err != nil {
		t.Fatalf("priced budget: %v", err)
	}
}
