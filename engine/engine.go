package engine

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/drover-run/drover"
)

// Engine runs agents from a registry and guarantees the shape of every run's
// stream: exactly one "done", last; adapter failures, timeouts and
// cancellation turned into events; the adapter stopped as soon as it is done.
type Engine struct {
	reg *drover.Registry

	coolOnce sync.Once
	cool     *Cooldowns // failover's cooldowns, shared by all runs (failover.go)
}

// New returns an engine over reg.
func New(reg *drover.Registry) *Engine { return &Engine{reg: reg} }

// Registry returns the engine's registry.
func (e *Engine) Registry() *drover.Registry { return e.reg }

// Run starts agent (an id or alias) on prompt and returns its event stream:
// Start with no hooks and no defaults.
func (e *Engine) Run(ctx context.Context, agent, prompt string, opts drover.Options) (iter.Seq[drover.Event], error) {
	return e.Start(ctx, Request{Agent: agent, Prompt: prompt, Options: opts})
}

// Start resolves req (Resolve) and returns the run's event stream. It
// returns drover.ErrUnknownAgent for an unregistered agent and a
// VALIDATION_ERROR *drover.Error for options no adapter could accept (ENG-003);
// every other failure, what the agent cannot honour included (ADP-3),
// arrives in the stream as "error" followed by "done".
//
// The stream is iterated once. Cancelling ctx stops the agent and ends the
// stream with done{interrupted}; a ctx already cancelled yields that without
// starting the agent (ENG-005). Breaking out of the loop stops the agent too;
// when iteration returns, the agent's process group is gone.
func (e *Engine) Start(ctx context.Context, req Request) (iter.Seq[drover.Event], error) {
	if _, ok := e.reg.Get(req.Agent); !ok {
		return nil, fmt.Errorf("%w %q (registered: %s)", drover.ErrUnknownAgent, req.Agent, strings.Join(e.reg.List(), ", "))
	}
	if err := req.Options.Validate(); err != nil {
		return nil, err
	}
	p, err := e.Resolve(req)
	if err != nil {
		return refused(req, err), nil
	}
	return e.Execute(ctx, p), nil
}

// RunSpec is one run of a RunParallel call.
type RunSpec struct {
	// ID, when set, is stamped as runId on the run's events so a reader can
	// tell interleaved runs apart.
	ID      string
	Agent   string
	Prompt  string
	Options drover.Options
}

