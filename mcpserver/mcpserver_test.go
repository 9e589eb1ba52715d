package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/testkit/agenttest"
	"github.com/drover-run/drover/mcpserver"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/sqlite"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// seen records the options each fake run got, by prompt.
type seen struct {
	mu   sync.Mutex
	opts map[string]drover.Options
}

func (s *seen) record(req drover.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts[req.Prompt] = req.Options
}

func (s *seen) get(prompt string) drover.Options {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opts[prompt]
}

// agents are the fake agents: echo answers "done: PROMPT" with usage and
// a cost; fail fails with the agent's own error; hang works until
// cancelled.
func agents(s *seen) []drover.Adapter {
	cost := 0.5
	echo := &agenttest.Agent{Name: "echo", Fn: func(_ context.Context, req drover.Request, y func(drover.Event, error) bool) {
		s.record(req)
		if y(drover.Event{Type: drover.TypeText, Payload: drover.TextPayload{Content: "working on " + req.Prompt}}, nil) {
			y(drover.Event{Type: drover.TypeDone, Payload: drover.DonePayload{Status: drover.StatusSuccess, Result: "done: " + req.Prompt,
				Usage: drover.Usage{InputTokens: 7, OutputTokens: 3, TotalCostUSD: &cost}}}, nil)
		}
	}}
	fail := &agenttest.Agent{Name: "fail", Fn: func(_ context.Context, req drover.Request, y func(drover.Event, error) bool) {
		s.record(req)
		if y(drover.Event{Type: drover.TypeError, Payload: drover.ErrorPayload{Code: drover.CodeRateLimited, Message: "the model is busy"}}, nil) {
			y(drover.Event{Type: drover.TypeDone, Payload: drover.DonePayload{Status: drover.StatusError}}, nil)
		}
	}}
	hang := &agenttest.Agent{Name: "hang", Fn: func(ctx context.Context, req drover.Request, y func(drover.Event, error) bool) {
		s.record(req)
		if y(drover.Event{Type: drover.TypeText, Payload: drover.TextPayload{Content: "working"}}, nil) {
			<-ctx.Done()
		}
	}}
	return []drover.Adapter{echo, fail, hang, panicky}
}

// panicky is an agent whose availability check panics.
var panicky = &agenttest.Agent{Name: "panicky", Caps: &drover.Capabilities{Tiers: drover.Tiers()},
	Fn:           func(context.Context, drover.Request, func(drover.Event, error) bool) {},
	Availability: func(context.Context) drover.Availability { panic("availability exploded") }}

// ledger is one SQLite ledger file shared by supervisors.
type ledger struct {
	path string
	seen *seen
}

func newLedger(t *testing.T) *ledger {
	return &ledger{path: filepath.Join(t.TempDir(), "drover.db"), seen: &seen{opts: map[string]drover.Options{}}}
}

