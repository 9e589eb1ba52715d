package engine

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/contain"
	"github.com/drover-run/drover/pricing"
)

// Request asks for one run: what travels on the wire (Agent, Prompt,
// Options) and what cannot (Hooks), with the defaults of whoever runs it.
type Request struct {
	// Agent is an adapter id or alias.
	Agent  string
	Prompt string
	// Options are the run's options as a client gave them; the plan keeps
	// them as they are, but for what Defaults fill in.
	Options drover.Options
	Hooks   Hooks
	// Defaults fill in what Options leave unset.
	Defaults Defaults
	// RunID, when set, is stamped as runId on the run's events, so that a
	// reader can tell interleaved runs apart (RunParallel).
	RunID string
}

// Hooks are a run's in-process hooks: functions and handles that live in
// the process running it and never travel on the wire or reach the ledger.
type Hooks struct {
	// CanUseTool decides the run's permission requests that no rule
	// decides (PERM-2), within Options.ApprovalTimeout (default
	// DefaultApprovalTimeout). An agent that cannot be asked refuses a run
	// with it (UNSUPPORTED_OPTION).
	CanUseTool drover.PermissionFunc
	// Control, when set, is the run's live control: answers to its
	// permission requests, steering, interrupts (CTL-1, CTL-3). Keep it to
	// act on the run while it is live.
	Control *Control
	// Observer is told about every vendor process the run starts (RUN-6).
	Observer drover.ProcessObserver
	// ProcessEnv, when set, is the environment drover adds to the vendor
	// process, in place of Options.Env: the runner's own variables merged
	// with the run's (the supervisor's: the run's id, the nested-run
	// socket). It is never recorded.
	ProcessEnv map[string]string
}

// Defaults are what a runner of runs fills in where a run's options say
// nothing.
type Defaults struct {
	// Timeout applies when Options.Timeout is 0.
	Timeout time.Duration
	// ApprovalTimeout applies when Options.ApprovalTimeout is 0 and the
	// agent can be asked (Capabilities.Permissions).
	ApprovalTimeout time.Duration
	// Live says that the runner gives every run a Control before it
	// executes it (the supervisor does): the plan is made for a run that
	// can be answered or steered, whatever the hooks it is resolved with.
	Live bool
	// Workspaces says that the runner gives a run with Options.Worktree
	// its workspace, as Cwd (the supervisor does); without it such a run
	// is refused.
	Workspaces bool
}

// Containment is what a run gets of kernel containment (SEC-2): on, or
// off and why ("off", "autonomous", "vendor sandbox", "landlock
// unavailable"; docs/security.md).
type Containment struct {
	On     bool
	Reason string
}

// Plan is a run resolved once (API-3): its adapter, options validated
// against what the adapter honours (ADP-3) with defaults applied, its tier,
// its containment, its failover chain (FAIL-1) with each attempt's options,
// the limits drover enforces where the vendor does not, and whether it can
// be answered or steered. Every face, the supervisor, a worker and the
// engine use the same plan; a plan does not change once made (WithHooks
// returns another).
type Plan struct {
	req      Request
	adapter  drover.Adapter
	tier     drover.Tier
	contain  Containment
	attempts []attempt // the chain; attempts[0] is the run's own
	chained  bool      // the run has a failover chain (Options.Failover)
	compact  string    // the vendor's compaction prompt; "" when it has none
}

// attempt is one link of a plan's chain: an agent, a model and the
// credentials to try, with the options its adapter is given.
type attempt struct {
	adapter drover.Adapter
	model   string
	profile *drover.Profile // nil: the run's own credentials
	opts    drover.Options  // without the limits drover enforces (lim)
	lim     limits
}

// Agent is the run's agent by its canonical id.
func (p *Plan) Agent() string { return p.adapter.ID() }

// Adapter is the run's adapter.
func (p *Plan) Adapter() drover.Adapter { return p.adapter }

// Prompt is the run's prompt.
func (p *Plan) Prompt() string { return p.req.Prompt }

// Options are the run's options as asked, with the defaults applied. The
// maps and slices are the plan's: the caller must not change them.
func (p *Plan) Options() drover.Options { return p.req.Options }

// Hooks are the run's in-process hooks.
func (p *Plan) Hooks() Hooks { return p.req.Hooks }

// Tier is the run's permission tier by its canonical name.
func (p *Plan) Tier() drover.Tier { return p.tier }

// Containment is what the run gets of kernel containment.
func (p *Plan) Containment() Containment { return p.contain }

// Agents are the agents of the run's failover chain, the run's own first,
// each once.
func (p *Plan) Agents() []string {
	var ids []string
	for _, a := range p.attempts {
		if !slices.Contains(ids, a.adapter.ID()) {
			ids = append(ids, a.adapter.ID())
		}
	}
	return ids
}

