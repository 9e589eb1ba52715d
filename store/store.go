// Package store is drover's ledger: the durable record of every run, its
// events, its turn record (messages and tool calls) and the sessions runs
// continue. Backends live in subpackages (store/sqlite; PostgreSQL later)
// and must all pass the contract suite in store/storetest.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/drover-run/drover"
)

// Errors returned by every backend.
var (
	// ErrNotFound: no run or session with that id.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the change does not apply to the record's current state
	// (e.g. finishing a run that already ended, a duplicate id or seq).
	ErrConflict = errors.New("conflict")
)

// RunStatus is where a run is in its life: pending → running → completed |
// failed (RUN-1).
type RunStatus string

// Run statuses.
const (
	StatusPending   RunStatus = "pending"
	StatusRunning   RunStatus = "running"
	StatusCompleted RunStatus = "completed"
	StatusFailed    RunStatus = "failed"
)

// Terminal reports whether s is completed or failed.
func (s RunStatus) Terminal() bool { return s == StatusCompleted || s == StatusFailed }

// Why a run failed, when drover ended it rather than the agent.
const (
	ReasonTimeout       = "timeout"
	ReasonIdleTimeout   = "idle timeout"
	ReasonCancelled     = "cancelled"
	ReasonParentEnded   = "parent ended"
	ReasonEngineRestart = "engine restart"
	// ReasonInterrupted: the run's turn was interrupted (CTL-3); its
	// session can be continued.
	ReasonInterrupted = "interrupted"
)

// Run is one agent run as the ledger records it.
type Run struct {
	ID     string    `json:"id"`
	Agent  string    `json:"agent"`
	Prompt string    `json:"prompt"`
	Status RunStatus `json:"status"`
	// Error says why a failed run failed: a Reason* constant or the agent's
	// own error message.
	Error    string `json:"error,omitempty"`
	ParentID string `json:"parentId,omitempty"`
	// SessionID is the drover session the run belongs to (LED-4).
	SessionID string `json:"sessionId,omitempty"`
	// ResumeToken is the vendor's token from the run's done event.
	ResumeToken string `json:"resumeToken,omitempty"`
	// Options are the drover.Options of the run, as JSON.
	Options json.RawMessage `json:"options,omitempty"`
	Timeout time.Duration   `json:"timeout,omitempty"`
	// Owner names the drover process supervising the run ("host:pid").
	Owner string `json:"owner,omitempty"`
	// Pid and Pgid of the vendor process, once running (0 before).
	Pid  int `json:"pid,omitempty"`
	Pgid int `json:"pgid,omitempty"`

	CreatedAt time.Time `json:"createdAt"`
	StartedAt time.Time `json:"startedAt,omitzero"`
	EndedAt   time.Time `json:"endedAt,omitzero"`

	// Set when the run has ended.
	DoneStatus drover.DoneStatus `json:"doneStatus,omitempty"`
	Usage      drover.Usage      `json:"usage"`
	DurationMs int64             `json:"durationMs,omitempty"`
	// Allowed counts the run's permission requests that were allowed and
	// Denied its tool calls that were denied (by a person, a rule, the
	// deadline or the vendor), both written with its end.
	Allowed int `json:"allowed,omitempty"`
	Denied  int `json:"denied,omitempty"`
	// LastSeq is the seq of the run's last recorded event.
	LastSeq int64 `json:"lastSeq"`
	// CancelRequested is set by RequestCancel; the owner polls it, so a run
	// can be cancelled from another process.
	CancelRequested bool `json:"cancelRequested,omitempty"`
}

// Outcome is how r stands or ended, in drover's one vocabulary
// (drover.Outcome): from its status, its done status and why it failed.
func (r Run) Outcome() drover.Outcome {
	switch r.Status {
	case StatusPending:
		return drover.OutcomePending
	case StatusRunning:
		return drover.OutcomeRunning
	case StatusCompleted:
		return drover.OutcomeCompleted
	}
	switch r.DoneStatus {
	case drover.StatusMaxTurns:
		return drover.OutcomeMaxTurns
	case drover.StatusMaxBudget:
		return drover.OutcomeMaxBudget
	}
	switch {
	case r.Error == ReasonInterrupted:
		return drover.OutcomeInterrupted
	case r.Error == ReasonTimeout || r.Error == ReasonIdleTimeout:
		return drover.OutcomeTimedOut
	case r.Error == ReasonParentEnded || strings.HasPrefix(r.Error, ReasonCancelled):
		return drover.OutcomeCancelled
	case r.DoneStatus == drover.StatusInterrupted && r.Error == "":
		return drover.OutcomeCancelled
	}
	return drover.OutcomeFailed
}

