// Package api is drover's one service interface (API-1): every operation a
// client can perform on runs — start, check, get, list, await, cancel,
// answer, steer, interrupt, follow — and on sessions and agents, defined
// once. Local implements it in-process over a runs.Supervisor; the HTTP
// client of `drover serve` (server.Client) implements it remotely; Confine
// narrows it to one run's subtree for a client inside a run. The faces —
// HTTP (server), the JSON-lines protocol (protocol), MCP (mcpserver), ACP
// (acpagent) and the CLI — translate; they do not decide.
//
// Ops lists the request/response operations with what every face needs to
// carry them (a name, HTTP routes, whether an agent may call it): an
// operation added to Service and Ops reaches every face. The three
// streams (Follow, FollowAll, WatchRuns) are carried by each face's one
// streaming mechanism (protocol subscriptions, SSE).
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
)

// Version is the version of the service's wire form (HTTP, the JSON-lines
// protocol): a client of another version is refused, with a message that
// says so, rather than half-understood.
const Version = 1

// Service is every operation a client can perform. Errors are *Error
// (errors.As), whose Code says what kind of failure it is; in-process,
// they also wrap the underlying error (errors.Is(err,
// engine.ErrAlreadyAnswered) holds). Operations that change something are
// carried out even when ctx ends after they began.
type Service interface {
	// Run starts a run and returns its id and session at once (RUN-1).
	// Unknown agent, invalid options, unknown session or inactive parent:
	// VALIDATION_ERROR or NOT_FOUND; more than the caller may have:
	// BOUNDARY_VIOLATION; a supervisor that cannot start it: RUN_FAILED.
	Run(ctx context.Context, p RunParams) (*runs.Started, error)
	// Check says what Run would answer p, starting and recording nothing:
	// the plan it would run, or Run's error.
	Check(ctx context.Context, p RunParams) (*CheckResult, error)
	// Get returns one run with its children, turn record, open permission
	// requests and, when it has children, the usage of its tree; or one
	// session with its runs, newest first. Unknown ids are NOT_FOUND.
	Get(ctx context.Context, p GetParams) (*GetResult, error)
	// List returns runs matching p, newest first.
	List(ctx context.Context, p ListParams) (*RunsResult, error)
	// Sessions returns sessions, most recently updated first.
	Sessions(ctx context.Context, p SessionsParams) (*SessionsResult, error)
	// Events returns a run's recorded events after p.AfterSeq (LED-2),
	// exactly as recorded. An unknown run is NOT_FOUND.
	Events(ctx context.Context, p EventsParams) (*EventsResult, error)
	// Await blocks until every named run has ended and returns their
	// records in order (RUN-2): a failed run is a result, not an error.
	Await(ctx context.Context, p AwaitParams) (*RunsResult, error)
	// Cancel ends a run; idempotent (RUN-3): a finished or unknown run is
	// not an error.
	Cancel(ctx context.Context, p RunIDParams) (struct{}, error)
	// Respond answers a run's permission request (CTL-1): NOT_FOUND for an
	// unknown run or request, CONFLICT when it already has its answer or
	// the run is not running, VALIDATION_ERROR for a behavior other than
	// allow or deny.
	Respond(ctx context.Context, p RespondParams) (struct{}, error)
	// Steer sends a user message into a live run (CTL-3): NOT_FOUND,
	// CONFLICT as Respond; VALIDATION_ERROR for an empty message or an
	// agent that takes none while it runs.
	Steer(ctx context.Context, p SteerParams) (struct{}, error)
	// Interrupt ends a live run's current turn and keeps its session
	// (CTL-3). Errors as Steer.
	Interrupt(ctx context.Context, p InterruptParams) (struct{}, error)
	// Change returns a run's change (WS-2): base, files, patch, check,
	// state and decisions. NOT_FOUND for a run that worked in no git
	// repository.
	Change(ctx context.Context, p RunIDParams) (*store.Change, error)
	// Apply applies a run's change to the user's working tree, whole or
	// not at all (WS-3): CONFLICT, naming the files, when a part does not
	// apply (nothing changed), when it was decided already or the tree
	// holds it; VALIDATION_ERROR for a run in place or without change.
	Apply(ctx context.Context, p DecideParams) (*store.Change, error)
	// Merge merges a run's branch into the user's current branch (WS-3),
	// errors as Apply.
	Merge(ctx context.Context, p MergeParams) (*store.Change, error)
	// Discard removes a run's workspace and branch (WS-3).
	Discard(ctx context.Context, p DecideParams) (*store.Change, error)
	// Revise sends a run's change back: a new run in its session and
	// workspace whose change includes it (WS-3).
	Revise(ctx context.Context, p ReviseParams) (*runs.Started, error)
	// Compare sets runs side by side: status, cost, duration, change and
	// check (WS-4).
	Compare(ctx context.Context, p CompareParams) (*CompareResult, error)
	// Collect removes the workspaces and branches of decided runs (WS-3).
	Collect(ctx context.Context, p CollectParams) (*CollectResult, error)
	// Requests lists every permission request waiting for an answer
	// across the running runs of the ledger, oldest first: the inbox.
	Requests(ctx context.Context, p RequestsParams) (*RequestsResult, error)
	// Agents lists the agents the service can run, their availability
	// and what they honour.
	Agents(ctx context.Context, p AgentsParams) (*AgentsResult, error)
	// Info says which drover answers and which version of this API.
	Info(ctx context.Context, p InfoParams) (*Info, error)

	// Follow yields the events of p.Runs after p.AfterSeq as they are
	// recorded, by batches of one run's events that became durable
	// together, until every run has ended and every event was yielded;
	// an error is yielded last. Unknown runs are NOT_FOUND, yielded first.
	Follow(ctx context.Context, p FollowParams) iter.Seq2[[]store.Event, error]
	// FollowAll yields the events of every run from the ledger's log
	// (runs.Supervisor.FollowLog): after p.AfterCursor, or, without it,
	// the runs live now from their first event, a marker (an Event with
	// no RunID whose Cursor is where the log continues), then the log.
	// On Local, "now" is when FollowAll is called, not when the iteration
	// begins, so a face that calls it before answering its client follows
	// every run the client starts after the answer; the clients of a
	// remote service start where the log is when the iteration begins.
	FollowAll(ctx context.Context, p FollowAllParams) iter.Seq2[store.Event, error]
	// WatchRuns yields the newest p.Limit runs and the live ones, oldest
	// first, then, each time run records change, the records that did: a
	// live list of runs. The first batch may be empty.
	WatchRuns(ctx context.Context, p WatchParams) iter.Seq2[[]store.Run, error]
}

