package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/store"
)

// Live control of runs (CTL-1, CTL-3): every run this supervisor starts has
// a engine.Control. A run it owns is answered, steered and interrupted
// through that Control at once; a run another drover process owns is
// reached through the ledger (store.PostControl), and its owner applies
// the message within its Poll interval.
//
// Errors, the same for a run owned here or elsewhere: store.ErrNotFound
// for an unknown run; engine.ErrNotLive for a run not running (pending,
// or ended); engine.ErrRequestNotFound for a request the run never made;
// engine.ErrAlreadyAnswered for one already answered; engine.ErrNotSupported
// when the run's agent cannot be steered or interrupted; drover.ErrValidation
// for an answer that is neither allow nor deny, or an empty message. An
// answer to a run owned elsewhere that passes these checks is accepted
// before its owner applies it: if the request is answered meanwhile (by
// its deadline, say), the owner refuses it and the ledger shows the answer
// that won.

// Respond answers the permission request requestID of run runID; by names
// who answers (recorded with the answer).
func (s *Supervisor) Respond(ctx context.Context, runID, requestID string, d drover.PermissionDecision, by string) error {
	if d.Behavior != drover.Allow && d.Behavior != drover.Deny {
		return &drover.Error{Code: drover.CodeValidation, Message: fmt.Sprintf("behavior %q: want allow or deny", d.Behavior)}
	}
	if a := s.lookup(runID); a != nil {
		return a.control.Respond(requestID, d, by)
	}
	if _, err := s.remote(ctx, runID); err != nil {
		return err
	}
	open, answered, err := requests(ctx, s.st, runID)
	if err != nil {
		return err
	}
	switch {
	case answered[requestID]:
		return engine.ErrAlreadyAnswered
	case !slices.ContainsFunc(open, func(p drover.PermissionRequestPayload) bool { return p.RequestID == requestID }):
		return fmt.Errorf("%w: %q", engine.ErrRequestNotFound, requestID)
	}
	payload, err := json.Marshal(store.ControlAnswer{RequestID: requestID, PermissionDecision: d})
	if err != nil {
		return err
	}
	return s.post(ctx, runID, store.ControlRespond, payload, by)
}

// Steer sends message into run runID as a user message (CTL-3).
func (s *Supervisor) Steer(ctx context.Context, runID, message, by string) error {
	if message == "" {
		return &drover.Error{Code: drover.CodeValidation, Message: "a steering message is empty"}
	}
	if a := s.lookup(runID); a != nil {
		return a.control.Steer(message, by)
	}
	r, err := s.remote(ctx, runID)
	if err != nil {
		return err
	}
	if !s.agentCan(r.Agent, func(c drover.Capabilities) bool { return c.Steer }) {
		return engine.ErrNotSupported
	}
	payload, err := json.Marshal(drover.SteerPayload{Message: message})
	if err != nil {
		return err
	}
	return s.post(ctx, runID, store.ControlSteer, payload, by)
}

// Interrupt ends run runID's current turn and keeps its session (CTL-3);
// the run ends done{interrupted} with a resume token.
func (s *Supervisor) Interrupt(ctx context.Context, runID, by string) error {
	if a := s.lookup(runID); a != nil {
		return a.control.Interrupt(by)
	}
	r, err := s.remote(ctx, runID)
	if err != nil {
		return err
	}
	if !s.agentCan(r.Agent, func(c drover.Capabilities) bool { return c.Interrupt }) {
		return engine.ErrNotSupported
	}
	return s.post(ctx, runID, store.ControlInterrupt, nil, by)
}

// Pending returns run runID's permission requests that have no answer,
// oldest first: from its Control when this supervisor runs it, else from
// the ledger. store.ErrNotFound for an unknown run.
func (s *Supervisor) Pending(ctx context.Context, runID string) ([]drover.PermissionRequestPayload, error) {
	if a := s.lookup(runID); a != nil {
		return a.control.Pending(), nil
	}
	r, err := s.st.GetRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	if r.Status.Terminal() {
		return nil, nil
	}
	return OpenRequests(ctx, s.st, runID)
}

// Waiting is a permission request waiting for an answer, with the run
// that asks it: a line of the inbox.
type Waiting struct {
	RunID  string `json:"runId"`
	Agent  string `json:"agent"`
	Prompt string `json:"prompt"`
	// Owner names the drover process running it ("host:pid").
	Owner   string                          `json:"owner,omitempty"`
	AskedAt time.Time                       `json:"askedAt"`
	Request drover.PermissionRequestPayload `json:"request"`
}

// inboxRuns bounds the runs Inbox looks at: the most recent running runs.
const inboxRuns = 1000

