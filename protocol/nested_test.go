package protocol_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/testkit/agenttest"
	"github.com/drover-run/drover/protocol"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/sqlite"
)

// nestedFixture is a supervisor serving nested runs through a protocol
// server, with the fake agents and "hold", which records the environment
// each run got (by prompt) and works until cancelled.
type nestedFixture struct {
	st   store.Store
	sup  *runs.Supervisor
	sock string

	mu  sync.Mutex
	env map[string]map[string]string
}

func newNestedFixture(t *testing.T) *nestedFixture {
	t.Helper()
	f := &nestedFixture{env: map[string]map[string]string{}}
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "drover.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	reg := drover.NewRegistry()
	for _, a := range agents() {
		if err := reg.Register(a); err != nil {
			t.Fatal(err)
		}
	}
	hold := &agenttest.Agent{Name: "hold", Fn: func(ctx context.Context, req drover.Request, y func(drover.Event, error) bool) {
		f.mu.Lock()
		f.env[req.Prompt] = req.Options.Env
		f.mu.Unlock()
		if y(text("holding"), nil) {
			<-ctx.Done()
		}
	}}
	if err := reg.Register(hold); err != nil {
		t.Fatal(err)
	}
	sup, err := runs.New(context.Background(), engine.New(reg), st, runs.Config{Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sup.Close() })
	srv := protocol.NewServer(api.NewLocal(sup, api.Config{}), protocol.Config{ShutdownGrace: 100 * time.Millisecond, Authenticate: sup.TokenRun})
	if f.sock, err = sup.ServeNested(srv.ServeNested); err != nil {
		t.Fatal(err)
	}
	f.st, f.sup = st, sup
	return f
}

// hold starts a "hold" run (prompt names it) on the supervisor directly
// and returns its id and token once it is running.
func (f *nestedFixture) hold(t *testing.T, prompt string, opts drover.Options) (string, string) {
	t.Helper()
	s, err := f.sup.Start(context.Background(), runs.StartRequest{Agent: "hold", Prompt: prompt, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	return s.RunID, f.token(t, prompt)
}

// token waits until the run of prompt has started and returns its token.
func (f *nestedFixture) token(t *testing.T, prompt string) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		f.mu.Lock()
		env := f.env[prompt]
		f.mu.Unlock()
		if env != nil {
			if env[runs.EnvSocket] != f.sock {
				t.Fatalf("run %q got %s=%q, want %q", prompt, runs.EnvSocket, env[runs.EnvSocket], f.sock)
			}
			return env[runs.EnvRunToken]
		}
	}
	t.Fatalf("run %q never started", prompt)
	return ""
}

func (f *nestedFixture) dial(t *testing.T, token string) (*protocol.Client, string) {
	t.Helper()
	c, res, err := protocol.DialNested(context.Background(), f.sock, token)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, res.RunID
}

