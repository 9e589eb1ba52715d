package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/drover-run/drover"
)

// Errors of a Control.
var (
	// ErrNotLive: the run has not started yet, or has ended.
	ErrNotLive = errors.New("run is not live")
	// ErrRequestNotFound: the run has no permission request with that id.
	ErrRequestNotFound = errors.New("no such permission request")
	// ErrAlreadyAnswered: the request has its answer; the first one wins.
	ErrAlreadyAnswered = errors.New("permission request already answered")
	// ErrNotSupported: the run's agent cannot do what was asked (steer or
	// interrupt a run of a vendor without that channel).
	ErrNotSupported = errors.New("not supported by this agent")
)

// Control is the live control of one run (CTL-1, CTL-3): answers to its
// permission requests by request id, steering messages and interrupts,
// from any goroutine. Create it with NewControl, set it as
// Options.Control, and keep it to act on the run while it is live. One
// Control serves one run at a time. The zero value is not usable.
type Control struct {
	mu  sync.Mutex
	run *liveRun // nil while no run is live
}

// NewControl returns a control that is not attached to a run yet.
func NewControl() *Control { return &Control{} }

// Respond answers the run's permission request id: ErrNotLive when no run
// is live, ErrRequestNotFound for an id the run never asked, and
// ErrAlreadyAnswered when it already has an answer (from a rule, the
// callback, another client or its deadline). by names who answers; the
// run records it.
func (c *Control) Respond(requestID string, d drover.PermissionDecision, by string) error {
	if d.Behavior != drover.Allow && d.Behavior != drover.Deny {
		return &drover.Error{Code: drover.CodeValidation, Message: fmt.Sprintf("behavior %q: want allow or deny", d.Behavior)}
	}
	r := c.live()
	if r == nil {
		return ErrNotLive
	}
	return r.decide(requestID, d, drover.ByClient, by)
}

// Pending returns the run's permission requests that have no answer yet,
// oldest first; none when no run is live.
func (c *Control) Pending() []drover.PermissionRequestPayload {
	r := c.live()
	if r == nil {
		return nil
	}
	return r.pendingRequests()
}

// Steer sends message into the live run as a user message (CTL-3); the
// agent sees it at its next step. ErrNotLive when no run is live,
// ErrNotSupported when its agent takes no messages while it runs.
func (c *Control) Steer(message, by string) error {
	if message == "" {
		return &drover.Error{Code: drover.CodeValidation, Message: "a steering message is empty"}
	}
	r := c.live()
	if r == nil {
		return ErrNotLive
	}
	if !r.caps.Steer {
		return ErrNotSupported
	}
	r.push(drover.LiveInput{Steer: &drover.SteerPayload{Message: message, By: by}})
	return nil
}

// Interrupt ends the run's current turn but keeps its session, unlike
// cancelling the run's context (CTL-3): the run ends done{interrupted}
// with a resume token. ErrNotLive when no run is live, ErrNotSupported
// when its agent cannot be interrupted.
func (c *Control) Interrupt(by string) error {
	r := c.live()
	if r == nil {
		return ErrNotLive
	}
	if !r.caps.Interrupt {
		return ErrNotSupported
	}
	r.push(drover.LiveInput{Interrupt: &drover.InterruptPayload{By: by}})
	return nil
}

func (c *Control) live() *liveRun {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.run
}

// liveRun is the engine's side of one interactive run: it decides the
// run's permission requests and queues every input for the adapter.
type liveRun struct {
	ctl    *Control
	opts   drover.Options
	canUse drover.PermissionFunc // Hooks.CanUseTool
	caps   drover.Capabilities
	ctx    context.Context // ends when the run ends
	stop   context.CancelFunc
	wg     sync.WaitGroup // callback goroutines
	ready  chan struct{}  // capacity 1: "Take has something"

	mu      sync.Mutex
	ended   bool
	queue   []drover.LiveInput
	pending map[string]*pendingRequest
	order   []string // pending ids, oldest first
	asked   map[string]bool
	always  []grant // calls allowed for the rest of the run
}

type pendingRequest struct {
	req    drover.PermissionRequestPayload
	asked  time.Time
	timer  *time.Timer
	cancel context.CancelFunc // the callback's context
}

// grant is a call an "always" answer allowed: the same tool with exactly
// the same subject.
type grant struct{ tool, subject string }