// WithHooks returns the plan with h as its hooks, refusing a permission
// callback its agent cannot honour, and containment it cannot have with
// them (UNSUPPORTED_OPTION): whether a run can be answered or steered
// decides where an agent that sandboxes its own commands headless can be
// contained (contain.Decide).
func (p *Plan) WithHooks(h Hooks) (*Plan, error) {
	caps := p.adapter.Capabilities()
	if h.CanUseTool != nil && !caps.Permissions {
		return nil, &drover.Error{Code: drover.CodeUnsupportedOption, Message: "canUseTool (answering permission requests) is not supported by this agent"}
	}
	q := *p
	q.req.Hooks = h
	d, err := contain.Decide(q.req.Options, caps, q.live() && takesLive(caps), contain.Available)
	if err != nil {
		return nil, err
	}
	q.contain = Containment(d)
	return &q, nil
}

// InSession returns the plan of the run in drover session sid: what a
// supervisor that records the run's session (after resolving it, so
// that nothing is recorded for a run it refuses) gives the engine, which
// stamps it on every event.
func (p *Plan) InSession(sid string) *Plan {
	q := *p
	q.req.Options.SessionID = sid
	return &q
}

// live reports whether the run can be answered or steered: then the
// engine gives the adapter a Live.
func (p *Plan) live() bool {
	o, h := p.req.Options, p.req.Hooks
	return p.req.Defaults.Live || h.Control != nil || h.CanUseTool != nil || o.ApprovalTimeout > 0 || len(o.PermissionRules) > 0
}

// takesLive reports whether an adapter with caps is given the Live of a
// run that can be answered or steered.
func takesLive(caps drover.Capabilities) bool {
	return caps.Permissions || caps.Steer || caps.Interrupt
}

