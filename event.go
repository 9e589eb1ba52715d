// Package drover runs AI coding agents (Claude Code, Codex CLI, Gemini CLI,
// OpenCode, ACP agents) as supervised processes behind one interface: one
// event stream (the Unified Event Stream, UES), one permission model, parallel
// runs and clean cancellation.
//
// The root package holds the domain types a library user imports: [Event] and
// its payloads, [Options], the [Adapter] interface, the [Registry] and the
// [Engine]. Vendor adapters live in adapter/<vendor>.
package drover

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// EventType names an event. The nine core types are constants below; an
// extension type is namespaced "vendor:name" (UES-3).
type EventType string

// The nine core event types (UES-2).
const (
	TypeInit              EventType = "init"
	TypeText              EventType = "text"
	TypeTextDelta         EventType = "text_delta"
	TypeThinking          EventType = "thinking"
	TypeToolUse           EventType = "tool_use"
	TypeToolResult        EventType = "tool_result"
	TypePermissionRequest EventType = "permission_request"
	TypeError             EventType = "error"
	TypeDone              EventType = "done"
)

// IsCore reports whether t is one of the nine core types.
func (t EventType) IsCore() bool {
	switch t {
	case TypeInit, TypeText, TypeTextDelta, TypeThinking, TypeToolUse,
		TypeToolResult, TypePermissionRequest, TypeError, TypeDone:
		return true
	}
	return false
}

// IsExtension reports whether t is a well-formed namespaced extension type
// ("vendor:name", both parts non-empty).
func (t EventType) IsExtension() bool {
	ns, name, ok := strings.Cut(string(t), ":")
	return ok && ns != "" && name != ""
}

