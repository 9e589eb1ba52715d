package acpagent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	"github.com/drover-run/drover/internal/agenttest"
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
				{Type: drover.TypeToolUse, Payload: drover.ToolUsePayload{ToolName: "Read", ToolUseID: "tr1", Input: map[string]any{"file_path": "/w/main.go"}}},
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

// asks asks to run "make" (tool use "tu1", request "q1"), passes the
// answer on, reports the call's result as the answer says and ends
// successfully.
func asks() *agenttest.Agent {
	return &agenttest.Agent{Name: "asks",
		Caps: &drover.Capabilities{Tiers: drover.Tiers(), Resume: true, Permissions: true},
		Fn: func(ctx context.Context, req drover.Request, y func(drover.Event, error) bool) {
			input := map[string]any{"command": "make"}
			if !y(drover.Event{Type: drover.TypeToolUse, Payload: drover.ToolUsePayload{ToolName: "Bash", ToolUseID: "tu1", Input: input}}, nil) ||
				!y(drover.Event{Type: drover.TypePermissionRequest, Payload: drover.PermissionRequestPayload{RequestID: "q1",
					ToolName: "Bash", ToolUseID: "tu1", Input: input}}, nil) {
				return
			}
			for {
				select {
				case <-ctx.Done():
					return
				case <-req.Live.Ready():
				}
				for _, in := range req.Live.Take() {
					if !y(in.Event(), nil) {
						return
					}
					if in.Answer == nil {
						continue
					}
					st := drover.ToolDenied
					if in.Answer.Behavior == drover.Allow {
						st = drover.ToolSuccess
					}
					y(drover.Event{Type: drover.TypeToolResult, Payload: drover.ToolResultPayload{ToolUseID: "tu1", ToolName: "Bash", Status: st}}, nil)
					y(drover.Event{Type: drover.TypeDone, Payload: drover.DonePayload{Status: drover.StatusSuccess, ResumeToken: "tok"}}, nil)
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
	for _, a := range []drover.Adapter{echo(), asks(), hang(), agenttest.Asker(true)} {
		if err := reg.Register(a); err != nil {
			t.Fatal(err)
		}
	}
	sup, err := runs.New(context.Background(), drover.NewEngine(reg), st, runs.Config{Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sup.Close() })
	return &fixture{t: t, st: st, sup: sup, reg: reg}
}

// client is the editor: the SDK's client side over in-memory pipes to
// acpagent.Serve. It records every update and answers permission
// questions with answer (nil: it waits until the question is withdrawn,
// then says "cancelled").
type client struct {
	t    *testing.T
	conn *acp.ClientSideConnection
	in   *io.PipeWriter // the agent's input
	out  *io.PipeReader // the agent's output
	// served is Serve's result, once it has returned.
	served chan error

	mu      sync.Mutex
	updates []acp.SessionNotification
	asked   []acp.RequestPermissionRequest
	answer  func(acp.RequestPermissionRequest) *acp.PermissionOptionId
	// questions receives each question as it arrives.
	questions chan acp.RequestPermissionRequest
	// withdrawn receives the tool call id of each question whose context
	// ended before an answer (drover withdrew it).
	withdrawn chan string
	// seen receives every update as it arrives.
	seen chan acp.SessionUpdate
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
	c := &client{t: f.t, in: inW, out: outR, served: make(chan error, 1), questions: make(chan acp.RequestPermissionRequest, 16),
		withdrawn: make(chan string, 16), seen: make(chan acp.SessionUpdate, 4096)}
	go func() {
		err := acpagent.Serve(context.Background(), f.sup, cfg, inR, outW)
		outW.Close()
		inR.Close()
		c.served <- err
	}()
	c.conn = acp.NewClientSideConnection(c, inW, outR)
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

// take returns the updates received so far and forgets them.
func (c *client) take() []acp.SessionUpdate {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []acp.SessionUpdate
	for _, n := range c.updates {
		out = append(out, n.Update)
	}
	c.updates = nil
	return out
}

func (c *client) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.updates = append(c.updates, n)
	c.seen <- n.Update
	return nil
}

func (c *client) RequestPermission(ctx context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	c.mu.Lock()
	c.asked = append(c.asked, p)
	answer := c.answer
	c.mu.Unlock()
	c.questions <- p
	if answer != nil {
		if id := answer(p); id != nil {
			return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeSelected(*id)}, nil
		}
	}
	<-ctx.Done()
	c.withdrawn <- string(p.ToolCall.ToolCallId)
	return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeCancelled()}, nil
}

func (c *client) setAnswer(fn func(acp.RequestPermissionRequest) *acp.PermissionOptionId) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.answer = fn
}

// waitFor waits until an update for which match is true arrives.
func (c *client) waitFor(what string, match func(acp.SessionUpdate) bool) {
	c.t.Helper()
	ctx := c.ctx()
	for {
		select {
		case u := <-c.seen:
			if match(u) {
				return
			}
		case <-ctx.Done():
			c.t.Fatalf("no %s arrived", what)
		}
	}
}

// question waits for the next permission question.
func (c *client) question() acp.RequestPermissionRequest {
	c.t.Helper()
	select {
	case q := <-c.questions:
		return q
	case <-c.ctx().Done():
		c.t.Fatal("no permission question arrived")
	}
	return acp.RequestPermissionRequest{}
}

func agentSaid(text string) func(acp.SessionUpdate) bool {
	return func(u acp.SessionUpdate) bool {
		return u.AgentMessageChunk != nil && u.AgentMessageChunk.Content.Text != nil && u.AgentMessageChunk.Content.Text.Text == text
	}
}

// chooseKind answers with the option of that kind, as ACP asks clients to.
func chooseKind(kind acp.PermissionOptionKind) func(acp.RequestPermissionRequest) *acp.PermissionOptionId {
	return func(p acp.RequestPermissionRequest) *acp.PermissionOptionId {
		for _, o := range p.Options {
			if o.Kind == kind {
				return &o.OptionId
			}
		}
		return nil
	}
}

func choose(id string) func(acp.RequestPermissionRequest) *acp.PermissionOptionId {
	return func(acp.RequestPermissionRequest) *acp.PermissionOptionId { return acp.Ptr(acp.PermissionOptionId(id)) }
}

func (c *client) ReadTextFile(context.Context, acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	return acp.ReadTextFileResponse{}, errors.New("drover asked to read a file")
}

func (c *client) WriteTextFile(context.Context, acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	return acp.WriteTextFileResponse{}, errors.New("drover asked to write a file")
}

func (c *client) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, errors.New("drover asked for a terminal")
}