// Inbox returns every permission request waiting for an answer across the
// running runs of the ledger (this process's, other processes', other
// machines' sharing it), oldest first; agent, if not empty, keeps only
// that agent's. A request this process has answered but not yet recorded
// is left out.
func (s *Supervisor) Inbox(ctx context.Context, agent string) ([]Waiting, error) {
	rs, err := s.st.ListRuns(ctx, store.RunFilter{Status: []store.RunStatus{store.StatusRunning}, Agent: agent, Limit: inboxRuns})
	if err != nil {
		return nil, err
	}
	var out []Waiting
	for _, r := range rs {
		var live map[string]bool // open at this process's Control
		if a := s.lookup(r.ID); a != nil {
			live = map[string]bool{}
			for _, p := range a.control.Pending() {
				live[p.RequestID] = true
			}
		}
		open, err := waitingIn(ctx, s.st, r)
		if err != nil {
			return nil, err
		}
		for _, w := range open {
			if live == nil || live[w.Request.RequestID] {
				out = append(out, w)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b Waiting) int { return a.AskedAt.Compare(b.AskedAt) })
	return out, nil
}

// waitingIn reads from the ledger run r's permission requests that have
// no answer, oldest first.
func waitingIn(ctx context.Context, st store.Store, r store.Run) ([]Waiting, error) {
	var open []Waiting
	answered := map[string]bool{}
	err := eachRequest(ctx, st, r.ID, func(ev drover.Event) {
		switch p := ev.Payload.(type) {
		case drover.PermissionRequestPayload:
			if p.AnsweredBy == "" {
				open = append(open, Waiting{RunID: r.ID, Agent: r.Agent, Prompt: r.Prompt, Owner: r.Owner,
					AskedAt: time.UnixMilli(ev.Timestamp), Request: p})
			}
		case drover.PermissionAnswerPayload:
			answered[p.RequestID] = true
		}
	})
	return slices.DeleteFunc(open, func(w Waiting) bool { return answered[w.Request.RequestID] }), err
}

// OpenRequests reads from the ledger run runID's permission requests that
// have no answer, oldest first: what a process that does not own the run
// can know of them.
func OpenRequests(ctx context.Context, st store.Store, runID string) ([]drover.PermissionRequestPayload, error) {
	open, _, err := requests(ctx, st, runID)
	return open, err
}

// remote checks that runID, not owned here, exists and is running.
func (s *Supervisor) remote(ctx context.Context, runID string) (*store.Run, error) {
	r, err := s.st.GetRun(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", runID, err)
	}
	if r.Status != store.StatusRunning {
		return nil, fmt.Errorf("run %s is %s: %w", runID, r.Status, engine.ErrNotLive)
	}
	return r, nil
}

func (s *Supervisor) agentCan(agent string, can func(drover.Capabilities) bool) bool {
	a, ok := s.eng.Registry().Get(agent)
	return ok && can(a.Capabilities())
}

func (s *Supervisor) post(ctx context.Context, runID, kind string, payload json.RawMessage, by string) error {
	err := s.st.PostControl(ctx, &store.ControlMessage{RunID: runID, Kind: kind, Payload: payload, By: by})
	if errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("run %s has ended: %w", runID, engine.ErrNotLive)
	}
	return err
}

// requests reads run runID's permission requests from the ledger: those
// without an answer, oldest first, and the ids of those answered.
func requests(ctx context.Context, st store.Store, runID string) (open []drover.PermissionRequestPayload, answered map[string]bool, err error) {
	answered = map[string]bool{}
	err = eachRequest(ctx, st, runID, func(ev drover.Event) {
		switch p := ev.Payload.(type) {
		case drover.PermissionRequestPayload:
			open = append(open, p)
		case drover.PermissionAnswerPayload:
			answered[p.RequestID] = true
		}
	})
	if err != nil {
		return nil, nil, err
	}
	open = slices.DeleteFunc(open, func(p drover.PermissionRequestPayload) bool { return answered[p.RequestID] })
	return open, answered, nil
}

// eachRequest calls fn with each permission request and answer of run
// runID the ledger holds, in order.
func eachRequest(ctx context.Context, st store.Store, runID string, fn func(drover.Event)) error {
	var after int64
	for {
		evs, err := st.Events(ctx, runID, after, 1000)
		if err != nil {
			return err
		}
		for _, e := range evs {
			after = e.Seq
			if e.Type != drover.TypePermissionRequest && e.Type != drover.TypePermissionAnswer {
				continue
			}
			var ev drover.Event
			if err := json.Unmarshal(e.JSON, &ev); err != nil {
				return fmt.Errorf("ledger event %s#%d: %w", runID, e.Seq, err)
			}
			fn(ev)
		}
		if len(evs) < 1000 {
			return nil
		}
	}
}

// applyControls takes the control messages other processes posted for
// the runs in ids (all owned here) and applies them to their Controls.
// What cannot be applied any more (a request answered meanwhile, a run
// that has ended) is logged, not retried: the ledger shows what won.
func (s *Supervisor) applyControls(ids []string) {
	if len(ids) == 0 {
		return
	}
	ms, err := s.st.TakeControls(s.ctx, ids)
	if err != nil {
		if s.ctx.Err() == nil {
			s.log.Warn("ledger: could not read control messages", "err", err)
		}
		return
	}
	for _, m := range ms {
		a := s.lookup(m.RunID)
		if a == nil {
			s.log.Info("control message for a run that has ended", "run", m.RunID, "kind", m.Kind, "by", m.By)
			continue
		}
		if err := applyControl(a.control, m); err != nil {
			s.log.Info("control message not applied", "run", m.RunID, "kind", m.Kind, "by", m.By, "err", err)
		}
	}
}

func applyControl(c *engine.Control, m store.ControlMessage) error {
	switch m.Kind {
	case store.ControlRespond:
		var a store.ControlAnswer
		if err := json.Unmarshal(m.Payload, &a); err != nil {
			return err
		}
		return c.Respond(a.RequestID, a.PermissionDecision, m.By)
	case store.ControlSteer:
		var p drover.SteerPayload
		if err := json.Unmarshal(m.Payload, &p); err != nil {
			return err
		}
		return c.Steer(p.Message, m.By)
	case store.ControlInterrupt:
		return c.Interrupt(m.By)
	}
	return fmt.Errorf("unknown control kind %q", m.Kind)
}