// supervisor opens the ledger for a new supervisor named owner.
func (l *ledger) supervisor(t *testing.T, owner string) *runs.Supervisor {
	t.Helper()
	st, err := sqlite.Open(context.Background(), l.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	reg := drover.NewRegistry()
	for _, a := range agents(l.seen) {
		if err := reg.Register(a); err != nil {
			t.Fatal(err)
		}
	}
	sup, err := runs.New(context.Background(), engine.New(reg), st, runs.Config{Owner: owner, Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sup.Close() })
	return sup
}

// client is one MCP session with a server over in-memory transports.
type client struct {
	t       *testing.T
	sup     *runs.Supervisor
	session *mcp.ClientSession
	served  chan error // Serve's result
}

// connect serves a new server over sup with cfg and connects a client;
// cleanup closes the session and waits for Serve to return.
func connect(t *testing.T, sup *runs.Supervisor, cfg mcpserver.Config) *client {
	t.Helper()
	srv, err := mcpserver.New(api.NewLocal(sup, api.Config{AllowAutonomous: true}), cfg)
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

// close ends the session and returns Serve's result; again, it returns
// that result again.
func (c *client) close() error {
	c.session.Close()
	err := <-c.served
	c.served <- err
	return err
}

// call calls tool with args and returns the result.
func (c *client) call(ctx context.Context, tool string, args map[string]any) *mcp.CallToolResult {
	c.t.Helper()
	res, err := c.session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		c.t.Fatalf("%s: protocol error %v", tool, err)
	}
	return res
}

// ok calls tool, fails the test on a tool error, and decodes the
// structured content into out.
func ok[T any](c *client, tool string, args map[string]any) T {
	c.t.Helper()
	res := c.call(context.Background(), tool, args)
	if res.IsError {
		c.t.Fatalf("%s %v: tool error %s", tool, args, text(res))
	}
	return decode[T](c.t, res)
}

// failed calls tool and returns the text of the tool error it must give.
func (c *client) failed(tool string, args map[string]any) string {
	c.t.Helper()
	res := c.call(context.Background(), tool, args)
	if !res.IsError {
		c.t.Fatalf("%s %v: want a tool error, got %s", tool, args, text(res))
	}
	return text(res)
}

func decode[T any](t *testing.T, res *mcp.CallToolResult) T {
	t.Helper()
	var out T
	data, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("structured content %s: %v", data, err)
	}
	return out
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func (c *client) ledgerRun(id string) *store.Run {
	c.t.Helper()
	r, err := c.sup.Store().GetRun(context.Background(), id)
	if err != nil {
		c.t.Fatal(err)
	}
	return r
}

// TestMCP1_ToolsAndSchemas: a tool for each operation an agent may call
// (api.Ops), and run_agent, are offered, each argument described for the
// model; run_agent's tier is one of the four; respond, which answers
// permission requests, is not offered.
func TestMCP1_ToolsAndSchemas(t *testing.T) {
	c := connect(t, newLedger(t).supervisor(t, "a:1"), mcpserver.Config{})
	res, err := c.session.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		if tool.Description == "" {
			t.Errorf("%s has no description", tool.Name)
		}
		var sc struct {
			Properties map[string]struct {
				Description string `json:"description"`
				Enum        []string
			} `json:"properties"`
			Required []string `json:"required"`
		}
		data, _ := json.Marshal(tool.InputSchema)
		if err := json.Unmarshal(data, &sc); err != nil {
			t.Fatal(err)
		}
		for name, p := range sc.Properties {
			if p.Description == "" {
				t.Errorf("%s: argument %s has no description", tool.Name, name)
			}
		}
		switch tool.Name {
		case "run_agent", "start_run":
			if !slices.Equal(sc.Required, []string{"agent", "prompt"}) ||
				!slices.Equal(sc.Properties["tier"].Enum, []string{"sandbox", "dry-run", "supervised", "autonomous"}) {
				t.Errorf("%s: schema %s", tool.Name, data)
			}
		case "await_run", "get_run", "cancel_run":
			if !slices.Equal(sc.Required, []string{"runId"}) {
				t.Errorf("%s: schema %s", tool.Name, data)
			}
		}
	}
	slices.Sort(names)
	if want := []string{"apply_change", "await_run", "cancel_run", "check_run", "compare_runs", "discard_change", "drover_info", "get_run",
		"interrupt_run", "list_agents", "list_runs", "merge_change", "revise_run", "run_agent", "run_change", "run_events", "start_run",
		"steer_run"}; !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}
}

// TestMCP1_RunAgent: run_agent waits for the run and returns its final
// text, status, usage and cost, and id; the run is in the ledger, in the
// default tier (supervised) and the server's working directory.
func TestMCP1_RunAgent(t *testing.T) {
	l := newLedger(t)
	c := connect(t, l.supervisor(t, "a:1"), mcpserver.Config{})
	r := ok[mcpserver.Run](c, "run_agent", map[string]any{"agent": "echo", "prompt": "say hi"})
	if r.Status != "completed" || r.Result != "done: say hi" || r.Agent != "echo" || r.Usage.InputTokens != 7 ||
		r.Usage.TotalCostUSD == nil || *r.Usage.TotalCostUSD != 0.5 || r.ParentID != "" {
		t.Fatalf("run_agent %+v", r)
	}
	if rec := c.ledgerRun(r.RunID); rec.Status != store.StatusCompleted || rec.Prompt != "say hi" {
		t.Fatalf("ledger %+v", rec)
	}
	wd, _ := os.Getwd()
	if o := l.seen.get("say hi"); o.Tier != drover.TierSupervised || o.Cwd != wd {
		t.Fatalf("options %+v, want supervised in %s", o, wd)
	}
	// Asked: the tier, model, directory (relative to the server's) and timeout.
	dir := t.TempDir()
	rel, err := filepath.Rel(wd, dir)
	if err != nil {
		t.Fatal(err)
	}
	ok[mcpserver.Run](c, "run_agent", map[string]any{"agent": "echo", "prompt": "asked", "tier": "dry-run", "model": "m1", "cwd": rel, "timeoutSeconds": 90})
	if o := l.seen.get("asked"); o.Tier != drover.TierDryRun || o.Model != "m1" || o.Cwd != dir || o.Timeout != 90*time.Second {
		t.Fatalf("options %+v", o)
	}
}

