package drover

import (
	"errors"
	"fmt"
)

// Sentinel errors.
var (
	// ErrUnknownAgent: no adapter is registered under that id or alias.
	ErrUnknownAgent = errors.New("unknown agent")
	// ErrAgentExists: Register was given an id or alias already taken.
	ErrAgentExists = errors.New("agent already registered")
	// ErrAgentNotInstalled: the vendor CLI could not be found.
	ErrAgentNotInstalled = errors.New("agent not installed")

	// ErrValidation matches, with errors.Is, every *Error with code
	// VALIDATION_ERROR: options or a request no agent could accept.
	ErrValidation error = &Error{Code: CodeValidation}
	// ErrUnsupportedOption matches, with errors.Is, every *Error with code
	// UNSUPPORTED_OPTION: an option the chosen agent cannot honour (ADP-3).
	ErrUnsupportedOption error = &Error{Code: CodeUnsupportedOption}
)

// ErrorCode classifies an "error" event.
type ErrorCode string

// Error codes carried by "error" events. docs/events.md lists which
// component raises each.
const (
	// CodeAdapterError: the adapter failed (could not start the CLI, could
	// not read its output, panicked).
	CodeAdapterError ErrorCode = "ADAPTER_ERROR"
	// CodeMissingDone: the stream ended without a done event (ENG-008).
	CodeMissingDone ErrorCode = "MISSING_DONE"
	// CodeTimeout: the run exceeded Options.Timeout (RUN-4).
	CodeTimeout ErrorCode = "TIMEOUT"
	// CodeIdleTimeout: the agent was silent for Options.IdleTimeout (ADP-6).
	CodeIdleTimeout ErrorCode = "IDLE_TIMEOUT"
	// CodeResumeFailed: the vendor rejected the resume token; the run goes
	// on in a new conversation (ADP-5, recoverable).
	CodeResumeFailed ErrorCode = "RESUME_FAILED"
	// CodeUnsupportedOption: the agent cannot honour an option (ADP-3).
	CodeUnsupportedOption ErrorCode = "UNSUPPORTED_OPTION"
	// CodeValidation: the options or request are invalid for every agent.
	CodeValidation ErrorCode = "VALIDATION_ERROR"
	// CodeUnknownAgent: no adapter is registered under that name.
	CodeUnknownAgent ErrorCode = "UNKNOWN_AGENT"
	// CodeNotInstalled: the vendor CLI was not found.
	CodeNotInstalled ErrorCode = "AGENT_NOT_INSTALLED"
	// CodeToolFilter: the agent offered or ran a tool outside the tool
	// filter (ENG-013).
	CodeToolFilter ErrorCode = "TOOL_FILTER_VIOLATION"
	// CodeLineTooLong: a native line exceeded the reader's cap and was
	// skipped (ADP-1, recoverable).
	CodeLineTooLong ErrorCode = "LINE_TOO_LONG"
	// CodeProcessExit: the vendor process ended without a result.
	CodeProcessExit ErrorCode = "PROCESS_EXIT"
	// CodeRateLimited: the model API refused for rate (HTTP 429).
	CodeRateLimited ErrorCode = "RATE_LIMITED"
	// CodeOverloaded: the model API is overloaded (HTTP 529, 503).
	CodeOverloaded ErrorCode = "OVERLOADED"
	// CodeServerError: the model API failed (HTTP 5xx).
	CodeServerError ErrorCode = "SERVER_ERROR"
	// CodeAuthFailed: the model API refused the credentials (HTTP 401, 403).
	CodeAuthFailed ErrorCode = "AUTH_FAILED"
	// CodeBadRequest: the model API refused the request as malformed
	// (HTTP 400 and the like) for a reason other than its size.
	CodeBadRequest ErrorCode = "BAD_REQUEST"
	// CodeContextOverflow: the conversation no longer fits the model's
	// context window.
	CodeContextOverflow ErrorCode = "CONTEXT_OVERFLOW"
	// CodeModelError: the model call failed for another reason.
	CodeModelError ErrorCode = "MODEL_ERROR"
	// CodeExecutionError: the agent reported a failure of its own.
	CodeExecutionError ErrorCode = "EXECUTION_ERROR"
	// CodeBoundaryViolation: the run asks for more than it may have, and
	// nothing was started: a child run's directories outside its parent's
	// (BND-1), or a write boundary that contains drover's own state, its
	// ledger or configuration (BND-3).
	CodeBoundaryViolation ErrorCode = "BOUNDARY_VIOLATION"
)

// Retryable reports whether trying the same request again later can help:
// rate limits, overload, server errors and timeouts.
func (c ErrorCode) Retryable() bool {
	switch c {
	case CodeRateLimited, CodeOverloaded, CodeServerError, CodeTimeout, CodeIdleTimeout:
		return true
	}
	return false
}

// Error is a classified failure. Adapters yield it to end a run with a
// specific code; the engine turns it into an "error" event and "done".
type Error struct {
	Code    ErrorCode
	Message string
	Err     error
}

// Error implements error.
func (e *Error) Error() string {
	switch {
	case e.Message != "" && e.Err != nil:
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	case e.Message != "":
		return fmt.Sprintf("%s: %s", e.Code, e.Message)
	case e.Err != nil:
		return fmt.Sprintf("%s: %v", e.Code, e.Err)
	}
	return string(e.Code)
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is an *Error of the same code with no message
// and no cause (a bare code, such as ErrValidation): errors.Is(err,
// &Error{Code: c}) asks "was it a c failure?".
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && t.Message == "" && t.Err == nil
}

// CodeOf returns the code of the first *Error in err's chain, or def.
func CodeOf(err error, def ErrorCode) ErrorCode {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return def
}
