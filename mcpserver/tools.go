package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
)

// RunInput is what run_agent and start_run take.
type RunInput struct {
	Agent          string `json:"agent" jsonschema:"the agent to run, an id from list_agents (e.g. claude-code, codex); the aliases claude and gemini work too"`
	Prompt         string `json:"prompt" jsonschema:"the task for the agent, written as you would write it to a colleague: what to do, where, and what to report back"`
	Tier           string `json:"tier,omitempty" jsonschema:"permission tier: sandbox (no native tools), dry-run (read and search only), supervised (edits files in cwd; shell and everything else needs approval and is denied without one), autonomous (everything). Default: supervised, or lower when this server or its parent run allows less; a tier above those is refused"`
	Cwd            string `json:"cwd,omitempty" jsonschema:"working directory of the agent, absolute or relative to this server's; default: this server's"`
	Model          string `json:"model,omitempty" jsonschema:"model name passed to the agent; default: the agent's own"`
	TimeoutSeconds int    `json:"timeoutSeconds,omitempty" jsonschema:"end the run as failed (timeout) after this many seconds; default: one hour"`
}

// AwaitInput is what await_run takes.
type AwaitInput struct {
	RunID          string `json:"runId" jsonschema:"the run's id, as run_agent or start_run returned it"`
	TimeoutSeconds int    `json:"timeoutSeconds,omitempty" jsonschema:"stop waiting after this many seconds and return the run as it is then (still running); default: wait until it ends"`
}

// RunIDInput names one run.
type RunIDInput struct {
	RunID string `json:"runId" jsonschema:"the run's id, as run_agent or start_run returned it"`
}

// Run is a run as the tools report it.
type Run struct {
	RunID  string `json:"runId" jsonschema:"the run's id"`
	Agent  string `json:"agent" jsonschema:"the agent that runs it"`
	Status string `json:"status" jsonschema:"pending (waiting for a slot), running, completed or failed"`
	Error  string `json:"error,omitempty" jsonschema:"why a failed run failed: timeout, cancelled, parent ended, or the agent's own error"`
	Result string `json:"result,omitempty" jsonschema:"the agent's final text, once the run has ended"`
	// Usage is the run's own, without its children's (see RunDetail.Total).
	Usage      drover.Usage `json:"usage" jsonschema:"tokens, tool calls and cost in USD (when the agent reports one) of this run alone"`
	DurationMs int64        `json:"durationMs,omitempty" jsonschema:"how long the run took, once ended"`
	SessionID  string       `json:"sessionId,omitempty" jsonschema:"the drover session the run belongs to"`
	ParentID   string       `json:"parentId,omitempty" jsonschema:"the run this run is a child of"`
}

// RunDetail is what get_run reports: a run with its prompt, children and
// the usage of its whole tree.
type RunDetail struct {
	Run
	Prompt   string          `json:"prompt" jsonschema:"the task the run was given"`
	Children []Child         `json:"children" jsonschema:"the runs started from inside this run, oldest first"`
	Total    runs.TreeUsage  `json:"total" jsonschema:"usage summed over this run and all its descendants, with the number of runs summed and of those without a cost"`
	Pending  []PendingAnswer `json:"pending,omitempty" jsonschema:"permission requests of the run waiting for an answer (drover approve or deny RUN REQUEST)"`
}

// Child is one child of a run.
type Child struct {
	RunID  string `json:"runId"`
	Agent  string `json:"agent"`
	Status string `json:"status"`
}

// PendingAnswer is a permission request of a run that has no answer yet.
type PendingAnswer struct {
	RequestID string `json:"requestId"`
	ToolName  string `json:"toolName"`
}

// Agents is what list_agents reports.
type Agents struct {
	Agents []Agent `json:"agents"`
}

// Agent is one agent drover can run.
type Agent struct {
	ID        string        `json:"id" jsonschema:"the id to pass as agent"`
	Installed bool          `json:"installed" jsonschema:"whether its CLI was found"`
	Version   string        `json:"version,omitempty" jsonschema:"the version of its CLI"`
	Tested    bool          `json:"tested" jsonschema:"whether drover was tested with that version"`
	Error     string        `json:"error,omitempty" jsonschema:"why it is not available"`
	Tiers     []drover.Tier `json:"tiers" jsonschema:"the tiers it can enforce"`
}

