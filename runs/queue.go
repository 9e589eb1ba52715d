package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/store"
)

// Queued runs (docs/scale-out.md): a supervisor with a Config.Queue does
// not run what Start records; it records the run pending with no owner
// and hands it to the queue in the same transaction, and a worker's
// supervisor (drover worker) claims it and runs it with Adopt. Everything
// else about the run — following, awaiting, cancelling, answering — goes
// through the ledger as for any run another process owns.

// Queue hands runs to workers.
type Queue interface {
	// Submit records r (pending, Owner "") and enqueues it for a worker
	// that has r.Agent and every one of q.Labels, atomically: both happen
	// or neither. The record's errors are the store's (store.ErrConflict
	// for a duplicate id).
	Submit(ctx context.Context, r *store.Run, q Queued) error
}

// Queued is what a queued run asks of the workers (StartRequest.Labels,
// StartRequest.Retries).
type Queued struct {
	Labels  []string `json:"labels,omitempty"`
	Retries int      `json:"retries,omitempty"`
}

// submit is Start's end for a supervisor with a queue: the run is
// recorded, with no owner, and queued instead of run here.
func (s *Supervisor) submit(ctx context.Context, req StartRequest, sid string, optsJSON json.RawMessage) (Started, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return Started{}, ErrClosed
	}
	r := &store.Run{ID: NewRunID(), Agent: req.Agent, Prompt: req.Prompt, Status: store.StatusPending, ParentID: req.ParentID,
		SessionID: sid, Options: optsJSON, Timeout: req.Options.Timeout, CreatedAt: time.Now()}
	if err := s.cfg.Queue.Submit(ctx, r, Queued{Labels: req.Labels, Retries: req.Retries}); err != nil {
		return Started{}, fmt.Errorf("queue run: %w", err)
	}
	s.mu.Lock()
	s.notifyLocked()
	s.mu.Unlock()
	return Started{RunID: r.ID, SessionID: r.SessionID}, nil
}

// RunOptions decodes the options a run was recorded with, as a worker
// runs them: the values the ledger holds redacted (API keys, secret
// environment variables and headers) are dropped, so that the worker's
// own environment and credentials supply them rather than the word
// "[redacted]".
func RunOptions(r *store.Run) (drover.Options, error) {
	var o drover.Options
	if len(r.Options) > 0 {
		if err := json.Unmarshal(r.Options, &o); err != nil {
			return o, fmt.Errorf("run %s: options: %w", r.ID, err)
		}
	}
	strip := func(m map[string]string) {
		for k, v := range m {
			if v == Redacted {
				delete(m, k)
			}
		}
	}
	strip(o.Env)
	for name, m := range o.MCPServers {
		strip(m.Env)
		strip(m.Headers)
		o.MCPServers[name] = m
	}
	if o.Failover != nil {
		for _, p := range o.Failover.Profiles {
			strip(p.Env) // a worker resolves profiles by name (worker.Config.Profiles)
		}
	}
	if o.Endpoint != nil && o.Endpoint.APIKey == Redacted {
		o.Endpoint.APIKey = ""
	}
	if o.Timeout <= 0 {
		o.Timeout = r.Timeout
	}
	return o, nil
}

// Adopt runs r, a run recorded elsewhere and claimed by this supervisor
// (r.Owner is Config.Owner), with opts (see RunOptions), as Start would
// have: it waits as pending for a slot, is recorded the same way, and is
// ended "parent ended" when its parent, owned by any process, ends. The
// returned channel is closed once the ledger has the run's end. A run
// this supervisor may not run (its write boundary contains drover's own
// state, BND-3) is failed at once with that reason, and so is one whose
// agent is unknown here.
func (s *Supervisor) Adopt(ctx context.Context, r *store.Run, opts drover.Options) (<-chan struct{}, error) {
	if r.Owner != s.cfg.Owner {
		return nil, fmt.Errorf("adopt run %s: owned by %q, not %q", r.ID, r.Owner, s.cfg.Owner)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = s.cfg.DefaultTimeout
	}
	req := StartRequest{Agent: r.Agent, Prompt: r.Prompt, Options: opts}
	var err error
	if _, ok := s.eng.Registry().Get(r.Agent); !ok {
		err = fmt.Errorf("%w %q on this worker", drover.ErrUnknownAgent, r.Agent)
	} else if req, err = s.inherit(ctx, req); err == nil {
		err = s.bound(ctx, req)
	}
	if err != nil {
		done := make(chan struct{})
		close(done)
		return done, s.st.FinishRun(ctx, store.Finish{RunID: r.ID, Status: store.StatusFailed, Error: err.Error(),
			DoneStatus: drover.StatusError, EndedAt: time.Now()})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	a := &active{id: r.ID, req: req, done: make(chan struct{}), remoteParent: r.ParentID,
		children: map[string]*active{}, control: engine.NewControl()}
	// What this worker cannot run as recorded (an option its agent does
	// not honour here) fails in the run's own events, as a run that
	// started would.
	a.plan, a.planErr = s.eng.Resolve(engine.Request{Agent: req.Agent, Prompt: req.Prompt, Options: req.Options, Defaults: s.defaults()})
	if req.Options.SessionID != "" {
		if sess, err := s.st.GetSession(ctx, req.Options.SessionID); err == nil && sess.HeadRunID != "" && sess.HeadRunID != r.ID {
			a.costBefore = conversationCost(ctx, s.st, sess.HeadRunID)
		}
	}
	a.ctx, a.cancel = context.WithCancelCause(s.ctx)
	if r.CancelRequested {
		a.cancel(errCancelled)
	}
	s.active[r.ID] = a
	s.queue = append(s.queue, a)
	s.scheduleLocked()
	s.notifyLocked()
	return a.done, nil
}

// queueCanceller is a ledger that can end a queued run no worker has
// claimed yet (store/postgres).
type queueCanceller interface {
	CancelQueued(ctx context.Context, id string) (bool, error)
}

// cancelQueued ends run id "cancelled" if it waits in a queue unclaimed:
// nobody owns it, so no owner would see the cancel request. A claimed run
// is left to its owner, which sees the request.
func cancelQueued(ctx context.Context, st store.Store, id string) error {
	if q, ok := st.(queueCanceller); ok {
		_, err := q.CancelQueued(ctx, id)
		return err
	}
	return nil
}