// RunParallel runs every spec at once and yields their events merged, each as
// it arrives (ENG-010). A spec that cannot start (unknown agent, invalid
// options) yields its own "error" and "done" and leaves the others running
// (ENG-011). Cancelling ctx ends every active run with done{interrupted}
// (ENG-012). Breaking out of the loop stops all runs before it returns.
func (e *Engine) RunParallel(ctx context.Context, specs []RunSpec) iter.Seq[drover.Event] {
	return func(yield func(drover.Event) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		events := make(chan drover.Event)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for _, spec := range specs {
			wg.Go(func() {
				send := func(ev drover.Event) bool {
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
func (e *Engine) specStream(ctx context.Context, spec RunSpec) iter.Seq[drover.Event] {
	req := Request{Agent: spec.Agent, Prompt: spec.Prompt, Options: spec.Options, RunID: spec.ID}
	p, err := e.Resolve(req)
	if err != nil {
		if errors.Is(err, drover.ErrUnknownAgent) && drover.CodeOf(err, "") == "" {
			err = &drover.Error{Code: drover.CodeUnknownAgent, Message: fmt.Sprintf("unknown agent %q", spec.Agent)}
		}
		return refused(req, err)
	}
	return e.Execute(ctx, p)
}

// refused is the stream of a run that cannot start: its error, then
// done{error}.
func refused(req Request, err error) iter.Seq[drover.Event] {
	return func(yield func(drover.Event) bool) {
		sid := req.Options.SessionID
		if sid == "" {
			sid = drover.NewSessionID()
		}
		ev := drover.NewEvent(drover.TypeError, req.Agent, sid, drover.ErrorPayload{Code: drover.CodeOf(err, drover.CodeValidation), Message: err.Error()})
		ev.RunID = req.RunID
		if !yield(ev) {
			return
		}
		d := drover.NewEvent(drover.TypeDone, req.Agent, sid, drover.DonePayload{Status: drover.StatusError})
		d.RunID = req.RunID
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

// Execute runs p and returns its event stream, as Start does: one
// attempt, or, for a run with a failover chain or a vendor that can
// compact its sessions, attempts until one is not retried (failover.go).
func (e *Engine) Execute(ctx context.Context, p *Plan) iter.Seq[drover.Event] {
	sid := p.req.Options.SessionID
	if sid == "" {
		sid = drover.NewSessionID()
	}
	if !p.chained && p.compact == "" {
		at := p.attempts[0]
		return e.attempt(ctx, p, at, p.req.Prompt, at.opts, sid)
	}
	return e.failover(ctx, p, sid)
}

// attempt is the guarded event stream of one attempt of p: at with opts
// (at's, with the resume token or remaining timeout the chain gives it),
// in session sid.
func (e *Engine) attempt(ctx context.Context, p *Plan, at attempt, prompt string, opts drover.Options, sid string) iter.Seq[drover.Event] {
	return func(yield func(drover.Event) bool) {
		opts.SessionID = sid
		h := p.req.Hooks
		if h.ProcessEnv != nil {
			// The runner's environment, the run's own in it, with the
			// attempt's credentials over both.
			env := maps.Clone(h.ProcessEnv)
			if at.profile != nil {
				maps.Copy(env, at.profile.Env)
			}
			opts.Env = env
		}
		g := &guard{agent: at.adapter.ID(), sid: sid, runID: p.req.RunID, yield: yield, start: time.Now(), opts: opts,
			lim: newLimiter(at.lim, opts.Model), plan: p}
		if ctx.Err() != nil {
			g.emitDone(drover.StatusInterrupted)
			return
		}
		req := drover.Request{Prompt: prompt, Options: opts, Observer: h.Observer}
		if p.live() {
			caps := at.adapter.Capabilities()
			live, err := attach(ctx, h.Control, opts, caps, h.CanUseTool)
			if err != nil {
				g.fail(drover.CodeOf(err, drover.CodeValidation), err.Error())
				return
			}
			g.live = live
			if takesLive(caps) {
				req.Live = live
			}
		}
		g.runAdapter(ctx, at.adapter, req)
	}
}

// guard holds the state of one guarded run.
type guard struct {
	plan              *Plan // the run's; nil for a guard outside a plan
	agent, sid, runID string
	opts              drover.Options
	yield             func(drover.Event) bool
	start             time.Time
	live              *liveRun // nil unless the run can be answered or steered
	lim               *limiter // the limits drover enforces (limits.go)

	stopped bool // the consumer stopped iterating
}

func (g *guard) stamp(ev *drover.Event) {
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
func (g *guard) emit(ev drover.Event) bool {
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

func (g *guard) emitDone(status drover.DoneStatus) {
	g.emit(drover.Event{Type: drover.TypeDone, Payload: drover.DonePayload{Status: status, DurationMs: time.Since(g.start).Milliseconds()}})
}

func (g *guard) fail(code drover.ErrorCode, msg string) {
	if g.emit(drover.Event{Type: drover.TypeError, Payload: drover.ErrorPayload{Code: code, Message: msg}}) {
		g.emitDone(drover.StatusError)
	}
}

func (g *guard) runAdapter(ctx context.Context, a drover.Adapter, req drover.Request) {
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
		done      *drover.Event
		fatal     error
		violation string
		limited   drover.DoneStatus
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
			if ev.Type == drover.TypeDone {
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
			if w, ok := ev.Payload.(drover.PermissionWithdrawnPayload); ok && ev.Type == drover.TypePermissionWithdrawn {
				// A signal for the engine, not an event: its answer records it.
				if g.live != nil {
					g.live.withdraw(w)
				}
				continue
			}
			if p, ok := ev.Payload.(drover.InitPayload); ok && ev.Type == drover.TypeInit && p.Capabilities == nil {
				p.Capabilities = g.capabilities(a, req)
				ev.Payload = p
			}
			if ev.Type == drover.TypePermissionRequest && g.live != nil {
				p, _ := ev.Payload.(drover.PermissionRequestPayload)
				opened, err := g.live.open(p)
				if err != nil {
					fatal = &drover.Error{Code: drover.CodeAdapterError, Message: err.Error()}
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
	var unrecorded []drover.Event
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
		if d, ok := done.Payload.(drover.DonePayload); ok {
			g.lim.finish(&d)
			done.Payload = d
		}
		g.emit(*done)
	case limited != "":
		g.emit(drover.Event{Type: drover.TypeDone, Payload: g.lim.limited(limited, time.Since(g.start).Milliseconds())})
	case context.Cause(actx) == errRunTimeout:
		// The run's own timeout, as asked: an attempt after a failover
		// runs with what was left of it.
		total := g.opts.Timeout
		if p := g.plan; p != nil && p.req.Options.Timeout > 0 {
			total = p.req.Options.Timeout
		}
		g.fail(drover.CodeTimeout, fmt.Sprintf("run exceeded its timeout of %s", total))
	case context.Cause(actx) == errIdleTimeout:
		g.fail(drover.CodeIdleTimeout, fmt.Sprintf("agent produced no output for %s", g.opts.IdleTimeout))
	case ctx.Err() != nil:
		g.emitDone(drover.StatusInterrupted)
	case panicked != nil:
		g.fail(drover.CodeAdapterError, fmt.Sprintf("adapter %s panicked: %v", g.agent, panicked))
	case fatal != nil:
		g.fail(drover.CodeOf(fatal, drover.CodeAdapterError), fatal.Error())
	case violation != "":
		g.fail(drover.CodeToolFilter, violation)
	default:
		g.fail(drover.CodeMissingDone, fmt.Sprintf("adapter %s ended its stream without a done event", g.agent))
	}
}

// capabilities is what the run can do, for its init event: the adapter's
// capabilities, with answers, steering and interrupts only when this run
// gets them (a live run).
func (g *guard) capabilities(a drover.Adapter, req drover.Request) *drover.Capabilities {
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
func (g *guard) filterViolation(ev drover.Event) string {
	if len(g.opts.AllowedTools) == 0 && len(g.opts.DisallowedTools) == 0 {
		return ""
	}
	switch p := ev.Payload.(type) {
	case drover.InitPayload:
		for _, t := range p.Tools {
			if !g.opts.ToolAllowed(t) {
				return fmt.Sprintf("agent offers tool %q outside the allowed/disallowed tool filter", t)
			}
		}
	case drover.ToolResultPayload:
		if p.Status == drover.ToolSuccess && p.ToolName != "" && !g.opts.ToolAllowed(p.ToolName) {
			return fmt.Sprintf("agent ran tool %q outside the allowed/disallowed tool filter", p.ToolName)
		}
	}
	return ""
}