// Resolve turns req into a plan, or says why it cannot run, before
// anything starts: an unregistered agent (drover.ErrUnknownAgent), options
// no agent could accept (VALIDATION_ERROR), and options, a tier, a
// containment, a fallback agent or a budget the chain cannot honour
// (UNSUPPORTED_OPTION; a fallback agent that is not registered is
// ErrUnknownAgent).
func (e *Engine) Resolve(req Request) (*Plan, error) {
	a, ok := e.reg.Get(req.Agent)
	if !ok {
		return nil, fmt.Errorf("%w %q (registered: %s)", drover.ErrUnknownAgent, req.Agent, strings.Join(e.reg.List(), ", "))
	}
	req.Agent = a.ID()
	caps := a.Capabilities()
	o := &req.Options
	if o.Timeout == 0 {
		o.Timeout = req.Defaults.Timeout
	}
	if o.ApprovalTimeout == 0 && caps.Permissions {
		o.ApprovalTimeout = req.Defaults.ApprovalTimeout
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Worktree != nil && !req.Defaults.Workspaces {
		return nil, &drover.Error{Code: drover.CodeUnsupportedOption, Message: "worktree: a run's workspace is made by drover's supervisor (drover run, a drover server), not by the engine alone"}
	}
	p := &Plan{req: req, adapter: a, tier: o.EffectiveTier(), chained: o.Failover != nil}
	if err := unsupported(caps, *o); err != nil {
		return nil, err
	}
	var err error
	if p.attempts, err = e.chain(a, *o); err != nil {
		return nil, err
	}
	if c, ok := a.(drover.Compacter); ok {
		p.compact = c.CompactPrompt()
	}
	return p.WithHooks(req.Hooks)
}

// unsupported is caps.Unsupported with the tier a run did not name said
// as such: the default tier is not one the agent can enforce.
func unsupported(caps drover.Capabilities, o drover.Options) error {
	err := caps.Unsupported(o)
	if err != nil && o.Tier == "" && !slices.Contains(caps.Tiers, drover.DefaultTier) && len(caps.Tiers) > 0 {
		tiers := make([]string, len(caps.Tiers))
		for i, t := range caps.Tiers {
			tiers[i] = string(t)
		}
		return &drover.Error{Code: drover.CodeUnsupportedOption, Message: fmt.Sprintf(
			"this agent runs only in tier %s, and the run names no tier (the default is %s): name tier %s (drover run --tier %s)",
			strings.Join(tiers, " or "), drover.DefaultTier, caps.Tiers[0], caps.Tiers[0])}
	}
	return err
}

// chain returns the attempts of a run of a with opts, in order: the run's
// own with the run's model, then (with a failover chain) profile by
// profile, model by model, agent by agent (see drover.Failover). A
// fallback agent that is not registered or cannot honour the run's
// options, a profile for no agent of the chain, and a budget drover must
// enforce on a model it cannot price are errors.
func (e *Engine) chain(a drover.Adapter, opts drover.Options) ([]attempt, error) {
	f := opts.Failover
	if f == nil {
		f = &drover.Failover{}
	}
	agents := []drover.Adapter{a}
	for _, name := range f.Agents {
		fa, ok := e.reg.Get(name)
		if !ok {
			return nil, fmt.Errorf("failover: %w %q (registered: %s)", drover.ErrUnknownAgent, name, strings.Join(e.reg.List(), ", "))
		}
		if err := unsupported(fa.Capabilities(), attemptOptions(opts, a, fa, "", nil)); err != nil {
			return nil, &drover.Error{Code: drover.CodeOf(err, drover.CodeUnsupportedOption), Message: fmt.Sprintf("failover agent %s: %v", fa.ID(), err)}
		}
		if !slices.ContainsFunc(agents, func(x drover.Adapter) bool { return x.ID() == fa.ID() }) {
			agents = append(agents, fa)
		}
	}
	for _, p := range f.Profiles {
		if p.Agent == "" {
			continue
		}
		pa, ok := e.reg.Get(p.Agent)
		if !ok {
			return nil, fmt.Errorf("failover: profile %q: %w %q", p.Name, drover.ErrUnknownAgent, p.Agent)
		}
		if !slices.ContainsFunc(agents, func(x drover.Adapter) bool { return x.ID() == pa.ID() }) {
			// It would be silently unused.
			return nil, &drover.Error{Code: drover.CodeValidation, Message: fmt.Sprintf(
				"failover: profile %s: its credentials are for %s, which this run does not use (its agent or a fallback agent)", p.Name, p.Agent)}
		}
	}
	var out []attempt
	for i, ag := range agents {
		models := []string{""}
		if i == 0 {
			models = append([]string{opts.Model}, f.Models...)
		}
		var profiles []*drover.Profile
		for j := range f.Profiles {
			p := &f.Profiles[j]
			if pa, ok := e.reg.Get(p.Agent); p.Agent == "" || ok && pa.ID() == ag.ID() {
				profiles = append(profiles, p)
			}
		}
		if len(profiles) == 0 {
			profiles = []*drover.Profile{nil}
		}
		for _, m := range models {
			for _, p := range profiles {
				at := attempt{adapter: ag, model: m, profile: p, opts: attemptOptions(opts, a, ag, m, p)}
				var err error
				if at.lim, err = newLimits(ag.Capabilities(), &at.opts); err != nil {
					return nil, err
				}
				out = append(out, at)
			}
		}
	}
	return out, nil
}

// attemptOptions are the options of an attempt with agent ag, model and
// profile of a run of primary with opts: another agent than the run's
// starts a new conversation, in a configuration home of its own.
func attemptOptions(opts drover.Options, primary, ag drover.Adapter, model string, p *drover.Profile) drover.Options {
	o := opts
	o.Failover = nil
	o.Model = model
	if ag.ID() != primary.ID() {
		o.Resume, o.Fork = "", false
		if o.ConfigDir != "" {
			o.ConfigDir = filepath.Join(o.ConfigDir, ag.ID())
		}
	}
	if p != nil {
		o.Env = maps.Clone(o.Env)
		if o.Env == nil {
			o.Env = map[string]string{}
		}
		maps.Copy(o.Env, p.Env)
		if p.ConfigDir != "" {
			o.ConfigDir = p.ConfigDir
		}
	}
	return o
}

// limits are what drover enforces of a run's turn and budget limits where
// the vendor does not (Capabilities.NativeMaxTurns, NativeMaxBudget), and
// the price tables of its cost estimate (docs/limits.md).
type limits struct {
	maxTurns int     // 0: not enforced by drover
	budget   float64 // 0: not enforced by drover
	prices   []map[string]drover.Price
}

// newLimits takes over from opts the limits that the vendor (caps) does
// not enforce, removing them from what the adapter is given, and finds the
// prices. A budget drover enforces on a model with no known price is an
// error; a run that names no model is checked at its init instead.
func newLimits(caps drover.Capabilities, opts *drover.Options) (limits, error) {
	var l limits
	if opts.MaxTurns > 0 && !caps.NativeMaxTurns {
		l.maxTurns, opts.MaxTurns = opts.MaxTurns, 0
	}
	if opts.MaxBudgetUSD > 0 && !caps.NativeMaxBudget {
		l.budget, opts.MaxBudgetUSD = opts.MaxBudgetUSD, 0
	}
	var err error
	if l.prices, err = pricing.Tables(opts.Prices); err != nil {
		return l, &drover.Error{Code: drover.CodeValidation, Message: err.Error()}
	}
	if l.budget > 0 && opts.Model != "" {
		if _, ok := pricing.Lookup(opts.Model, l.prices...); !ok {
			return l, noPrice(opts.Model)
		}
	}
	return l, nil
}

// noPrice is the error of a budget drover cannot count on model.
func noPrice(model string) error {
	if model == "" {
		model = "(the agent's default, unnamed)"
	}
	return &drover.Error{Code: drover.CodeUnsupportedOption, Message: fmt.Sprintf(
		"maxBudgetUsd: no price known for model %q, so drover cannot count its cost: give its price in Options.Prices (drover run --prices FILE) or a %s file (docs/limits.md)", model, pricing.Env)}
}
