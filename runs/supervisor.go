// Package runs is drover's supervisor: every agent run becomes a process
// drover starts, limits, times out, cancels, nests in a tree, and records in
// the ledger (docs/requirements.md §6, RUN-1…RUN-7).
//
// Events flow one way: the engine yields an event, the supervisor gives it
// runId and seq, persists it, and only then tells readers it exists. Readers
// follow a run through the ledger by seq (Follow), so a slow reader never
// slows a run and never misses an event.
package runs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/store"
)

// Config tunes a Supervisor.
type Config struct {
	// Limit is the number of runs that may be running at once (RUN-7);
	// 0 means 8. Runs past it wait as pending, in the order started.
	Limit int
	// DefaultTimeout applies to runs that name none (RUN-4); 0 means 1 h.
	DefaultTimeout time.Duration
	// DefaultApprovalTimeout applies to runs that name no approval
	// timeout, when their agent can be asked (Capabilities.Permissions):
	// how long their permission requests wait for a client's answer. 0
	// means none: what no rule or callback decides is denied at once.
	DefaultApprovalTimeout time.Duration
	// Owner names this supervisor in the ledger; "" means "host:pid".
	Owner string
	// Notifier, if set, is told when a run this supervisor executes asks
	// for permission, when it ends, and when a budget ends it (CON-3).
	Notifier Notifier
	// Observer, if set, is told what the runs this supervisor executes
	// do: their start, each event recorded and its commit time, their
	// permission requests and answers, their end (OBS-2: metrics). nil
	// costs nothing.
	Observer Observer
	// Poll is how often runs owned elsewhere are checked (cross-process
	// cancel, Await and Follow); 0 means 250 ms.
	Poll time.Duration
	// Logger receives what the supervisor cannot report to a caller:
	// ledger writes that failed after a run started (warn; Follow and
	// Await also report those that lost a run's record), runs reconciled
	// at start-up (info; warn for those it could not record). nil means
	// none (quiet).
	Logger *slog.Logger
	// Env is added to the environment of every agent process a run
	// starts (a run's own Options.Env wins over it), and EnvRunID with the
	// run's id is always set, so that a drover started inside the run (a
	// nested `drover mcp`) records its runs as the run's children (MCP-1);
	// it reaches this supervisor through ServeNested's socket. Neither is
	// recorded with the run's options. No credential or ledger address
	// belongs here: the agent can read all of it (SEC-5).
	Env map[string]string
	// Protected are drover's own state, which no run's write boundary may
	// contain (BND-3): the ledger's directory, drover's configuration
	// directory. Start refuses such a run with BOUNDARY_VIOLATION. The
	// drover command sets them; nil protects nothing.
	Protected []string
	// Queue, when set, makes Start queue runs for workers instead of
	// running them here (runs/queue.go, docs/scale-out.md).
	Queue Queue
	// Workspaces is the directory that holds runs' workspaces (WS-1,
	// Options.Worktree; runs/workspace.go): each run's in a directory
	// named by its id. When set, every run working in a git repository
	// also has its change recorded (WS-2). "" refuses worktree runs and
	// records no change.
	Workspaces string
	// MaxPatch is the largest patch of a change the ledger keeps; 0
	// means DefaultMaxPatch.
	MaxPatch int
}

// Variables every agent process a run starts finds in its environment
// (see Config.Env), so that a drover it starts nests its runs (MCP-1).
const (
	// EnvRunID holds the id of the run the process belongs to. Always set.
	EnvRunID = "DROVER_RUN_ID"
	// EnvDB names the ledger to the drover command. Agents never get it
	// (SEC-5): a nested drover reaches the ledger through EnvSocket.
	EnvDB = "DROVER_DB"
)