func (c *client) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, errors.New("no terminals")
}

func (c *client) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, errors.New("no terminals")
}

func (c *client) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, errors.New("no terminals")
}

func (c *client) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, errors.New("no terminals")
}

// describe renders updates compactly for comparison: one string each.
func describe(us []acp.SessionUpdate) []string {
	var out []string
	for _, u := range us {
		switch {
		case u.UserMessageChunk != nil:
			out = append(out, "user "+u.UserMessageChunk.Content.Text.Text)
		case u.AgentMessageChunk != nil:
			out = append(out, "agent "+u.AgentMessageChunk.Content.Text.Text)
		case u.AgentThoughtChunk != nil:
			out = append(out, "thought "+u.AgentThoughtChunk.Content.Text.Text)
		case u.ToolCall != nil:
			out = append(out, fmt.Sprintf("tool_call %s %s %s %q", u.ToolCall.ToolCallId, u.ToolCall.Kind, u.ToolCall.Status, u.ToolCall.Title))
		case u.ToolCallUpdate != nil:
			st := ""
			if u.ToolCallUpdate.Status != nil {
				st = string(*u.ToolCallUpdate.Status)
			}
			out = append(out, fmt.Sprintf("tool_call_update %s %s", u.ToolCallUpdate.ToolCallId, st))
		case u.Plan != nil:
			out = append(out, fmt.Sprintf("plan %d", len(u.Plan.Entries)))
		case u.ConfigOptionUpdate != nil:
			out = append(out, "config_option_update")
		case u.CurrentModeUpdate != nil:
			out = append(out, "current_mode_update "+string(u.CurrentModeUpdate.CurrentModeId))
		default:
			b, _ := json.Marshal(u)
			out = append(out, string(b))
		}
	}
	return out
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