// Event is one UES event. Its JSON form is exactly UES-1:
// {"type","agent","timestamp","sessionId","payload"?,"metadata"?} plus
// "runId" and "seq" when a supervisor manages the run.
//
// Payload holds the typed payload of a core type (a value such as
// [TextPayload], never a pointer). For an extension type it holds whatever the
// adapter put there; a decoded extension payload is a [json.RawMessage], so
// it round-trips unchanged.
type Event struct {
	Type      EventType      `json:"type"`
	Agent     string         `json:"agent"`
	Timestamp int64          `json:"timestamp"`
	SessionID string         `json:"sessionId"`
	Payload   any            `json:"payload,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
	RunID     string         `json:"runId,omitempty"`
	Seq       int64          `json:"seq,omitempty"`
}

// InitPayload is the payload of "init".
type InitPayload struct {
	Model        string        `json:"model"`
	Cwd          string        `json:"cwd"`
	Tools        []string      `json:"tools"`
	Capabilities *Capabilities `json:"capabilities,omitempty"`
}

// TextPayload is the payload of "text": one complete assistant message.
type TextPayload struct {
	Content string `json:"content"`
}

// TextDeltaPayload is the payload of "text_delta": a streamed fragment of an
// assistant message that a later "text" event repeats in full.
type TextDeltaPayload struct {
	Delta string `json:"delta"`
}

// ThinkingPayload is the payload of "thinking".
type ThinkingPayload struct {
	Summary string `json:"summary"`
}

// ToolUsePayload is the payload of "tool_use". Description is a one-line
// human description for live views (UES-5), see [DescribeCall].
type ToolUsePayload struct {
	ToolName    string         `json:"toolName"`
	ToolUseID   string         `json:"toolUseId"`
	Input       map[string]any `json:"input"`
	Description string         `json:"description,omitempty"`
}

// ToolStatus is the outcome of a tool call.
type ToolStatus string

// Tool call outcomes.
const (
	ToolSuccess ToolStatus = "success"
	ToolError   ToolStatus = "error"
	ToolDenied  ToolStatus = "denied"
)

// ToolResultPayload is the payload of "tool_result".
type ToolResultPayload struct {
	ToolUseID  string     `json:"toolUseId"`
	ToolName   string     `json:"toolName"`
	Status     ToolStatus `json:"status"`
	Output     string     `json:"output"`
	DurationMs *int64     `json:"durationMs,omitempty"`
}

// PermissionRequestPayload is the payload of "permission_request": a tool
// call the agent asks to make (PERM-2, CTL-1). Its answer follows as a
// "drover:permission_answer" event with the same RequestID.
type PermissionRequestPayload struct {
	// RequestID names the request within its run; answers name it.
	RequestID string         `json:"requestId,omitempty"`
	ToolName  string         `json:"toolName"`
	ToolUseID string         `json:"toolUseId"`
	Input     map[string]any `json:"input"`
	// Reason is the vendor's own words for what the call does, if any.
	Reason string `json:"reason,omitempty"`
	// Description is a one-line human description (see DescribeCall).
	Description string `json:"description,omitempty"`
	// Deadline, in Unix milliseconds, is when an unanswered request is
	// denied; 0 when nobody is waited for.
	Deadline int64 `json:"deadline,omitempty"`
	// AnsweredBy is set when the request was answered as it was asked —
	// by a rule, an earlier "always" answer (ByRule) or because nobody
	// could be asked (ByDefault): nobody need be asked; its answer
	// follows.
	AnsweredBy AnswerSource `json:"answeredBy,omitempty"`
}

// ErrorPayload is the payload of "error". Recoverable means the run goes on
// after it; a non-recoverable error is followed by "done".
type ErrorPayload struct {
	Code        ErrorCode `json:"code,omitempty"`
	Message     string    `json:"message"`
	Recoverable bool      `json:"recoverable"`
}

// DoneStatus is how a run ended.
type DoneStatus string

// Run end states carried by "done".
const (
	StatusSuccess     DoneStatus = "success"
	StatusError       DoneStatus = "error"
	StatusInterrupted DoneStatus = "interrupted"
	StatusMaxTurns    DoneStatus = "max_turns"
	StatusMaxBudget   DoneStatus = "max_budget"
)

// Valid reports whether s is one of the five statuses.
func (s DoneStatus) Valid() bool {
	switch s {
	case StatusSuccess, StatusError, StatusInterrupted, StatusMaxTurns, StatusMaxBudget:
		return true
	}
	return false
}

// Usage is what a run consumed. Optional fields are nil when the vendor did
// not report them: never an invented zero.
type Usage struct {
	InputTokens      int64    `json:"inputTokens"`
	OutputTokens     int64    `json:"outputTokens"`
	ToolUses         int64    `json:"toolUses"`
	TotalCostUSD     *float64 `json:"totalCostUsd,omitempty"`
	CacheReadTokens  *int64   `json:"cacheReadTokens,omitempty"`
	CacheWriteTokens *int64   `json:"cacheWriteTokens,omitempty"`
	ReasoningTokens  *int64   `json:"reasoningTokens,omitempty"`
	Turns            *int64   `json:"turns,omitempty"`
	// CostEstimated says TotalCostUSD is drover's estimate from the tokens
	// and its price table (docs/limits.md), the vendor having reported no
	// cost.
	CostEstimated bool `json:"costEstimated,omitempty"`
}

// DonePayload is the payload of "done", the last event of every run.
type DonePayload struct {
	Status      DoneStatus `json:"status"`
	Result      string     `json:"result,omitempty"`
	ResumeToken string     `json:"resumeToken,omitempty"`
	Usage       Usage      `json:"usage"`
	DurationMs  int64      `json:"durationMs"`
}

// NewEvent returns an event of type t for agent and session, stamped with the
// current time in Unix milliseconds. payload may be nil.
func NewEvent(t EventType, agent, sessionID string, payload any) Event {
	return Event{Type: t, Agent: agent, SessionID: sessionID, Timestamp: time.Now().UnixMilli(), Payload: payload}
}

// NewSessionID returns a new unique session id (a random UUIDv4 string).
func NewSessionID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand never fails on supported platforms (Go 1.24+ panics instead).
		panic(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// rawEvent mirrors Event with an undecoded payload.
type rawEvent struct {
	Type      EventType       `json:"type"`
	Agent     string          `json:"agent"`
	Timestamp int64           `json:"timestamp"`
	SessionID string          `json:"sessionId"`
	Payload   json.RawMessage `json:"payload,omitempty"`
	Metadata  map[string]any  `json:"metadata,omitempty"`
	RunID     string          `json:"runId,omitempty"`
	Seq       int64           `json:"seq,omitempty"`
}

// UnmarshalJSON decodes an event, giving core types their typed payload and
// keeping an extension's payload as raw JSON.
func (e *Event) UnmarshalJSON(data []byte) error {
	var r rawEvent
	if err := json.Unmarshal(data, &r); err != nil {
		return err
	}
	*e = Event{Type: r.Type, Agent: r.Agent, Timestamp: r.Timestamp, SessionID: r.SessionID,
		Metadata: r.Metadata, RunID: r.RunID, Seq: r.Seq}
	if len(r.Payload) == 0 || bytes.Equal(r.Payload, []byte("null")) {
		return nil
	}
	p, err := decodePayload(r.Type, r.Payload)
	if err != nil {
		return fmt.Errorf("decode %s payload: %w", r.Type, err)
	}
	e.Payload = p
	return nil
}

func decodePayload(t EventType, raw json.RawMessage) (any, error) {
	switch t {
	case TypeInit:
		return decodeAs[InitPayload](raw)
	case TypeText:
		return decodeAs[TextPayload](raw)
	case TypeTextDelta:
		return decodeAs[TextDeltaPayload](raw)
	case TypeThinking:
		return decodeAs[ThinkingPayload](raw)
	case TypeToolUse:
		return decodeAs[ToolUsePayload](raw)
	case TypeToolResult:
		return decodeAs[ToolResultPayload](raw)
	case TypePermissionRequest:
		return decodeAs[PermissionRequestPayload](raw)
	case TypeError:
		return decodeAs[ErrorPayload](raw)
	case TypeDone:
		return decodeAs[DonePayload](raw)
	case TypePermissionAnswer:
		return decodeAs[PermissionAnswerPayload](raw)
	case TypeSteer:
		return decodeAs[SteerPayload](raw)
	case TypeInterrupt:
		return decodeAs[InterruptPayload](raw)
	}
	return append(json.RawMessage(nil), raw...), nil
}

func decodeAs[T any](raw json.RawMessage) (any, error) {
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// IsAgentEvent reports whether v is a well-formed UES event: an [Event] (or
// *Event, or a decoded JSON object such as map[string]any) whose type is core
// or a namespaced extension, with an agent, a positive timestamp, and — for a
// core type — a payload of the right shape with its required fields.
func IsAgentEvent(v any) bool {
	return ValidateEvent(v) == nil
}

// ValidateEvent is [IsAgentEvent] with the reason for a rejection.
func ValidateEvent(v any) error {
	var ev Event
	switch x := v.(type) {
	case Event:
		ev = x
	case *Event:
		if x == nil {
			return fmt.Errorf("nil event")
		}
		ev = *x
	case nil:
		return fmt.Errorf("nil event")
	default:
		data, err := json.Marshal(x)
		if err != nil {
			return fmt.Errorf("not JSON-encodable: %w", err)
		}
		if err := json.Unmarshal(data, &ev); err != nil {
			return fmt.Errorf("not an event: %w", err)
		}
	}
	if !ev.Type.IsCore() && !ev.Type.IsExtension() {
		return fmt.Errorf("type %q is neither core nor vendor:name", ev.Type)
	}
	if ev.Agent == "" {
		return fmt.Errorf("agent is empty")
	}
	if ev.Timestamp <= 0 {
		return fmt.Errorf("timestamp %d is not positive Unix milliseconds", ev.Timestamp)
	}
	if !ev.Type.IsCore() {
		return nil
	}
	return validatePayload(ev.Type, ev.Payload)
}

func validatePayload(t EventType, p any) error {
	var ok bool
	switch t {
	case TypeInit:
		_, ok = p.(InitPayload)
	case TypeText:
		_, ok = p.(TextPayload)
	case TypeTextDelta:
		_, ok = p.(TextDeltaPayload)
	case TypeThinking:
		_, ok = p.(ThinkingPayload)
	case TypeToolUse:
		_, ok = p.(ToolUsePayload)
	case TypeToolResult:
		_, ok = p.(ToolResultPayload)
	case TypePermissionRequest:
		_, ok = p.(PermissionRequestPayload)
	case TypeError:
		_, ok = p.(ErrorPayload)
	case TypeDone:
		_, ok = p.(DonePayload)
	}
	if !ok {
		return fmt.Errorf("%s: payload of type %T", t, p)
	}
	switch x := p.(type) {
	case ToolUsePayload:
		if x.ToolName == "" || x.ToolUseID == "" {
			return fmt.Errorf("tool_use: toolName and toolUseId are required")
		}
	case ToolResultPayload:
		if x.ToolUseID == "" {
			return fmt.Errorf("tool_result: toolUseId is required")
		}
		switch x.Status {
		case ToolSuccess, ToolError, ToolDenied:
		default:
			return fmt.Errorf("tool_result: status %q", x.Status)
		}
	case PermissionRequestPayload:
		if x.ToolName == "" {
			return fmt.Errorf("permission_request: toolName is required")
		}
	case ErrorPayload:
		if x.Message == "" {
			return fmt.Errorf("error: message is required")
		}
	case DonePayload:
		if !x.Status.Valid() {
			return fmt.Errorf("done: status %q", x.Status)
		}
		if x.DurationMs < 0 {
			return fmt.Errorf("done: negative durationMs")
		}
	}
	return nil
}

// Done returns the payload of a "done" event and whether e is one.
func (e Event) Done() (DonePayload, bool) {
	p, ok := e.Payload.(DonePayload)
	return p, ok && e.Type == TypeDone
}