// StartRequest asks for one run. Its Options.SessionID continues that
// drover session (LED-4; "" starts a new one) and its Options.Timeout
// overrides Config.DefaultTimeout (RUN-4).
type StartRequest struct {
	Agent   string
	Prompt  string
	Options drover.Options
	// ParentID makes the run a child of an active run (RUN-5), of this
	// supervisor or of another drover process sharing the ledger (a run
	// started from inside a run, MCP-1). It is ended "parent ended" when
	// the parent ends: with it, for a parent of this supervisor (the
	// parent's end is recorded after the child's); within Config.Poll of
	// the parent's end in the ledger, for a parent owned elsewhere.
	ParentID string
	// ForkFrom starts a new session that continues from the end of that
	// earlier run, leaving the run's own session untouched (LED-4). The
	// agent must be the run's agent and able to fork.
	ForkFrom string
	// Labels restrict a queued run (Config.Queue) to workers that have
	// every one of them; a supervisor without a queue refuses them.
	Labels []string
	// NewSession creates the session Options.SessionID names, for the
	// run's new conversation, rather than continuing it: a client that
	// names its sessions itself (an ACP editor) records one only with its
	// first run. A session of that id must not exist yet.
	NewSession bool
	// Retries is how many times a queued run whose worker is lost is run
	// again, as a new run on another worker (for idempotent tasks; 0, the
	// default, never: a coding agent's side effects make blind re-runs
	// wrong). A supervisor without a queue refuses it.
	Retries int
	// Revise continues the work of an earlier run in its workspace, with
	// the change building on that run's (WS-3, drover revise): the run's
	// change moves to revised. Options.Cwd lies in that workspace.
	Revise *Revision
}

// Revision names the run a revise continues and who asked.
type Revision struct {
	RunID string
	By    string
}

// Started names a run Start recorded and the session it belongs to.
type Started struct {
	RunID     string `json:"runId"`
	SessionID string `json:"sessionId"`
	// Workspace and Branch are those of a run in a workspace of its own
	// (Options.Worktree); Uncommitted are the files of the user's working
	// tree with changes the workspace does not carry (without
	// Worktree.IncludeDirty).
	Workspace   string   `json:"workspace,omitempty"`
	Branch      string   `json:"branch,omitempty"`
	Uncommitted []string `json:"uncommitted,omitempty"`
}

// Errors.
var (
	// ErrClosed: the supervisor is closed.
	ErrClosed = errors.New("supervisor closed")
	// ErrParentEnded: the named parent is not an active run: it has
	// ended, its end was asked for (a cancel), or the ledger has no run of
	// that id.
	ErrParentEnded = errors.New("parent run is not active")
)

// UnrecordedError is what Follow fails with for a run of this supervisor
// that has ended with something the ledger could not record (a full disk,
// a file system gone read-only): some of its events, or its end; and
// Await, when it is the end (LED-7). The ledger keeps showing what it last
// recorded of the run until a later drover reconciles it (RUN-6).
type UnrecordedError struct {
	RunID string
	Err   error // the ledger's
}

// Error says which run and what the ledger said.
func (e *UnrecordedError) Error() string {
	return fmt.Sprintf("run %s has ended, but the ledger could not record it: %v", e.RunID, e.Err)
}

// Unwrap returns the ledger's error.
func (e *UnrecordedError) Unwrap() error { return e.Err }

// causes are why drover ended a run; their text is what the ledger records.
var (
	errCancelled   = errors.New(store.ReasonCancelled)
	errParentEnded = errors.New(store.ReasonParentEnded)
	errShutdown    = errors.New(store.ReasonCancelled + " (supervisor closed)")
)

// Supervisor starts and tracks runs. Close it to cancel and wait for every
// run it owns.
type Supervisor struct {
	eng *engine.Engine
	st  store.Store
	cfg Config
	log *slog.Logger
	// appendAsync records one event: the store's batched writer when it
	// has one (store.AsyncAppender), else one AppendEvents call.
	appendAsync func(store.Event) <-chan error
	ctx         context.Context
	close       context.CancelFunc
	wg          sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	active  map[string]*active
	queue   []*active // pending runs in start order
	running int
	changed chan struct{} // closed and replaced when a run starts or ends

	// unrecorded are the runs that ended with something the ledger
	// could not record (*UnrecordedError): only this process knows they
	// have ended when the ledger cannot say so.
	unrecorded map[string]error

	recorded signal  // fired whenever an event of any run is persisted
	nested   *nested // the nested-run endpoint (runs/nested.go); nil when not served
}

