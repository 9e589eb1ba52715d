// Package agenttest holds the fake adapter of the tests of the engine and
// the packages above it (runs, api, protocol, server, the CLI): a
// func-field adapter is the thin seam those tests need; vendor adapters
// are proven against the real CLIs instead.
package agenttest

import (
	"context"
	"iter"
	"sync/atomic"

	"github.com/drover-run/drover"
)

// Agent is an adapter whose Run is a function.
type Agent struct {
	// Name is its id.
	Name string
	// Caps are its capabilities; nil means every tier, resume and fork.
	Caps *drover.Capabilities
	// Fn is its run: it yields the run's events (stamped with Name when
	// they name no agent).
	Fn func(ctx context.Context, req drover.Request, yield func(drover.Event, error) bool)
	// Availability, when set, is its Available; nil reports it installed.
	Availability func(context.Context) drover.Availability

	// Calls counts the runs it was asked for. Returned says that a run's
	// iterator has returned, Stopped that a run saw its consumer stop (a
	// yield returned false) or its context end: what the engine's
	// guarantees are checked against.
	Calls    atomic.Int32
	Returned atomic.Bool
	Stopped  atomic.Bool
}

var _ drover.Adapter = (*Agent)(nil)

// ID returns Name.
func (a *Agent) ID() string { return a.Name }

// Capabilities returns Caps, or every tier, resume and fork.
func (a *Agent) Capabilities() drover.Capabilities {
	if a.Caps != nil {
		return *a.Caps
	}
	return drover.Capabilities{Tiers: drover.Tiers(), Resume: true, Fork: true}
}

// Available is Availability's answer, else installed.
func (a *Agent) Available(ctx context.Context) drover.Availability {
	if a.Availability != nil {
		return a.Availability(ctx)
	}
	return drover.Availability{Installed: true}
}

// Run runs Fn.
func (a *Agent) Run(ctx context.Context, req drover.Request) iter.Seq2[drover.Event, error] {
	a.Calls.Add(1)
	return func(yield func(drover.Event, error) bool) {
		defer a.Returned.Store(true)
		y := func(ev drover.Event, err error) bool {
			if ev.Type != "" && ev.Agent == "" {
				ev.Agent = a.Name
			}
			ok := yield(ev, err)
			if !ok {
				a.Stopped.Store(true)
			}
			return ok
		}
		a.Fn(ctx, req, y)
		if ctx.Err() != nil {
			a.Stopped.Store(true)
		}
	}
}

// Asker is an interactive agent named "asker": it asks to run the shell
// command "make" (tool use id "tu1", permission request "q1"), passes every
// live input on and yields its event, reports the call's result as the
// answer says (success or denied), and ends when a steering message says
// "stop" (done, success, resume token "tok"), at an interrupt (done,
// interrupted, "tok"), or when cancelled. With steerable false its
// capabilities have Permissions only.
func Asker(steerable bool) *Agent {
	return &Agent{Name: "asker",
		Caps: &drover.Capabilities{Tiers: drover.Tiers(), Resume: true, Permissions: true, Steer: steerable, Interrupt: steerable},
		Fn: func(ctx context.Context, req drover.Request, y func(drover.Event, error) bool) {
			input := map[string]any{"command": "make"}
			// Described as an adapter describes its vendor's calls (UES-5).
			d := drover.DescribeCall(drover.ToolShell, "Bash", "make")
			if !y(drover.Event{Type: drover.TypeToolUse, Payload: drover.ToolUsePayload{ToolName: "Bash", ToolUseID: "tu1", Input: input, Description: d}}, nil) ||
				!y(drover.Event{Type: drover.TypePermissionRequest, Payload: drover.PermissionRequestPayload{RequestID: "q1",
					ToolName: "Bash", ToolUseID: "tu1", Input: input, Description: d}}, nil) {
				return
			}
			if req.Live == nil {
				<-ctx.Done()
				return
			}
			for {
				select {
				case <-ctx.Done():
					return
				case <-req.Live.Ready():
				}
				for _, in := range req.Live.Take() {
					if !y(in.Event(), nil) {
						return
					}
					switch {
					case in.Answer != nil:
						st := drover.ToolDenied
						if in.Answer.Behavior == drover.Allow {
							st = drover.ToolSuccess
						}
						if !y(drover.Event{Type: drover.TypeToolResult, Payload: drover.ToolResultPayload{ToolUseID: "tu1", ToolName: "Bash", Status: st}}, nil) {
							return
						}
					case in.Steer != nil && in.Steer.Message == "stop":
						y(drover.Event{Type: drover.TypeDone, Payload: drover.DonePayload{Status: drover.StatusSuccess, ResumeToken: "tok"}}, nil)
						return
					case in.Interrupt != nil:
						y(drover.Event{Type: drover.TypeDone, Payload: drover.DonePayload{Status: drover.StatusInterrupted, ResumeToken: "tok"}}, nil)
						return
					}
				}
			}
		}}
}