// RunParams are what "run" and "check" take.
type RunParams struct {
	// Agent is an agent id or alias ("claude").
	Agent  string `json:"agent" jsonschema:"the agent to run, an id from agents (e.g. claude-code, codex); the aliases claude and gemini work too"`
	Prompt string `json:"prompt" jsonschema:"the task for the agent"`
	// Options of the run (drover.Options' JSON form: timeouts as duration
	// strings or milliseconds). options.sessionId continues a drover
	// session (LED-4); options.timeout is the run's timeout (RUN-4), else
	// the supervisor's default.
	Options *drover.Options `json:"options,omitempty" jsonschema:"the run's options: tier, cwd, model, timeout, maxTurns, …"`
	// Parent makes the run a child of an active run (RUN-5).
	Parent string `json:"parent,omitempty" jsonschema:"make the run a child of this active run"`
	// Fork starts a new session from the end of this earlier run.
	Fork string `json:"fork,omitempty" jsonschema:"start a new session from the end of this earlier run"`
	// NewSession creates the session options.sessionId names for the
	// run's conversation, rather than continuing it (a client that names
	// its sessions itself: an ACP editor). It must not exist yet.
	NewSession bool `json:"newSession,omitempty" jsonschema:"create the session options.sessionId names, for a new conversation"`
	// Labels and Retries are for a service that queues runs for workers
	// (drover serve --queue, docs/scale-out.md): only workers carrying
	// every label may run it, and it is run anew up to Retries times if
	// its worker is lost. Refused (VALIDATION) by one that runs runs
	// itself.
	Labels  []string `json:"labels,omitempty" jsonschema:"for a queued run: only workers with all these labels may run it"`
	Retries int      `json:"retries,omitempty" jsonschema:"for a queued run: how many times it is run again if its worker is lost"`
}