// active is one run this supervisor owns and has not finished.
type active struct {
	id     string
	req    StartRequest
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{} // closed once the ledger has its end
	parent *active
	// remoteParent is the id of the parent when another drover process
	// owns it (parent is then nil); pollOwned ends the run when the
	// ledger shows the parent ended.
	remoteParent string
	children     map[string]*active // guarded by Supervisor.mu
	control      *engine.Control    // answers, steering, interrupts (CTL-1, CTL-3)
	plan         *engine.Plan       // the run as it executes; nil when it cannot (planErr)
	planErr      error
	// costBefore is what the vendor conversation the run continues had
	// cost before it (see cost.go); nil for a new conversation.
	costBefore *float64
	// change is the run's change as recorded when it started (open),
	// read and recorded again when it ends (runs/workspace.go); nil when
	// it works in no git repository.
	change *store.Change

	notify signal // fired whenever an event of the run is persisted
	tail   tail   // its latest durable events, for followers (followtail.go)
}

func (a *active) changed() <-chan struct{} { return a.notify.wait() }

func (a *active) wake() { a.notify.fire() }

// signal wakes waiters: wait returns a channel that fire closes. A channel
// nobody took is kept rather than replaced: replacing it at every event of
// an unwatched run was a measurable part of recording. The zero signal is
// ready to use.
type signal struct {
	mu      sync.Mutex
	ch      chan struct{}
	watched bool // ch was handed out since it was made
}

func (g *signal) wait() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ch == nil {
		g.ch = make(chan struct{})
	}
	g.watched = true
	return g.ch
}

func (g *signal) fire() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.watched {
		return
	}
	close(g.ch)
	g.ch = make(chan struct{})
	g.watched = false
}

// New returns a supervisor over eng and st. It first reconciles the ledger
// (RUN-6): runs left pending or running by a drover process that is gone are
// marked failed "engine restart", and their recorded process groups are
// killed if still alive. When st is a engine.CooldownStore (both ledgers
// are), eng's failover cooldowns are shared through it with every other
// process on the ledger.
func New(ctx context.Context, eng *engine.Engine, st store.Store, cfg Config) (*Supervisor, error) {
	if cfg.Limit <= 0 {
		cfg.Limit = 8
	}
	if cfg.DefaultTimeout <= 0 {
		cfg.DefaultTimeout = time.Hour
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 250 * time.Millisecond
	}
	if cfg.Owner == "" {
		cfg.Owner = DefaultOwner()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Supervisor{eng: eng, st: st, cfg: cfg, log: log, active: map[string]*active{},
		unrecorded: map[string]error{}, changed: make(chan struct{})}
	if w, ok := st.(store.AsyncAppender); ok {
		s.appendAsync = w.AppendAsync
	} else {
		s.appendAsync = func(ev store.Event) <-chan error {
			res := make(chan error, 1)
			res <- st.AppendEvents(context.Background(), []store.Event{ev})
			return res
		}
	}
	if cs, ok := st.(engine.CooldownStore); ok {
		// Every process on this ledger (the workers on one PostgreSQL, the
		// drover commands on one SQLite file) skips what any of them found
		// rate limited (FAIL-1).
		eng.Cooldowns().Share(cs, func(err error) {
			log.Warn("failover cooldowns: the ledger did not answer; using this process's own", "err", err)
		})
	}
	if err := reconcile(ctx, st, cfg.Owner, log); err != nil {
		return nil, fmt.Errorf("reconcile ledger: %w", err)
	}
	// Runs must outlive the request that started them, so their context
	// derives from the supervisor's own, which Close cancels.
	s.ctx, s.close = context.WithCancel(context.WithoutCancel(ctx))
	s.wg.Go(s.pollOwned)
	s.wg.Go(s.bridgeLedger) // runs/notify.go
	return s, nil
}

// pendingEvents and pendingCommits bound how far a run may get ahead of
// its encoder and of the ledger. Each run's channels are allocated whole
// when it starts (a drover.Event is ~100 bytes): at 1024 and 4096 they
// were 130 KB per run, 26 MB for a server running 200. Each
// pending commit also holds its event's JSON: once adapters read their
// lines faster than the ledger writes them (internal/jsonscan) a run keeps
// all of them pending, and 2048 had cost a run 1 MB of peak RSS for no
// throughput. The encoder drains in bursts (encodeLinger) and a group
// commit takes all that is queued (up to 1024 events), so a busy run still
// has several milliseconds of headroom at 100,000 events/s.
const (
	pendingEvents  = 512
	pendingCommits = 1024
)

// NewRunID returns a new run id: time-ordered, unique.
func NewRunID() string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("run_%011x%s", time.Now().UnixMilli(), hex.EncodeToString(b[:]))
}

