package runs_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/testkit/agenttest"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
)

// TestMCP1_ParentOwnedElsewhere: a run started in one drover process (a
// nested `drover mcp`) may name as its parent a run another process owns
// on the same ledger. It is recorded as that run's child; when the parent
// ends, its owner's poll ends it "parent ended", with its own local child;
// and a parent that has ended, is being cancelled, or is unknown is
// refused with nothing recorded.
func TestMCP1_ParentOwnedElsewhere(t *testing.T) {
	path := filepath.Join(t.TempDir(), "drover.db")
	a := newFixtureOn(t, openStore(t, path), runs.Config{Owner: "a:1", Poll: 20 * time.Millisecond}, hang())
	b := newFixtureOn(t, openStore(t, path), runs.Config{Owner: "b:2", Poll: 20 * time.Millisecond}, hang(), quick(1))
	ctx := context.Background()

	parent := a.start(t, runs.StartRequest{Agent: "hang", Prompt: "parent"})
	child := b.start(t, runs.StartRequest{Agent: "hang", Prompt: "child", ParentID: parent})
	grandchild := b.start(t, runs.StartRequest{Agent: "hang", Prompt: "grandchild", ParentID: child})
	kids, err := a.st.Children(ctx, parent)
	if err != nil || len(kids) != 1 || kids[0].ID != child || kids[0].Owner != "b:2" {
		t.Fatalf("the parent's children in the ledger: %+v %v", kids, err)
	}
	// Nothing but its parent's end stops a hang.
	if r, _ := b.st.GetRun(ctx, child); r.Status.Terminal() {
		t.Fatalf("child ended before its parent: %+v", r)
	}
	if err := a.sup.Cancel(ctx, parent); err != nil {
		t.Fatal(err)
	}
	p := a.await(t, parent)[0]
	if p.Error != store.ReasonCancelled {
		t.Fatalf("parent %+v", p)
	}
	for _, r := range b.await(t, child, grandchild) {
		if r.Status != store.StatusFailed || r.Error != store.ReasonParentEnded || r.DoneStatus != drover.StatusInterrupted {
			t.Fatalf("run %s: %s %q %s", r.ID, r.Status, r.Error, r.DoneStatus)
		}
	}

	before, err := b.st.ListRuns(ctx, store.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for name, id := range map[string]string{"ended": parent, "unknown": "run_nope"} {
		if _, err := b.sup.Start(ctx, runs.StartRequest{Agent: "quick", Prompt: "x", ParentID: id}); !errors.Is(err, runs.ErrParentEnded) {
			t.Errorf("child of an %s parent: %v", name, err)
		}
	}
	// A parent whose cancel was asked for is ending: refused as well.
	ending := a.start(t, runs.StartRequest{Agent: "hang", Prompt: "ending"})
	if err := b.st.RequestCancel(ctx, ending); err != nil {
		t.Fatal(err)
	}
	if _, err := b.sup.Start(ctx, runs.StartRequest{Agent: "quick", Prompt: "x", ParentID: ending}); !errors.Is(err, runs.ErrParentEnded) {
		t.Errorf("child of a parent being cancelled: %v", err)
	}
	a.await(t, ending)
	after, err := b.st.ListRuns(ctx, store.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before)+1 { // ending itself
		t.Fatalf("refused children were recorded: %d runs, then %d", len(before), len(after))
	}
}

// TestMCP1_ChildOfRemoteParentEndsOnItsOwn: a child of a parent owned
// elsewhere that ends first is an ordinary completed run, and its parent
// goes on.
func TestMCP1_ChildOfRemoteParentEndsOnItsOwn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "drover.db")
	a := newFixtureOn(t, openStore(t, path), runs.Config{Owner: "a:1", Poll: 20 * time.Millisecond}, hang())
	b := newFixtureOn(t, openStore(t, path), runs.Config{Owner: "b:2", Poll: 20 * time.Millisecond}, quick(2))
	parent := a.start(t, runs.StartRequest{Agent: "hang", Prompt: "parent"})
	child := b.start(t, runs.StartRequest{Agent: "quick", Prompt: "child", ParentID: parent})
	if r := b.await(t, child)[0]; r.Status != store.StatusCompleted || r.ParentID != parent {
		t.Fatalf("child %+v", r)
	}
	if r, _ := a.st.GetRun(context.Background(), parent); r.Status.Terminal() {
		t.Fatalf("the parent ended with its child: %+v", r)
	}
}