// TestMCP1_RunThatFails: a run that fails is a tool error whose text says
// why, with the run (failed, the agent's error) as structured content.
func TestMCP1_RunThatFails(t *testing.T) {
	c := connect(t, newLedger(t).supervisor(t, "a:1"), mcpserver.Config{})
	res := c.call(context.Background(), "run_agent", map[string]any{"agent": "fail", "prompt": "try"})
	if !res.IsError || !strings.Contains(text(res), "failed: the model is busy") {
		t.Fatalf("result %v: %s", res.IsError, text(res))
	}
	r := decode[mcpserver.Run](t, res)
	if r.Status != "failed" || r.Error != "the model is busy" || r.RunID == "" {
		t.Fatalf("run %+v", r)
	}
}

// TestMCP1_StartAwaitGetCancel: start_run returns at once; get_run shows
// the run going; await_run with a timeout returns it still running;
// cancel_run ends it cancelled and returns it ended; await_run then
// answers at once; start_run + await_run is run_agent in two steps.
func TestMCP1_StartAwaitGetCancel(t *testing.T) {
	c := connect(t, newLedger(t).supervisor(t, "a:1"), mcpserver.Config{})
	started := ok[runs.Started](c, "start_run", map[string]any{"agent": "hang", "prompt": "long job"})
	if started.RunID == "" || started.SessionID == "" {
		t.Fatalf("start_run %+v", started)
	}
	d := ok[mcpserver.RunDetail](c, "get_run", map[string]any{"runId": started.RunID})
	if d.Status == "completed" || d.Status == "failed" || d.Prompt != "long job" || len(d.Children) != 0 || d.Total.Runs != 1 {
		t.Fatalf("get_run %+v", d)
	}
	if r := ok[mcpserver.Run](c, "await_run", map[string]any{"runId": started.RunID, "timeoutSeconds": 1}); r.Status == "completed" || r.Status == "failed" {
		t.Fatalf("await_run with a timeout on a hang: %+v", r)
	}
	res := c.call(context.Background(), "cancel_run", map[string]any{"runId": started.RunID})
	if r := decode[mcpserver.Run](t, res); !res.IsError || r.Status != "failed" || r.Error != store.ReasonCancelled {
		t.Fatalf("cancel_run %v %+v", res.IsError, r)
	}
	if r := decode[mcpserver.Run](t, c.call(context.Background(), "await_run", map[string]any{"runId": started.RunID})); r.Error != store.ReasonCancelled {
		t.Fatalf("await_run after cancel %+v", r)
	}
	// Cancelling again changes nothing.
	if r := decode[mcpserver.Run](t, c.call(context.Background(), "cancel_run", map[string]any{"runId": started.RunID})); r.Error != store.ReasonCancelled {
		t.Fatalf("cancel_run again %+v", r)
	}
	two := ok[runs.Started](c, "start_run", map[string]any{"agent": "echo", "prompt": "two steps"})
	if r := ok[mcpserver.Run](c, "await_run", map[string]any{"runId": two.RunID}); r.Status != "completed" || r.Result != "done: two steps" {
		t.Fatalf("await_run %+v", r)
	}
}

