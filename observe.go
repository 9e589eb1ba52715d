package drover

import "context"

type observerKey struct{}

// ProcessObserver is told about every vendor process an adapter starts for
// a run: its pid and process group id. The supervisor records them so a
// later drover can kill what a dead one left behind (RUN-6).
type ProcessObserver func(pid, pgid int)

// WithProcessObserver returns a context whose runs report their vendor
// processes to fn. fn must return quickly; it may be called from the
// adapter's goroutine.
func WithProcessObserver(ctx context.Context, fn ProcessObserver) context.Context {
	return context.WithValue(ctx, observerKey{}, fn)
}

// ProcessStarted reports a started vendor process to the observer in ctx,
// if any. Adapters call it right after starting the CLI.
func ProcessStarted(ctx context.Context, pid, pgid int) {
	if fn, ok := ctx.Value(observerKey{}).(ProcessObserver); ok && fn != nil {
		fn(pid, pgid)
	}
}
