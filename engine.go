package drover

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"
	"time"
)

// Engine runs agents from a registry and guarantees the shape of every run's
// stream: exactly one "done", last; adapter failures, timeouts and
// cancellation turned into events; the adapter stopped as soon as it is done.
type Engine struct {
	reg *Registry

	coolOnce sync.Once
	cool     *Cooldowns // failover's cooldowns, shared by all runs (failover.go)
}

// NewEngine returns an engine over reg.
func NewEngine(reg *Registry) *Engine { return &Engine{reg: reg} }

// Registry returns the engine's registry.
func (e *Engine) Registry() *Registry { return e.reg }

// Run starts agent (an id or alias) on prompt and returns its event stream.
// It returns ErrUnknownAgent for an unregistered agent and a VALIDATION_ERROR
// *Error for options no adapter could accept; every other failure arrives in
// the stream as "error" followed by "done".
//
// The stream is iterated once. Cancelling ctx stops the agent and ends the
// stream with done{interrupted}; a ctx already cancelled yields that without
// starting the agent (ENG-005). Breaking out of the loop stops the agent too;
// when iteration returns, the agent's process group is gone.
func (e *Engine) Run(ctx context.Context, agent, prompt string, opts Options) (iter.Seq[Event], error) {
	a, ok := e.reg.Get(agent)
	if !ok {
		return nil, fmt.Errorf("%w %q (registered: %s)", ErrUnknownAgent, agent, strings.Join(e.reg.List(), ", "))
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return e.stream(ctx, a, prompt, opts, ""), nil
}

// RunSpec is one run of a RunParallel call.
type RunSpec struct {
	// ID, when set, is stamped as runId on the run's events so a reader can
	// tell interleaved runs apart.
	ID      string
	Agent   string
	Prompt  string
	Options Options
}

// RunParallel runs every spec at once and yields their events merged, each as
// it arrives (ENG-010). A spec that cannot start (unknown agent, invalid
// options) yields its own "error" and "done" and leaves the others running
// (ENG-011). Cancelling ctx ends every active run with done{interrupted}
// (ENG-012). Breaking out of the loop stops all runs before it returns.
func (e *Engine) RunParallel(ctx context.Context, specs []RunSpec) iter.Seq[Event] {
	return func(yield func(Event) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		events := make(chan Event)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for _, spec := range specs {
			wg.Go(func() {
				send := func(ev Event) bool {
					select {
					case events <- ev:
						return true
					case <-stop:
						return false
					}
				}
				for ev := range e.specStream(ctx, spec) {
					if !send(ev) {
						return
					}
				}
			})
		}
		// The closer goroutine is owned by this iterator: it ends once every
		// run goroutine has, and this function waits for it below.
		closed := make(chan struct{})
		go func() {
			wg.Wait()
			close(events)
			close(closed)
		}()
		defer func() {
			// Stop producers first, then cancel their runs, then wait, so a
			// producer blocked on send is released before we wait for it.
			close(stop)
			cancel()
			<-closed
		}()
		for ev := range events {
			if !yield(ev) {
				return
			}
		}
	}
}

// specStream returns the stream of one RunParallel spec, turning a spec that
// cannot start into error + done.
func (e *Engine) specStream(ctx context.Context, spec RunSpec) iter.Seq[Event] {
	a, ok := e.reg.Get(spec.Agent)
	var startErr *Error
	switch {
	case !ok:
		startErr = &Error{Code: CodeUnknownAgent, Message: fmt.Sprintf("unknown agent %q", spec.Agent)}
	default:
		if err := spec.Options.Validate(); err != nil {
			startErr = &Error{Code: CodeOf(err, CodeValidation), Message: err.Error()}
		}
	}
	if startErr == nil {
		return e.stream(ctx, a, spec.Prompt, spec.Options, spec.ID)
	}
	return func(yield func(Event) bool) {
		sid := spec.Options.SessionID
		if sid == "" {
			sid = NewSessionID()
		}
		ev := NewEvent(TypeError, spec.Agent, sid, ErrorPayload{Code: startErr.Code, Message: startErr.Message})
		ev.RunID = spec.ID
		if !yield(ev) {
			return
		}
		d := NewEvent(TypeDone, spec.Agent, sid, DonePayload{Status: StatusError})
		d.RunID = spec.ID
		yield(d)
	}
}

var (
	errRunTimeout  = errors.New("run timed out")
	errIdleTimeout = errors.New("agent produced no output within the idle timeout")
)

// consumerPanic carries a panic raised by the consumer's loop body through
// the adapter's iterator, so the engine re-raises it instead of blaming the
// adapter.
type consumerPanic struct{ v any }

// stream is the guarded event stream of one run: one attempt, or with a
// failover chain or a vendor that can compact its sessions, attempts until
// one is not retried (failover.go).
func (e *Engine) stream(ctx context.Context, a Adapter, prompt string, opts Options, runID string) iter.Seq[Event] {
	if opts.Failover != nil || CompactPrompt(a) != "" {
		return e.failover(ctx, a, prompt, opts, runID)
	}
	return e.attempt(ctx, a, prompt, opts, runID)
}

// attempt is the guarded event stream of one attempt of a run.
func (e *Engine) attempt(ctx context.Context, a Adapter, prompt string, opts Options, runID string) iter.Seq[Event] {
	return func(yield func(Event) bool) {
		if opts.SessionID == "" {
			opts.SessionID = NewSessionID()
		}
		g := &guard{agent: a.ID(), sid: opts.SessionID, runID: runID, yield: yield, start: time.Now(), opts: opts}
		if ctx.Err() != nil {
			g.emitDone(StatusInterrupted)
			return
		}
		lim, err := newLimiter(a.Capabilities(), &opts) // limits.go
		if err != nil {
			g.fail(CodeOf(err, CodeValidation), err.Error())
			return
		}
		g.lim = lim
		req := Request{Prompt: prompt, Options: opts}
		if opts.interactive() {
			caps := a.Capabilities()
			live, err := attach(ctx, opts.Control, opts, caps)
			if err != nil {
				g.fail(CodeOf(err, CodeValidation), err.Error())
				return
			}
			g.live = live
			if caps.Permissions || caps.Steer || caps.Interrupt {
				req.Live = live
			}
		}
		g.runAdapter(ctx, a, req)
	}
}

// guard holds the state of one guarded run.
type guard struct {
	agent, sid, runID string
	opts              Options
	yield             func(Event) bool
	start             time.Time
	live              *liveRun // nil unless the run can be answered or steered
	lim               *limiter // the limits drover enforces (limits.go)

	stopped bool // the consumer stopped iterating
}

func (g *guard) stamp(ev *Event) {
	if ev.Agent == "" {
		ev.Agent = g.agent
	}
	if ev.SessionID == "" {
		ev.SessionID = g.sid
	}
	if ev.Timestamp == 0 {
		ev.Timestamp = time.Now().UnixMilli()
	}
	if g.runID != "" {
		ev.RunID = g.runID
	}
}

// emit hands ev to the consumer, marking a consumer panic so that it passes
// through the adapter's recover untouched.
func (g *guard) emit(ev Event) bool {
	if g.stopped {
		return false
	}
	g.stamp(&ev)
	ok := func() (ok bool) {
		defer func() {
			if r := recover(); r != nil {
				panic(consumerPanic{r})
			}
		}()
		return g.yield(ev)
	}()
	if !ok {
		g.stopped = true
	}
	return ok
}

func (g *guard) emitDone(status DoneStatus) {
	g.emit(Event{Type: TypeDone, Payload: DonePayload{Status: status, DurationMs: time.Since(g.start).Milliseconds()}})
}

func (g *guard) fail(code ErrorCode, msg string) {
	if g.emit(Event{Type: TypeError, Payload: ErrorPayload{Code: code, Message: msg}}) {
		g.emitDone(StatusError)
	}
}

func (g *guard) runAdapter(ctx context.Context, a Adapter, req Request) {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if g.opts.Timeout > 0 {
		var cancelT context.CancelFunc
		actx, cancelT = context.WithTimeoutCause(actx, g.opts.Timeout, errRunTimeout)
		defer cancelT()
	}
	var idle *time.Timer
	if g.opts.IdleTimeout > 0 {
		idle = time.AfterFunc(g.opts.IdleTimeout, func() { cancel(errIdleTimeout) })
		defer idle.Stop()
	}

	if g.live != nil {
		// On every way out, including a panic passing through: detach the
		// Control and stop the run's callbacks and timers.
		defer g.live.close()
	}
	var (
		done      *Event
		fatal     error
		violation string
		limited   DoneStatus
	)
	panicked := func() (panicked any) {
		defer func() {
			if r := recover(); r != nil {
				if cp, ok := r.(consumerPanic); ok {
					panic(cp.v)
				}
				panicked = r
			}
		}()
		for ev, err := range a.Run(actx, req) {
			if actx.Err() != nil {
				// Cancelled or timed out: what the adapter says now is noise
				// from being stopped; the engine decides how the run ended.
				break
			}
			if err != nil {
				fatal = err
				break
			}
			if ev.Type == TypeDone {
				// Stop the adapter before the consumer sees done, so that by
				// then no process of the run is left (ENG-006).
				d := ev
				done = &d
				break
			}
			if v := g.filterViolation(ev); v != "" {
				violation = v
				break
			}
			if limited, fatal = g.lim.observe(ev); limited != "" || fatal != nil {
				break // stops the vendor before it goes on (limits.go)
			}
			if w, ok := ev.Payload.(PermissionWithdrawnPayload); ok && ev.Type == TypePermissionWithdrawn {
				// A signal for the engine, not an event: its answer records it.
				if g.live != nil {
					g.live.withdraw(w)
				}
				continue
			}
			if p, ok := ev.Payload.(InitPayload); ok && ev.Type == TypeInit && p.Capabilities == nil {
				p.Capabilities = g.capabilities(a, req)
				ev.Payload = p
			}
			if ev.Type == TypePermissionRequest && g.live != nil {
				p, _ := ev.Payload.(PermissionRequestPayload)
				opened, err := g.live.open(p)
				if err != nil {
					fatal = &Error{Code: CodeAdapterError, Message: err.Error()}
					break
				}
				ev.Payload = opened
			}
			if idle != nil {
				idle.Stop()
			}
			if !g.emit(ev) {
				return nil
			}
			if limited = g.lim.reached(); limited != "" {
				break // before the vendor can begin a turn past the limit
			}
			// A run waiting for a person is not idle: the idle timeout
			// resumes once no permission request is open.
			if idle != nil && (g.live == nil || !g.live.waiting()) {
				idle.Reset(g.opts.IdleTimeout)
			}
		}
		return nil
	}()
	var unrecorded []Event
	if g.live != nil {
		unrecorded = g.live.close()
	}
	if g.stopped {
		return
	}
	for _, ev := range unrecorded {
		if !g.emit(ev) {
			return
		}
	}
	switch {
	case done != nil:
		if d, ok := done.Payload.(DonePayload); ok {
			g.lim.finish(&d)
			done.Payload = d
		}
		g.emit(*done)
	case limited != "":
		g.emit(Event{Type: TypeDone, Payload: g.lim.limited(limited, time.Since(g.start).Milliseconds())})
	case context.Cause(actx) == errRunTimeout:
		g.fail(CodeTimeout, fmt.Sprintf("run exceeded its timeout of %s", g.opts.Timeout))
	case context.Cause(actx) == errIdleTimeout:
		g.fail(CodeIdleTimeout, fmt.Sprintf("agent produced no output for %s", g.opts.IdleTimeout))
	case ctx.Err() != nil:
		g.emitDone(StatusInterrupted)
	case panicked != nil:
		g.fail(CodeAdapterError, fmt.Sprintf("adapter %s panicked: %v", g.agent, panicked))
	case fatal != nil:
		g.fail(CodeOf(fatal, CodeAdapterError), fatal.Error())
	case violation != "":
		g.fail(CodeToolFilter, violation)
	default:
		g.fail(CodeMissingDone, fmt.Sprintf("adapter %s ended its stream without a done event", g.agent))
	}
}

// capabilities is what the run can do, for its init event: the adapter's
// capabilities, with answers, steering and interrupts only when this run
// gets them (a live run).
func (g *guard) capabilities(a Adapter, req Request) *Capabilities {
	c := a.Capabilities()
	c.MaxTurns, c.MaxBudget = true, true // drover enforces what the vendor does not (limits.go)
	if req.Live == nil {
		c.Permissions, c.Steer, c.Interrupt = false, false, false
	}
	return &c
}

// filterViolation enforces ENG-013 on what the agent reports: an init that
// offers a filtered-out tool, or a filtered-out tool that ran successfully,
// ends the run. A call the vendor itself refused is not a violation.
func (g *guard) filterViolation(ev Event) string {
	if len(g.opts.AllowedTools) == 0 && len(g.opts.DisallowedTools) == 0 {
		return ""
	}
	switch p := ev.Payload.(type) {
	case InitPayload:
		for _, t := range p.Tools {
			if !g.opts.ToolAllowed(t) {
				return fmt.Sprintf("agent offers tool %q outside the allowed/disallowed tool filter", t)
			}
		}
	case ToolResultPayload:
		if p.Status == ToolSuccess && p.ToolName != "" && !g.opts.ToolAllowed(p.ToolName) {
			return fmt.Sprintf("agent ran tool %q outside the allowed/disallowed tool filter", p.ToolName)
		}
	}
	return ""
}
