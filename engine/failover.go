package engine

import (
	"context"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/drover-run/drover"
)

// failoverCodes are the failures an attempt may be retried after, on the
// next attempt of the chain, when no tool ran.
var failoverCodes = []drover.ErrorCode{drover.CodeRateLimited, drover.CodeOverloaded, drover.CodeServerError, drover.CodeAuthFailed}

// AttemptRecord is one attempt of a run with a failover chain, as the done
// event's metadata.attempts lists them.
type AttemptRecord struct {
	Agent   string `json:"agent"`
	Model   string `json:"model,omitempty"`
	Profile string `json:"profile,omitempty"`
	// Kind is "compaction" for the turn that compacted the session after
	// a context overflow; empty for an attempt at the run's prompt.
	Kind       string            `json:"kind,omitempty"`
	Status     drover.DoneStatus `json:"status"`
	Code       drover.ErrorCode  `json:"code,omitempty"`
	Usage      drover.Usage      `json:"usage"`
	DurationMs int64             `json:"durationMs"`
}

// continuePrompt is the prompt of the retry after a compaction when the
// overflowing turn had already run tools: the compacted session holds what
// it did, and the agent goes on from there.
const continuePrompt = "Continue the task you were working on: the conversation was compacted because it no longer fit the context window."

// failover is the stream of a run with a failover chain, or of an agent
// whose sessions can be compacted (drover.Compacter): one attempt after
// another on the same stream, until one ends other than by a retryable
// failure before any tool ran, or the chain ends. Each switch is an
// error{recoverable:true} event naming what failed and what comes next. A
// CONTEXT_OVERFLOW is answered once per run by compacting the attempt's
// session with the vendor's own compaction and retrying in it. The final
// done of a run that made more than one attempt, or has a chain, carries
// the usage of every attempt summed, the duration of the whole run, and
// metadata.attempts; a single plain attempt's done is passed on as it is.
func (e *Engine) failover(ctx context.Context, p *Plan, sid string) iter.Seq[drover.Event] {
	return func(yield func(drover.Event) bool) {
		c := &chainRun{e: e, p: p, sid: sid, yield: yield, start: time.Now(), cool: e.Cooldowns(), sessionCost: map[string]float64{}}
		c.run(ctx)
	}
}

// chainRun is one execution of a plan's chain.
type chainRun struct {
	e     *Engine
	p     *Plan
	sid   string
	yield func(drover.Event) bool
	start time.Time
	cool  *Cooldowns

	next      int // the first attempt of p.attempts not tried or skipped yet
	records   []AttemptRecord
	total     drover.Usage
	compacted bool // the run has compacted once; it does not again
	// sessionCost is each vendor session's running cost (by resume token)
	// at the end of this run's last attempt in it: a vendor that reports a
	// resumed turn's cost as the session's running total (done metadata
	// sessionCostUsd, Claude) has each attempt's own share counted, not
	// the total again.
	sessionCost map[string]float64
}

func (c *chainRun) run(ctx context.Context) {
	cur, ok := c.pick()
	if !ok {
		c.fail(c.p.Agent(), c.coolingCode(), c.coolingMessage())
		return
	}
	prompt, resume := c.p.req.Prompt, ""
	for {
		res, ok := c.try(ctx, cur, prompt, resume, "")
		if !ok {
			return
		}
		prompt, resume = c.p.req.Prompt, ""
		failed := res.done.Status == drover.StatusError && ctx.Err() == nil
		if failed && res.code == drover.CodeContextOverflow && !c.compacted && res.done.ResumeToken != "" && c.p.compact != "" {
			if resume, ok = c.compact(ctx, cur, res); !ok {
				return
			}
			if res.toolRan {
				// The turn had done work the summary now holds: asking
				// again would redo it.
				prompt = continuePrompt
			}
			continue
		}
		if failed && slices.Contains(failoverCodes, res.code) && c.p.chained && !res.toolRan {
			next, switched, ok := c.switchFrom(cur, res)
			if !ok {
				return
			}
			if switched {
				cur = next
				continue
			}
		}
		c.finish(res, c.note(failed, res))
		return
	}
}

