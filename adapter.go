package drover

import (
	"context"
	"iter"
)

// Adapter runs one vendor's agent CLI and translates its native output into
// UES events. It is the four things every agent can do; extras are optional
// interfaces an adapter may also implement.
type Adapter interface {
	// ID is the adapter id stamped on events ("claude-code").
	ID() string
	// Capabilities says which options and tiers the adapter honours.
	Capabilities() Capabilities
	// Available reports whether the vendor CLI is installed, its version,
	// and whether that version is one the adapter was tested with (ADP-4).
	Available(ctx context.Context) Availability
	// Run starts the agent and yields its events as they happen.
	//
	// Contract: the sequence is iterated once. A yielded non-nil error ends
	// the run (an *Error gives its code; anything else is ADAPTER_ERROR).
	// When ctx is cancelled, or the consumer stops iterating (yield returns
	// false), the adapter stops its process group and returns promptly; when
	// it returns, no process or goroutine it started is left. An adapter
	// yields at most one "done", last.
	Run(ctx context.Context, req Request) iter.Seq2[Event, error]
}

// Request is what an adapter is asked to run. The engine fills in
// Options.SessionID, so an adapter always finds the session id there.
type Request struct {
	Prompt  string
	Options Options
	// Live, when set, carries the run's permission answers, steering
	// messages and interrupts to the adapter (see Live). The engine sets it
	// only for an adapter whose Capabilities include Permissions, Steer or
	// Interrupt, in a run that can be answered or steered; without it the
	// adapter runs its vendor headless, asking nothing.
	Live Live
	// Observer, when set, is told about every vendor process the adapter
	// starts for the run (RUN-6): the supervisor records them.
	Observer ProcessObserver
}

// ProcessStarted reports a started vendor process to r's
// Observer, if any. Adapters call it right after starting
// the CLI, before its first event.
func (r Request) ProcessStarted(pid, pgid int) {
	if fn := r.Observer; fn != nil {
		fn(pid, pgid)
	}
}

// Availability is what an adapter knows about its vendor CLI (ADP-4).
type Availability struct {
	Installed bool   `json:"installed"`
	Path      string `json:"path,omitempty"`
	Version   string `json:"version,omitempty"`
	// Tested is true when Version is one the adapter was tested with.
	Tested bool `json:"tested"`
	// TestedVersions names the tested version range, e.g. "2.1.330".
	TestedVersions string `json:"testedVersions"`
	// Error says why the CLI is unavailable or its version unknown.
	Error string `json:"error,omitempty"`
}

// Compacter is an optional interface of an adapter whose vendor compacts a
// session when asked by a prompt: after a context overflow the engine
// compacts the run's session with it and retries once (FAIL-1).
type Compacter interface {
	// CompactPrompt is the prompt that, sent in a turn resuming a session,
	// makes the vendor compact it.
	CompactPrompt() string
}
