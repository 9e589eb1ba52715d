package api

import (
	"context"

	"github.com/drover-run/drover/runs"
)

// Caller carries one operation to a service elsewhere, by its name (an
// Op's Name), and decodes its result into result: the JSON-lines client
// and the HTTP client are Callers. Its errors are *Error.
type Caller interface {
	Call(ctx context.Context, op string, params, result any) error
}

// Remote is the request/response half of Service over a Caller. A client
// of a transport embeds it with itself as the Caller and adds the
// streams, which each transport carries its own way.
type Remote struct{ Caller Caller }

// call performs op with p through r's caller.
func call[R any](ctx context.Context, r Remote, op string, p any) (R, error) {
	var out R
	err := r.Caller.Call(ctx, op, p, &out)
	return out, err
}

// Run implements Service.
func (r Remote) Run(ctx context.Context, p RunParams) (*runs.Started, error) {
	return call[*runs.Started](ctx, r, "run", p)
}

// Check implements Service.
func (r Remote) Check(ctx context.Context, p RunParams) (*CheckResult, error) {
	return call[*CheckResult](ctx, r, "check", p)
}

// Get implements Service.
func (r Remote) Get(ctx context.Context, p GetParams) (*GetResult, error) {
	return call[*GetResult](ctx, r, "get", p)
}

// List implements Service.
func (r Remote) List(ctx context.Context, p ListParams) (*RunsResult, error) {
	return call[*RunsResult](ctx, r, "list", p)
}

// Sessions implements Service.
func (r Remote) Sessions(ctx context.Context, p SessionsParams) (*SessionsResult, error) {
	return call[*SessionsResult](ctx, r, "sessions", p)
}

// Events implements Service.
func (r Remote) Events(ctx context.Context, p EventsParams) (*EventsResult, error) {
	return call[*EventsResult](ctx, r, "events", p)
}

// Await implements Service. Cancelling ctx stops waiting, not the runs.
func (r Remote) Await(ctx context.Context, p AwaitParams) (*RunsResult, error) {
	return call[*RunsResult](ctx, r, "await", p)
}

// Cancel implements Service.
func (r Remote) Cancel(ctx context.Context, p RunIDParams) (struct{}, error) {
	return call[struct{}](ctx, r, "cancel", p)
}

// Respond implements Service.
func (r Remote) Respond(ctx context.Context, p RespondParams) (struct{}, error) {
	return call[struct{}](ctx, r, "respond", p)
}

// Steer implements Service.
func (r Remote) Steer(ctx context.Context, p SteerParams) (struct{}, error) {
	return call[struct{}](ctx, r, "steer", p)
}

// Interrupt implements Service.
func (r Remote) Interrupt(ctx context.Context, p InterruptParams) (struct{}, error) {
	return call[struct{}](ctx, r, "interrupt", p)
}

// Requests implements Service.
func (r Remote) Requests(ctx context.Context, p RequestsParams) (*RequestsResult, error) {
	return call[*RequestsResult](ctx, r, "requests", p)
}

// Agents implements Service.
func (r Remote) Agents(ctx context.Context, p AgentsParams) (*AgentsResult, error) {
	return call[*AgentsResult](ctx, r, "agents", p)
}

// Info implements Service.
func (r Remote) Info(ctx context.Context, p InfoParams) (*Info, error) {
	return call[*Info](ctx, r, "info", p)
}