// TestMCP1_ArgumentErrors: what cannot run is a tool error saying what is
// wrong, and the server goes on answering.
func TestMCP1_ArgumentErrors(t *testing.T) {
	l := newLedger(t)
	sup := l.supervisor(t, "a:1")
	c := connect(t, sup, mcpserver.Config{})
	other, err := sup.Start(context.Background(), runs.StartRequest{Agent: "echo", Prompt: "not through mcp"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"run_agent", map[string]any{"agent": "echo"}, "prompt"},
		{"run_agent", map[string]any{"agent": "echo", "prompt": "x", "tier": "reckless"}, "tier"},
		{"run_agent", map[string]any{"agent": "echo", "prompt": "x", "extra": 1}, "extra"},
		{"run_agent", map[string]any{"agent": "nosuch", "prompt": "x"}, "list_agents"},
		{"run_agent", map[string]any{"agent": "echo", "prompt": ""}, "agent and prompt are required"},
		{"run_agent", map[string]any{"agent": "echo", "prompt": "x", "tier": "autonomous"}, "is above supervised, the highest this server allows"},
		{"run_agent", map[string]any{"agent": "echo", "prompt": "x", "cwd": "/no/such/dir"}, "not a directory"},
		{"start_run", map[string]any{"agent": "echo", "prompt": "x", "timeoutSeconds": -1}, "negative"},
		{"await_run", map[string]any{"runId": "run_nope"}, `no run "run_nope"`},
		{"await_run", map[string]any{}, "runId"},
		{"get_run", map[string]any{"runId": "run_nope"}, `no run "run_nope"`},
		{"get_run", map[string]any{"runId": other.RunID}, "among the runs started through this server"},
		{"cancel_run", map[string]any{"runId": other.RunID}, "among the runs started through this server"},
	} {
		got := c.failed(tc.tool, tc.args)
		t.Logf("%s %v: %s", tc.tool, tc.args, got)
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s %v: %q, want it to say %q", tc.tool, tc.args, got, tc.want)
		}
	}
	// An agent whose check panics is listed with the error; the others
	// are listed as usual.
	agents := ok[mcpserver.Agents](c, "list_agents", map[string]any{})
	if i := slices.IndexFunc(agents.Agents, func(a mcpserver.Agent) bool { return a.ID == "panicky" }); i < 0 ||
		agents.Agents[i].Installed || !strings.Contains(agents.Agents[i].Error, "internal error checking panicky: availability exploded") {
		t.Errorf("list_agents %+v", agents)
	}
	if r := ok[mcpserver.Run](c, "run_agent", map[string]any{"agent": "echo", "prompt": "still here"}); r.Status != "completed" {
		t.Fatalf("after the errors: %+v", r)
	}
	if recs, _ := sup.Store().ListRuns(context.Background(), store.RunFilter{}); len(recs) != 2 {
		t.Fatalf("refused runs were recorded: %d runs", len(recs))
	}
}

// TestMCP1_ListAgents: every agent of the registry with its availability
// and tiers.
func TestMCP1_ListAgents(t *testing.T) {
	reg := drover.NewRegistry()
	reg.Register(&agenttest.Agent{Name: "echo"})
	reg.Register(&agenttest.Agent{Name: "narrow", Caps: &drover.Capabilities{Tiers: []drover.Tier{drover.TierAutonomous}}})
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "drover.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sup, err := runs.New(context.Background(), engine.New(reg), st, runs.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer sup.Close()
	c := connect(t, sup, mcpserver.Config{})
	got := ok[mcpserver.Agents](c, "list_agents", nil)
	want := []mcpserver.Agent{{ID: "echo", Installed: true, Tiers: drover.Tiers()}, {ID: "narrow", Installed: true, Tiers: []drover.Tier{drover.TierAutonomous}}}
	if len(got.Agents) != 2 || got.Agents[0].ID != want[0].ID || !slices.Equal(got.Agents[0].Tiers, want[0].Tiers) ||
		got.Agents[1].ID != want[1].ID || !got.Agents[1].Installed || !slices.Equal(got.Agents[1].Tiers, want[1].Tiers) {
		t.Fatalf("list_agents %+v", got)
	}
	c.close()
}