// options are at's options for a try resuming resume ("": as planned),
// with what is left of the run's timeout; false when none is left (the
// run has then failed TIMEOUT).
func (c *chainRun) options(at attempt, resume string) (drover.Options, bool) {
	o := at.opts
	if resume != "" {
		o.Resume, o.Fork = resume, false
	}
	if total := c.p.req.Options.Timeout; total > 0 {
		if o.Timeout = total - time.Since(c.start); o.Timeout <= 0 {
			c.fail(at.adapter.ID(), drover.CodeTimeout, fmt.Sprintf("run exceeded its timeout of %s", total))
			return o, false
		}
	}
	return o, true
}

// try runs one attempt and records it; false when the run is over (the
// consumer stopped, or no time was left).
func (c *chainRun) try(ctx context.Context, at attempt, prompt, resume, kind string) (attemptResult, bool) {
	o, ok := c.options(at, resume)
	if !ok {
		return attemptResult{}, false
	}
	res := c.runAttempt(ctx, at, prompt, o)
	if res.stopped {
		return res, false
	}
	c.record(at, kind, &res)
	return res, true
}

// compact answers res's context overflow: it compacts the attempt's
// session with the vendor's own compaction and returns the session to
// retry in; false when the run ended instead (the compaction failed or
// was not reported, or the consumer stopped).
func (c *chainRun) compact(ctx context.Context, at attempt, res attemptResult) (string, bool) {
	c.compacted = true
	cp := c.p.compact
	if !c.emit(at.adapter.ID(), drover.TypeError, drover.ErrorPayload{Code: drover.CodeContextOverflow, Recoverable: true,
		Message: fmt.Sprintf("%s overflowed its context window (%s); compacting its session (%s) and retrying once", at, res.message, cp)},
		map[string]any{"compaction": map[string]any{"agent": at.adapter.ID(), "prompt": cp, "session": res.done.ResumeToken}}) {
		return "", false
	}
	cres, ok := c.try(ctx, at, cp, res.done.ResumeToken, "compaction")
	switch {
	case !ok:
		return "", false
	case cres.done.Status != drover.StatusSuccess:
		c.finish(cres, " (compacting the session after a context overflow failed)")
		return "", false
	case !cres.compacted:
		// The turn ended well but the vendor reported no compaction
		// (Claude: "Not enough messages to compact"): retrying would
		// overflow again.
		res.doneEv = cres.doneEv
		d := cres.done
		d.Status = drover.StatusError
		res.done = d
		c.finish(res, fmt.Sprintf(" (not retried: %s reported no compaction of the session)", at.adapter.ID()))
		return "", false
	}
	if cres.done.ResumeToken != "" {
		return cres.done.ResumeToken, true
	}
	return res.done.ResumeToken, true
}

// switchFrom cools at down after res's retryable failure and picks the
// next attempt not cooling; switched is false when the chain is
// exhausted, ok false when the consumer stopped.
func (c *chainRun) switchFrom(at attempt, res attemptResult) (next attempt, switched, ok bool) {
	d := res.retryAfter
	if d <= 0 {
		d = CooldownFor(res.code)
	}
	pk, mk := at.keys()
	if res.code == drover.CodeAuthFailed {
		c.cool.Cool(pk, res.code, d)
	} else {
		c.cool.Cool(mk, res.code, d)
	}
	next, switched = c.pick()
	if !switched {
		return next, false, true
	}
	ok = c.emit(at.adapter.ID(), drover.TypeError, drover.ErrorPayload{Code: res.code, Recoverable: true,
		Message: fmt.Sprintf("%s failed (%s: %s); cooling down for %s; trying %s", at, res.code, res.message, d.Round(time.Millisecond), switchText(at, next))},
		map[string]any{"failover": map[string]any{"from": at.meta(), "to": next.meta(), "cooldownMs": d.Milliseconds()}})
	return next, true, ok
}

// note says why a failed attempt's failure ends the run.
func (c *chainRun) note(failed bool, res attemptResult) string {
	if !failed || !slices.Contains(failoverCodes, res.code) || !c.p.chained {
		return ""
	}
	switch n := len(c.records); {
	case res.toolRan:
		return " (not retried: a tool had already run in this attempt)"
	case n > 1:
		return fmt.Sprintf(" (failover chain exhausted after %d attempts)", n)
	}
	return " (failover chain exhausted)"
}