// TestMCP1_AgentEnvironment: every agent process learns its run's id, and
// what the supervisor's owner adds (the ledger's path), under the run's
// own variables; none of it is recorded with the run's options.
func TestMCP1_AgentEnvironment(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]map[string]string{}
	envAgent := &agenttest.Agent{Name: "env", Fn: func(_ context.Context, req drover.Request, y func(drover.Event, error) bool) {
		mu.Lock()
		seen[req.Prompt] = req.Options.Env
		mu.Unlock()
		y(done(""), nil)
	}}
	f := newFixture(t, runs.Config{Env: map[string]string{runs.EnvDB: "/ledger.db", "SHARED": "config"}}, envAgent)
	plain := f.start(t, runs.StartRequest{Agent: "env", Prompt: "plain"})
	own := f.start(t, runs.StartRequest{Agent: "env", Prompt: "own",
		Options: drover.Options{Env: map[string]string{"SHARED": "run", runs.EnvRunID: "forged"}}})
	f.await(t, plain, own)
	mu.Lock()
	defer mu.Unlock()
	for prompt, want := range map[string]map[string]string{
		"plain": {runs.EnvRunID: plain, runs.EnvDB: "/ledger.db", "SHARED": "config"},
		"own":   {runs.EnvRunID: own, runs.EnvDB: "/ledger.db", "SHARED": "run"},
	} {
		for k, v := range want {
			if got := seen[prompt][k]; got != v {
				t.Errorf("run %s: %s=%q, want %q", prompt, k, got, v)
			}
		}
	}
	r, err := f.st.GetRun(context.Background(), plain)
	if err != nil {
		t.Fatal(err)
	}
	var opts drover.Options
	if err := json.Unmarshal(r.Options, &opts); err != nil || opts.Env != nil {
		t.Fatalf("recorded options %s: %v", r.Options, err)
	}
}

// TestMCP1_SumTree: a run's usage with its descendants' sums every run of
// the tree, whichever process owns it; the cost sums the runs that report
// one and counts those that do not.
func TestMCP1_SumTree(t *testing.T) {
	cost := func(usd float64) *float64 { return &usd }
	turns := int64(2)
	// costly runs named in gates wait for their gate before they end, so
	// that children can be started under them.
	gates := map[string]chan struct{}{"root": make(chan struct{}), "remote": make(chan struct{})}
	costly := &agenttest.Agent{Name: "costly", Fn: func(ctx context.Context, req drover.Request, y func(drover.Event, error) bool) {
		if gate, ok := gates[req.Prompt]; ok {
			select {
			case <-gate:
			case <-ctx.Done():
				return
			}
		}
		y(drover.Event{Type: drover.TypeDone, Payload: drover.DonePayload{Status: drover.StatusSuccess,
			Usage: drover.Usage{InputTokens: 100, OutputTokens: 10, ToolUses: 1, TotalCostUSD: cost(0.25), Turns: &turns}}}, nil)
	}}
	path := filepath.Join(t.TempDir(), "drover.db")
	a := newFixtureOn(t, openStore(t, path), runs.Config{Owner: "a:1", Poll: 20 * time.Millisecond}, costly, quick(1))
	b := newFixtureOn(t, openStore(t, path), runs.Config{Owner: "b:2", Poll: 20 * time.Millisecond}, costly, quick(1))
	root := a.start(t, runs.StartRequest{Agent: "costly", Prompt: "root"})
	local := a.start(t, runs.StartRequest{Agent: "quick", Prompt: "local", ParentID: root})
	remote := b.start(t, runs.StartRequest{Agent: "costly", Prompt: "remote", ParentID: root})
	deep := b.start(t, runs.StartRequest{Agent: "quick", Prompt: "deep", ParentID: remote})
	a.await(t, local)
	b.await(t, deep)
	close(gates["remote"])
	b.await(t, remote)
	close(gates["root"])
	a.await(t, root)

	got, err := runs.SumTree(context.Background(), a.st, root)
	if err != nil {
		t.Fatal(err)
	}
	// root and remote: 100/10, 1 tool, $0.25, 2 turns each; local and deep: 3/2.
	u := got.Usage
	if got.Runs != 4 || got.WithoutCost != 2 || u.InputTokens != 206 || u.OutputTokens != 24 || u.ToolUses != 2 ||
		u.TotalCostUSD == nil || *u.TotalCostUSD != 0.5 || u.Turns == nil || *u.Turns != 4 || u.CacheReadTokens != nil {
		t.Fatalf("tree usage %+v (usage %+v)", got, u)
	}
	sub, err := runs.SumTree(context.Background(), a.st, remote)
	if err != nil || sub.Runs != 2 || sub.Usage.InputTokens != 103 || *sub.Usage.TotalCostUSD != 0.25 || sub.WithoutCost != 1 {
		t.Fatalf("a subtree %+v %v", sub, err)
	}
	if _, err := runs.SumTree(context.Background(), a.st, "run_nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown run: %v", err)
	}
}
