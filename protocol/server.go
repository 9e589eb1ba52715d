package protocol

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
)

// Config tunes a Server; zero fields take the defaults.
type Config struct {
	// QueueSize bounds each connection's outbound queue, in lines; 0 means
	// 1024. A subscription that finds it full pauses and sends "lagged".
	QueueSize int
	// MaxInFlight bounds the requests one connection may have running at
	// once (awaits block); 0 means 256. Past it the connection stops
	// reading until one ends.
	MaxInFlight int
	// MaxLine is the longest request line accepted, in bytes; 0 means
	// 16 MiB. A longer line gets INVALID_REQUEST and is skipped.
	MaxLine int
	// Poll is how often an "all runs" subscription looks for runs started
	// by other processes; 0 means 1 s. Runs of this supervisor are seen at
	// once.
	Poll time.Duration
	// ShutdownGrace is how long Conn.Shutdown lets awaits and
	// subscriptions go on after the connection's own runs have ended, so
	// that their last responses and events are sent; 0 means 2 s.
	ShutdownGrace time.Duration
	// Defaults, when set, fills in each run's options before the run is
	// started ("drover serve --fakemodel" points every run at its model
	// server this way). It must only add to what the client asked for.
	Defaults func(*drover.Options)
	// Profiles, when set, resolves the credential profiles a run's
	// failover names by name only (a profile with neither env nor config
	// directory) from the server's own configuration ("drover serve": its
	// profiles file), so a client names profiles without holding their
	// secrets. Profiles given with credentials are used as given. Unset,
	// name-only profiles go to the supervisor as they are (a queueing
	// server's workers resolve them).
	Profiles func(names []string) ([]drover.Profile, error)
	// AllowAutonomous lets clients start runs in the autonomous tier (no
	// prompts, no containment); without it such a run is refused with
	// BOUNDARY_VIOLATION. The server's operator decides (drover serve
	// --allow-autonomous), never a client (SEC-1).
	AllowAutonomous bool
	// Client names the transport in what it records of its clients' answers
	// and steering when a client names nobody; "" means "protocol".
	Client string
	// Logger receives what the server cannot tell a client: failed ledger
	// reads of a subscription (retried), requests that failed inside
	// drover. nil means none (quiet).
	Logger *slog.Logger
}

// Server executes protocol operations against a supervisor and its
// ledger. It holds no per-connection state: the op methods (Run, Await, …)
// are what every transport calls; errors they return are *Error.
type Server struct {
	log *slog.Logger
	sup *runs.Supervisor
	st  store.Store
	cfg Config
}

// NewServer returns a server over sup and the ledger it records in.
func NewServer(sup *runs.Supervisor, cfg Config) *Server {
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = 1024
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 256
	}
	if cfg.MaxLine <= 0 {
		cfg.MaxLine = 16 << 20
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = 2 * time.Second
	}
	if cfg.Client == "" {
		cfg.Client = "protocol"
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{log: log, sup: sup, st: sup.Store(), cfg: cfg}
}

// Supervisor returns the supervisor the server executes operations with;
// its Store is the server's ledger.
func (s *Server) Supervisor() *runs.Supervisor { return s.sup }

// Run starts a run and returns its id at once (RUN-1). Unknown agent,
// invalid options, unknown session or inactive parent: VALIDATION_ERROR or
// NOT_FOUND; a supervisor that cannot start it: RUN_FAILED.
func (s *Server) Run(ctx context.Context, p RunParams) (*RunResult, error) {
	if p.Agent == "" {
		return nil, errorf(CodeValidation, "agent is required")
	}
	var opts drover.Options
	if p.Options != nil {
		opts = *p.Options
	}
	if s.cfg.Defaults != nil {
		s.cfg.Defaults(&opts)
	}
	if err := s.resolveProfiles(&opts); err != nil {
		return nil, err
	}
	if opts.EffectiveTier() == drover.TierAutonomous && !s.cfg.AllowAutonomous {
		return nil, errorf(CodeBoundaryViolation, "tier autonomous is refused by this server: its operator can allow it (drover serve --allow-autonomous)")
	}
	started, err := s.sup.Start(ctx, runs.StartRequest{Agent: p.Agent, Prompt: p.Prompt, Options: opts,
		ParentID: p.Parent, ForkFrom: p.Fork, Labels: p.Labels, Retries: p.Retries})
	if err != nil {
		return nil, startError(err)
	}
	return &started, nil
}

