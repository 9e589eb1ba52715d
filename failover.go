package drover

import (
	"context"
	"fmt"
	"iter"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Profile is a named set of credentials for an agent (FAIL-1): environment
// variables (an API key), or a vendor configuration home holding a login.
// Its Env values are secrets: Options.Redacted replaces every one of them,
// so they never reach the ledger, events or API responses (SEC-3).
type Profile struct {
	// Name names the profile in events, cooldowns and the ledger.
	Name string `json:"name"`
	// Agent is the agent (id or alias) the credentials are for; empty
	// means any agent.
	Agent string `json:"agent,omitempty"`
	// Env is added to the vendor process environment over Options.Env.
	Env map[string]string `json:"env,omitempty"`
	// ConfigDir, when set, is the vendor configuration home the attempt
	// runs with (Options.ConfigDir): a home the user logged in to.
	ConfigDir string `json:"configDir,omitempty"`
}

// Failover is a run's failover chain (FAIL-1): the credential profiles,
// models and agents to try when an attempt fails retryably before any tool
// ran. Attempts go profile by profile, then model by model, then agent by
// agent: the run's agent with Options.Model, then with each of Models; then
// each of Agents with its default model. Each agent is tried with every
// profile for it (Profile.Agent names it or is empty), in order, or with
// the run's own credentials when none is for it.
type Failover struct {
	// Profiles are the credential profiles, in the order they are tried.
	Profiles []Profile `json:"profiles,omitempty"`
	// Models are the models tried after Options.Model, with the run's agent.
	Models []string `json:"models,omitempty"`
	// Agents are the agents (ids or aliases) tried after the run's agent.
	Agents []string `json:"agents,omitempty"`
}

// validate checks what holds for every chain.
func (f *Failover) validate() error {
	seen := map[string]bool{}
	for _, p := range f.Profiles {
		switch {
		case p.Name == "":
			return &Error{Code: CodeValidation, Message: "failover: a profile has no name"}
		case seen[p.Name]:
			return &Error{Code: CodeValidation, Message: fmt.Sprintf("failover: profile %q named twice", p.Name)}
		}
		seen[p.Name] = true
	}
	if slices.Contains(f.Models, "") {
		return &Error{Code: CodeValidation, Message: "failover: an empty model name"}
	}
	if slices.Contains(f.Agents, "") {
		return &Error{Code: CodeValidation, Message: "failover: an empty agent name"}
	}
	return nil
}

// redacted returns a copy of f with every profile's Env value replaced by
// Redacted.
func (f *Failover) redacted() *Failover {
	out := &Failover{Models: slices.Clone(f.Models), Agents: slices.Clone(f.Agents)}
	for _, p := range f.Profiles {
		if p.Env != nil {
			env := make(map[string]string, len(p.Env))
			for k := range p.Env {
				env[k] = Redacted
			}
			p.Env = env
		}
		out.Profiles = append(out.Profiles, p)
	}
	return out
}

// failoverCodes are the failures an attempt may be retried after, on the
// next link of the chain, when no tool ran.
var failoverCodes = []ErrorCode{CodeRateLimited, CodeOverloaded, CodeServerError, CodeAuthFailed}

// CooldownFor is how long a profile cools down after a failure with code
// when the vendor gave no retry-after: a rate limit a minute, an overload
// 30 s, a server error 15 s, refused credentials 15 minutes (a key that
// was refused is unlikely to work again soon).
func CooldownFor(code ErrorCode) time.Duration {
	switch code {
	case CodeRateLimited:
		return time.Minute
	case CodeOverloaded:
		return 30 * time.Second
	case CodeServerError:
		return 15 * time.Second
	case CodeAuthFailed:
		return 15 * time.Minute
	}
	return 0
}

// MetaSessionCostUSD is the metadata key of a done event by which an
// adapter says that the vendor reported the cost as the running total of
// the session the run resumed (Claude Code), not the run's own.
const MetaSessionCostUSD = "sessionCostUsd"

// MetaRetryAfterMs is the metadata key of an error event by which an
// adapter reports the vendor's retry-after, in milliseconds; failover
// cools the profile down for that long instead of CooldownFor.
const MetaRetryAfterMs = "retryAfterMs"

// Cooldowns is the registry of cooling credentials that the failover of
// every run of one Engine shares: what one run found rate limited, the
// next run skips until it has cooled down. Shared through a CooldownStore
// (Share), it is also what the other processes on that store found. It is
// safe for concurrent use.
type Cooldowns struct {
	mu     sync.Mutex
	until  map[string]cooldown
	now    func() time.Time
	shared CooldownStore
	report func(error)
}

type cooldown struct {
	until time.Time
	code  ErrorCode
}

// CooldownStore keeps cooldowns where several processes see them: every
// worker on one PostgreSQL ledger skips the credentials any of them found
// rate limited. Durations, not instants, cross it, so machines whose
// clocks disagree still agree on how long is left. Keys name a profile,
// agent and model, never a secret. store/sqlite and store/postgres
// implement it.
type CooldownStore interface {
	// CoolDown records that key cools down for d after a failure with
	// code; a cooldown already recorded that ends later is kept.
	CoolDown(ctx context.Context, key string, code ErrorCode, d time.Duration) error
	// CooldownLeft returns how long key has left to cool and the failure
	// that started it; zero when key is not cooling.
	CooldownLeft(ctx context.Context, key string) (time.Duration, ErrorCode, error)
}

// sharedTimeout bounds one CooldownStore call: a ledger that does not
// answer must not hold up a run's failover, which then goes on with what
// this process knows.
const sharedTimeout = 2 * time.Second

// NewCooldowns returns an empty registry.
func NewCooldowns() *Cooldowns {
	return &Cooldowns{until: map[string]cooldown{}, now: time.Now}
}

// Share makes c write every cooldown through to s and consult s for keys
// it does not know to be cooling. A call to s that fails (report is told,
// when not nil) leaves c working on what this process knows: a shared
// ledger being down never fails a run.
func (c *Cooldowns) Share(s CooldownStore, report func(error)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.shared, c.report = s, report
}

func (c *Cooldowns) sharing() (CooldownStore, func(error)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	report := c.report
	if report == nil {
		report = func(error) {}
	}
	return c.shared, report
}

// Cool marks key as cooling for d after a failure with code; a longer
// cooldown already set is kept.
func (c *Cooldowns) Cool(key string, code ErrorCode, d time.Duration) {
	c.coolLocal(key, cooldown{until: c.now().Add(d), code: code})
	if s, report := c.sharing(); s != nil {
		ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
		defer cancel()
		if err := s.CoolDown(ctx, key, code, d); err != nil {
			report(fmt.Errorf("failover: share cooldown of %s: %w", key, err))
		}
	}
}

func (c *Cooldowns) coolLocal(key string, cd cooldown) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.until[key]; ok && cur.until.After(cd.until) {
		return
	}
	c.until[key] = cd
}

