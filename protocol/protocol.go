// Package protocol is drover's client protocol (docs/requirements.md §8, PRO-1, PRO-2):
// JSON objects, one a line, exchanged with a program that drives drover.
//
// A request is {"id":N,"op":"…", …fields of the op}; its response carries
// the same id and either "result" or "error":{"code","message"}. Events of
// subscriptions arrive as {"subscription":"sub_1","event":{…}} with no id.
// docs/protocol.md describes every op with examples.
//
// The package has three parts: [Server] executes operations against a
// runs.Supervisor and its ledger, independent of any transport; [Conn] is
// one JSON-lines connection over a Server (decoding, concurrency,
// subscriptions, a bounded outbound queue); [Serve] runs a Conn over a
// reader and a writer (stdio). [Client] is the Go side of a connection.
package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
)

// Error codes of a response's error (PRO-1).
const (
	// CodeInvalidRequest: the line is not a request (bad JSON, missing or
	// mistyped id or op, unknown op, unknown or mistyped field, oversize line).
	CodeInvalidRequest = "INVALID_REQUEST"
	// CodeNotFound: no run, session or subscription with that id.
	CodeNotFound = "NOT_FOUND"
	// CodeValidation: the request is well formed but its values are not
	// acceptable (unknown agent, invalid options, parent not active).
	CodeValidation = "VALIDATION_ERROR"
	// CodeRunFailed: a run could not be started although the request was
	// valid (the supervisor is closing, the ledger refused the run).
	CodeRunFailed = "RUN_FAILED"
	// CodeBoundaryViolation: the request asks for more than this server
	// or the run's parent allows: the autonomous tier on a server that
	// does not allow it, directories outside a parent's (BND-1), a write
	// boundary around drover's own state (BND-3).
	CodeBoundaryViolation = "BOUNDARY_VIOLATION"
	// CodeConflict: the request does not apply to the run as it is now: a
	// permission request that already has its answer (the first wins), a
	// run that is not running (not started yet, or ended).
	CodeConflict = "CONFLICT"
	// CodeInternal: drover failed to answer (e.g. the ledger could not be
	// read). Not in the list of PRO-1; the request may be retried.
	CodeInternal = "INTERNAL_ERROR"
)

// Ops of the protocol.
const (
	OpRun         = "run"
	OpAwait       = "await"
	OpCancel      = "cancel"
	OpGet         = "get"
	OpList        = "list"
	OpEvents      = "events"
	OpSubscribe   = "subscribe"
	OpUnsubscribe = "unsubscribe"
	OpRespond     = "respond"
	OpSteer       = "steer"
	OpInterrupt   = "interrupt"
)

// Error is a failed request's error, as sent in a response. Client methods
// return it (errors.As) when the server refused a request.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error implements error.
func (e *Error) Error() string { return e.Code + ": " + e.Message }

func errorf(code, format string, a ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, a...)}
}

// toError classifies err as a protocol error.
func toError(err error) *Error {
	var pe *Error
	if errors.As(err, &pe) {
		return pe
	}
	var de *drover.Error
	switch {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, engine.ErrRequestNotFound):
		return &Error{Code: CodeNotFound, Message: err.Error()}
	case errors.Is(err, engine.ErrAlreadyAnswered), errors.Is(err, engine.ErrNotLive):
		return &Error{Code: CodeConflict, Message: err.Error()}
	case errors.Is(err, engine.ErrNotSupported):
		return &Error{Code: CodeValidation, Message: err.Error()}
	case errors.Is(err, drover.ErrUnknownAgent):
		return &Error{Code: CodeValidation, Message: err.Error()}
	case errors.As(err, &de) && (de.Code == drover.CodeValidation || de.Code == drover.CodeUnsupportedOption || de.Code == drover.CodeUnknownAgent):
		return &Error{Code: CodeValidation, Message: err.Error()}
	case errors.As(err, &de) && de.Code == drover.CodeBoundaryViolation:
		return &Error{Code: CodeBoundaryViolation, Message: err.Error()}
	}
	return &Error{Code: CodeInternal, Message: err.Error()}
}

// RunParams are the fields of a "run" request.
type RunParams struct {
	// Agent is an agent id or alias ("claude").
	Agent  string `json:"agent"`
	Prompt string `json:"prompt"`
	// Options of the run (drover.Options' JSON form: timeouts as duration
	// strings or milliseconds). options.sessionId continues a drover
	// session (LED-4); options.timeout is the run's timeout (RUN-4), else
	// the supervisor's default.
	Options *drover.Options `json:"options,omitempty"`
	// Parent makes the run a child of an active run (RUN-5).
	Parent string `json:"parent,omitempty"`
	// Fork starts a new session from the end of this earlier run.
	Fork string `json:"fork,omitempty"`
	// Labels and Retries are for a server that queues runs for workers
	// (drover serve --queue, docs/scale-out.md): only workers carrying
	// every label may run it, and it is run anew up to Retries times if
	// its worker is lost. Refused (VALIDATION) by a server that runs runs
	// itself.
	Labels  []string `json:"labels,omitempty"`
	Retries int      `json:"retries,omitempty"`
}

// RunResult is the result of "run": the new run's id and its session, at
// once (RUN-1).
type RunResult = runs.Started

// AwaitParams are the fields of an "await" request: runId, runs, or both.
type AwaitParams struct {
	RunID string   `json:"runId,omitempty"`
	Runs  []string `json:"runs,omitempty"`
}

// RunsResult is the result of "await" and "list": run records.
type RunsResult struct {
	Runs []store.Run `json:"runs"`
}

// RunIDParams are the fields of "cancel": one run id.
type RunIDParams struct {
	RunID string `json:"runId"`
}