// checked is a request Start may record: as it will run, with what the
// ledger said of it.
type checked struct {
	// id and ws are the run's id and workspace, decided by check for a
	// worktree run (its directory is named by the id).
	id           string
	ws           *workspace
	req          StartRequest
	plan         *engine.Plan
	fork         *store.Run     // the run it forks from
	sess         *store.Session // the session it continues
	remoteParent string         // its parent, when another process owns it
}

// Check returns the plan Start would run req with, or what Start would
// refuse, recording nothing.
func (s *Supervisor) Check(ctx context.Context, req StartRequest) (*engine.Plan, error) {
	c, err := s.check(ctx, req)
	if err != nil {
		return nil, err
	}
	return c.plan, nil
}

func (s *Supervisor) check(ctx context.Context, req StartRequest) (checked, error) {
	var c checked
	if req.ParentID != "" && s.lookup(req.ParentID) == nil {
		// Not ours, or ours and already ended: the ledger says which. A
		// run of this supervisor stays in s.active until its end is
		// recorded, so one that is missing here is never shown running.
		p, err := s.st.GetRun(ctx, req.ParentID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return c, fmt.Errorf("%w: no run %s in the ledger", ErrParentEnded, req.ParentID)
		case err != nil:
			return c, fmt.Errorf("parent run %s: %w", req.ParentID, err)
		case p.Status.Terminal() || p.CancelRequested || p.Owner == s.cfg.Owner:
			return c, fmt.Errorf("%w: %s", ErrParentEnded, req.ParentID)
		}
		c.remoteParent = p.ID
	}
	if req.ForkFrom != "" {
		r, err := s.st.GetRun(ctx, req.ForkFrom)
		if err != nil {
			return c, fmt.Errorf("fork from %s: %w", req.ForkFrom, err)
		}
		c.fork = r
	}
	switch id := req.Options.SessionID; {
	case req.NewSession && id == "":
		return c, &drover.Error{Code: drover.CodeValidation, Message: "a new session needs its id (options.sessionId)"}
	case req.NewSession:
		if _, err := s.st.GetSession(ctx, id); err == nil {
			return c, &drover.Error{Code: drover.CodeValidation, Message: fmt.Sprintf("session %s exists: continue it, or name a new one", id)}
		} else if !errors.Is(err, store.ErrNotFound) {
			return c, fmt.Errorf("session %s: %w", id, err)
		}
		// Checked as the new session it will be.
		c.sess = &store.Session{ID: id}
	case id != "":
		r, err := s.st.GetSession(ctx, id)
		if err != nil {
			return c, fmt.Errorf("session %s: %w", id, err)
		}
		c.sess = r
	}
	req, err := s.inherit(ctx, req)
	if err != nil {
		return c, err
	}
	if req.Options.Worktree != nil || req.Revise != nil {
		c.id = NewRunID()
		if c.ws, err = s.planWorkspace(ctx, c.id, &req); err != nil {
			return c, err
		}
	}
	if c.plan, err = Check(s.eng, req, c.fork, c.sess, s.defaults()); err != nil {
		return c, err
	}
	req.Agent, req.Options = c.plan.Agent(), c.plan.Options()
	if (len(req.Labels) > 0 || req.Retries != 0) && s.cfg.Queue == nil {
		return c, &drover.Error{Code: drover.CodeValidation, Message: "labels and retries are for queued runs (drover workers)"}
	}
	if req.Retries < 0 {
		return c, &drover.Error{Code: drover.CodeValidation, Message: "retries must not be negative"}
	}
	if err := s.bound(ctx, req); err != nil {
		return c, err
	}
	c.req = req
	return c, nil
}