// MarshalJSON is a run's JSON with its outcome, so that every face shows
// the same word for it.
func (r Run) MarshalJSON() ([]byte, error) {
	type plain Run
	return json.Marshal(struct {
		plain
		Outcome drover.Outcome `json:"outcome"`
	}{plain(r), r.Outcome()})
}

// Event is one recorded UES event of a run (LED-2).
type Event struct {
	RunID string
	Seq   int64
	Type  drover.EventType
	// JSON is the event exactly as drover emits it (with runId and seq).
	JSON json.RawMessage
	Time time.Time
	// Cursor is the event's place in the ledger's commit order across all
	// runs, set on events read back (EventsAfter, Events); it is ignored
	// when appending. See EventsAfter.
	Cursor int64
}

// Message is one entry of a run's turn record (LED-3).
type Message struct {
	RunID     string `json:"runId"`
	Index     int    `json:"index"`
	Role      string `json:"role"` // user, assistant, tool
	Content   string `json:"content"`
	ToolUseID string `json:"toolUseId,omitempty"`
	// Seq, when not 0, records the message by reference to the run's event
	// with that seq, which holds its content: a "text" event is an
	// assistant message, a "tool_result" event a tool message (its output
	// and tool use id), a "drover:steer" event a user message sent into the
	// live run. Role, Content and ToolUseID are then those of the event,
	// whatever the fields say, so the ledger need not store the content
	// twice. Not part of the JSON form.
	Seq int64 `json:"-"`
	// Span, for a message recorded by reference, is how many messages it
	// stands for: Index, Index+1, … read from the events Seq, Seq+1, …
	// (a run of consecutive message events, as a long streamed turn is);
	// 0 and 1 mean one. FinishRun takes spans, so that a run of a million
	// messages ends without a million entries in memory;
	// Messages returns every message on its own. Not part of the JSON
	// form.
	Span int `json:"-"`
}

// ToolCall is one tool call of a run's turn record (LED-3).
type ToolCall struct {
	RunID     string            `json:"runId"`
	ID        string            `json:"id"`
	Name      string            `json:"name"`
	Input     json.RawMessage   `json:"input,omitempty"`
	Status    drover.ToolStatus `json:"status,omitempty"`
	Output    string            `json:"output,omitempty"`
	StartedAt time.Time         `json:"startedAt"`
	EndedAt   time.Time         `json:"endedAt,omitzero"`
	// Seq and ResultSeq, when not 0, record the call by reference to the
	// run's events (as Message.Seq does): ID, Name, Input and StartedAt
	// (the event's Time) are then those of the "tool_use" event Seq;
	// Status, Output and EndedAt those of the "tool_result" event
	// ResultSeq. Not part of the JSON form.
	Seq       int64 `json:"-"`
	ResultSeq int64 `json:"-"`
	// Permission is how the call's permission request was answered (CTL-1),
	// when it needed one: by reference only, to the
	// "drover:permission_answer" event PermissionSeq (read back from it).
	Permission    *ToolPermission `json:"permission,omitempty"`
	PermissionSeq int64           `json:"-"`
}

// ToolPermission is the answer a tool call's permission request got.
type ToolPermission struct {
	RequestID  string              `json:"requestId"`
	Behavior   drover.Behavior     `json:"behavior"`
	Message    string              `json:"message,omitempty"`
	Always     bool                `json:"always,omitempty"`
	By         drover.AnswerSource `json:"by"`
	Detail     string              `json:"detail,omitempty"`
	AskedAt    time.Time           `json:"askedAt"`
	AnsweredAt time.Time           `json:"answeredAt"`
}

// Finish is everything recorded when a run ends, written in one
// transaction (LED-3): final status and accounting plus the turn record.
type Finish struct {
	RunID       string
	Status      RunStatus // completed or failed
	Error       string
	DoneStatus  drover.DoneStatus
	ResumeToken string
	Usage       drover.Usage
	DurationMs  int64
	Allowed     int // see Run.Allowed
	Denied      int // see Run.Denied
	EndedAt     time.Time
	Messages    []Message
	ToolCalls   []ToolCall
	// SessionID, with a ResumeToken, moves that session's head to this run
	// in the same transaction (LED-3, LED-4), as AdvanceSession does at
	// EndedAt. A session that does not exist is left alone: the run's end
	// is still recorded.
	SessionID string
}

