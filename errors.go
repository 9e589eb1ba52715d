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
)

// ErrorCode classifies an "error" event.
type ErrorCode string

// Error codes carried by "error" events.
const (
	CodeAdapterError      ErrorCode = "ADAPTER_ERROR"
	CodeMissingDone       ErrorCode = "MISSING_DONE"
	CodeTimeout           ErrorCode = "TIMEOUT"
	CodeIdleTimeout       ErrorCode = "IDLE_TIMEOUT"
	CodeResumeFailed      ErrorCode = "RESUME_FAILED"
	CodeUnsupportedOption ErrorCode = "UNSUPPORTED_OPTION"
	CodeValidation        ErrorCode = "VALIDATION_ERROR"
	CodeUnknownAgent      ErrorCode = "UNKNOWN_AGENT"
	CodeNotInstalled      ErrorCode = "AGENT_NOT_INSTALLED"
	CodeToolFilter        ErrorCode = "TOOL_FILTER_VIOLATION"
	CodeLineTooLong       ErrorCode = "LINE_TOO_LONG"
	CodeProcessExit       ErrorCode = "PROCESS_EXIT"
	CodeRateLimited       ErrorCode = "RATE_LIMITED"
	CodeOverloaded        ErrorCode = "OVERLOADED"
	CodeServerError       ErrorCode = "SERVER_ERROR"
	CodeAuthFailed        ErrorCode = "AUTH_FAILED"
	CodeInvalidRequest    ErrorCode = "INVALID_REQUEST"
	CodeContextOverflow   ErrorCode = "CONTEXT_OVERFLOW"
	CodeModelError        ErrorCode = "MODEL_ERROR"
	CodeExecutionError    ErrorCode = "EXECUTION_ERROR"
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

// CodeOf returns the code of the first *Error in err's chain, or def.
func CodeOf(err error, def ErrorCode) ErrorCode {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return def
}