// TestMCP1_NestedUnderARunOfAnotherProcess: a server working for a run
// that another drover process owns (DROVER_RUN_ID) makes its runs that
// run's children, never above its tier (the default is the parent's
// when lower); the parent's tree sums them; when the parent ends, a
// child still going ends "parent ended", and no run can start any more.
func TestMCP1_NestedUnderARunOfAnotherProcess(t *testing.T) {
	l := newLedger(t)
	outer := l.supervisor(t, "outer:1")
	parent, err := outer.Start(context.Background(), runs.StartRequest{Agent: "hang", Prompt: "parent", Options: drover.Options{Tier: drover.TierDryRun}})
	if err != nil {
		t.Fatal(err)
	}
	c := connect(t, l.supervisor(t, "nested:2"), mcpserver.Config{ParentID: parent.RunID, MaxTier: drover.TierAutonomous})

	r := ok[mcpserver.Run](c, "run_agent", map[string]any{"agent": "echo", "prompt": "child"})
	if r.ParentID != parent.RunID || c.ledgerRun(r.RunID).Owner != "nested:2" {
		t.Fatalf("child %+v", r)
	}
	if o := l.seen.get("child"); o.Tier != drover.TierDryRun {
		t.Fatalf("child's tier %s, want the parent's dry-run", o.Tier)
	}
	if msg := c.failed("run_agent", map[string]any{"agent": "echo", "prompt": "wider", "tier": "supervised"}); !strings.Contains(msg, "is above dry-run, the tier of the run this server works for") {
		t.Fatalf("a tier above the parent's: %s", msg)
	}
	ok[mcpserver.Run](c, "run_agent", map[string]any{"agent": "echo", "prompt": "narrower", "tier": "sandbox"})

	going := ok[runs.Started](c, "start_run", map[string]any{"agent": "hang", "prompt": "going"})
	d := ok[mcpserver.RunDetail](c, "get_run", map[string]any{"runId": parent.RunID})
	if len(d.Children) != 3 || d.Total.Runs != 4 || d.Total.Usage.InputTokens != 14 || *d.Total.Usage.TotalCostUSD != 1 || d.Total.WithoutCost != 2 {
		t.Fatalf("the parent's tree %+v", d)
	}
	if err := outer.Cancel(context.Background(), parent.RunID); err != nil {
		t.Fatal(err)
	}
	res := c.call(context.Background(), "await_run", map[string]any{"runId": going.RunID})
	if g := decode[mcpserver.Run](t, res); g.Status != "failed" || g.Error != store.ReasonParentEnded {
		t.Fatalf("child of an ended parent %+v", g)
	}
	if msg := c.failed("start_run", map[string]any{"agent": "echo", "prompt": "late"}); !strings.Contains(msg, "has ended") {
		t.Fatalf("start under an ended parent: %s", msg)
	}
}

// TestMCP1_SessionEndCancelsRuns: when the client goes away, the runs it
// started that are still going are cancelled and recorded before Serve
// returns; runs that ended stay as they were.
func TestMCP1_SessionEndCancelsRuns(t *testing.T) {
	c := connect(t, newLedger(t).supervisor(t, "a:1"), mcpserver.Config{})
	done := ok[mcpserver.Run](c, "run_agent", map[string]any{"agent": "echo", "prompt": "quick"})
	going := ok[runs.Started](c, "start_run", map[string]any{"agent": "hang", "prompt": "going"})
	if err := c.close(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if r := c.ledgerRun(going.RunID); r.Status != store.StatusFailed || r.Error != store.ReasonCancelled {
		t.Fatalf("run left going %+v", r)
	}
	if r := c.ledgerRun(done.RunID); r.Status != store.StatusCompleted {
		t.Fatalf("ended run %+v", r)
	}
}

// TestMCP1_ClientCancelsRunAgent: a client that gives up on run_agent (an
// MCP cancellation) cancels the run it was waiting for.
func TestMCP1_ClientCancelsRunAgent(t *testing.T) {
	l := newLedger(t)
	sup := l.supervisor(t, "a:1")
	c := connect(t, sup, mcpserver.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	called := make(chan error, 1)
	go func() {
		_, err := c.session.CallTool(ctx, &mcp.CallToolParams{Name: "run_agent", Arguments: map[string]any{"agent": "hang", "prompt": "abandoned"}})
		called <- err
	}()
	var id string
	deadline, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	for id == "" {
		if deadline.Err() != nil {
			t.Fatal("run_agent's run never ran")
		}
		recs, err := sup.Store().ListRuns(context.Background(), store.RunFilter{Status: []store.RunStatus{store.StatusRunning}})
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 1 {
			id = recs[0].ID
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-called; !errors.Is(err, context.Canceled) {
		t.Fatalf("call: %v", err)
	}
	recs, err := sup.Await(deadline, id)
	if err != nil || recs[0].Error != store.ReasonCancelled {
		t.Fatalf("abandoned run %+v %v", recs, err)
	}
}