// Start records a new run and returns its id and session at once (RUN-1);
// the run waits as pending until a slot is free (RUN-7). It refuses what
// Check refuses, an unknown session or fork run (store.ErrNotFound), a
// parent that is not active (ErrParentEnded), and directories beyond the
// run's boundaries (BOUNDARY_VIOLATION: a child's outside its parent's,
// BND-1; a write boundary around Config.Protected, BND-3); then nothing is
// recorded. A parent this supervisor does not own is looked up in the
// ledger. A child that names no working directory gets its parent's.
func (s *Supervisor) Start(ctx context.Context, req StartRequest) (Started, error) {
	c, err := s.check(ctx, req)
	if err != nil {
		return Started{}, err
	}
	req, plan, fork, sess, remoteParent := c.req, c.plan, c.fork, c.sess, c.remoteParent
	var costBefore *float64 // what the conversation this run continues had cost
	switch {
	case fork != nil:
		costBefore = conversationCost(ctx, s.st, fork.ID)
	case sess != nil && sess.HeadRunID != "":
		costBefore = conversationCost(ctx, s.st, sess.HeadRunID)
	}
	sid := req.Options.SessionID
	if sid == "" || req.NewSession {
		if sid == "" {
			sid = drover.NewSessionID()
		}
		now := time.Now()
		if err := s.st.PutSession(ctx, &store.Session{ID: sid, Agent: req.Agent, Heads: []string{}, CreatedAt: now, UpdatedAt: now}); err != nil {
			return Started{}, fmt.Errorf("create session: %w", err)
		}
	}
	req.Options.SessionID = sid
	plan = plan.InSession(sid)
	// The ledger keeps what the run was asked, never its credentials (SEC-3).
	optsJSON, err := json.Marshal(Redact(req.Options))
	if err != nil {
		return Started{}, fmt.Errorf("encode options: %w", err)
	}

	if s.cfg.Queue != nil {
		return s.submit(ctx, req, sid, optsJSON)
	}

	id := c.id
	if id == "" {
		id = NewRunID()
	}
	started := Started{RunID: id, SessionID: sid}
	var change *store.Change
	if c.ws != nil {
		if req.Revise != nil {
			if err := s.st.DecideChange(ctx, req.Revise.RunID, store.ChangeDecision{Action: store.ChangeRevised, By: req.Revise.By, Detail: id},
				store.ChangePending, store.ChangeNone); errors.Is(err, store.ErrConflict) {
				return Started{}, fmt.Errorf("revise: run %s's change was decided meanwhile: %w", req.Revise.RunID, err)
			} else if err != nil {
				return Started{}, fmt.Errorf("revise: %w", err)
			}
		}
		var err error
		if change, started.Uncommitted, err = s.makeWorkspace(ctx, id, c.ws, req); err != nil {
			return Started{}, err
		}
		started.Workspace, started.Branch = change.Workspace, change.Branch
	}
	unmake := func() {
		if c.ws != nil {
			c.ws.unmake(context.WithoutCancel(ctx))
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		unmake()
		return Started{}, ErrClosed
	}
	var parent *active
	if req.ParentID != "" && remoteParent == "" {
		parent = s.active[req.ParentID]
		if parent == nil || parent.ctx.Err() != nil {
			unmake()
			return Started{}, fmt.Errorf("%w: %s", ErrParentEnded, req.ParentID)
		}
	}
	r := &store.Run{ID: id, Agent: req.Agent, Prompt: req.Prompt, Status: store.StatusPending, ParentID: req.ParentID,
		SessionID: sid, Options: optsJSON, Timeout: req.Options.Timeout, Owner: s.cfg.Owner, CreatedAt: time.Now()}
	if err := s.st.CreateRun(ctx, r); err != nil {
		unmake()
		return Started{}, fmt.Errorf("record run: %w", err)
	}
	if change != nil {
		// Recorded open at once, so that a drover killed mid-run leaves
		// the next one the workspace to read the change from.
		if err := s.st.RecordChange(ctx, change); err != nil {
			s.log.Warn("ledger: could not record the run's workspace", "run", id, "workspace", change.Workspace, "err", err)
		}
	}
	// A child's context is its own, not derived from the parent's, so that
	// its end can say "parent ended" rather than the parent's own reason;
	// cancelTreeLocked and execute cascade explicitly.
	a := &active{id: id, req: req, done: make(chan struct{}), parent: parent, remoteParent: remoteParent,
		children: map[string]*active{}, control: engine.NewControl(), costBefore: costBefore, plan: plan, change: change}
	a.ctx, a.cancel = context.WithCancelCause(s.ctx)
	if parent != nil {
		parent.children[id] = a
	}
	s.active[id] = a
	s.queue = append(s.queue, a)
	s.scheduleLocked()
	s.notifyLocked()
	return started, nil
}

// Check resolves req as Start would run it, or says what Start would
// refuse, without recording anything: what engine.Resolve refuses (an
// unknown agent, invalid options, options the agent cannot honour with
// the fork's or session's resume token in them — ADP-3 —, containment the
// system cannot give); and a fork that also names a session or a resume
// token, a fork from a run of another agent or without a conversation, a
// session of another agent, a session with a resume token of its own
// (drover.ErrValidation). fork is the run req.ForkFrom names and session
// the session req.Options.SessionID names, as the ledger has them; the
// caller looks them up. The plan names the agent by its canonical id and
// carries the resume token to pass on.
func Check(eng *engine.Engine, req StartRequest, fork *store.Run, session *store.Session, defaults engine.Defaults) (*engine.Plan, error) {
	ad, ok := eng.Registry().Get(req.Agent)
	if !ok {
		return nil, fmt.Errorf("%w %q (known: %s)", drover.ErrUnknownAgent, req.Agent, strings.Join(eng.Registry().List(), ", "))
	}
	if err := req.Options.Validate(); err != nil {
		return nil, err
	}
	invalid := func(format string, a ...any) error {
		return &drover.Error{Code: drover.CodeValidation, Message: fmt.Sprintf(format, a...)}
	}
	switch {
	case req.ForkFrom != "":
		switch {
		case req.Options.SessionID != "":
			return nil, invalid("a fork starts a new session: do not also name one")
		case req.Options.Resume != "":
			return nil, invalid("a fork continues the forked run's conversation: do not also name a resume token")
		case fork == nil || fork.ID != req.ForkFrom:
			return nil, fmt.Errorf("fork from %s: %w", req.ForkFrom, store.ErrNotFound)
		case fork.Agent != ad.ID() || fork.ResumeToken == "":
			return nil, invalid("run %s (%s) has no %s conversation to fork", fork.ID, fork.Agent, ad.ID())
		}
		req.Options.Resume, req.Options.Fork = fork.ResumeToken, true
	case req.Options.SessionID != "":
		switch {
		case req.Options.Resume != "":
			return nil, invalid("a session continues its own conversation: do not also name a resume token")
		case session == nil || session.ID != req.Options.SessionID:
			return nil, fmt.Errorf("session %s: %w", req.Options.SessionID, store.ErrNotFound)
		case session.Agent != "" && session.Agent != ad.ID():
			return nil, invalid("session %s is a conversation with %s, not %s", session.ID, session.Agent, ad.ID())
		}
		req.Options.Resume = session.ResumeToken
	}
	return eng.Resolve(engine.Request{Agent: req.Agent, Prompt: req.Prompt, Options: req.Options, Defaults: defaults})
}

// defaults are what the supervisor fills in of a run's options; every run
// it executes gets a Control (CTL-1, CTL-3), so each is planned live.
func (s *Supervisor) defaults() engine.Defaults {
	return engine.Defaults{Timeout: s.cfg.DefaultTimeout, ApprovalTimeout: s.cfg.DefaultApprovalTimeout, Live: true,
		Workspaces: s.cfg.Workspaces != ""}
}

// Store returns the ledger the supervisor records in.
func (s *Supervisor) Store() store.Store { return s.st }

// Registry returns the agents the supervisor can run.
func (s *Supervisor) Registry() *drover.Registry { return s.eng.Registry() }

// notifyLocked wakes everyone waiting on RunsChanged.
func (s *Supervisor) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// EventsRecorded returns a channel that is closed the next time an event
// of any run of this supervisor is persisted. Followers of the ledger's
// log of all events (store.Store.EventsAfter) wait on it instead of
// polling; runs of other processes sharing the ledger do not fire it.
func (s *Supervisor) EventsRecorded() <-chan struct{} { return s.recorded.wait() }

// RunsChanged returns a channel that is closed the next time a run of this
// supervisor starts or ends. Watchers read what changed from the ledger
// (ListRuns), so a slow watcher never misses a run and never blocks one.
func (s *Supervisor) RunsChanged() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// scheduleLocked starts queued runs while slots are free, oldest first.
func (s *Supervisor) scheduleLocked() {
	for s.running < s.cfg.Limit && len(s.queue) > 0 {
		a := s.queue[0]
		s.queue = s.queue[1:]
		s.running++
		s.wg.Go(func() { s.execute(a) })
	}
}

// execute runs one run to its end and records it.
func (s *Supervisor) execute(a *active) {
	var lost error // what the ledger could not record of the run
	defer func() {
		s.mu.Lock()
		s.running--
		// Under the same lock as leaving s.active, so that a follower
		// never finds the run in neither.
		if lost != nil {
			s.unrecorded[a.id] = &UnrecordedError{RunID: a.id, Err: lost}
		}
		delete(s.active, a.id)
		if a.parent != nil {
			delete(a.parent.children, a.id)
		}
		s.scheduleLocked()
		s.notifyLocked()
		s.mu.Unlock()
		s.forgetToken(a.id)
		a.wake()
		close(a.done)
	}()
	rec := &recorder{s: s, a: a, ctx: context.WithoutCancel(a.ctx),
		pending: make(chan drover.Event, pendingEvents), commits: make(chan (<-chan error), pendingCommits)}
	if s.cfg.Observer != nil {
		rec.obs, rec.epoch = s.cfg.Observer.RunStarted(a.req.Agent), time.Now()
	}
	// The encoder encodes and queues each event for the ledger, and the
	// committer wakes readers as each becomes durable, so the run itself
	// neither encodes nor waits for the disk: on another core, that work
	// does not slow the agent's event path. Both are owned here and waited
	// for before the run's end is recorded. The buffered channels bound
	// how far the run may get ahead of the ledger.
	var pipeline sync.WaitGroup
	pipeline.Go(rec.encode)
	pipeline.Go(rec.commit)
	if a.ctx.Err() == nil {
		plan, err := a.plan, a.planErr
		if err == nil {
			plan, err = plan.WithHooks(engine.Hooks{Control: a.control, Observer: rec.processStarted, ProcessEnv: s.agentEnv(a)})
		}
		if err != nil {
			for _, ev := range failEvents(a, err) {
				rec.record(ev)
			}
		} else {
			if a.change == nil {
				a.change = s.startInPlace(a.ctx, a)
			}
			for ev := range s.eng.Execute(a.ctx, plan) {
				rec.record(ev)
			}
		}
	} else {
		rec.record(drover.NewEvent(drover.TypeDone, a.req.Agent, a.req.Options.SessionID, drover.DonePayload{Status: drover.StatusInterrupted}))
	}
	// A child never outlives its parent (RUN-5): end the children and wait
	// for them before this run's end is recorded.
	s.mu.Lock()
	children := make([]*active, 0, len(a.children))
	for _, c := range a.children {
		children = append(children, c)
		s.cancelTreeLocked(c, errParentEnded)
	}
	s.mu.Unlock()
	for _, c := range children {
		<-c.done
	}
	if a.change != nil {
		s.endRunChange(a)
	}
	close(rec.pending)
	pipeline.Wait()
	lost = rec.finish()
}

// lostRecord is the *UnrecordedError of id when it is a run of this
// supervisor that ended with something the ledger could not record, else
// nil.
func (s *Supervisor) lostRecord(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unrecorded[id]
}

// agentEnv is the environment a's agent processes get besides drover's
// own: Config.Env, then the run's Options.Env, then EnvRunID and, when
// nested runs are served, EnvSocket and the run's EnvRunToken.
func (s *Supervisor) agentEnv(a *active) map[string]string {
	env := make(map[string]string, len(s.cfg.Env)+len(a.req.Options.Env)+1)
	maps.Copy(env, s.cfg.Env)
	maps.Copy(env, a.req.Options.Env)
	env[EnvRunID] = a.id
	s.nestedEnv(a.id, env)
	return env
}

// cancelTreeLocked cancels a with cause and all its descendants with
// "parent ended". A pending run leaves the queue and ends at once.
func (s *Supervisor) cancelTreeLocked(a *active, cause error) {
	a.cancel(cause)
	if i := slices.Index(s.queue, a); i >= 0 {
		s.queue = slices.Delete(s.queue, i, i+1)
		s.running++ // released again by execute's deferred bookkeeping
		s.wg.Go(func() { s.execute(a) })
	}
	for _, c := range a.children {
		s.cancelTreeLocked(c, errParentEnded)
	}
}

// Cancel ends a run (RUN-3). It is idempotent: unknown and finished runs
// are not an error. A run owned by another drover process is marked in the
// ledger, and that process stops it within its poll interval.
func (s *Supervisor) Cancel(ctx context.Context, id string) error {
	s.mu.Lock()
	a := s.active[id]
	if a != nil {
		s.cancelTreeLocked(a, errCancelled)
	}
	s.mu.Unlock()
	if a != nil {
		return nil
	}
	if err := s.st.RequestCancel(ctx, id); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return cancelQueued(ctx, s.st, id)
}

// pollOwned applies what other processes asked of the runs this supervisor
// owns through the ledger: cancellations, and answers, steering messages
// and interrupts (CTL-3: from any process); and it ends the runs whose
// parent, owned by another process, has ended (RUN-5, MCP-1).
func (s *Supervisor) pollOwned() {
	t := time.NewTicker(s.cfg.Poll)
	defer t.Stop()
	posted := s.controlsChanged() // taken before reading, so no wake-up is missed
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		case <-posted:
		}
		posted = s.controlsChanged()
		s.mu.Lock()
		ids := make([]string, 0, len(s.active))
		remote := map[string][]string{} // parent owned elsewhere → its children here
		for id, a := range s.active {
			ids = append(ids, id)
			if a.remoteParent != "" {
				remote[a.remoteParent] = append(remote[a.remoteParent], id)
			}
		}
		s.mu.Unlock()
		// Parents first: a child whose parent ended and that was also
		// cancelled says "parent ended" (the first cause wins).
		for parent, children := range remote {
			if r, err := s.st.GetRun(s.ctx, parent); err == nil && r.Status.Terminal() {
				s.endChildren(children)
			}
		}
		s.applyCancels(ids)
		s.applyControls(ids)
	}
}

