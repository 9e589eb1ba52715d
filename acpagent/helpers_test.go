package acpagent_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/drover-run/drover"
	"github.com/drover-run/drover/acpagent"
	"github.com/drover-run/drover/acpagent/editortest"
	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/testkit/agenttest"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/sqlite"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var discard = slog.New(slog.DiscardHandler)

// Fake agents: func-field adapters, the thin seam these tests need.

// echo streams its answer ("heard: PROMPT", with the resume token it was
// given, if any) as two deltas and a text, thinks, reads a file and ends
// with the done status a prompt "status:S" names (success otherwise); a
// prompt "fail" fails with a model error.
func echo() *agenttest.Agent {
	return &agenttest.Agent{Name: "echo",
		Caps: &drover.Capabilities{Tiers: drover.Tiers(), Resume: true, PartialText: true, MCPTransports: []string{"stdio"}},
		Fn: func(_ context.Context, req drover.Request, y func(drover.Event, error) bool) {
			if req.Prompt == "fail" {
				y(drover.Event{Type: drover.TypeError, Payload: drover.ErrorPayload{Code: drover.CodeModelError, Message: "the model fell over"}}, nil)
				y(drover.Event{Type: drover.TypeDone, Payload: drover.DonePayload{Status: drover.StatusError}}, nil)
				return
			}
			answer := "heard: " + req.Prompt
			if req.Options.Resume != "" {
				answer += " (resumed " + req.Options.Resume + ")"
			}
			half := len(answer) / 2
			status := drover.StatusSuccess
			if s, ok := strings.CutPrefix(req.Prompt, "status:"); ok {
				status = drover.DoneStatus(s)
			}
			for _, ev := range []drover.Event{
				{Type: drover.TypeThinking, Payload: drover.ThinkingPayload{Summary: "pondering"}},
				{Type: drover.TypeTextDelta, Payload: drover.TextDeltaPayload{Delta: answer[:half]}},
				{Type: drover.TypeTextDelta, Payload: drover.TextDeltaPayload{Delta: answer[half:]}},
				{Type: drover.TypeText, Payload: drover.TextPayload{Content: answer}},
				{Type: drover.TypeToolUse, Payload: drover.ToolUsePayload{ToolName: "Read", ToolUseID: "tr1", Input: map[string]any{"file_path": "/w/main.go"}, Description: "Reading /w/main.go"}},
				{Type: drover.TypeToolResult, Payload: drover.ToolResultPayload{ToolName: "Read", ToolUseID: "tr1", Status: drover.ToolSuccess, Output: "package main"}},
				{Type: drover.TypeDone, Payload: drover.DonePayload{Status: status, Result: answer, ResumeToken: "tok-" + req.Prompt,
					Usage: drover.Usage{InputTokens: 7, OutputTokens: 3}}},
			} {
				if !y(ev, nil) {
					return
				}
			}
		}}
}

// hang says it is working and waits to be cancelled; it cannot be
// interrupted.
func hang() *agenttest.Agent {
	return &agenttest.Agent{Name: "hang",
		Fn: func(ctx context.Context, _ drover.Request, y func(drover.Event, error) bool) {
			if y(drover.Event{Type: drover.TypeText, Payload: drover.TextPayload{Content: "working"}}, nil) {
				<-ctx.Done()
			}
		}}
}

// fixture is a real SQLite ledger and a supervisor over the fake agents.
type fixture struct {
	t   *testing.T
	st  store.Store
	sup *runs.Supervisor
	reg *drover.Registry
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "drover.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	reg := drover.NewRegistry()
	for _, a := range []drover.Adapter{echo(), hang(), agenttest.Asker(true)} {
		if err := reg.Register(a); err != nil {
			t.Fatal(err)
		}
	}
	sup, err := runs.New(context.Background(), engine.New(reg), st, runs.Config{Poll: 20 * time.Millisecond, Workspaces: filepath.Join(t.TempDir(), "worktrees")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sup.Close() })
	return &fixture{t: t, st: st, sup: sup, reg: reg}
}

// client is the editor (editortest.Editor) with its SDK client side over
// in-memory pipes to acpagent.Serve.
type client struct {
	t    *testing.T
	ed   *editortest.Editor
	conn *acp.ClientSideConnection
	in   *io.PipeWriter // the agent's input
	// served is Serve's result, once it has returned.
	served chan error
}

