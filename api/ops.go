package api

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
)

// Op is one request/response operation of Service as every face carries
// it: the JSON-lines protocol by Name, HTTP by Routes, MCP as a tool when
// an agent may call it, the CLI as `drover api NAME`. Params and results
// are JSON objects; the faces decode params strictly (an unknown field is
// INVALID_REQUEST).
type Op struct {
	// Name is the op's name ("run", "get", …).
	Name string
	// Summary says what the op does, in a sentence: a tool's
	// description, a command's help.
	Summary string
	// Routes are its HTTP routes, "METHOD /path/{field}": a path
	// wildcard fills the params field of that JSON name; a GET takes the
	// other fields from the query string (by JSON name, or a field's
	// `query` tag; lists comma-separated or repeated), a POST from its
	// JSON body.
	Routes []string
	// Created makes HTTP answer 201 Created (a run) rather than 200.
	Created bool
	// Agent lets a client inside a run call it (MCP tools, the nested-run
	// socket), through Confine: never an op that answers permission
	// requests.
	Agent bool
	// Blocks says that the op waits for something (await): a face ends
	// it when its client goes away. Other ops that change something are
	// carried out whatever the client does once asked.
	Blocks bool

	params reflect.Type
	call   func(ctx context.Context, s Service, params any) (any, error)
}

// NewParams returns a pointer to a zero value of the op's params, to
// decode into.
func (op Op) NewParams() any { return reflect.New(op.params).Interface() }

// ParamsType is the op's params type.
func (op Op) ParamsType() reflect.Type { return op.params }

// Call performs the op on s with params: a pointer from NewParams, or a
// value of the params type.
func (op Op) Call(ctx context.Context, s Service, params any) (any, error) {
	return op.call(ctx, s, params)
}

// CallJSON decodes params strictly (no unknown field; empty means none)
// and performs the op on s.
func (op Op) CallJSON(ctx context.Context, s Service, params []byte) (any, error) {
	p := op.NewParams()
	if len(strings.TrimSpace(string(params))) > 0 {
		dec := json.NewDecoder(strings.NewReader(string(params)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(p); err != nil {
			return nil, Errorf(CodeInvalidRequest, "%s: %v", op.Name, err)
		}
	}
	return op.call(ctx, s, p)
}

// Define makes the Op named name of method m of Service (o carries the
// rest: routes, Agent, …). A face given a table with it carries it like
// the ops of Ops.
func Define[P, R any](name, summary string, m func(Service, context.Context, P) (R, error), o Op) Op {
	o.Name, o.Summary = name, summary
	o.params = reflect.TypeFor[P]()
	o.call = func(ctx context.Context, s Service, params any) (any, error) {
		var p P
		switch v := params.(type) {
		case *P:
			p = *v
		case P:
			p = v
		}
		return m(s, ctx, p)
	}
	return o
}

// Ops are the request/response operations of Service, each once.
var Ops = []Op{
	Define("run", "Start an agent on a task; returns the run's id at once.", Service.Run,
		Op{Routes: []string{"POST /v1/runs"}, Created: true, Agent: true}),
	Define("check", "Say whether a run would start, and how, without starting or recording anything.", Service.Check,
		Op{Routes: []string{"POST /v1/runs/check"}, Agent: true}),
	Define("get", "Show a run (children, messages, tool calls, open permission requests, the usage of its tree) or a session (its runs).", Service.Get,
		Op{Routes: []string{"GET /v1/runs/{runId}", "GET /v1/sessions/{sessionId}"}, Agent: true}),
	Define("list", "List runs, newest first, by status, agent, session, parent and time.", Service.List,
		Op{Routes: []string{"GET /v1/runs"}, Agent: true}),
	Define("sessions", "List sessions, most recently updated first.", Service.Sessions,
		Op{Routes: []string{"GET /v1/sessions"}}),
	Define("events", "A run's recorded events after a seq, exactly as recorded.", Service.Events,
		Op{Routes: []string{"GET /v1/runs/{runId}/events"}, Agent: true}),
	Define("await", "Wait until runs have ended and return their records.", Service.Await,
		Op{Routes: []string{"GET /v1/runs/{runId}/await"}, Agent: true, Blocks: true}),
	Define("cancel", "Cancel a run and its children; a run that has ended is not an error.", Service.Cancel,
		Op{Routes: []string{"POST /v1/runs/{runId}/cancel"}, Agent: true}),
	Define("respond", "Answer a run's permission request: allow or deny.", Service.Respond,
		Op{Routes: []string{"POST /v1/runs/{runId}/respond"}}),
	Define("steer", "Send a message into a live run; the agent sees it at its next step.", Service.Steer,
		Op{Routes: []string{"POST /v1/runs/{runId}/steer"}, Agent: true}),
	Define("interrupt", "End a live run's current turn and keep its session.", Service.Interrupt,
		Op{Routes: []string{"POST /v1/runs/{runId}/interrupt"}, Agent: true}),
	Define("change", "A run's change to its git repository: base, files with +/-, the patch, the check, its review state and decisions.", Service.Change,
		Op{Routes: []string{"GET /v1/runs/{runId}/change"}, Agent: true}),
	Define("apply", "Apply a run's change to the working tree it came from, whole or not at all.", Service.Apply,
		Op{Routes: []string{"POST /v1/runs/{runId}/apply"}, Agent: true}),
	Define("merge", "Merge a run's branch into the current branch (one squashed commit unless noSquash).", Service.Merge,
		Op{Routes: []string{"POST /v1/runs/{runId}/merge"}, Agent: true}),
	Define("discard", "Remove a run's workspace and branch: its change is discarded.", Service.Discard,
		Op{Routes: []string{"POST /v1/runs/{runId}/discard"}, Agent: true}),
	Define("revise", "Send a run's change back: a new run in its session and workspace, with what to change.", Service.Revise,
		Op{Routes: []string{"POST /v1/runs/{runId}/revise"}, Created: true, Agent: true}),
	Define("compare", "Set runs side by side: status, cost, duration, files changed, +/-, the check's result.", Service.Compare,
		Op{Routes: []string{"GET /v1/compare"}, Agent: true}),
	Define("gc", "Remove the workspaces and branches of runs whose change was decided (or that changed nothing) longer ago than olderThan.", Service.Collect,
		Op{Routes: []string{"POST /v1/gc"}}),
	Define("requests", "List every permission request waiting for an answer, across all running runs (the inbox).", Service.Requests,
		Op{Routes: []string{"GET /v1/requests"}}),
	Define("agents", "List the agents drover can run: installed, version, tiers, what they honour.", Service.Agents,
		Op{Routes: []string{"GET /v1/agents"}, Agent: true}),
	Define("info", "Say which drover answers and which version of its API.", Service.Info,
		Op{Routes: []string{"GET /v1/info"}, Agent: true}),
}

// Lookup returns the op named name.
func Lookup(name string) (Op, bool) {
	for _, op := range Ops {
		if op.Name == name {
			return op, true
		}
	}
	return Op{}, false
}