// applyCancels cancels those of the runs ids whose cancellation another
// process requested through the ledger (RUN-3).
func (s *Supervisor) applyCancels(ids []string) {
	if len(ids) == 0 {
		return
	}
	cancels, err := s.st.CancelsRequested(s.ctx, ids)
	if err != nil {
		if s.ctx.Err() == nil {
			s.log.Warn("ledger: could not read cancellation requests", "err", err)
		}
		return
	}
	for _, id := range cancels {
		_ = s.Cancel(s.ctx, id)
	}
}

// endChildren ends the runs ids (those still active) and their
// descendants "parent ended".
func (s *Supervisor) endChildren(ids []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if a := s.active[id]; a != nil {
			s.cancelTreeLocked(a, errParentEnded)
		}
	}
}

// Close cancels every run this supervisor owns, waits for them to be
// recorded, and stops its goroutines. The store is not closed.
func (s *Supervisor) Close() error {
	s.mu.Lock()
	s.closed = true
	for _, a := range s.active {
		if a.parent == nil {
			s.cancelTreeLocked(a, errShutdown)
		}
	}
	s.mu.Unlock()
	// Each run keeps the cause given above (the first cause wins), and
	// cancelling the supervisor's context also stops the cancel poller.
	s.close()
	s.wg.Wait()
	s.removeNested()
	return nil
}