// attach makes ctl the control of a new live run.
func attach(ctx context.Context, ctl *Control, opts drover.Options, caps drover.Capabilities, canUse drover.PermissionFunc) (*liveRun, error) {
	if ctl == nil {
		ctl = NewControl()
	}
	r := &liveRun{ctl: ctl, opts: opts, caps: caps, canUse: canUse, ready: make(chan struct{}, 1),
		pending: map[string]*pendingRequest{}, asked: map[string]bool{}}
	r.ctx, r.stop = context.WithCancel(context.WithoutCancel(ctx))
	ctl.mu.Lock()
	defer ctl.mu.Unlock()
	if ctl.run != nil {
		r.stop()
		return nil, &drover.Error{Code: drover.CodeValidation, Message: "this Control already serves a live run"}
	}
	ctl.run = r
	return r, nil
}

// Ready implements Live.
func (r *liveRun) Ready() <-chan struct{} { return r.ready }

// Take implements Live.
func (r *liveRun) Take() []drover.LiveInput {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.queue
	r.queue = nil
	return q
}

// push queues in for the adapter. The queue is unbounded so that no
// decider ever blocks: the engine decides by rule inside the adapter's own
// yield, when the adapter cannot be taking inputs.
func (r *liveRun) push(in drover.LiveInput) {
	r.mu.Lock()
	if r.ended {
		r.mu.Unlock()
		return
	}
	r.queue = append(r.queue, in)
	r.mu.Unlock()
	select {
	case r.ready <- struct{}{}:
	default:
	}
}

// open registers a permission request the adapter yielded and starts
// deciding it: a rule or an earlier "always" answer at once; else the
// callback, a client or the deadline; with neither a callback nor an
// approval timeout, a denial at once. It returns the request as the event
// shows it, with its deadline.
func (r *liveRun) open(req drover.PermissionRequestPayload) (drover.PermissionRequestPayload, error) {
	if req.RequestID == "" {
		return req, fmt.Errorf("permission request for %s without a request id", req.ToolName)
	}
	if req.Description == "" {
		// The adapter describes its vendor's tools; one that did not
		// still gets a line a person can read.
		req.Description = drover.DescribeCall(drover.ToolOther, req.ToolName, "")
	}
	now := time.Now()
	timeout := r.opts.ApprovalTimeout
	if timeout == 0 && r.canUse != nil {
		timeout = DefaultApprovalTimeout
	}
	if timeout > 0 {
		req.Deadline = now.Add(timeout).UnixMilli()
	}
	r.mu.Lock()
	if r.asked[req.RequestID] {
		r.mu.Unlock()
		return req, fmt.Errorf("permission request id %q asked twice", req.RequestID)
	}
	r.asked[req.RequestID] = true
	p := &pendingRequest{req: req, asked: now}
	r.pending[req.RequestID] = p
	r.order = append(r.order, req.RequestID)
	subject := drover.CallSubject(req.Input)
	always := slices.Contains(r.always, grant{req.ToolName, subject})
	r.mu.Unlock()

	// Answered at once: the event says so, so that nobody is asked a
	// question whose answer follows it.
	if rule, ok := decideByRules(r.opts.PermissionRules, req); ok {
		r.decide(req.RequestID, drover.PermissionDecision{Behavior: rule.Behavior, Message: ruleMessage(rule)}, drover.ByRule, rule.String())
		req.AnsweredBy, req.Deadline = drover.ByRule, 0
		return req, nil
	}
	if always {
		r.decide(req.RequestID, drover.PermissionDecision{Behavior: drover.Allow}, drover.ByRule, "always (an earlier answer)")
		req.AnsweredBy, req.Deadline = drover.ByRule, 0
		return req, nil
	}
	if r.opts.Tier == drover.TierSupervised || r.opts.Tier == "" {
		if readOnlyCommand(req.Input) {
			r.decide(req.RequestID, drover.PermissionDecision{Behavior: drover.Allow}, drover.ByRule, ReadOnlyRule)
			req.AnsweredBy, req.Deadline = drover.ByRule, 0
			return req, nil
		}
	}
	if r.canUse == nil && timeout == 0 {
		r.decide(req.RequestID, drover.PermissionDecision{Behavior: drover.Deny,
			Message: "denied: nobody is there to approve this call"}, drover.ByDefault, "")
		req.AnsweredBy = drover.ByDefault
		return req, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.pending[req.RequestID]; !ok {
		return req, nil // answered meanwhile (a client that read the event first)
	}
	p.timer = time.AfterFunc(timeout, func() {
		r.decide(req.RequestID, drover.PermissionDecision{Behavior: drover.Deny,
			Message: fmt.Sprintf("denied: no answer within %s", timeout)}, drover.ByDeadline, "")
	})
	if fn := r.canUse; fn != nil {
		ctx, cancel := context.WithDeadline(r.ctx, now.Add(timeout))
		p.cancel = cancel
		// The callback goroutine belongs to the run: close cancels its
		// context and waits for it.
		r.wg.Go(func() {
			defer cancel()
			d, err := callPermission(ctx, fn, req)
			if ctx.Err() != nil {
				return // answered otherwise, timed out, or the run ended
			}
			if err != nil {
				d = drover.PermissionDecision{Behavior: drover.Deny, Message: "denied: " + err.Error()}
			}
			r.decide(req.RequestID, d, drover.ByCallback, "")
		})
	}
	return req, nil
}

// callPermission calls fn, turning a panic into an error: a broken callback
// denies the call rather than taking the run down.
func callPermission(ctx context.Context, fn drover.PermissionFunc, req drover.PermissionRequestPayload) (d drover.PermissionDecision, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("the permission callback panicked: %v", v)
		}
	}()
	d, err = fn(ctx, req)
	if err == nil && d.Behavior != drover.Allow && d.Behavior != drover.Deny {
		err = fmt.Errorf("the permission callback answered behavior %q", d.Behavior)
	}
	return d, err
}