// CheckResult is what "check" answers for a run Run would start.
type CheckResult struct {
	// Agent is the run's agent by its canonical id.
	Agent string `json:"agent"`
	// Tier is the run's permission tier.
	Tier drover.Tier `json:"tier"`
	// Contained says whether the run would be contained by the kernel;
	// Containment why not.
	Contained   bool   `json:"contained"`
	Containment string `json:"containment,omitempty"`
	// Agents are the agents of its failover chain, its own first.
	Agents []string `json:"agents"`
	// Asks says that its agent asks before tool calls that need approval
	// (Capabilities.Permissions): its permission requests wait for an
	// answer, within its approval timeout.
	Asks bool `json:"asks"`
}

// checkResult describes plan p.
func checkResult(p *engine.Plan) *CheckResult {
	c := p.Containment()
	return &CheckResult{Agent: p.Agent(), Tier: p.Tier(), Contained: c.On, Containment: c.Reason, Agents: p.Agents(),
		Asks: p.Adapter().Capabilities().Permissions}
}

// AwaitParams name the runs "await" waits for: runId, runs, or both.
type AwaitParams struct {
	RunID string   `json:"runId,omitempty" jsonschema:"the run's id"`
	Runs  []string `json:"runs,omitempty" jsonschema:"more runs' ids"`
}

// ids are the runs of p, runId first.
func (p AwaitParams) ids() []string {
	if p.RunID != "" {
		return append([]string{p.RunID}, p.Runs...)
	}
	return p.Runs
}

// RunsResult is the result of "await" and "list": run records.
type RunsResult struct {
	Runs []store.Run `json:"runs"`
	// Changes are, for "list", the changes of those runs that worked in a
	// git repository, without their patches.
	Changes []store.Change `json:"changes,omitempty"`
}

// RunIDParams name one run.
type RunIDParams struct {
	RunID string `json:"runId" jsonschema:"the run's id"`
}

// RespondParams are the answer to a run's permission request (CTL-1).
type RespondParams struct {
	RunID     string `json:"runId"`
	RequestID string `json:"requestId"`
	drover.PermissionDecision
	// By names who answers, recorded with the answer; default the face's
	// name ("protocol", "http", …).
	By string `json:"by,omitempty"`
}

// SteerParams are a user message into a live run (CTL-3).
type SteerParams struct {
	RunID   string `json:"runId" jsonschema:"the run's id"`
	Message string `json:"message" jsonschema:"the message the agent sees at its next step"`
	By      string `json:"by,omitempty" jsonschema:"who sends it, recorded with it"`
}

// InterruptParams end a run's current turn, keeping its session (CTL-3).
type InterruptParams struct {
	RunID string `json:"runId" jsonschema:"the run's id"`
	By    string `json:"by,omitempty" jsonschema:"who interrupts, recorded with it"`
}

// GetParams name a run or a session.
type GetParams struct {
	RunID     string `json:"runId,omitempty" jsonschema:"the run's id"`
	SessionID string `json:"sessionId,omitempty" jsonschema:"a session's id, instead of a run's"`
	// RecordOnly asks for a run's record alone: no children, turn record,
	// open requests or tree usage.
	RecordOnly bool `json:"recordOnly,omitempty" jsonschema:"only the run's record, without children, messages and tool calls"`
}