// Until returns when key's cooldown ends and the failure that started it;
// a zero time when key is not cooling.
func (c *Cooldowns) Until(key string) (time.Time, ErrorCode) {
	if t, code := c.untilLocal(key); !t.IsZero() {
		return t, code
	}
	s, report := c.sharing()
	if s == nil {
		return time.Time{}, ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	defer cancel()
	left, code, err := s.CooldownLeft(ctx, key)
	if err != nil {
		report(fmt.Errorf("failover: read shared cooldown of %s: %w", key, err))
		return time.Time{}, ""
	}
	if left <= 0 {
		return time.Time{}, ""
	}
	// Held here until it ends: what another process started is not asked
	// for again by every pick of this one.
	cd := cooldown{until: c.now().Add(left), code: code}
	c.coolLocal(key, cd)
	return cd.until, cd.code
}

func (c *Cooldowns) untilLocal(key string) (time.Time, ErrorCode) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cd, ok := c.until[key]
	if !ok {
		return time.Time{}, ""
	}
	if !cd.until.After(c.now()) {
		delete(c.until, key)
		return time.Time{}, ""
	}
	return cd.until, cd.code
}

// Cooldowns returns the engine's cooldown registry, shared by the
// failover of all its runs (one engine serves a drover process).
func (e *Engine) Cooldowns() *Cooldowns {
	e.coolOnce.Do(func() {
		if e.cool == nil {
			e.cool = NewCooldowns()
		}
	})
	return e.cool
}