// tools give the service's ops that an agent uses most a name and shape
// made for models; every other agent-callable op (api.Op.Agent) is a tool
// named as in this table, or by its op name, taking the op's params and
// returning its result. The one table of how MCP maps the service.
var tools = map[string]string{
	"run": "start_run", "await": "await_run", "get": "get_run", "cancel": "cancel_run", "agents": "list_agents",
	"check": "check_run", "list": "list_runs", "events": "run_events", "steer": "steer_run", "interrupt": "interrupt_run",
	"info": "drover_info", "change": "run_change", "apply": "apply_change", "merge": "merge_change", "discard": "discard_change",
	"revise": "revise_run", "compare": "compare_runs",
}

// toolName is the tool of op.
func toolName(op string) string {
	if n, ok := tools[op]; ok {
		return n
	}
	return op
}

func (s *Server) addTools() {
	idem, open := true, true
	runSchema := schemaFor[RunInput]()
	runSchema.Properties["tier"].Enum = []any{"sandbox", "dry-run", "supervised", "autonomous"}
	add(s, &mcp.Tool{Name: "run_agent", InputSchema: runSchema,
		Description: "Run an AI coding agent on a task and wait until it ends; returns its final text, status, usage and cost, and the run's id. " +
			"The run is recorded in drover's ledger (as a child of the run this server works for, if any). " +
			"For long or parallel work use start_run and await_run instead.",
		Annotations: &mcp.ToolAnnotations{Title: "Run an agent", DestructiveHint: &open, OpenWorldHint: &open}},
		func(ctx context.Context, in RunInput) (*mcp.CallToolResult, Run, error) {
			started, err := s.start(ctx, in)
			if err != nil {
				return nil, Run{}, err
			}
			return s.await(ctx, started.RunID, 0, true)
		})
	curated := map[string]func(){
		"run": func() {
			add(s, &mcp.Tool{Name: toolName("run"), InputSchema: runSchema,
				Description: "Start an AI coding agent on a task and return the run's id at once, without waiting; the run goes on in the background. " +
					"Follow it with await_run or get_run, stop it with cancel_run. Runs still going when this MCP session ends are cancelled.",
				Annotations: &mcp.ToolAnnotations{Title: "Start a run", DestructiveHint: &open, OpenWorldHint: &open}},
				func(ctx context.Context, in RunInput) (*mcp.CallToolResult, runs.Started, error) {
					started, err := s.start(ctx, in)
					if err != nil {
						return nil, runs.Started{}, err
					}
					return nil, *started, nil
				})
		},
		"await": func() {
			add(s, &mcp.Tool{Name: toolName("await"), InputSchema: schemaFor[AwaitInput](),
				Description: "Wait until a run has ended and return its final text, status, usage and cost; with timeoutSeconds, return the run as it is when that time is up.",
				Annotations: &mcp.ToolAnnotations{Title: "Await a run", ReadOnlyHint: true, IdempotentHint: idem}},
				func(ctx context.Context, in AwaitInput) (*mcp.CallToolResult, Run, error) {
					if in.TimeoutSeconds < 0 {
						return nil, Run{}, errors.New("timeoutSeconds must not be negative")
					}
					if _, err := s.record(ctx, in.RunID); err != nil {
						return nil, Run{}, err
					}
					return s.await(ctx, in.RunID, time.Duration(in.TimeoutSeconds)*time.Second, false)
				})
		},
		"get": func() {
			add(s, &mcp.Tool{Name: toolName("get"), InputSchema: schemaFor[RunIDInput](),
				Description: "Show a run as drover records it now: status, prompt, final text once ended, its own usage and cost, its children, " +
					"the usage and cost of its whole tree, and permission requests waiting for an answer.",
				Annotations: &mcp.ToolAnnotations{Title: "Show a run", ReadOnlyHint: true, IdempotentHint: idem}},
				func(ctx context.Context, in RunIDInput) (*mcp.CallToolResult, RunDetail, error) {
					if in.RunID == "" {
						return nil, RunDetail{}, errors.New("runId is required")
					}
					g, err := s.svc.Get(ctx, api.GetParams{RunID: in.RunID})
					if err != nil {
						return nil, RunDetail{}, refusal(err)
					}
					return nil, s.detail(ctx, g), nil
				})
		},
		"cancel": func() {
			add(s, &mcp.Tool{Name: toolName("cancel"), InputSchema: schemaFor[RunIDInput](),
				Description: "Cancel a run and its children: the agent is stopped and the run fails as cancelled. Returns the run as it ended. " +
					"Cancelling a run that has already ended changes nothing.",
				Annotations: &mcp.ToolAnnotations{Title: "Cancel a run", DestructiveHint: &open, IdempotentHint: idem}},
				func(ctx context.Context, in RunIDInput) (*mcp.CallToolResult, Run, error) {
					if in.RunID == "" {
						return nil, Run{}, errors.New("runId is required")
					}
					if _, err := s.svc.Cancel(ctx, api.RunIDParams{RunID: in.RunID}); err != nil {
						return nil, Run{}, refusal(err)
					}
					// The owner stops the agent within a moment (within its poll
					// for a run of another drover process); a run that takes
					// longer is reported as it is.
					return s.await(ctx, in.RunID, cancelWait, false)
				})
		},
		"agents": func() {
			add(s, &mcp.Tool{Name: toolName("agents"), InputSchema: schemaFor[struct{}](),
				Description: "List the agents drover can run, whether each is installed, its version, and the permission tiers it enforces.",
				Annotations: &mcp.ToolAnnotations{Title: "List agents", ReadOnlyHint: true, IdempotentHint: idem}},
				func(ctx context.Context, _ struct{}) (*mcp.CallToolResult, Agents, error) {
					as, err := s.svc.Agents(ctx, api.AgentsParams{})
					if err != nil {
						return nil, Agents{}, refusal(err)
					}
					out := Agents{Agents: []Agent{}}
					for _, a := range as.Agents {
						out.Agents = append(out.Agents, Agent{ID: a.ID, Installed: a.Installed, Version: a.Version, Tested: a.Tested, Error: a.Error, Tiers: a.Tiers})
					}
					return nil, out, nil
				})
		},
	}
	for _, op := range s.cfg.Ops {
		switch {
		case !op.Agent:
		case curated[op.Name] != nil:
			curated[op.Name]()
		default:
			s.addOp(op)
		}
	}
}

