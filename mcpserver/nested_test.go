package mcpserver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/mcpserver"
	"github.com/drover-run/drover/protocol"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
)

// connectOver is connect for a server over backend b; sup is the
// supervisor whose ledger the test reads.
func connectOver(t *testing.T, b api.Service, sup *runs.Supervisor, cfg mcpserver.Config) *client {
	t.Helper()
	srv, err := mcpserver.New(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	c := &client{t: t, sup: sup, served: make(chan error, 1)}
	go func() { c.served <- srv.Serve(context.Background(), st) }()
	c.session, err = mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.close() })
	return c
}

// TestMCP1_NestedThroughTheParentsSocket: a server inside a run reaches
// the drover that runs it over its nested-run socket (Remote, what a
// contained `drover mcp` does): the runs it starts are that run's
// children, started and owned by the outer drover, never above the
// parent's tier; it sees the parent's tree and nothing else; list_agents
// is the outer drover's registry; its session's end cancels its runs;
// the parent's end ends the children.
func TestMCP1_NestedThroughTheParentsSocket(t *testing.T) {
	l := newLedger(t)
	outer := l.supervisor(t, "outer:1")
	sock, err := outer.ServeNested(protocol.NewServer(api.NewLocal(outer, api.Config{}), protocol.Config{ShutdownGrace: 100 * time.Millisecond, Authenticate: outer.TokenRun}).ServeNested)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	parent, err := outer.Start(ctx, runs.StartRequest{Agent: "hang", Prompt: "parent", Options: drover.Options{Tier: drover.TierDryRun}})
	if err != nil {
		t.Fatal(err)
	}
	other, err := outer.Start(ctx, runs.StartRequest{Agent: "hang", Prompt: "other"})
	if err != nil {
		t.Fatal(err)
	}
	var token string
	for deadline := time.Now().Add(10 * time.Second); token == "" && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		token = l.seen.get("parent").Env[runs.EnvRunToken]
	}
	pc, auth, err := protocol.DialNested(ctx, sock, token)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if auth.RunID != parent.RunID {
		t.Fatalf("auth: run %s, want %s", auth.RunID, parent.RunID)
	}
	c := connectOver(t, pc, outer, mcpserver.Config{ParentID: auth.RunID, MaxTier: drover.TierAutonomous})

	r := ok[mcpserver.Run](c, "run_agent", map[string]any{"agent": "echo", "prompt": "child"})
	if r.ParentID != parent.RunID || r.Result != "done: child" || c.ledgerRun(r.RunID).Owner != "outer:1" {
		t.Fatalf("child %+v", r)
	}
	if o := l.seen.get("child"); o.Tier != drover.TierDryRun {
		t.Fatalf("child's tier %s, want the parent's dry-run", o.Tier)
	}
	if msg := c.failed("run_agent", map[string]any{"agent": "echo", "prompt": "wider", "tier": "supervised"}); !strings.Contains(msg, "is above dry-run") {
		t.Fatalf("a tier above the parent's: %s", msg)
	}
	if msg := c.failed("run_agent", map[string]any{"agent": "nobody", "prompt": "x"}); !strings.Contains(msg, `unknown agent "nobody" (list_agents names the agents)`) {
		t.Fatalf("an unknown agent: %s", msg)
	}
	going := ok[runs.Started](c, "start_run", map[string]any{"agent": "hang", "prompt": "going"})
	d := ok[mcpserver.RunDetail](c, "get_run", map[string]any{"runId": parent.RunID})
	if len(d.Children) != 2 || d.Total.Runs != 3 || d.Total.Usage.InputTokens != 7 || *d.Total.Usage.TotalCostUSD != 0.5 {
		t.Fatalf("the parent's tree %+v", d)
	}
	if cd := ok[mcpserver.RunDetail](c, "get_run", map[string]any{"runId": r.RunID}); cd.Total.Runs != 1 || cd.Total.Usage.InputTokens != 7 || cd.Result != "done: child" {
		t.Fatalf("the child alone %+v", cd)
	}
	for _, tool := range []string{"get_run", "cancel_run", "await_run"} {
		if msg := c.failed(tool, map[string]any{"runId": other.RunID}); !strings.Contains(msg, "no run") {
			t.Errorf("%s of a run outside the parent's tree: %s", tool, msg)
		}
	}
	if o := c.ledgerRun(other.RunID); o.Status != store.StatusRunning || o.CancelRequested {
		t.Fatalf("the other run %+v", o)
	}
	agents := ok[mcpserver.Agents](c, "list_agents", nil)
	if len(agents.Agents) != 4 || agents.Agents[0].ID != "echo" || !agents.Agents[0].Installed {
		t.Fatalf("list_agents %+v", agents)
	}
	for _, a := range agents.Agents {
		if a.ID == "panicky" && !strings.Contains(a.Error, "availability exploded") {
			t.Errorf("an agent whose check panics: %+v", a)
		}
	}

	// The parent ends: its children end "parent ended", and no run can
	// start under it any more.
	if err := outer.Cancel(ctx, parent.RunID); err != nil {
		t.Fatal(err)
	}
	res := c.call(ctx, "await_run", map[string]any{"runId": going.RunID})
	if g := decode[mcpserver.Run](t, res); g.Status != "failed" || g.Error != store.ReasonParentEnded {
		t.Fatalf("child of an ended parent %+v", g)
	}
	if msg := c.failed("start_run", map[string]any{"agent": "echo", "prompt": "late"}); !strings.Contains(msg, "the run this server works for ("+parent.RunID+") has ended") {
		t.Fatalf("start under an ended parent: %s", msg)
	}
	if err := c.close(); err != nil {
		t.Fatal(err)
	}
}

// TestMCP1_NestedSessionEndCancelsItsRuns: over the socket too, the runs
// a session started that are still going are cancelled when it ends.
func TestMCP1_NestedSessionEndCancelsItsRuns(t *testing.T) {
	l := newLedger(t)
	outer := l.supervisor(t, "outer:1")
	sock, err := outer.ServeNested(protocol.NewServer(api.NewLocal(outer, api.Config{}), protocol.Config{ShutdownGrace: 100 * time.Millisecond, Authenticate: outer.TokenRun}).ServeNested)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	parent, err := outer.Start(ctx, runs.StartRequest{Agent: "hang", Prompt: "parent"})
	if err != nil {
		t.Fatal(err)
	}
	var token string
	for deadline := time.Now().Add(10 * time.Second); token == "" && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		token = l.seen.get("parent").Env[runs.EnvRunToken]
	}
	pc, _, err := protocol.DialNested(ctx, sock, token)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	c := connectOver(t, pc, outer, mcpserver.Config{ParentID: parent.RunID})
	going := ok[runs.Started](c, "start_run", map[string]any{"agent": "hang", "prompt": "going"})
	if err := c.close(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if r := c.ledgerRun(going.RunID); r.Status != store.StatusFailed || r.Error != store.ReasonCancelled {
		t.Fatalf("run left going %+v", r)
	}
	if r := c.ledgerRun(parent.RunID); r.Status != store.StatusRunning {
		t.Fatalf("the parent %+v", r)
	}
}