// code is err's protocol error code, "" when it is none.
func code(err error) string {
	var pe *api.Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// TestMCP1_NestedTokenRequired: a nested connection whose first request
// is not "auth" with the token of a run going on gets UNAUTHORIZED and is
// closed; the token of a run that ended is refused too.
func TestMCP1_NestedTokenRequired(t *testing.T) {
	f := newNestedFixture(t)
	ctx := context.Background()
	raw := func(first string) (string, bool) {
		t.Helper()
		conn, err := net.Dial("unix", f.sock)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintln(conn, first)
		br := bufio.NewReader(conn)
		resp, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("no answer to %s: %v", first, err)
		}
		fmt.Fprintln(conn, `{"id":2,"op":"list"}`)
		_, err = br.ReadString('\n')
		return resp, err == nil
	}
	for _, first := range []string{`{"id":1,"op":"list"}`, `{"id":1,"op":"auth"}`, `{"id":1,"op":"auth","token":"0000"}`, `not json`} {
		resp, open := raw(first)
		var l line
		if err := json.Unmarshal([]byte(resp), &l); err != nil || l.Error == nil || l.Error.Code != api.CodeUnauthorized {
			t.Errorf("%s: answered %s", first, resp)
		}
		if open {
			t.Errorf("%s: the connection answered a second request", first)
		}
	}

	id, token := f.hold(t, "parent", drover.Options{})
	c, root := f.dial(t, token)
	if root != id {
		t.Fatalf("auth says run %s, want %s", root, id)
	}
	if _, err := listRuns(ctx, c, api.ListParams{}); err != nil {
		t.Fatal(err)
	}
	if err := f.sup.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := f.sup.Await(ctx, id); err != nil {
		t.Fatal(err)
	}
	_, _, err := protocol.DialNested(ctx, f.sock, token)
	if code(err) != api.CodeUnauthorized || !strings.Contains(err.Error(), f.sock) {
		t.Fatalf("the token of an ended run: %v", err)
	}
	_, _, err = protocol.DialNested(ctx, filepath.Join(t.TempDir(), "gone"), token)
	if err == nil || !strings.Contains(err.Error(), runs.EnvSocket) {
		t.Fatalf("a socket that is not there: %v", err)
	}
}