// pick returns the next attempt not cooling down; a run without a chain
// never consults the cooldowns.
func (c *chainRun) pick() (attempt, bool) {
	for ; c.next < len(c.p.attempts); c.next++ {
		at := c.p.attempts[c.next]
		if c.p.chained && c.cooling(at) {
			continue
		}
		c.next++
		return at, true
	}
	return attempt{}, false
}

// cooling reports whether either of at's cooldown keys is cooling.
func (c *chainRun) cooling(at attempt) bool {
	pk, mk := at.keys()
	for _, k := range []string{pk, mk} {
		if t, _ := c.cool.Until(k); !t.IsZero() {
			return true
		}
	}
	return false
}

// record adds one attempt's usage, its own share of a vendor session's
// running cost, to the run's.
func (c *chainRun) record(at attempt, kind string, r *attemptResult) {
	u, token := r.done.Usage, r.done.ResumeToken
	if t, ok := r.doneEv.Metadata[drover.MetaSessionCostUSD].(float64); ok && u.TotalCostUSD != nil {
		if prev, ok := c.sessionCost[token]; ok && *u.TotalCostUSD == t {
			// The adapter could only say the session's running total.
			own := max(t-prev, 0)
			u.TotalCostUSD = &own
		}
		c.sessionCost[token] = t
	} else if u.TotalCostUSD != nil && token != "" {
		c.sessionCost[token] = *u.TotalCostUSD // a new session's first turn: its cost is the session's
	}
	r.done.Usage = u
	rec := AttemptRecord{Agent: at.adapter.ID(), Model: at.model, Kind: kind, Status: r.done.Status, Code: r.code,
		Usage: u, DurationMs: r.done.DurationMs}
	if at.profile != nil {
		rec.Profile = at.profile.Name
	}
	c.records = append(c.records, rec)
	c.total = addUsage(c.total, u)
}

// finish passes on the held error, marked with note, and the final done
// of the run.
func (c *chainRun) finish(r attemptResult, note string) {
	if r.heldErr != nil {
		p := r.heldErr.Payload.(drover.ErrorPayload)
		p.Message += note
		r.heldErr.Payload = p
		if !c.yield(*r.heldErr) {
			return
		}
	}
	d := r.doneEv
	if !c.p.chained && len(c.records) == 1 {
		c.yield(d)
		return
	}
	p := r.done
	p.Usage = c.total
	p.DurationMs = time.Since(c.start).Milliseconds()
	d.Payload = p
	d.Metadata = maps.Clone(d.Metadata)
	if d.Metadata == nil {
		d.Metadata = map[string]any{}
	}
	d.Metadata["attempts"] = c.records
	c.yield(d)
}

func (c *chainRun) emit(agent string, typ drover.EventType, p any, meta map[string]any) bool {
	ev := drover.NewEvent(typ, agent, c.sid, p)
	ev.RunID, ev.Metadata = c.p.req.RunID, meta
	return c.yield(ev)
}

func (c *chainRun) fail(agent string, code drover.ErrorCode, msg string) {
	if c.emit(agent, drover.TypeError, drover.ErrorPayload{Code: code, Message: msg}, nil) {
		c.emit(agent, drover.TypeDone, drover.DonePayload{Status: drover.StatusError, DurationMs: time.Since(c.start).Milliseconds()}, nil)
	}
}

// coolingCode is the code of the failure that cooled the first attempt,
// for a run whose every attempt is cooling.
func (c *chainRun) coolingCode() drover.ErrorCode {
	for _, at := range c.p.attempts {
		pk, mk := at.keys()
		for _, k := range []string{pk, mk} {
			if _, code := c.cool.Until(k); code != "" {
				return code
			}
		}
	}
	return drover.CodeRateLimited
}

// coolingMessage says that every attempt is cooling and when the first
// cooldown ends.
func (c *chainRun) coolingMessage() string {
	var soonest time.Time
	for _, at := range c.p.attempts {
		pk, mk := at.keys()
		for _, k := range []string{pk, mk} {
			if t, _ := c.cool.Until(k); !t.IsZero() && (soonest.IsZero() || t.Before(soonest)) {
				soonest = t
			}
		}
	}
	return fmt.Sprintf("failover: every profile, model and agent of the chain is cooling down after a failure; the first cools down at %s",
		soonest.UTC().Format(time.RFC3339))
}