// connect starts Serve with cfg and connects a
// client. Cleanup closes the agent's input, waits for Serve and the
// client's connection to end.
func (f *fixture) connect(cfg acpagent.Config) *client {
	f.t.Helper()
	if cfg.Agent == "" {
		cfg.Agent = "echo"
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := &client{t: f.t, ed: editortest.New(), in: inW, served: make(chan error, 1)}
	go func() {
		err := acpagent.Serve(context.Background(), api.NewLocal(f.sup, api.Config{AllowAutonomous: true}), cfg, inR, outW)
		outW.Close()
		inR.Close()
		c.served <- err
	}()
	c.conn = acp.NewClientSideConnection(c.ed, inW, outR)
	c.conn.SetLogger(discard)
	f.t.Cleanup(func() {
		c.close()
		<-c.conn.Done()
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		f.t.Fatal(err)
	}
	return c
}

// close ends the agent's input and waits for Serve to return its result.
func (c *client) close() error {
	c.in.Close()
	err := <-c.served
	c.served <- err // for a later close
	return err
}

func (c *client) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	c.t.Cleanup(cancel)
	return ctx
}

func (c *client) newSession(cwd string, mcp ...acp.McpServer) acp.NewSessionResponse {
	c.t.Helper()
	if mcp == nil {
		mcp = []acp.McpServer{}
	}
	r, err := c.conn.NewSession(c.ctx(), acp.NewSessionRequest{Cwd: cwd, McpServers: mcp})
	if err != nil {
		c.t.Fatal(err)
	}
	return r
}

func (c *client) prompt(session acp.SessionId, text string) (acp.PromptResponse, error) {
	return c.conn.Prompt(c.ctx(), acp.PromptRequest{SessionId: session, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
}

// mustPrompt prompts and returns the response and the run it started.
func (c *client) mustPrompt(session acp.SessionId, text string) (acp.PromptResponse, string) {
	c.t.Helper()
	r, err := c.prompt(session, text)
	if err != nil {
		c.t.Fatalf("prompt %q: %v", text, err)
	}
	return r, runOf(c.t, r)
}

func runOf(t *testing.T, r acp.PromptResponse) string {
	t.Helper()
	d, _ := r.Meta["drover"].(map[string]any)
	id, _ := d["runId"].(string)
	if id == "" {
		t.Fatalf("response without a run id: %+v", r)
	}
	return id
}

// waitFor waits until an update for which match is true arrives.
func (c *client) waitFor(what string, match func(acp.SessionUpdate) bool) {
	c.t.Helper()
	if err := c.ed.WaitUpdate(c.ctx(), match); err != nil {
		c.t.Fatalf("no %s arrived: %v", what, err)
	}
}

// working starts a prompt of the hang agent and waits until it says it
// is working; the returned function waits for the prompt's answer.
func (c *client) working(session acp.SessionId) func() (acp.PromptResponse, error) {
	c.t.Helper()
	answer := c.promptAsync(session, "work")
	c.waitFor("working", editortest.AgentSaid("working"))
	return answer
}

// promptAsync prompts in a goroutine the test waits for.
func (c *client) promptAsync(session acp.SessionId, text string) func() (acp.PromptResponse, error) {
	var wg sync.WaitGroup
	var r acp.PromptResponse
	var err error
	wg.Go(func() { r, err = c.prompt(session, text) })
	c.t.Cleanup(wg.Wait)
	return func() (acp.PromptResponse, error) {
		wg.Wait()
		return r, err
	}
}

// promptAsker prompts the asker agent, which asks to run make; once the
// call has ended (the editor answered, or a rule), the run is told to
// stop and the prompt's answer awaited.
func (c *client) promptAsker(f *fixture, session acp.SessionId) (acp.PromptResponse, string) {
	c.t.Helper()
	answer := c.promptAsync(session, "build it")
	c.waitFor("end of the call", func(u acp.SessionUpdate) bool {
		st := u.ToolCallUpdate
		return st != nil && st.Status != nil && (*st.Status == acp.ToolCallStatusCompleted || *st.Status == acp.ToolCallStatusFailed)
	})
	rs, err := f.st.ListRuns(context.Background(), store.RunFilter{SessionID: string(session), Limit: 1})
	if err != nil || len(rs) != 1 {
		c.t.Fatalf("the session's run: %v, %v", rs, err)
	}
	if err := f.sup.Steer(context.Background(), rs[0].ID, "stop", "test"); err != nil {
		c.t.Fatal(err)
	}
	r, err := answer()
	if err != nil {
		c.t.Fatal(err)
	}
	return r, runOf(c.t, r)
}

// option returns the select config option id of opts.
func option(t *testing.T, opts []acp.SessionConfigOption, id string) *acp.SessionConfigOptionSelect {
	t.Helper()
	for _, o := range opts {
		if o.Select != nil && string(o.Select.Id) == id {
			return o.Select
		}
	}
	t.Fatalf("no config option %q in %+v", id, opts)
	return nil
}

// values are a select option's values.
func values(o *acp.SessionConfigOptionSelect) []string {
	var out []string
	for _, v := range *o.Options.Ungrouped {
		out = append(out, string(v.Value))
	}
	return out
}

// rpcCode returns the JSON-RPC code of err, or 0.
func rpcCode(err error) int {
	var re *acp.RequestError
	if errors.As(err, &re) {
		return re.Code
	}
	return 0
}

// events returns run id's recorded events, decoded.
func (f *fixture) events(id string) []drover.Event {
	f.t.Helper()
	evs, err := f.st.Events(context.Background(), id, 0, 10000)
	if err != nil {
		f.t.Fatal(err)
	}
	out := make([]drover.Event, len(evs))
	for i, e := range evs {
		if err := json.Unmarshal(e.JSON, &out[i]); err != nil {
			f.t.Fatal(err)
		}
	}
	return out
}

func (f *fixture) run(id string) *store.Run {
	f.t.Helper()
	r, err := f.st.GetRun(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

func (f *fixture) options(id string) drover.Options {
	f.t.Helper()
	var o drover.Options
	if err := json.Unmarshal(f.run(id).Options, &o); err != nil {
		f.t.Fatal(err)
	}
	return o
}

func asRequestError(err error, re **acp.RequestError) bool { return errors.As(err, re) }