// TestMCP1_NestedConnectionIsConfinedToItsRun: a client with a run's
// token starts only children of that run, never above its tier or less
// contained, and sees, awaits and cancels only that run's descendants;
// closing it cancels the runs it started.
func TestMCP1_NestedConnectionIsConfinedToItsRun(t *testing.T) {
	f := newNestedFixture(t)
	ctx := context.Background()
	parent, token := f.hold(t, "parent", drover.Options{Tier: drover.TierSupervised})
	other, _ := f.hold(t, "other", drover.Options{Tier: drover.TierAutonomous})
	c, _ := f.dial(t, token)

	// Children only, within the parent's tier and containment.
	child, err := c.Run(ctx, api.RunParams{Agent: "quick", Prompt: "2"})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := awaitIDs(ctx, c, child.RunID)
	if err != nil {
		t.Fatal(err)
	}
	var opts drover.Options
	if err := json.Unmarshal(rs[0].Options, &opts); err != nil {
		t.Fatal(err)
	}
	if rs[0].ParentID != parent || rs[0].Status != store.StatusCompleted || opts.EffectiveTier() != drover.TierSupervised {
		t.Fatalf("child %+v, options %s", rs[0], rs[0].Options)
	}
	no := false
	for _, tc := range []struct {
		name string
		p    api.RunParams
		code string
	}{
		{"another parent", api.RunParams{Agent: "quick", Prompt: "1", Parent: other}, api.CodeBoundaryViolation},
		{"above the tier", api.RunParams{Agent: "quick", Prompt: "1", Options: &drover.Options{Tier: drover.TierAutonomous}}, api.CodeBoundaryViolation},
		{"uncontained", api.RunParams{Agent: "quick", Prompt: "1", Options: &drover.Options{Contain: &no}}, api.CodeBoundaryViolation},
		{"environment", api.RunParams{Agent: "quick", Prompt: "1", Options: &drover.Options{Env: map[string]string{"X": "1"}}}, api.CodeValidation},
		{"failover profiles", api.RunParams{Agent: "quick", Prompt: "1", Options: &drover.Options{Failover: &drover.Failover{Profiles: []drover.Profile{{Name: "p", Env: map[string]string{"LD_PRELOAD": "/x.so"}}}}}}, api.CodeValidation},
		{"rules", api.RunParams{Agent: "quick", Prompt: "1", Options: &drover.Options{PermissionRules: []drover.PermissionRule{{Tool: "Bash", Behavior: drover.Allow}}}}, api.CodeValidation},
		{"fork", api.RunParams{Agent: "quick", Prompt: "1", Fork: child.RunID}, api.CodeValidation},
		{"a config home elsewhere", api.RunParams{Agent: "quick", Prompt: "1", Options: &drover.Options{ConfigDir: t.TempDir()}}, api.CodeBoundaryViolation},
		// Within the parent's directories the boundary holds; the fake
		// agent then refuses a config home (it has none).
		{"a config home in the parent's cwd", api.RunParams{Agent: "quick", Prompt: "1", Options: &drover.Options{ConfigDir: "home"}}, api.CodeValidation},
	} {
		if _, err := c.Run(ctx, tc.p); code(err) != tc.code {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
		}
	}

	// Nothing outside the parent's subtree exists for it.
	if _, err := c.Get(ctx, api.GetParams{RunID: other}); code(err) != api.CodeNotFound {
		t.Errorf("get another run: %v", err)
	}
	if err := cancelID(ctx, c, other); code(err) != api.CodeNotFound {
		t.Errorf("cancel another run: %v", err)
	}
	if _, err := awaitIDs(ctx, c, other); code(err) != api.CodeNotFound {
		t.Errorf("await another run: %v", err)
	}
	if _, err := c.Events(ctx, api.EventsParams{RunID: other}); code(err) != api.CodeNotFound {
		t.Errorf("events of another run: %v", err)
	}
	if _, err := listRuns(ctx, c, api.ListParams{Parent: other}); code(err) != api.CodeNotFound {
		t.Errorf("list another run's children: %v", err)
	}
	if _, err := c.Subscribe(ctx, protocol.SubscribeParams{All: true}); code(err) != api.CodeValidation {
		t.Errorf("subscribe to all: %v", err)
	}
	if err := cancelID(ctx, c, parent); code(err) != api.CodeBoundaryViolation {
		t.Errorf("cancel its own run: %v", err)
	}
	if _, err := c.Respond(ctx, api.RespondParams{RunID: child.RunID, RequestID: "q1"}); code(err) != api.CodeBoundaryViolation {
		t.Errorf("respond: %v", err)
	}
	if r, err := f.st.GetRun(ctx, other); err != nil || r.Status != store.StatusRunning || r.CancelRequested {
		t.Fatalf("the other run: %+v %v", r, err)
	}

	// Its own run and its descendants are there.
	g, err := c.Get(ctx, api.GetParams{RunID: parent})
	if err != nil || len(g.Children) != 1 || g.Children[0].ID != child.RunID {
		t.Fatalf("get its run: %+v %v", g, err)
	}
	listed, err := listRuns(ctx, c, api.ListParams{})
	if err != nil || len(listed) != 1 || listed[0].ID != child.RunID {
		t.Fatalf("list: %+v %v", listed, err)
	}
	registered := len(agents()) + 1 // and hold
	agents, err := listAgents(ctx, c)
	if err != nil || len(agents) != registered || !agents[0].Installed {
		t.Fatalf("agents: %+v %v", agents, err)
	}

	// A grandchild, started through the child's own connection: the
	// parent's connection sees it; the child's does not see the parent.
	mid, err := c.Run(ctx, api.RunParams{Agent: "hold", Prompt: "mid"})
	if err != nil {
		t.Fatal(err)
	}
	cm, _ := f.dial(t, f.token(t, "mid"))
	grand, err := cm.Run(ctx, api.RunParams{Agent: "hold", Prompt: "grand"})
	if err != nil {
		t.Fatal(err)
	}
	if gr, err := c.Get(ctx, api.GetParams{RunID: grand.RunID}); err != nil || gr.Run.ParentID != mid.RunID {
		t.Fatalf("the parent's connection gets the grandchild: %+v %v", gr, err)
	}
	if _, err := cm.Get(ctx, api.GetParams{RunID: parent}); code(err) != api.CodeNotFound {
		t.Errorf("the child's connection gets the parent: %v", err)
	}
	if _, err := cm.Get(ctx, api.GetParams{RunID: child.RunID}); code(err) != api.CodeNotFound {
		t.Errorf("the child's connection gets its sibling: %v", err)
	}

	// Closing the parent's connection cancels what it started (mid, and
	// with it the grandchild), not the parent nor the other run.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	ended, err := f.sup.Await(ctx, mid.RunID, grand.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if ended[0].Error != store.ReasonCancelled || ended[1].Error != store.ReasonParentEnded {
		t.Fatalf("after close: mid %s %q, grandchild %s %q", ended[0].Status, ended[0].Error, ended[1].Status, ended[1].Error)
	}
	for _, id := range []string{parent, other} {
		if r, err := f.st.GetRun(ctx, id); err != nil || r.Status != store.StatusRunning {
			t.Fatalf("run %s after close: %+v %v", id, r, err)
		}
	}
}