// addOp offers op as a tool of its params and result.
func (s *Server) addOp(op api.Op) {
	in, err := jsonschema.ForType(op.ParamsType(), nil)
	if err != nil {
		panic(err) // a programming error in the api types, caught by every test
	}
	tool := &mcp.Tool{Name: toolName(op.Name), Description: op.Summary, InputSchema: in}
	s.mcp.AddTool(tool, func(ctx context.Context, req *mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
		defer func() {
			if p := recover(); p != nil {
				s.log().Error("mcp: tool panicked", "tool", tool.Name, "panic", p, "stack", string(debug.Stack()))
				res, err = nil, fmt.Errorf("drover: internal error in %s: %v", tool.Name, p)
			}
		}()
		out, err := op.CallJSON(api.WithClient(ctx, "mcp"), s.svc, req.Params.Arguments)
		if err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: api.ErrorOf(err).Message}}}, nil
		}
		body, err := json.Marshal(out)
		if err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(body)}}, StructuredContent: json.RawMessage(body)}, nil
	})
}

// refusal is the service's error as a tool says it: its message.
func refusal(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return errors.New(api.ErrorOf(err).Message)
}

// cancelWait is how long cancel_run waits for the run to end.
const cancelWait = 30 * time.Second

// add registers a tool whose handler cannot crash the server: a panic
// becomes a tool error, as does any error it returns (the SDK turns a
// returned error into a result with isError set and the error's text).
func add[In, Out any](s *Server, t *mcp.Tool, h func(context.Context, In) (*mcp.CallToolResult, Out, error)) {
	mcp.AddTool(s.mcp, t, func(ctx context.Context, _ *mcp.CallToolRequest, in In) (res *mcp.CallToolResult, out Out, err error) {
		defer func() {
			if p := recover(); p != nil {
				s.log().Error("mcp: tool panicked", "tool", t.Name, "panic", p, "stack", string(debug.Stack()))
				var zero Out
				res, out, err = nil, zero, fmt.Errorf("drover: internal error in %s: %v", t.Name, p)
			}
		}()
		return h(ctx, in)
	})
}