// GetResult is a run with its children and turn record, or a session with
// its runs.
type GetResult struct {
	Run       *store.Run       `json:"run,omitempty"`
	Children  []store.Run      `json:"children,omitempty"`
	Messages  []store.Message  `json:"messages,omitempty"`
	ToolCalls []store.ToolCall `json:"toolCalls,omitempty"`
	// Pending are the run's permission requests waiting for an answer.
	Pending []drover.PermissionRequestPayload `json:"pending,omitempty"`
	// Total is the run's usage with its descendants' (MCP-1's cost
	// roll-up), present when the run has children.
	Total *runs.TreeUsage `json:"total,omitempty"`
	// Change is the run's change to its git repository, without its
	// patch (WS-2); none when it worked in no repository.
	Change  *store.Change  `json:"change,omitempty"`
	Session *store.Session `json:"session,omitempty"`
	Runs    []store.Run    `json:"runs,omitempty"`
}

// ListParams filter "list"; zero fields do not filter.
type ListParams struct {
	Status  []store.RunStatus `json:"status,omitempty" jsonschema:"only runs in these statuses: pending, running, completed, failed"`
	Agent   string            `json:"agent,omitempty" jsonschema:"only runs of this agent"`
	Session string            `json:"session,omitempty" jsonschema:"only runs of this session"`
	Parent  string            `json:"parent,omitempty" jsonschema:"only children of this run"`
	Since   time.Time         `json:"since,omitzero" jsonschema:"only runs created since then (RFC 3339)"`
	// Limit is at most this many runs, newest first; 0 means 100.
	Limit int `json:"limit,omitempty" jsonschema:"at most this many runs, newest first; default 100"`
}

// SessionsParams bound "sessions".
type SessionsParams struct {
	// Limit is at most this many sessions; 0 means 100.
	Limit int `json:"limit,omitempty"`
}

// SessionsResult is the result of "sessions".
type SessionsResult struct {
	Sessions []store.Session `json:"sessions"`
}

// EventsParams page through a run's events.
type EventsParams struct {
	RunID    string `json:"runId" jsonschema:"the run's id"`
	AfterSeq int64  `json:"afterSeq,omitempty" query:"after" jsonschema:"only events with a seq above this"`
	// Limit is at most this many events; 0 means 1000, at most 10000.
	Limit int `json:"limit,omitempty" jsonschema:"at most this many events; default 1000, at most 10000"`
}

// EventsResult are UES events exactly as recorded, in seq order; More says
// that events after the last one exist.
type EventsResult struct {
	Events []json.RawMessage `json:"events"`
	More   bool              `json:"more"`
}

// RequestsParams select the waiting permission requests "requests"
// lists.
type RequestsParams struct {
	Agent string `json:"agent,omitempty" jsonschema:"only this agent's runs"`
}

// RequestsResult is the result of "requests": the inbox.
type RequestsResult struct {
	Requests []runs.Waiting `json:"requests"`
}

// AgentsParams take nothing.
type AgentsParams struct{}

// AgentsResult is the result of "agents".
type AgentsResult struct {
	Agents []AgentInfo `json:"agents"`
}

// AgentInfo is one agent the service can run: whether its CLI is
// installed (on the service's machine), its version, and what it honours.
type AgentInfo struct {
	ID string `json:"id"`
	drover.Availability
	// Tiers are the tiers it can enforce.
	Tiers        []drover.Tier       `json:"tiers"`
	Capabilities drover.Capabilities `json:"capabilities"`
	// Configured marks an agent added by configuration (drover agents
	// add), not built in.
	Configured bool `json:"configured,omitempty"`
}

// InfoParams take nothing.
type InfoParams struct{}

// Info says which drover answers.
type Info struct {
	// API is the version of the service's wire form (Version).
	API int `json:"api"`
	// Drover is drover's own version, "devel" for a build from source.
	Drover string `json:"drover"`
}

// FollowParams name the runs "follow" yields.
type FollowParams struct {
	Runs     []string `json:"runs"`
	AfterSeq int64    `json:"afterSeq,omitempty"`
}

// FollowAllParams say where "follow all" begins: after a ledger cursor, or
// (nil) with the runs live now.
type FollowAllParams struct {
	AfterCursor *int64 `json:"afterCursor,omitempty"`
}