// TestMCP1_NestedTierDefaultsToTheParents: a child of a dry-run run that
// names no tier is dry-run; of an autonomous run, supervised and
// contained; an autonomous child is refused.
func TestMCP1_NestedTierDefaultsToTheParents(t *testing.T) {
	f := newNestedFixture(t)
	ctx := context.Background()
	yes := true
	for _, tc := range []struct {
		parent  drover.Options
		tier    drover.Tier
		contain bool
	}{
		{drover.Options{Tier: drover.TierDryRun}, drover.TierDryRun, true},
		{drover.Options{Tier: drover.TierAutonomous}, drover.TierSupervised, true},
	} {
		_, token := f.hold(t, "parent "+string(tc.parent.Tier), tc.parent)
		c, _ := f.dial(t, token)
		p := api.RunParams{Agent: "quick", Prompt: "1"}
		s, err := c.Run(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		rs, err := awaitIDs(ctx, c, s.RunID)
		if err != nil {
			t.Fatal(err)
		}
		var o drover.Options
		if err := json.Unmarshal(rs[0].Options, &o); err != nil {
			t.Fatal(err)
		}
		if on, _ := o.Containment(); o.EffectiveTier() != tc.tier || on != tc.contain {
			t.Errorf("child of %s: options %s", tc.parent.Tier, rs[0].Options)
		}
	}
	// An autonomous child, even of an autonomous parent, is the
	// operator's to allow, which the nested socket's service never does
	// (SEC-5).
	_, token := f.hold(t, "contained autonomous", drover.Options{Tier: drover.TierAutonomous, Contain: &yes})
	c, _ := f.dial(t, token)
	_, err := c.Run(ctx, api.RunParams{Agent: "quick", Prompt: "1", Options: &drover.Options{Tier: drover.TierAutonomous}})
	if api.CodeOf(err) != api.CodeBoundaryViolation {
		t.Errorf("an autonomous child through the nested socket: %v", err)
	}
}

// TestMCP1_NestedNetworkIsTheParents: a child of a run whose network is
// restricted gets the same restriction when it names none, and may not
// name another (BOUNDARY_VIOLATION).
func TestMCP1_NestedNetworkIsTheParents(t *testing.T) {
	f := newNestedFixture(t)
	ctx := context.Background()
	_, token := f.hold(t, "restricted", drover.Options{Network: "443"})
	c, _ := f.dial(t, token)
	_, err := c.Run(ctx, api.RunParams{Agent: "quick", Prompt: "1", Options: &drover.Options{Network: "443,80"}})
	if api.CodeOf(err) != api.CodeBoundaryViolation {
		t.Fatalf("a child asking for another network: %v", err)
	}
	s, err := c.Run(ctx, api.RunParams{Agent: "quick", Prompt: "1"})
	if err != nil {
		// A restricted network needs a kernel that can contain.
		t.Skipf("restricted child: %v", err)
	}
	rs, err := awaitIDs(ctx, c, s.RunID)
	if err != nil {
		t.Fatal(err)
	}
	var o drover.Options
	if err := json.Unmarshal(rs[0].Options, &o); err != nil || o.Network != "443" {
		t.Errorf("the child's options %s, want network 443", rs[0].Options)
	}
}