func ruleMessage(r drover.PermissionRule) string {
	if r.Behavior == drover.Deny {
		return "denied by rule " + r.String()
	}
	return ""
}

// decide gives request id its answer, if it has none, and queues it for
// the adapter.
func (r *liveRun) decide(id string, d drover.PermissionDecision, by drover.AnswerSource, detail string) error {
	r.mu.Lock()
	p, ok := r.pending[id]
	switch {
	case r.ended:
		r.mu.Unlock()
		return ErrNotLive
	case !ok && r.asked[id]:
		r.mu.Unlock()
		return ErrAlreadyAnswered
	case !ok:
		r.mu.Unlock()
		return fmt.Errorf("%w: %q", ErrRequestNotFound, id)
	}
	delete(r.pending, id)
	r.order = slices.DeleteFunc(r.order, func(x string) bool { return x == id })
	if p.timer != nil {
		p.timer.Stop()
	}
	if p.cancel != nil {
		p.cancel()
	}
	if d.Behavior == drover.Deny {
		d.UpdatedInput, d.Always = nil, false
	}
	if d.Always {
		r.always = append(r.always, grant{p.req.ToolName, drover.CallSubject(p.req.Input)})
	}
	a := &drover.PermissionAnswerPayload{RequestID: id, ToolName: p.req.ToolName, ToolUseID: p.req.ToolUseID,
		PermissionDecision: d, By: by, Detail: detail, AskedAt: p.asked.UnixMilli(), AnsweredAt: time.Now().UnixMilli()}
	r.mu.Unlock()
	r.push(drover.LiveInput{Answer: a})
	return nil
}

// withdraw answers a request its agent withdrew: denied, by the agent.
func (r *liveRun) withdraw(w drover.PermissionWithdrawnPayload) {
	msg := "withdrawn by the agent"
	if w.Reason != "" {
		msg += ": " + w.Reason
	}
	_ = r.decide(w.RequestID, drover.PermissionDecision{Behavior: drover.Deny, Message: msg}, drover.ByAgent, w.Reason)
}

func (r *liveRun) pendingRequests() []drover.PermissionRequestPayload {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]drover.PermissionRequestPayload, 0, len(r.order))
	for _, id := range r.order {
		out = append(out, r.pending[id].req)
	}
	return out
}

// waiting reports whether a permission request is open.
func (r *liveRun) waiting() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.order) > 0
}

// close ends the live run: requests still open are denied (ByRunEnd), and
// they and the answers the adapter never took are returned as events to
// record before "done". It detaches the Control and waits for callbacks.
// Later calls return nothing.
func (r *liveRun) close() []drover.Event {
	r.mu.Lock()
	if r.ended {
		r.mu.Unlock()
		return nil
	}
	r.mu.Unlock()
	r.ctl.mu.Lock()
	if r.ctl.run == r {
		r.ctl.run = nil
	}
	r.ctl.mu.Unlock()
	r.mu.Lock()
	now := time.Now().UnixMilli()
	var evs []drover.Event
	for _, in := range r.queue {
		if in.Answer != nil { // decided, never passed on: still the answer
			evs = append(evs, in.Event())
		}
	}
	for _, id := range r.order {
		p := r.pending[id]
		if p.timer != nil {
			p.timer.Stop()
		}
		a := drover.PermissionAnswerPayload{RequestID: id, ToolName: p.req.ToolName, ToolUseID: p.req.ToolUseID,
			PermissionDecision: drover.PermissionDecision{Behavior: drover.Deny, Message: "denied: the run ended"},
			By:                 drover.ByRunEnd, AskedAt: p.asked.UnixMilli(), AnsweredAt: now}
		evs = append(evs, drover.LiveInput{Answer: &a}.Event())
	}
	r.ended, r.queue, r.pending, r.order = true, nil, nil, nil
	r.mu.Unlock()
	r.stop()
	r.wg.Wait()
	return evs
}