// WatchParams bound "watch runs".
type WatchParams struct {
	// Limit is how many of the newest runs are watched besides the live
	// ones; 0 means 100, at most 1000.
	Limit int `json:"limit,omitempty"`
}

// Watch limits of WatchParams.
const (
	DefaultWatchLimit = 100
	MaxWatchLimit     = 1000
)

// Error codes of a failed operation (PRO-1).
const (
	// CodeInvalidRequest: not a request (bad JSON, missing or mistyped
	// fields, unknown op or field, an oversize line or body).
	CodeInvalidRequest = "INVALID_REQUEST"
	// CodeNotFound: no run, session, request or subscription with that id.
	CodeNotFound = "NOT_FOUND"
	// CodeValidation: well formed but not acceptable (unknown agent,
	// invalid options, parent not active).
	CodeValidation = "VALIDATION_ERROR"
	// CodeRunFailed: a valid run could not be started (the supervisor is
	// closing, the ledger refused it).
	CodeRunFailed = "RUN_FAILED"
	// CodeBoundaryViolation: more than the caller may have: the
	// autonomous tier where the operator has not allowed it, directories
	// outside a parent's (BND-1), a write boundary around drover's own
	// state (BND-3).
	CodeBoundaryViolation = "BOUNDARY_VIOLATION"
	// CodeConflict: the request does not apply to the run as it is now:
	// a permission request already answered (the first wins), a run that
	// is not running.
	CodeConflict = "CONFLICT"
	// CodeInternal: drover failed to answer (the ledger could not be
	// read); the request may be retried.
	CodeInternal = "INTERNAL_ERROR"
	// CodeUnauthorized: no token, or not the service's.
	CodeUnauthorized = "UNAUTHORIZED"
	// CodeIncompatible: the client and the service speak different
	// versions of this API (Version).
	CodeIncompatible = "INCOMPATIBLE_VERSION"
)

// Error is a failed operation's error, the same in every face: Code says
// what kind of failure, Message what happened. In-process it wraps the
// error it was made from (Unwrap).
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	err     error
}

// Error implements error.
func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Unwrap returns the error e was made from, in-process; nil when it came
// over the wire.
func (e *Error) Unwrap() error { return e.err }

// Errorf returns an *Error of code.
func Errorf(code, format string, a ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, a...)}
}

// ErrorOf classifies err as an *Error: one already is; the store's and
// the engine's errors by what they mean; anything else INTERNAL_ERROR.
// ErrorOf(nil) is nil.
func ErrorOf(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	code := CodeInternal
	var de *drover.Error
	switch {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, engine.ErrRequestNotFound):
		code = CodeNotFound
	case errors.Is(err, engine.ErrAlreadyAnswered), errors.Is(err, engine.ErrNotLive), errors.Is(err, store.ErrConflict):
		code = CodeConflict
	case errors.Is(err, engine.ErrNotSupported), errors.Is(err, drover.ErrUnknownAgent), errors.Is(err, runs.ErrParentEnded):
		code = CodeValidation
	case errors.As(err, &de) && (de.Code == drover.CodeValidation || de.Code == drover.CodeUnsupportedOption || de.Code == drover.CodeUnknownAgent):
		code = CodeValidation
	case errors.As(err, &de) && de.Code == drover.CodeBoundaryViolation:
		code = CodeBoundaryViolation
	}
	return &Error{Code: code, Message: err.Error(), err: err}
}

// CodeOf is the code of ErrorOf(err), "" for nil.
func CodeOf(err error) string {
	if err == nil {
		return ""
	}
	return ErrorOf(err).Code
}

// clientKey is the context key of WithClient.
type clientKey struct{}

// WithClient returns ctx naming the face a request came through
// ("protocol", "http", "mcp", "acp", a CLI command): recorded with the
// answers and steering messages that name nobody else.
func WithClient(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, clientKey{}, name)
}

// by is who a request says answers, else the face it came through.
func by(ctx context.Context, named string) string {
	if named != "" {
		return named
	}
	if c, _ := ctx.Value(clientKey{}).(string); c != "" {
		return c
	}
	return "client"
}