// schemaFor is the input schema of In, for a tool that changes it (the
// tier's enum) or shares it.
func schemaFor[In any]() *jsonschema.Schema {
	sc, err := jsonschema.For[In](nil)
	if err != nil {
		panic(err) // a programming error in the types above, caught by every test
	}
	return sc
}

// record is run id's record, when it is within the server's reach.
func (s *Server) record(ctx context.Context, id string) (*store.Run, error) {
	if id == "" {
		return nil, errors.New("runId is required")
	}
	g, err := s.svc.Get(ctx, api.GetParams{RunID: id, RecordOnly: true})
	if err != nil {
		return nil, refusal(err)
	}
	return g.Run, nil
}

// await waits for run id to end, or for wait (0: no limit), and reports
// it. A failed run is a tool error whose structured content is still the
// run. When the client gives up (ctx ends) on a run that waiting was part
// of (own: run_agent), the run is cancelled: nobody would take its result.
func (s *Server) await(ctx context.Context, id string, wait time.Duration, own bool) (*mcp.CallToolResult, Run, error) {
	wctx := ctx
	if wait > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	_, err := s.svc.Await(wctx, api.AwaitParams{RunID: id})
	switch {
	case err == nil:
	case ctx.Err() != nil:
		if own {
			_, _ = s.svc.Cancel(context.WithoutCancel(ctx), api.RunIDParams{RunID: id})
		}
		return nil, Run{}, fmt.Errorf("stopped waiting for run %s: %w", id, context.Cause(ctx))
	case wctx.Err() == nil:
		return nil, Run{}, refusal(err)
	}
	// The run ended, or wait is up: report it as the ledger has it now.
	r, err := s.record(context.WithoutCancel(ctx), id)
	if err != nil {
		return nil, Run{}, err
	}
	out := s.summary(context.WithoutCancel(ctx), r)
	if r.Status == store.StatusFailed {
		body, err := json.Marshal(out)
		if err != nil {
			return nil, Run{}, err
		}
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{
			Text: fmt.Sprintf("run %s (%s) failed: %s\n%s", r.ID, r.Agent, r.Error, body)}}}, out, nil
	}
	return nil, out, nil
}

// summary is run r as the tools report it, with its final text once ended.
func (s *Server) summary(ctx context.Context, r *store.Run) Run {
	out := Run{RunID: r.ID, Agent: r.Agent, Status: string(r.Status), Error: r.Error, Usage: r.Usage,
		DurationMs: r.DurationMs, SessionID: r.SessionID, ParentID: r.ParentID}
	if r.Status.Terminal() {
		out.Result = s.resultText(ctx, r)
	}
	return out
}

// resultText is the final text of ended run r: its done event's result,
// else its last assistant message, else "".
func (s *Server) resultText(ctx context.Context, r *store.Run) string {
	if evs, err := s.svc.Events(ctx, api.EventsParams{RunID: r.ID, AfterSeq: max(r.LastSeq-1, 0)}); err == nil && len(evs.Events) > 0 {
		var ev drover.Event
		if json.Unmarshal(evs.Events[len(evs.Events)-1], &ev) == nil {
			if d, ok := ev.Payload.(drover.DonePayload); ok && d.Result != "" {
				return d.Result
			}
		}
	}
	g, err := s.svc.Get(ctx, api.GetParams{RunID: r.ID})
	if err != nil {
		return ""
	}
	for i := len(g.Messages) - 1; i >= 0; i-- {
		if g.Messages[i].Role == "assistant" {
			return g.Messages[i].Content
		}
	}
	return ""
}

// detail is what get_run reports of g.
func (s *Server) detail(ctx context.Context, g *api.GetResult) RunDetail {
	r := g.Run
	d := RunDetail{Run: s.summary(ctx, r), Prompt: r.Prompt, Children: []Child{}}
	for _, c := range g.Children {
		d.Children = append(d.Children, Child{RunID: c.ID, Agent: c.Agent, Status: string(c.Status)})
	}
	if g.Total != nil {
		d.Total = *g.Total
	} else {
		// The service sums a tree only when the run has children.
		d.Total = runs.TreeUsage{Usage: r.Usage, Runs: 1}
		if r.Usage.TotalCostUSD == nil {
			d.Total.WithoutCost = 1
		}
	}
	for _, p := range g.Pending {
		d.Pending = append(d.Pending, PendingAnswer{RequestID: p.RequestID, ToolName: p.ToolName})
	}
	return d
}