// RespondParams are the fields of "respond": the answer to a run's
// permission request (CTL-1).
type RespondParams struct {
	RunID     string `json:"runId"`
	RequestID string `json:"requestId"`
	drover.PermissionDecision
	// By names who answers, recorded with the answer; default "protocol"
	// (stdio) or "http".
	By string `json:"by,omitempty"`
}

// SteerParams are the fields of "steer": a user message into a live run
// (CTL-3).
type SteerParams struct {
	RunID   string `json:"runId"`
	Message string `json:"message"`
	By      string `json:"by,omitempty"`
}

// InterruptParams are the fields of "interrupt": end the run's current
// turn, keeping its session (CTL-3).
type InterruptParams struct {
	RunID string `json:"runId"`
	By    string `json:"by,omitempty"`
}

// GetParams are the fields of "get": a run id or a session id.
type GetParams struct {
	RunID     string `json:"runId,omitempty"`
	SessionID string `json:"sessionId,omitempty"`
}

// GetResult is the result of "get": a run with its children and turn
// record, or a session with its runs.
type GetResult struct {
	Run       *store.Run       `json:"run,omitempty"`
	Children  []store.Run      `json:"children,omitempty"`
	Messages  []store.Message  `json:"messages,omitempty"`
	ToolCalls []store.ToolCall `json:"toolCalls,omitempty"`
	// Pending are the run's permission requests waiting for an answer.
	Pending []drover.PermissionRequestPayload `json:"pending,omitempty"`
	// Total is the run's usage with its descendants' (MCP-1's cost
	// roll-up), present when the run has children.
	Total   *runs.TreeUsage `json:"total,omitempty"`
	Session *store.Session  `json:"session,omitempty"`
	Runs    []store.Run     `json:"runs,omitempty"`
}

// ListParams are the fields of "list"; zero fields do not filter.
type ListParams struct {
	Status  []store.RunStatus `json:"status,omitempty"`
	Agent   string            `json:"agent,omitempty"`
	Session string            `json:"session,omitempty"`
	Parent  string            `json:"parent,omitempty"`
	Since   time.Time         `json:"since,omitzero"`
	// Limit is at most this many runs, newest first; 0 means 100.
	Limit int `json:"limit,omitempty"`
}

// EventsParams are the fields of "events".
type EventsParams struct {
	RunID    string `json:"runId"`
	AfterSeq int64  `json:"afterSeq,omitempty"`
	// Limit is at most this many events; 0 means 1000, at most 10000.
	Limit int `json:"limit,omitempty"`
}

// EventsResult is the result of "events": UES events exactly as recorded,
// in seq order; More says that events after the last one exist.
type EventsResult struct {
	Events []json.RawMessage `json:"events"`
	More   bool              `json:"more"`
}

// SubscribeParams are the fields of "subscribe": some runs, or all.
type SubscribeParams struct {
	// Runs are followed from AfterSeq (their whole history with 0).
	Runs     []string `json:"runs,omitempty"`
	AfterSeq int64    `json:"afterSeq,omitempty"`
	// All follows every run: without AfterCursor, the runs live now (each
	// from its first event), then a "synced" notice, then every event of
	// every run as it is recorded, each line with its ledger cursor.
	All bool `json:"all,omitempty"`
	// AfterCursor, with All, resumes: every event recorded after that
	// cursor (the "cursor" of the last line received), of every run.
	AfterCursor *int64 `json:"afterCursor,omitempty"`
}

// SubscribeResult is the result of "subscribe".
type SubscribeResult struct {
	Subscription string `json:"subscription"`
}

// UnsubscribeParams are the fields of "unsubscribe".
type UnsubscribeParams struct {
	Subscription string `json:"subscription"`
}

// TypeLagged is the type of the notice a subscription sends when its
// connection could not take events as fast as they came (PRO-2).
const TypeLagged = "lagged"

// Lagged is the event of a lagged notice: delivery of RunID's events
// paused after AfterSeq; the ones after it follow next, read from the
// ledger, with no gap and no duplicate.
// An all-runs subscription's notice has AfterCursor instead of RunID and
// AfterSeq: delivery paused after that cursor.
type Lagged struct {
	Type        string `json:"type"` // "lagged"
	RunID       string `json:"runId,omitempty"`
	AfterSeq    int64  `json:"afterSeq"`
	AfterCursor int64  `json:"afterCursor,omitempty"`
}

// laggedLog is the lagged notice of an all-runs subscription.
type laggedLog struct {
	Type        string `json:"type"`
	AfterCursor int64  `json:"afterCursor"`
}

// TypeSynced is the type of the notice an all-runs subscription sends once
// it has sent the events so far of the runs live when it began.
const TypeSynced = "synced"

// Synced is the event of a synced notice: the live runs were caught up to
// Cursor; resuming after Cursor (AfterCursor) continues from there.
type Synced struct {
	Type   string `json:"type"` // "synced"
	Cursor int64  `json:"cursor"`
}

// response is one response line.
type response struct {
	ID     json.RawMessage `json:"id"`
	Result any             `json:"result,omitempty"`
	Error  *Error          `json:"error,omitempty"`
}

// eventLine is a subscription's event line; ev is sent verbatim, with the
// event's ledger cursor when not 0 (all-runs subscriptions).
func eventLine(sub string, cursor int64, ev json.RawMessage) []byte {
	var b bytes.Buffer
	b.Grow(len(ev) + len(sub) + 48)
	b.WriteString(`{"subscription":`)
	s, _ := json.Marshal(sub)
	b.Write(s)
	if cursor > 0 {
		b.WriteString(`,"cursor":`)
		b.WriteString(strconv.FormatInt(cursor, 10))
	}
	b.WriteString(`,"event":`)
	b.Write(ev)
	b.WriteByte('}')
	return b.Bytes()
}