// resolveProfiles replaces the name-only profiles of opts' failover with
// the server's own of those names (Config.Profiles).
func (s *Server) resolveProfiles(opts *drover.Options) error {
	if s.cfg.Profiles == nil || opts.Failover == nil {
		return nil
	}
	var names []string
	for _, p := range opts.Failover.Profiles {
		if len(p.Env) == 0 && p.ConfigDir == "" {
			names = append(names, p.Name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	resolved, err := s.cfg.Profiles(names)
	if err != nil {
		return errorf(CodeValidation, "failover profiles: %v", err)
	}
	fo := *opts.Failover
	fo.Profiles = slices.Clone(fo.Profiles)
	for i, p := range fo.Profiles {
		if len(p.Env) == 0 && p.ConfigDir == "" {
			fo.Profiles[i], resolved = resolved[0], resolved[1:]
		}
	}
	opts.Failover = &fo
	return nil
}

// startError classifies an error of runs.Supervisor.Start.
func startError(err error) *Error {
	switch e := toError(err); {
	case errors.Is(err, runs.ErrParentEnded):
		return &Error{Code: CodeValidation, Message: err.Error()}
	case e.Code == CodeInternal:
		return &Error{Code: CodeRunFailed, Message: err.Error()}
	default:
		return e
	}
}

// Await blocks until every named run has ended and returns their records
// in order, whether they completed or failed (RUN-2): a failed run is a
// result, not an error. An unknown id is NOT_FOUND.
func (s *Server) Await(ctx context.Context, p AwaitParams) (*RunsResult, error) {
	ids := p.Runs
	if p.RunID != "" {
		ids = append([]string{p.RunID}, ids...)
	}
	if len(ids) == 0 {
		return nil, errorf(CodeInvalidRequest, "await needs runId or runs")
	}
	rs, err := s.sup.Await(ctx, ids...)
	if err != nil {
		return nil, toError(err)
	}
	out := &RunsResult{Runs: make([]store.Run, len(rs))}
	for i, r := range rs {
		out.Runs[i] = *r
	}
	return out, nil
}

// Cancel ends a run. It is idempotent (RUN-3): a finished or unknown run
// is not an error.
func (s *Server) Cancel(ctx context.Context, p RunIDParams) (struct{}, error) {
	if p.RunID == "" {
		return struct{}{}, errorf(CodeInvalidRequest, "cancel needs runId")
	}
	if err := s.sup.Cancel(ctx, p.RunID); err != nil {
		return struct{}{}, toError(err)
	}
	return struct{}{}, nil
}

// Respond answers a run's permission request (CTL-1): NOT_FOUND for an
// unknown run or request, CONFLICT when it already has its answer or the
// run is not running, VALIDATION_ERROR for a behavior other than allow or
// deny. An answer to a run another drover process owns is accepted once
// checked and applied by its owner within its poll interval.
func (s *Server) Respond(ctx context.Context, p RespondParams) (struct{}, error) {
	if p.RunID == "" || p.RequestID == "" {
		return struct{}{}, errorf(CodeInvalidRequest, "respond needs runId and requestId")
	}
	if err := s.sup.Respond(ctx, p.RunID, p.RequestID, p.PermissionDecision, by(p.By, s.cfg.Client)); err != nil {
		return struct{}{}, toError(err)
	}
	return struct{}{}, nil
}

// Steer sends a user message into a live run (CTL-3): NOT_FOUND for an
// unknown run, CONFLICT when it is not running, VALIDATION_ERROR for an
// empty message or an agent that takes none while it runs.
func (s *Server) Steer(ctx context.Context, p SteerParams) (struct{}, error) {
	if p.RunID == "" {
		return struct{}{}, errorf(CodeInvalidRequest, "steer needs runId and message")
	}
	if err := s.sup.Steer(ctx, p.RunID, p.Message, by(p.By, s.cfg.Client)); err != nil {
		return struct{}{}, toError(err)
	}
	return struct{}{}, nil
}

// Interrupt ends a live run's current turn and keeps its session (CTL-3):
// the run ends done{interrupted} with a resume token. Errors as Steer.
func (s *Server) Interrupt(ctx context.Context, p InterruptParams) (struct{}, error) {
	if p.RunID == "" {
		return struct{}{}, errorf(CodeInvalidRequest, "interrupt needs runId")
	}
	if err := s.sup.Interrupt(ctx, p.RunID, by(p.By, s.cfg.Client)); err != nil {
		return struct{}{}, toError(err)
	}
	return struct{}{}, nil
}

// by is who a client says it is, else the transport's name.
func by(client, transport string) string {
	if client != "" {
		return client
	}
	return transport
}

// Get returns one run with its children, turn record and, when it has
// children, the usage of its whole tree; or one session with its runs
// (newest first). Unknown ids are NOT_FOUND.
func (s *Server) Get(ctx context.Context, p GetParams) (*GetResult, error) {
	switch {
	case (p.RunID == "") == (p.SessionID == ""):
		return nil, errorf(CodeInvalidRequest, "get needs exactly one of runId and sessionId")
	case p.SessionID != "":
		sess, err := s.st.GetSession(ctx, p.SessionID)
		if err != nil {
			return nil, toError(err)
		}
		rs, err := s.st.ListRuns(ctx, store.RunFilter{SessionID: p.SessionID})
		if err != nil {
			return nil, toError(err)
		}
		return &GetResult{Session: sess, Runs: rs}, nil
	}
	r, err := s.st.GetRun(ctx, p.RunID)
	if err != nil {
		return nil, toError(err)
	}
	res := &GetResult{Run: r}
	if res.Children, err = s.st.Children(ctx, r.ID); err != nil {
		return nil, toError(err)
	}
	if len(res.Children) > 0 {
		total, err := runs.SumTree(ctx, s.st, r.ID)
		if err != nil {
			return nil, toError(err)
		}
		res.Total = &total
	}
	if res.Messages, err = s.st.Messages(ctx, r.ID); err != nil {
		return nil, toError(err)
	}
	if res.ToolCalls, err = s.st.ToolCalls(ctx, r.ID); err != nil {
		return nil, toError(err)
	}
	if res.Pending, err = s.sup.Pending(ctx, r.ID); err != nil {
		return nil, toError(err)
	}
	return res, nil
}

var statuses = []store.RunStatus{store.StatusPending, store.StatusRunning, store.StatusCompleted, store.StatusFailed}

// List returns runs matching p, newest first.
func (s *Server) List(ctx context.Context, p ListParams) (*RunsResult, error) {
	for _, st := range p.Status {
		if !slices.Contains(statuses, st) {
			return nil, errorf(CodeValidation, "unknown status %q (want pending, running, completed or failed)", st)
		}
	}
	if p.Limit < 0 {
		return nil, errorf(CodeValidation, "limit must not be negative")
	}
	if p.Limit == 0 {
		p.Limit = 100
	}
	rs, err := s.st.ListRuns(ctx, store.RunFilter{Status: p.Status, Agent: p.Agent, SessionID: p.Session,
		ParentID: p.Parent, Since: p.Since, Limit: p.Limit})
	if err != nil {
		return nil, toError(err)
	}
	if rs == nil {
		rs = []store.Run{}
	}
	return &RunsResult{Runs: rs}, nil
}

// Events returns a run's recorded events after p.AfterSeq (LED-2), exactly
// as recorded. An unknown run is NOT_FOUND.
func (s *Server) Events(ctx context.Context, p EventsParams) (*EventsResult, error) {
	if p.RunID == "" {
		return nil, errorf(CodeInvalidRequest, "events needs runId")
	}
	if p.Limit < 0 || p.AfterSeq < 0 {
		return nil, errorf(CodeValidation, "limit and afterSeq must not be negative")
	}
	if p.Limit == 0 {
		p.Limit = 1000
	}
	p.Limit = min(p.Limit, 10000)
	if _, err := s.st.GetRun(ctx, p.RunID); err != nil {
		return nil, toError(err)
	}
	evs, err := s.st.Events(ctx, p.RunID, p.AfterSeq, p.Limit+1)
	if err != nil {
		return nil, toError(err)
	}
	res := &EventsResult{Events: make([]json.RawMessage, 0, min(len(evs), p.Limit))}
	for i, ev := range evs {
		if i == p.Limit {
			res.More = true
			break
		}
		res.Events = append(res.Events, ev.JSON)
	}
	return res, nil
}
