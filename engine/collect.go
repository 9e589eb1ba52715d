package engine

import (
	"context"
	"iter"
	"time"

	"github.com/drover-run/drover"
)

// StopReason says why a run stopped (UES-6).
type StopReason string

// Stop reasons.
const (
	StopEndTurn   StopReason = "end_turn"
	StopMaxTokens StopReason = "max_tokens"
	StopMaxTurns  StopReason = "max_turns"
	StopMaxBudget StopReason = "max_budget"
	StopTimeout   StopReason = "timeout"
	StopAborted   StopReason = "aborted"
	StopError     StopReason = "error"
)

// ErrorKind classifies why a run failed (UES-6).
type ErrorKind string

// Error kinds.
const (
	KindContextOverflow ErrorKind = "context_overflow"
	KindAuthFailure     ErrorKind = "auth_failure"
	KindRateLimit       ErrorKind = "rate_limit"
	KindModelError      ErrorKind = "model_error"
	KindTimeout         ErrorKind = "timeout"
	KindUnknown         ErrorKind = "unknown"
)

// RunError is the typed error of a failed run.
type RunError struct {
	Kind      ErrorKind        `json:"kind"`
	Code      drover.ErrorCode `json:"code,omitempty"`
	Message   string           `json:"message"`
	Retryable bool             `json:"retryable"`
}

// Message is one entry of a run's conversation.
type Message struct {
	// Role is "user", "assistant" or "tool".
	Role      string `json:"role"`
	Content   string `json:"content"`
	ToolUseID string `json:"toolUseId,omitempty"`
}

// ToolCall is one tool call of a run with its outcome and timing.
type ToolCall struct {
	ID          string         `json:"id"`
	Name        string         `json:"name"`
	Input       map[string]any `json:"input"`
	Description string         `json:"description,omitempty"`
	// Status is empty when the run ended before the call had a result.
	Status     drover.ToolStatus `json:"status,omitempty"`
	Output     string            `json:"output,omitempty"`
	StartedAt  time.Time         `json:"startedAt"`
	EndedAt    time.Time         `json:"endedAt,omitzero"`
	DurationMs int64             `json:"durationMs"`
}

// Result is a whole run folded into one value (UES-6).
type Result struct {
	Agent       string            `json:"agent"`
	SessionID   string            `json:"sessionId"`
	Status      drover.DoneStatus `json:"status"`
	Text        string            `json:"text"`
	ResumeToken string            `json:"resumeToken,omitempty"`
	Messages    []Message         `json:"messages"`
	ToolCalls   []ToolCall        `json:"toolCalls"`
	Usage       drover.Usage      `json:"usage"`
	StopReason  StopReason        `json:"stopReason"`
	DurationMs  int64             `json:"durationMs"`
	Error       *RunError         `json:"error,omitempty"`
	// Errors lists every error event, recoverable ones included.
	Errors []drover.ErrorPayload `json:"errors,omitempty"`
	Events int                   `json:"events"`
}