// link is one attempt of a failover chain.
type link struct {
	a       Adapter
	model   string
	profile *Profile // nil: the run's own credentials
}

func (l link) String() string {
	s := l.a.ID()
	if l.model != "" {
		s += " model " + l.model
	}
	if l.profile != nil {
		s += " profile " + l.profile.Name
	}
	return s
}

// keys are the cooldown keys of l: the profile across agents and models
// (set by refused credentials), and the profile with this agent and model
// (set by rate limits, overload and server errors). The run's own
// credentials count as the profile "" of the agent.
func (l link) keys() (profile, model string) {
	name := "agent:" + l.a.ID()
	if l.profile != nil {
		name = "profile:" + l.profile.Name
	}
	return name, name + "|" + l.a.ID() + "|" + l.model
}

// AttemptRecord is one attempt of a run with a failover chain, as the done
// event's metadata.attempts lists them.
type AttemptRecord struct {
	Agent   string `json:"agent"`
	Model   string `json:"model,omitempty"`
	Profile string `json:"profile,omitempty"`
	// Kind is "compaction" for the turn that compacted the session after
	// a context overflow; empty for an attempt at the run's prompt.
	Kind       string     `json:"kind,omitempty"`
	Status     DoneStatus `json:"status"`
	Code       ErrorCode  `json:"code,omitempty"`
	Usage      Usage      `json:"usage"`
	DurationMs int64      `json:"durationMs"`
}

// chain returns the links of a run of a with opts.Failover, in order, or
// an error naming a fallback agent that is not registered or cannot honour
// the run's options.
func (e *Engine) chain(a Adapter, opts Options) ([]link, error) {
	f := opts.Failover
	agents := []Adapter{a}
	for _, name := range f.Agents {
		fa, ok := e.reg.Get(name)
		if !ok {
			return nil, fmt.Errorf("failover: %w %q (registered: %s)", ErrUnknownAgent, name, strings.Join(e.reg.List(), ", "))
		}
		o := attemptOptions(opts, a, link{a: fa})
		if err := fa.Capabilities().Unsupported(o); err != nil {
			return nil, &Error{Code: CodeOf(err, CodeUnsupportedOption), Message: fmt.Sprintf("failover agent %s: %v", fa.ID(), err)}
		}
		if !slices.ContainsFunc(agents, func(x Adapter) bool { return x.ID() == fa.ID() }) {
			agents = append(agents, fa)
		}
	}
	for _, p := range f.Profiles {
		if p.Agent == "" {
			continue
		}
		if _, ok := e.reg.Get(p.Agent); !ok {
			return nil, fmt.Errorf("failover: profile %q: %w %q", p.Name, ErrUnknownAgent, p.Agent)
		}
	}
	var links []link
	for i, ag := range agents {
		models := []string{""}
		if i == 0 {
			models = append([]string{opts.Model}, f.Models...)
		}
		var profiles []*Profile
		for j := range f.Profiles {
			p := &f.Profiles[j]
			if pa, ok := e.reg.Get(p.Agent); p.Agent == "" || ok && pa.ID() == ag.ID() {
				profiles = append(profiles, p)
			}
		}
		if len(profiles) == 0 {
			profiles = []*Profile{nil}
		}
		for _, m := range models {
			for _, p := range profiles {
				links = append(links, link{a: ag, model: m, profile: p})
			}
		}
	}
	return links, nil
}