// attemptResult is how one attempt of a chain ended.
type attemptResult struct {
	stopped    bool // the consumer stopped iterating
	toolRan    bool
	compacted  bool             // the vendor reported a compaction (an event VENDOR:compact)
	code       drover.ErrorCode // of the last unrecoverable error event
	message    string
	retryAfter time.Duration
	heldErr    *drover.Event // the last unrecoverable error, not yet emitted
	doneEv     drover.Event
	done       drover.DonePayload
}

// runAttempt runs one attempt, passing its events on as they come except
// its unrecoverable error just before done and done itself, which the
// caller emits or replaces by a switch.
func (c *chainRun) runAttempt(ctx context.Context, at attempt, prompt string, o drover.Options) attemptResult {
	var r attemptResult
	for ev := range c.e.attempt(ctx, c.p, at, prompt, o, c.sid) {
		if ev.Type == drover.TypeDone {
			r.doneEv = ev
			r.done, _ = ev.Payload.(drover.DonePayload)
			return r
		}
		if p, ok := ev.Payload.(drover.ErrorPayload); ok && ev.Type == drover.TypeError && !p.Recoverable {
			// Held until it is known whether done follows at once: an
			// error the attempt goes on after is passed on as it was.
			if r.heldErr != nil && !c.yield(*r.heldErr) {
				r.stopped = true
				return r
			}
			held := ev
			r.heldErr, r.code, r.message = &held, p.Code, p.Message
			r.retryAfter = retryAfter(ev.Metadata)
			continue
		}
		if r.heldErr != nil {
			if !c.yield(*r.heldErr) {
				r.stopped = true
				return r
			}
			r.heldErr, r.code, r.message, r.retryAfter = nil, "", "", 0
		}
		if ev.Type == drover.TypeToolUse {
			r.toolRan = true
		}
		if strings.HasSuffix(string(ev.Type), ":compact") {
			r.compacted = true
		}
		if !c.yield(ev) {
			r.stopped = true
			return r
		}
	}
	// The engine ends every attempt with done unless the consumer stopped.
	r.stopped = true
	return r
}

// String names at in events: its agent, model and profile.
func (at attempt) String() string {
	s := at.adapter.ID()
	if at.model != "" {
		s += " model " + at.model
	}
	if at.profile != nil {
		s += " profile " + at.profile.Name
	}
	return s
}

// keys are the cooldown keys of at: the profile across agents and models
// (set by refused credentials), and the profile with this agent and model
// (set by rate limits, overload and server errors). The run's own
// credentials count as the profile "" of the agent.
func (at attempt) keys() (profile, model string) {
	name := "agent:" + at.adapter.ID()
	if at.profile != nil {
		name = "profile:" + at.profile.Name
	}
	return name, name + "|" + at.adapter.ID() + "|" + at.model
}

func (at attempt) meta() map[string]any {
	m := map[string]any{"agent": at.adapter.ID()}
	if at.model != "" {
		m["model"] = at.model
	}
	if at.profile != nil {
		m["profile"] = at.profile.Name
	}
	return m
}

// retryAfter reads MetaRetryAfterMs from an error event's metadata.
func retryAfter(meta map[string]any) time.Duration {
	switch v := meta[drover.MetaRetryAfterMs].(type) {
	case float64:
		return time.Duration(v * float64(time.Millisecond))
	case int64:
		return time.Duration(v) * time.Millisecond
	case int:
		return time.Duration(v) * time.Millisecond
	}
	return 0
}

// switchText names what changes from at to next: the profile, the model
// or the agent.
func switchText(at, next attempt) string {
	name := func(p *drover.Profile) string {
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
	case next.adapter.ID() != at.adapter.ID():
		s := "agent " + next.adapter.ID()
		if next.profile != nil {
			s += " with profile " + next.profile.Name
		}
		return s
	case next.model != at.model:
		return fmt.Sprintf("model %s with %s", model(next.model), name(next.profile))
	}
	return "profile " + name(next.profile)
}

// addUsage sums two attempts' usage; an optional field is present when
// either reported it.
func addUsage(a, b drover.Usage) drover.Usage {
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