// Collect folds a run's events into a Result. It consumes events to the end.
// Final text is done.result when the agent reported one, else the last text.
func Collect(events iter.Seq[drover.Event]) *Result {
	r := &Result{Messages: []Message{}, ToolCalls: []ToolCall{}}
	calls := map[string]int{}
	var lastErr *drover.ErrorPayload
	var stopHint string
	for ev := range events {
		r.Events++
		if r.Agent == "" {
			r.Agent = ev.Agent
		}
		if r.SessionID == "" {
			r.SessionID = ev.SessionID
		}
		at := time.UnixMilli(ev.Timestamp)
		switch p := ev.Payload.(type) {
		case drover.TextPayload:
			r.Text = p.Content
			r.Messages = append(r.Messages, Message{Role: "assistant", Content: p.Content})
		case drover.ToolUsePayload:
			calls[p.ToolUseID] = len(r.ToolCalls)
			r.ToolCalls = append(r.ToolCalls, ToolCall{ID: p.ToolUseID, Name: p.ToolName,
				Input: p.Input, Description: p.Description, StartedAt: at})
		case drover.ToolResultPayload:
			r.Messages = append(r.Messages, Message{Role: "tool", Content: p.Output, ToolUseID: p.ToolUseID})
			i, ok := calls[p.ToolUseID]
			if !ok {
				calls[p.ToolUseID] = len(r.ToolCalls)
				i = len(r.ToolCalls)
				r.ToolCalls = append(r.ToolCalls, ToolCall{ID: p.ToolUseID, Name: p.ToolName, StartedAt: at})
			}
			tc := &r.ToolCalls[i]
			tc.Status, tc.Output, tc.EndedAt = p.Status, p.Output, at
			if p.DurationMs != nil {
				tc.DurationMs = *p.DurationMs
			} else {
				tc.DurationMs = at.Sub(tc.StartedAt).Milliseconds()
			}
		case drover.ErrorPayload:
			r.Errors = append(r.Errors, p)
			if !p.Recoverable {
				lastErr = &p
			}
		case drover.DonePayload:
			r.Status = p.Status
			r.ResumeToken = p.ResumeToken
			r.Usage = p.Usage
			r.DurationMs = p.DurationMs
			if p.Result != "" {
				r.Text = p.Result
			}
			if s, ok := ev.Metadata["stopReason"].(string); ok {
				stopHint = s
			}
		}
	}
	r.StopReason = stopReason(r.Status, lastErr, stopHint)
	if r.Status != drover.StatusSuccess && r.Status != "" {
		r.Error = runError(r.Status, lastErr)
	}
	return r
}

// RunCollect runs agent and returns the collected result, with the prompt
// as the first message. Errors are those of Run.
func (e *Engine) RunCollect(ctx context.Context, agent, prompt string, opts drover.Options) (*Result, error) {
	events, err := e.Run(ctx, agent, prompt, opts)
	if err != nil {
		return nil, err
	}
	r := Collect(events)
	r.Messages = append([]Message{{Role: "user", Content: prompt}}, r.Messages...)
	return r, nil
}

func stopReason(s drover.DoneStatus, lastErr *drover.ErrorPayload, hint string) StopReason {
	switch s {
	case drover.StatusSuccess:
		if hint == string(StopMaxTokens) {
			return StopMaxTokens
		}
		return StopEndTurn
	case drover.StatusMaxTurns:
		return StopMaxTurns
	case drover.StatusMaxBudget:
		return StopMaxBudget
	case drover.StatusInterrupted:
		return StopAborted
	}
	if lastErr != nil && (lastErr.Code == drover.CodeTimeout || lastErr.Code == drover.CodeIdleTimeout) {
		return StopTimeout
	}
	return StopError
}

func runError(s drover.DoneStatus, lastErr *drover.ErrorPayload) *RunError {
	switch s {
	case drover.StatusInterrupted:
		return &RunError{Kind: KindUnknown, Message: "run was interrupted"}
	case drover.StatusMaxTurns:
		return &RunError{Kind: KindUnknown, Message: "run reached its turn limit"}
	case drover.StatusMaxBudget:
		return &RunError{Kind: KindUnknown, Message: "run reached its budget limit"}
	}
	if lastErr == nil {
		return &RunError{Kind: KindUnknown, Message: "run failed"}
	}
	k := KindUnknown
	switch lastErr.Code {
	case drover.CodeContextOverflow:
		k = KindContextOverflow
	case drover.CodeAuthFailed:
		k = KindAuthFailure
	case drover.CodeRateLimited, drover.CodeOverloaded:
		k = KindRateLimit
	case drover.CodeServerError, drover.CodeModelError, drover.CodeBadRequest:
		k = KindModelError
	case drover.CodeTimeout, drover.CodeIdleTimeout:
		k = KindTimeout
	}
	return &RunError{Kind: k, Code: lastErr.Code, Message: lastErr.Message, Retryable: lastErr.Code.Retryable()}
}