// attemptOptions are the options of the attempt l of a run of primary
// with opts: the link's model and profile; another agent than the run's
// starts a new conversation, in a configuration home of its own.
func attemptOptions(opts Options, primary Adapter, l link) Options {
	o := opts
	o.Failover = nil
	o.Model = l.model
	if l.a.ID() != primary.ID() {
		o.Resume, o.Fork = "", false
		if o.ConfigDir != "" {
			o.ConfigDir = filepath.Join(o.ConfigDir, l.a.ID())
		}
	}
	if p := l.profile; p != nil {
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

// failover is the stream of a run with a failover chain, or of an agent
// whose sessions can be compacted: one attempt after another on the same
// stream, until one ends other than by a retryable failure before any tool
// ran, or the chain ends. Each switch is an error{recoverable:true} event
// naming what failed and what comes next. A CONTEXT_OVERFLOW is answered
// once per run by compacting the attempt's session with the vendor's own
// compaction and retrying in it (see CompactPrompt). The final done of a
// run that made more than one attempt, or has a chain, carries the usage
// of every attempt summed, the duration of the whole run, and
// metadata.attempts; a single plain attempt's done is passed on as it is.
func (e *Engine) failover(ctx context.Context, primary Adapter, prompt string, opts Options, runID string) iter.Seq[Event] {
	return func(yield func(Event) bool) {
		if opts.SessionID == "" {
			opts.SessionID = NewSessionID()
		}
		start := time.Now()
		emit := func(agent string, typ EventType, p any, meta map[string]any) bool {
			ev := NewEvent(typ, agent, opts.SessionID, p)
			ev.RunID, ev.Metadata = runID, meta
			return yield(ev)
		}
		fail := func(agent string, code ErrorCode, msg string) {
			if emit(agent, TypeError, ErrorPayload{Code: code, Message: msg}, nil) {
				emit(agent, TypeDone, DonePayload{Status: StatusError, DurationMs: time.Since(start).Milliseconds()}, nil)
			}
		}
		chained := opts.Failover != nil
		links := []link{{a: primary, model: opts.Model}}
		if chained {
			var err error
			if links, err = e.chain(primary, opts); err != nil {
				fail(primary.ID(), CodeOf(err, CodeUnknownAgent), err.Error())
				return
			}
		}
		cool := e.Cooldowns()
		var (
			attempts  []AttemptRecord
			total     Usage
			next      = 0
			compacted bool // the run has compacted once; it does not again
		)
		// sessionCost is each vendor session's running cost (by resume
		// token) at the end of this run's last attempt in it: a vendor
		// that reports a resumed turn's cost as the session's running
		// total (done metadata sessionCostUsd, Claude) has each attempt's
		// own share counted, not the total again.
		sessionCost := map[string]float64{}
		record := func(l link, kind string, r attemptResult) {
			u, token := r.done.Usage, r.done.ResumeToken
			if t, ok := r.doneEv.Metadata[MetaSessionCostUSD].(float64); ok && u.TotalCostUSD != nil {
				if prev, ok := sessionCost[token]; ok {
					own := max(t-prev, 0)
					u.TotalCostUSD = &own
				}
				sessionCost[token] = t
			} else if u.TotalCostUSD != nil && token != "" {
				sessionCost[token] = *u.TotalCostUSD // a new session's first turn: its cost is the session's
			}
			r.done.Usage = u
			rec := AttemptRecord{Agent: l.a.ID(), Model: l.model, Kind: kind, Status: r.done.Status, Code: r.code,
				Usage: u, DurationMs: r.done.DurationMs}
			if l.profile != nil {
				rec.Profile = l.profile.Name
			}
			attempts = append(attempts, rec)
			total = addUsage(total, r.done.Usage)
		}
		// pick returns the next link not cooling down, from next on; a run
		// without a chain never consults the cooldowns.
		pick := func() (link, bool) {
			for ; next < len(links); next++ {
				pk, mk := links[next].keys()
				if chained {
					if t, _ := cool.Until(pk); !t.IsZero() {
						continue
					}
					if t, _ := cool.Until(mk); !t.IsZero() {
						continue
					}
				}
				l := links[next]
				next++
				return l, true
			}
			return link{}, false
		}
		// finish passes on the held error, marked with note, and the final
		// done of the run.
		finish := func(r attemptResult, note string) {
			if r.heldErr != nil {
				p := r.heldErr.Payload.(ErrorPayload)
				p.Message += note
				r.heldErr.Payload = p
				if !yield(*r.heldErr) {
					return
				}
			}
			d := r.doneEv
			if !chained && len(attempts) == 1 {
				yield(d)
				return
			}
			p := r.done
			p.Usage = total
			p.DurationMs = time.Since(start).Milliseconds()
			d.Payload = p
			d.Metadata = maps.Clone(d.Metadata)
			if d.Metadata == nil {
				d.Metadata = map[string]any{}
			}
			d.Metadata["attempts"] = attempts
			yield(d)
		}
		cur, ok := pick()
		if !ok {
			fail(primary.ID(), coolingCode(cool, links), coolingMessage(cool, links))
			return
		}
		turnPrompt, resume := prompt, ""
		for {
			o := attemptOptions(opts, primary, cur)
			if resume != "" {
				// The retry after a compaction continues the compacted session.
				o.Resume, o.Fork = resume, false
			}
			if opts.Timeout > 0 {
				o.Timeout = opts.Timeout - time.Since(start)
				if o.Timeout <= 0 {
					fail(cur.a.ID(), CodeTimeout, fmt.Sprintf("run exceeded its timeout of %s", opts.Timeout))
					return
				}
			}
			res := e.runAttempt(ctx, cur, turnPrompt, o, runID, yield)
			if res.stopped {
				return
			}
			record(cur, "", res)
			turnPrompt, resume = prompt, ""
			failed := res.done.Status == StatusError && ctx.Err() == nil

			if failed && res.code == CodeContextOverflow && !compacted && res.done.ResumeToken != "" && CompactPrompt(cur.a) != "" {
				compacted = true
				cp := CompactPrompt(cur.a)
				if !emit(cur.a.ID(), TypeError, ErrorPayload{Code: CodeContextOverflow, Recoverable: true,
					Message: fmt.Sprintf("%s overflowed its context window (%s); compacting its session (%s) and retrying once", cur, res.message, cp)},
					map[string]any{"compaction": map[string]any{"agent": cur.a.ID(), "prompt": cp, "session": res.done.ResumeToken}}) {
					return
				}
				co := o
				co.Resume, co.Fork = res.done.ResumeToken, false
				if opts.Timeout > 0 {
					if co.Timeout = opts.Timeout - time.Since(start); co.Timeout <= 0 {
						fail(cur.a.ID(), CodeTimeout, fmt.Sprintf("run exceeded its timeout of %s", opts.Timeout))
						return
					}
				}
				cres := e.runAttempt(ctx, cur, cp, co, runID, yield)
				if cres.stopped {
					return
				}
				record(cur, "compaction", cres)
				if cres.done.Status != StatusSuccess {
					finish(cres, " (compacting the session after a context overflow failed)")
					return
				}
				if !cres.compacted {
					// The turn ended well but the vendor reported no
					// compaction (Claude: "Not enough messages to
					// compact"): retrying would overflow again.
					res.doneEv = cres.doneEv
					p := cres.done
					p.Status = StatusError
					res.done = p
					finish(res, fmt.Sprintf(" (not retried: %s reported no compaction of the session)", cur.a.ID()))
					return
				}
				resume = cres.done.ResumeToken
				if resume == "" {
					resume = res.done.ResumeToken
				}
				if res.toolRan {
					// The turn had done work the summary now holds: asking
					// again would redo it.
					turnPrompt = continuePrompt
				}
				continue
			}

			if failed && slices.Contains(failoverCodes, res.code) && chained && !res.toolRan {
				d := res.retryAfter
				if d <= 0 {
					d = CooldownFor(res.code)
				}
				pk, mk := cur.keys()
				if res.code == CodeAuthFailed {
					cool.Cool(pk, res.code, d)
				} else {
					cool.Cool(mk, res.code, d)
				}
				if nextLink, ok := pick(); ok {
					if !emit(cur.a.ID(), TypeError, ErrorPayload{Code: res.code, Recoverable: true,
						Message: fmt.Sprintf("%s failed (%s: %s); cooling down for %s; trying %s", cur, res.code, res.message, d.Round(time.Millisecond), switchText(cur, nextLink))},
						map[string]any{"failover": map[string]any{"from": linkMeta(cur), "to": linkMeta(nextLink), "cooldownMs": d.Milliseconds()}}) {
						return
					}
					cur = nextLink
					continue
				}
			}
			note := ""
			if failed && slices.Contains(failoverCodes, res.code) && chained {
				n := len(attempts)
				switch {
				case res.toolRan:
					note = " (not retried: a tool had already run in this attempt)"
				case n > 1:
					note = fmt.Sprintf(" (failover chain exhausted after %d attempts)", n)
				default:
					note = " (failover chain exhausted)"
				}
			}
			finish(res, note)
			return
		}
	}
}

// continuePrompt is the prompt of the retry after a compaction when the
// overflowing turn had already run tools: the compacted session holds what
// it did, and the agent goes on from there.
const continuePrompt = "Continue the task you were working on: the conversation was compacted because it no longer fit the context window."

// compactPrompts are the vendors' own compaction commands, sent as the
// prompt of a turn resuming the session, by adapter id, for adapters that
// do not implement Compacter. Claude Code's /compact works headless (-p
// with --resume) and reports a compact_boundary (claude-code:compact).
var compactPrompts = map[string]string{"claude-code": "/compact"}

// Compacter is an optional interface of an adapter whose vendor compacts a
// session when asked by a prompt.
type Compacter interface {
	// CompactPrompt is the prompt that, sent in a turn resuming a session,
	// makes the vendor compact it.
	CompactPrompt() string
}

// CompactPrompt returns how a's vendor is asked to compact a session: the
// adapter's own CompactPrompt, else the one drover knows for it, else ""
// (the vendor cannot be asked).
func CompactPrompt(a Adapter) string {
	if c, ok := a.(Compacter); ok {
		return c.CompactPrompt()
	}
	return compactPrompts[a.ID()]
}

// attemptResult is how one attempt of a failover chain ended.
type attemptResult struct {
	stopped    bool // the consumer stopped iterating
	toolRan    bool
	compacted  bool      // the vendor reported a compaction (an event VENDOR:compact)
	code       ErrorCode // of the last unrecoverable error event
	message    string
	retryAfter time.Duration
	heldErr    *Event // the last unrecoverable error, not yet emitted
	doneEv     Event
	done       DonePayload
}

// runAttempt runs one attempt, passing its events on as they come except
// its unrecoverable error just before done and done itself, which the
// caller emits or replaces by a switch.
func (e *Engine) runAttempt(ctx context.Context, l link, prompt string, o Options, runID string, yield func(Event) bool) attemptResult {
	var r attemptResult
	for ev := range e.attempt(ctx, l.a, prompt, o, runID) {
		if ev.Type == TypeDone {
			r.doneEv = ev
			r.done, _ = ev.Payload.(DonePayload)
			return r
		}
		if p, ok := ev.Payload.(ErrorPayload); ok && ev.Type == TypeError && !p.Recoverable {
			// Held until it is known whether done follows at once: an
			// error the attempt goes on after is passed on as it was.
			if r.heldErr != nil && !yield(*r.heldErr) {
				r.stopped = true
				return r
			}
			held := ev
			r.heldErr, r.code, r.message = &held, p.Code, p.Message
			r.retryAfter = retryAfter(ev.Metadata)
			continue
		}
		if r.heldErr != nil {
			if !yield(*r.heldErr) {
				r.stopped = true
				return r
			}
			r.heldErr, r.code, r.message, r.retryAfter = nil, "", "", 0
		}
		if ev.Type == TypeToolUse {
			r.toolRan = true
		}
		if strings.HasSuffix(string(ev.Type), ":compact") {
			r.compacted = true
		}
		if !yield(ev) {
			r.stopped = true
			return r
		}
	}
	// The engine ends every attempt with done unless the consumer stopped.
	r.stopped = true
	return r
}

// retryAfter reads MetaRetryAfterMs from an error event's metadata.
func retryAfter(meta map[string]any) time.Duration {
	switch v := meta[MetaRetryAfterMs].(type) {
	case float64:
		return time.Duration(v * float64(time.Millisecond))
	case int64:
		return time.Duration(v) * time.Millisecond
	case int:
		return time.Duration(v) * time.Millisecond
	}
	return 0
}

// switchText names what changes from l to next: the profile, the model
// or the agent.
func switchText(l, next link) string {
	name := func(p *Profile) string {
		if p == nil {
			return "the run's own credentials"
		}
		return p.Name
	}
	model := func(m string) string {
		if m == "" {
			return "the default model"
		}
		return m
	}
	switch {
	case next.a.ID() != l.a.ID():
		s := "agent " + next.a.ID()
		if next.profile != nil {
			s += " with profile " + next.profile.Name
		}
		return s
	case next.model != l.model:
		return fmt.Sprintf("model %s with %s", model(next.model), name(next.profile))
	}
	return "profile " + name(next.profile)
}

func linkMeta(l link) map[string]any {
	m := map[string]any{"agent": l.a.ID()}
	if l.model != "" {
		m["model"] = l.model
	}
	if l.profile != nil {
		m["profile"] = l.profile.Name
	}
	return m
}

// coolingCode is the code of the failure that cooled the first link, for
// a run whose every link is cooling.
func coolingCode(cool *Cooldowns, links []link) ErrorCode {
	for _, l := range links {
		pk, mk := l.keys()
		if _, c := cool.Until(pk); c != "" {
			return c
		}
		if _, c := cool.Until(mk); c != "" {
			return c
		}
	}
	return CodeRateLimited
}

// coolingMessage says that every link is cooling and when the first
// cooldown ends.
func coolingMessage(cool *Cooldowns, links []link) string {
	var soonest time.Time
	for _, l := range links {
		pk, mk := l.keys()
		for _, k := range []string{pk, mk} {
			if t, _ := cool.Until(k); !t.IsZero() && (soonest.IsZero() || t.Before(soonest)) {
				soonest = t
			}
		}
	}
	return fmt.Sprintf("failover: every profile, model and agent of the chain is cooling down after a failure; the first cools down at %s",
		soonest.UTC().Format(time.RFC3339))
}

// addUsage sums two attempts' usage; an optional field is present when
// either reported it.
func addUsage(a, b Usage) Usage {
	a.InputTokens += b.InputTokens
	a.OutputTokens += b.OutputTokens
	a.ToolUses += b.ToolUses
	a.TotalCostUSD = addOpt(a.TotalCostUSD, b.TotalCostUSD)
	a.CacheReadTokens = addOpt(a.CacheReadTokens, b.CacheReadTokens)
	a.CacheWriteTokens = addOpt(a.CacheWriteTokens, b.CacheWriteTokens)
	a.ReasoningTokens = addOpt(a.ReasoningTokens, b.ReasoningTokens)
	a.Turns = addOpt(a.Turns, b.Turns)
	a.CostEstimated = a.CostEstimated || b.CostEstimated // a sum with any estimate in it is an estimate
	return a
}

func addOpt[T int64 | float64](a, b *T) *T {
	switch {
	case a == nil && b == nil:
		return nil
	case a == nil:
		v := *b
		return &v
	case b == nil:
		v := *a
		return &v
	}
	v := *a + *b
	return &v
}