// Session is a drover session: runs that continue one vendor conversation (LED-4).
type Session struct {
	ID    string `json:"id"`
	Agent string `json:"agent"`
	// ResumeToken is the vendor token that continues the conversation now.
	ResumeToken string `json:"resumeToken,omitempty"`
	// HeadRunID is the run whose state the session continues from.
	HeadRunID string `json:"headRunId,omitempty"`
	// Heads are all former heads, oldest first (the session's turns).
	Heads     []string  `json:"heads"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// Kinds of control messages.
const (
	ControlRespond   = "respond"   // Payload: a ControlAnswer
	ControlSteer     = "steer"     // Payload: {"message": "..."}
	ControlInterrupt = "interrupt" // no payload
)

// ControlMessage is an instruction for a run's owner from another process
// (PostControl): an answer to a permission request, a steering message, an
// interrupt.
type ControlMessage struct {
	ID      int64           `json:"id"`
	RunID   string          `json:"runId"`
	Kind    string          `json:"kind"`
	Payload json.RawMessage `json:"payload,omitempty"`
	// By names who sent it ("drover approve", "http", …).
	By        string    `json:"by,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

// ControlAnswer is the payload of a ControlRespond message.
type ControlAnswer struct {
	RequestID string `json:"requestId"`
	drover.PermissionDecision
}

// ChangeState is where a run's change is in its review (WS-3).
type ChangeState string

// The states of a run's change.
const (
	// ChangeOpen: the run is still working in its workspace (or its
	// drover ended before it could read the change: the next one reads it
	// from the workspace).
	ChangeOpen ChangeState = "open"
	// ChangeNone: the run ended having changed nothing.
	ChangeNone ChangeState = "none"
	// ChangePending: the run ended with a change waiting for a decision.
	ChangePending ChangeState = "pending"
	// ChangeApplied, ChangeMerged, ChangeDiscarded: the decisions of
	// drover apply, merge and discard.
	ChangeApplied   ChangeState = "applied"
	ChangeMerged    ChangeState = "merged"
	ChangeDiscarded ChangeState = "discarded"
	// ChangeRevised: a later run continued the work in the same
	// workspace (drover revise); that run's change includes this one's.
	ChangeRevised ChangeState = "revised"
)

// ChangeFile is one file of a run's change set.
type ChangeFile struct {
	Path string `json:"path"`
	// From is the path a renamed file had.
	From string `json:"from,omitempty"`
	// Kind is added, modified, deleted or renamed.
	Kind string `json:"kind"`
	// Added and Removed count lines; a binary file has neither.
	Added   int  `json:"added"`
	Removed int  `json:"removed"`
	Binary  bool `json:"binary,omitempty"`
}

// ChangeCheck is the result of the command a run's change was checked
// with in its workspace after the run (WS-4, drover run --check).
type ChangeCheck struct {
	Command  string `json:"command"`
	Passed   bool   `json:"passed"`
	ExitCode int    `json:"exitCode"`
	// Output is the tail of its standard output and error.
	Output     string `json:"output,omitempty"`
	DurationMs int64  `json:"durationMs"`
}

// ChangeDecision is one decision about a run's change: who took it, when,
// and which.
type ChangeDecision struct {
	// Action is the state the decision moved the change to.
	Action ChangeState `json:"action"`
	By     string      `json:"by"`
	At     time.Time   `json:"at"`
	// Detail says more: the revising run's id, the commit a merge made.
	Detail string `json:"detail,omitempty"`
}

// Change is a run's change to a git repository as the ledger records it
// (WS-2) and what was decided about it (WS-3).
type Change struct {
	RunID string `json:"runId"`
	// Repo is the top of the user's working tree.
	Repo string `json:"repo"`
	// Base is the commit the run's work started from, in full.
	Base string `json:"base"`
	// Branch, Workspace and Commit are those of a run in a workspace of
	// its own (--worktree): its branch in Repo (refs/heads/Branch), the
	// directory it worked in ("" once removed), and the commit on Branch
	// that holds the change ("" when there is none). A run in place has
	// none of them.
	Branch    string `json:"branch,omitempty"`
	Workspace string `json:"workspace,omitempty"`
	Commit    string `json:"commit,omitempty"`
	// Start is, for a run in place, the tree its working tree held when
	// it started: the change is the difference from it.
	Start string       `json:"start,omitempty"`
	Files []ChangeFile `json:"files"`
	// Patch is the change as git apply takes it, binary files included;
	// "" when it was over the ledger's limit (Truncated) or has not been
	// read (lists).
	Patch     string       `json:"patch,omitempty"`
	Truncated bool         `json:"truncated,omitempty"`
	Check     *ChangeCheck `json:"check,omitempty"`
	State     ChangeState  `json:"state"`
	// Decisions are the change's decisions, oldest first; RecordChange
	// ignores them.
	Decisions []ChangeDecision `json:"decisions,omitempty"`
	CreatedAt time.Time        `json:"createdAt"`
	UpdatedAt time.Time        `json:"updatedAt"`
}

// ChangeFilter selects changes for ListChanges; zero fields do not filter.
type ChangeFilter struct {
	RunIDs []string
	States []ChangeState
	// Before: UpdatedAt < Before.
	Before time.Time
	// Patches asks for the patches too (lists leave them out).
	Patches bool
}

// RunFilter selects runs for ListRuns; zero fields do not filter.
type RunFilter struct {
	Status    []RunStatus
	Agent     string
	SessionID string
	ParentID  string
	Since     time.Time // CreatedAt >= Since
	Limit     int       // 0 = no limit
}

// Store is the ledger. Implementations are safe for concurrent use by many
// goroutines, and several processes may share one ledger.
type Store interface {
	// CreateRun records a new run; ErrConflict if the id exists. A zero
	// Status becomes pending and a zero CreatedAt now (both written back to
	// r); LastSeq is ignored: it is always derived from the events.
	CreateRun(ctx context.Context, r *Run) error
	// StartRun moves a pending run to running with its process ids, at
	// at. For a run already running it replaces the process ids and keeps
	// the start time: a run may start a second process (the resume
	// fallback does), and RUN-6 must stop the live one. ErrNotFound if
	// unknown, ErrConflict if it has ended.
	StartRun(ctx context.Context, id string, pid, pgid int, at time.Time) error
	// FinishRun records a run's end in one transaction (LED-3), from
	// pending or running (a run can end before it ever ran, RUN-6);
	// ErrNotFound if unknown, ErrConflict if it already ended. Two messages
	// with the same Index are an error and nothing is written; so is a
	// reference (Message.Seq, ToolCall.Seq or ResultSeq) past the run's
	// last recorded event (ErrConflict).
	FinishRun(ctx context.Context, f Finish) error
	// GetRun returns one run; ErrNotFound if unknown.
	GetRun(ctx context.Context, id string) (*Run, error)
	// ListRuns returns runs matching f, newest first.
	ListRuns(ctx context.Context, f RunFilter) ([]Run, error)
	// Children returns the runs whose parent is id, oldest first; none for
	// an unknown id.
	Children(ctx context.Context, id string) ([]Run, error)
	// RequestCancel marks a run for cancellation by its owner; unknown or
	// ended runs are not an error (RUN-3).
	RequestCancel(ctx context.Context, id string) error
	// CancelsRequested returns those of the runs named whose cancellation
	// was requested (RequestCancel), in no particular order; unknown ids
	// are left out. An owner polls its runs with it: one query for all,
	// not one per run.
	CancelsRequested(ctx context.Context, runIDs []string) ([]string, error)

	// AppendEvents records events in one transaction. A run's first seq is
	// 1; within a run, events must be in seq order and continue the run's
	// last seq (a gap, a duplicate or seq ≤ 0 is ErrConflict); an unknown
	// run is ErrNotFound. On error nothing of the batch is written. The
	// event JSON is stored and returned byte for byte.
	AppendEvents(ctx context.Context, evs []Event) error
	// Events returns a run's events with seq > afterSeq, in order, at most
	// limit (0 = all); none for an unknown run.
	Events(ctx context.Context, runID string, afterSeq int64, limit int) ([]Event, error)
	// EventsAfter returns the events of every run with Cursor > cursor, in
	// cursor order, at most limit (0 = all): the ledger's log of events, to
	// follow all runs at once and resume after the last cursor seen. An
	// event committed after another has a larger cursor, and once a reader
	// has seen cursor c no event with a cursor ≤ c appears later, so
	// following EventsAfter from the last cursor read misses nothing.
	// Cursors are positive; they need not be contiguous.
	EventsAfter(ctx context.Context, cursor int64, limit int) ([]Event, error)
	// LastCursor is the cursor of the last committed event, 0 if none.
	LastCursor(ctx context.Context) (int64, error)
	// Messages and ToolCalls return a run's turn record (tool calls in the
	// order given to FinishRun); empty for an unknown run. Entries recorded
	// by reference come back with their Seq fields and the content of the
	// events they name; a reference to an event of the wrong type is an
	// error.
	Messages(ctx context.Context, runID string) ([]Message, error)
	ToolCalls(ctx context.Context, runID string) ([]ToolCall, error)

	// PutSession creates or replaces a session.
	PutSession(ctx context.Context, s *Session) error
	// AdvanceSession moves a session's head to runID with the new resume
	// token, keeping the former head in Heads; ErrNotFound if unknown.
	AdvanceSession(ctx context.Context, id, runID, resumeToken string, at time.Time) error
	// GetSession returns one session; ErrNotFound if unknown.
	GetSession(ctx context.Context, id string) (*Session, error)
	// ListSessions returns sessions, most recently updated first, at most
	// limit (0 = all).
	ListSessions(ctx context.Context, limit int) ([]Session, error)

	// Unfinished returns runs left pending or running, oldest first (for
	// reconciliation at start-up, RUN-6).
	Unfinished(ctx context.Context) ([]Run, error)

	// PostControl queues m for the process that owns m.RunID (CTL-1,
	// CTL-3): how another process answers, steers or interrupts a run it
	// does not own. It sets m.ID (increasing) and, when zero,
	// m.CreatedAt. ErrNotFound for an unknown run, ErrConflict for one
	// that has ended.
	PostControl(ctx context.Context, m *ControlMessage) error
	// TakeControls returns the queued messages of the runs named, oldest
	// first, and removes them: each message is taken once, however many
	// processes take at the same time. FinishRun discards a run's
	// messages nobody took.
	TakeControls(ctx context.Context, runIDs []string) ([]ControlMessage, error)

	// RecordChange records the change of run c.RunID (WS-2), replacing
	// the one it had: a run in a workspace is recorded open when it
	// starts, then with its change when it ends. Every field but
	// Decisions, CreatedAt and UpdatedAt is written as given (an empty
	// State is an error); CreatedAt is that of the run's first record
	// (now when zero) and later records keep it whatever they say,
	// UpdatedAt is now (both written back to c). Decisions already taken
	// stay. ErrNotFound for an unknown run; a run that has ended is no
	// error.
	RecordChange(ctx context.Context, c *Change) error
	// GetChange returns a run's change with its patch and decisions;
	// ErrNotFound when none is recorded.
	GetChange(ctx context.Context, runID string) (*Change, error)
	// ListChanges returns the changes f selects, newest UpdatedAt first,
	// with their decisions, and their patches only when f.Patches.
	ListChanges(ctx context.Context, f ChangeFilter) ([]Change, error)
	// DecideChange records d on a run's change and moves it to state
	// d.Action (UpdatedAt now), in one transaction, when its state is one
	// of from (any, when from is empty); otherwise nothing is written and
	// the error is ErrConflict. Of deciders racing from one state, in any
	// processes, one wins. ErrNotFound when the run has no change. A zero
	// d.At is now; an empty d.Action is an error.
	DecideChange(ctx context.Context, runID string, d ChangeDecision, from ...ChangeState) error

	// Close releases the store; pending writes are flushed first. Closing
	// again returns the first result.
	Close() error
}

// AsyncAppender is an optional interface of a Store: a batched event writer
// that never makes its caller wait for the disk. A supervisor finds it by
// type assertion and records through it; without it, each event is one
// AppendEvents call.
type AsyncAppender interface {
	// AppendAsync queues ev and returns a channel that receives exactly
	// one value: nil once ev is durably committed, or the error
	// AppendEvents would have returned for it. Until then ev.JSON must not
	// be modified. Events one goroutine queues are committed in that
	// order, so a run's events keep their seq order without waiting for
	// each commit.
	AppendAsync(ev Event) <-chan error
}
