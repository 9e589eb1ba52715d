package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/builtin"
	"github.com/drover-run/drover/internal/secret"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
)

// Config tunes a Local; zero fields take the defaults.
type Config struct {
	// Defaults, when set, fills in each run's options before the run is
	// checked ("drover serve --fakemodel" points every run at its model
	// server this way). It must only add to what the client asked for.
	Defaults func(*drover.Options)
	// Profiles, when set, resolves the credential profiles a run's
	// failover names by name only (a profile with neither env nor config
	// directory) from the service's own configuration ("drover serve": its
	// profiles file), so a client names profiles without holding their
	// secrets. Profiles given with credentials are used as given. Unset,
	// name-only profiles go to the supervisor as they are (a queueing
	// service's workers resolve them).
	Profiles func(names []string) ([]drover.Profile, error)
	// AllowAutonomous lets clients start runs in the autonomous tier (no
	// prompts, no containment) and widen a run beyond its tier (contain:
	// false, allow-all rules, binary, env); without it such a run is
	// refused with BOUNDARY_VIOLATION. The operator decides (drover serve
	// --allow-autonomous), never a client (SEC-1, SEC-5).
	AllowAutonomous bool
	// Poll is how often WatchRuns looks for changes made by other
	// processes sharing the ledger; 0 means 1 s. Changes by the
	// supervisor's own runs are seen at once.
	Poll time.Duration
	// Logger receives what the service cannot tell a client (an agent's
	// availability check that panicked). nil means none.
	Logger *slog.Logger
}

// Local is the Service of a runs.Supervisor of this process and its
// ledger.
type Local struct {
	sup *runs.Supervisor
	st  store.Store
	cfg Config
	log *slog.Logger
}

var _ Service = (*Local)(nil)

// NewLocal returns the service of sup.
func NewLocal(sup *runs.Supervisor, cfg Config) *Local {
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Local{sup: sup, st: sup.Store(), cfg: cfg, log: log}
}

// Supervisor is the supervisor the service runs runs with.
func (l *Local) Supervisor() *runs.Supervisor { return l.sup }

// Run implements Service.
func (l *Local) Run(ctx context.Context, p RunParams) (*runs.Started, error) {
	req, err := l.request(p)
	if err != nil {
		return nil, err
	}
	started, err := l.sup.Start(ctx, req)
	if err != nil {
		return nil, startError(err)
	}
	return &started, nil
}

// Check implements Service.
func (l *Local) Check(ctx context.Context, p RunParams) (*CheckResult, error) {
	req, err := l.request(p)
	if err != nil {
		return nil, err
	}
	plan, err := l.sup.Check(ctx, req)
	if err != nil {
		return nil, startError(err)
	}
	return checkResult(plan), nil
}

// request is the supervisor's request of p, with the service's defaults,
// its profiles, and its operator's consent checked.
func (l *Local) request(p RunParams) (runs.StartRequest, error) {
	if p.Agent == "" {
		return runs.StartRequest{}, Errorf(CodeValidation, "agent is required")
	}
	if strings.TrimSpace(p.Prompt) == "" {
		return runs.StartRequest{}, Errorf(CodeValidation, "prompt is required: an empty prompt gives the agent nothing to do")
	}
	var opts drover.Options
	if p.Options != nil {
		opts = *p.Options
	}
	if !l.cfg.AllowAutonomous {
		if err := gate(opts); err != nil {
			return runs.StartRequest{}, err
		}
	}
	if l.cfg.Defaults != nil {
		l.cfg.Defaults(&opts)
	}
	if err := l.resolveProfiles(&opts); err != nil {
		return runs.StartRequest{}, err
	}
	return runs.StartRequest{Agent: p.Agent, Prompt: p.Prompt, Options: opts,
		ParentID: p.Parent, ForkFrom: p.Fork, NewSession: p.NewSession, Labels: p.Labels, Retries: p.Retries}, nil
}

// gate refuses what a client asked for that would take a run beyond its
// tier, unless the operator allowed autonomy (Config.AllowAutonomous): the
// autonomous tier itself, no containment, a permission rule that allows
// every tool, a vendor binary, environment of the client's choosing (a
// failover profile's credentials are what a profile is for) (SEC-1,
// SEC-5). It sees
// the client's options before the service's Defaults and profiles, which
// are the operator's.
func gate(o drover.Options) error {
	if o.EffectiveTier() == drover.TierAutonomous {
		return Errorf(CodeBoundaryViolation, "tier autonomous is refused by this server: its operator can allow it (drover serve --allow-autonomous)")
	}
	var refused []string
	if o.Contain != nil && !*o.Contain {
		refused = append(refused, "contain: false")
	}
	if slices.ContainsFunc(o.PermissionRules, func(r drover.PermissionRule) bool {
		return r.Behavior == drover.Allow && r.Tool == "*"
	}) {
		refused = append(refused, "a permissionRule allowing every tool")
	}
	if o.Binary != "" {
		refused = append(refused, "binary")
	}
	if len(o.Env) > 0 {
		refused = append(refused, "env")
	}
	if o.Worktree != nil && o.Worktree.Check != "" {
		// A check is a command drover runs itself, uncontained.
		refused = append(refused, "worktree.check")
	}
	if o.Failover != nil && slices.ContainsFunc(o.Failover.Profiles, func(p drover.Profile) bool {
		return slices.ContainsFunc(slices.Collect(maps.Keys(p.Env)), func(k string) bool { return !secret.Name(k) })
	}) {
		refused = append(refused, "a failover profile's env beyond credentials")
	}
	if len(refused) > 0 {
		return Errorf(CodeBoundaryViolation, "%s refused by this server: they widen a run beyond its tier %s; its operator can allow them (drover serve --allow-autonomous)",
			strings.Join(refused, ", "), o.EffectiveTier())
	}
	return nil
}

// resolveProfiles replaces the name-only profiles of opts' failover with
// the service's own of those names (Config.Profiles).
func (l *Local) resolveProfiles(opts *drover.Options) error {
	if l.cfg.Profiles == nil || opts.Failover == nil {
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
	resolved, err := l.cfg.Profiles(names)
	if err != nil {
		return Errorf(CodeValidation, "failover profiles: %v", err)
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

// startError classifies an error of runs.Supervisor.Start: what drover
// itself failed at is RUN_FAILED.
func startError(err error) *Error {
	e := ErrorOf(err)
	if e.Code == CodeInternal {
		e.Code = CodeRunFailed
	}
	return e
}

// Await implements Service.
func (l *Local) Await(ctx context.Context, p AwaitParams) (*RunsResult, error) {
	ids := p.ids()
	if len(ids) == 0 {
		return nil, Errorf(CodeInvalidRequest, "await needs runId or runs")
	}
	rs, err := l.sup.Await(ctx, ids...)
	if err != nil {
		return nil, ErrorOf(err)
	}
	out := &RunsResult{Runs: make([]store.Run, len(rs))}
	for i, r := range rs {
		out.Runs[i] = *r
	}
	return out, nil
}

// Cancel implements Service.
func (l *Local) Cancel(ctx context.Context, p RunIDParams) (struct{}, error) {
	if p.RunID == "" {
		return struct{}{}, Errorf(CodeInvalidRequest, "cancel needs runId")
	}
	return struct{}{}, errorOrNil(l.sup.Cancel(ctx, p.RunID))
}

// Respond implements Service. An answer to a run another drover process
// owns is accepted once checked and applied by its owner within its poll
// interval.
func (l *Local) Respond(ctx context.Context, p RespondParams) (struct{}, error) {
	if p.RunID == "" || p.RequestID == "" {
		return struct{}{}, Errorf(CodeInvalidRequest, "respond needs runId and requestId")
	}
	return struct{}{}, errorOrNil(l.sup.Respond(ctx, p.RunID, p.RequestID, p.PermissionDecision, by(ctx, p.By)))
}

// Requests implements Service.
func (l *Local) Requests(ctx context.Context, p RequestsParams) (*RequestsResult, error) {
	ws, err := l.sup.Inbox(ctx, p.Agent)
	if err != nil {
		return nil, ErrorOf(err)
	}
	if ws == nil {
		ws = []runs.Waiting{} // "requests": [], not null
	}
	return &RequestsResult{Requests: ws}, nil
}

// Steer implements Service.
func (l *Local) Steer(ctx context.Context, p SteerParams) (struct{}, error) {
	if p.RunID == "" {
		return struct{}{}, Errorf(CodeInvalidRequest, "steer needs runId and message")
	}
	return struct{}{}, errorOrNil(l.sup.Steer(ctx, p.RunID, p.Message, by(ctx, p.By)))
}

// Interrupt implements Service.
func (l *Local) Interrupt(ctx context.Context, p InterruptParams) (struct{}, error) {
	if p.RunID == "" {
		return struct{}{}, Errorf(CodeInvalidRequest, "interrupt needs runId")
	}
	return struct{}{}, errorOrNil(l.sup.Interrupt(ctx, p.RunID, by(ctx, p.By)))
}

// errorOrNil is err classified, or nil.
func errorOrNil(err error) error {
	if err == nil {
		return nil
	}
	return ErrorOf(err)
}

// Get implements Service.
func (l *Local) Get(ctx context.Context, p GetParams) (*GetResult, error) {
	switch {
	case (p.RunID == "") == (p.SessionID == ""):
		return nil, Errorf(CodeInvalidRequest, "get needs exactly one of runId and sessionId")
	case p.SessionID != "":
		sess, err := l.st.GetSession(ctx, p.SessionID)
		if err != nil {
			return nil, ErrorOf(err)
		}
		rs, err := l.st.ListRuns(ctx, store.RunFilter{SessionID: p.SessionID})
		if err != nil {
			return nil, ErrorOf(err)
		}
		return &GetResult{Session: sess, Runs: rs}, nil
	}
	r, err := l.st.GetRun(ctx, p.RunID)
	if err != nil {
		return nil, ErrorOf(err)
	}
	res := &GetResult{Run: r}
	if p.RecordOnly {
		return res, nil
	}
	if res.Children, err = l.st.Children(ctx, r.ID); err != nil {
		return nil, ErrorOf(err)
	}
	if len(res.Children) > 0 {
		total, err := runs.SumTree(ctx, l.st, r.ID)
		if err != nil {
			return nil, ErrorOf(err)
		}
		res.Total = &total
	}
	if res.Messages, err = l.st.Messages(ctx, r.ID); err != nil {
		return nil, ErrorOf(err)
	}
	if res.ToolCalls, err = l.st.ToolCalls(ctx, r.ID); err != nil {
		return nil, ErrorOf(err)
	}
	if res.Pending, err = l.sup.Pending(ctx, r.ID); err != nil {
		return nil, ErrorOf(err)
	}
	if c, err := l.sup.Change(ctx, r.ID); err == nil {
		c.Patch = ""
		res.Change = c
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, ErrorOf(err)
	}
	return res, nil
}

var statuses = []store.RunStatus{store.StatusPending, store.StatusRunning, store.StatusCompleted, store.StatusFailed}

// List implements Service.
func (l *Local) List(ctx context.Context, p ListParams) (*RunsResult, error) {
	for _, st := range p.Status {
		if !slices.Contains(statuses, st) {
			return nil, Errorf(CodeValidation, "unknown status %q (want pending, running, completed or failed)", st)
		}
	}
	if p.Limit < 0 {
		return nil, Errorf(CodeValidation, "limit must not be negative")
	}
	if p.Limit == 0 {
		p.Limit = 100
	}
	rs, err := l.st.ListRuns(ctx, store.RunFilter{Status: p.Status, Agent: p.Agent, SessionID: p.Session,
		ParentID: p.Parent, Since: p.Since, Limit: p.Limit})
	if err != nil {
		return nil, ErrorOf(err)
	}
	if rs == nil {
		rs = []store.Run{}
	}
	res := &RunsResult{Runs: rs}
	if len(rs) > 0 {
		ids := make([]string, len(rs))
		for i, r := range rs {
			ids[i] = r.ID
		}
		if res.Changes, err = l.st.ListChanges(ctx, store.ChangeFilter{RunIDs: ids}); err != nil {
			return nil, ErrorOf(err)
		}
	}
	return res, nil
}

// Sessions implements Service.
func (l *Local) Sessions(ctx context.Context, p SessionsParams) (*SessionsResult, error) {
	if p.Limit < 0 {
		return nil, Errorf(CodeValidation, "limit must not be negative")
	}
	if p.Limit == 0 {
		p.Limit = 100
	}
	ss, err := l.st.ListSessions(ctx, p.Limit)
	if err != nil {
		return nil, ErrorOf(err)
	}
	if ss == nil {
		ss = []store.Session{}
	}
	return &SessionsResult{Sessions: ss}, nil
}

// Events implements Service.
func (l *Local) Events(ctx context.Context, p EventsParams) (*EventsResult, error) {
	if p.RunID == "" {
		return nil, Errorf(CodeInvalidRequest, "events needs runId")
	}
	if p.Limit < 0 || p.AfterSeq < 0 {
		return nil, Errorf(CodeValidation, "limit and afterSeq must not be negative")
	}
	if p.Limit == 0 {
		p.Limit = 1000
	}
	p.Limit = min(p.Limit, 10000)
	if _, err := l.st.GetRun(ctx, p.RunID); err != nil {
		return nil, ErrorOf(err)
	}
	evs, err := l.st.Events(ctx, p.RunID, p.AfterSeq, p.Limit+1)
	if err != nil {
		return nil, ErrorOf(err)
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

// Agents implements Service: each agent's availability is checked now
// (its CLI's --version); an agent whose check fails or panics is listed
// with the error.
func (l *Local) Agents(ctx context.Context, _ AgentsParams) (*AgentsResult, error) {
	return AgentsOf(ctx, l.sup.Registry(), l.log), nil
}

// AgentsOf lists the agents of reg as Service.Agents does; a check that
// panics is logged to log.
func AgentsOf(ctx context.Context, reg *drover.Registry, log *slog.Logger) *AgentsResult {
	out := &AgentsResult{Agents: []AgentInfo{}}
	for _, id := range reg.List() {
		if a, ok := reg.Get(id); ok {
			out.Agents = append(out.Agents, agentInfo(ctx, a, log))
		}
	}
	return out
}

func agentInfo(ctx context.Context, a drover.Adapter, log *slog.Logger) (info AgentInfo) {
	info = AgentInfo{ID: a.ID(), Tiers: []drover.Tier{}, Configured: !builtin.IsBuiltin(a.ID())}
	defer func() {
		if p := recover(); p != nil {
			log.Error("agents: availability check panicked", "agent", a.ID(), "panic", p, "stack", string(debug.Stack()))
			info.Installed, info.Error = false, fmt.Sprintf("drover: internal error checking %s: %v", a.ID(), p)
		}
	}()
	info.Capabilities = a.Capabilities()
	if info.Capabilities.Tiers != nil {
		info.Tiers = info.Capabilities.Tiers
	}
	info.Availability = a.Available(ctx)
	return info
}

// Info implements Service.
func (l *Local) Info(context.Context, InfoParams) (*Info, error) {
	return &Info{API: Version, Drover: DroverVersion()}, nil
}

// DroverVersion is drover's module version as built, "devel" when
// unknown.
func DroverVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	for _, m := range append([]*debug.Module{&bi.Main}, bi.Deps...) {
		if m.Path == "github.com/drover-run/drover" && m.Version != "" && m.Version != "(devel)" {
			return m.Version
		}
	}
	return "devel"
}

// Follow implements Service.
func (l *Local) Follow(ctx context.Context, p FollowParams) iter.Seq2[[]store.Event, error] {
	return func(yield func([]store.Event, error) bool) {
		if len(p.Runs) == 0 {
			yield(nil, Errorf(CodeInvalidRequest, "follow needs runs"))
			return
		}
		if p.AfterSeq < 0 {
			yield(nil, Errorf(CodeValidation, "afterSeq must not be negative"))
			return
		}
		for _, id := range p.Runs {
			if _, err := l.st.GetRun(ctx, id); err != nil {
				yield(nil, ErrorOf(err))
				return
			}
		}
		batches := l.sup.FollowManyBatches(ctx, p.AfterSeq, p.Runs...)
		if len(p.Runs) == 1 {
			// One run needs no merging: no goroutine between the ledger
			// and the reader (a server's streams are mostly of one run).
			batches = l.sup.FollowBatches(ctx, p.Runs[0], p.AfterSeq)
		}
		for evs, err := range batches {
			if err != nil {
				err = ErrorOf(err)
			}
			if !yield(evs, err) {
				return
			}
		}
	}
}

// FollowAll implements Service.
func (l *Local) FollowAll(ctx context.Context, p FollowAllParams) iter.Seq2[store.Event, error] {
	from := int64(runs.FromLive)
	if p.AfterCursor != nil {
		if *p.AfterCursor < 0 {
			return func(yield func(store.Event, error) bool) {
				yield(store.Event{}, Errorf(CodeValidation, "afterCursor must not be negative"))
			}
		}
		from = *p.AfterCursor
	}
	return l.sup.FollowLog(ctx, from)
}

// WatchRuns implements Service: the records are read from the ledger at
// once when a run of this supervisor starts or ends, and every
// Config.Poll for runs of other processes sharing the ledger; a failed
// read is retried at the next wake-up. Only records that differ from what
// was yielded are yielded again, and an empty batch every Poll says that
// the watch is still alive.
func (l *Local) WatchRuns(ctx context.Context, p WatchParams) iter.Seq2[[]store.Run, error] {
	return func(yield func([]store.Run, error) bool) {
		if p.Limit < 0 || p.Limit > MaxWatchLimit {
			yield(nil, Errorf(CodeValidation, "limit %d: want 1 to %d", p.Limit, MaxWatchLimit))
			return
		}
		if p.Limit == 0 {
			p.Limit = DefaultWatchLimit
		}
		w := &runWatch{l: l, limit: p.Limit, sent: map[string][]byte{}}
		tick := time.NewTicker(l.cfg.Poll)
		defer tick.Stop()
		first := true
		for {
			// The change channel is taken before each scan, so no change
			// is missed between them.
			changed := l.sup.RunsChanged()
			recs, err := w.scan(ctx)
			switch {
			case err != nil && first:
				yield(nil, ErrorOf(err))
				return
			case err == nil:
				if !yield(recs, nil) {
					return
				}
				first = false
			}
			select {
			case <-changed:
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
	}
}

// runWatch remembers what one watch has yielded, to yield only changes.
type runWatch struct {
	l     *Local
	limit int
	// sent is each watched run's record as last yielded, as JSON.
	sent map[string][]byte
}

// scan reads the newest runs, the live ones, and the watched runs that had
// not ended when last yielded (they may have left the newest window
// since), and returns the records that differ from what was yielded,
// oldest first.
func (w *runWatch) scan(ctx context.Context) ([]store.Run, error) {
	st := w.l.st
	newest, err := st.ListRuns(ctx, store.RunFilter{Limit: w.limit})
	if err != nil {
		return nil, err
	}
	live, err := st.ListRuns(ctx, store.RunFilter{Status: []store.RunStatus{store.StatusPending, store.StatusRunning}, Limit: MaxWatchLimit})
	if err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(newest)+len(live))
	all := make([]store.Run, 0, len(newest)+len(live))
	for _, r := range slices.Concat(newest, live) {
		if !seen[r.ID] {
			seen[r.ID] = true
			all = append(all, r)
		}
	}
	for id, b := range w.sent {
		if seen[id] {
			continue
		}
		var prev store.Run
		if json.Unmarshal(b, &prev) == nil && prev.Status.Terminal() {
			delete(w.sent, id) // ended and out of the window: forget it
			continue
		}
		r, err := st.GetRun(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			delete(w.sent, id)
			continue
		} else if err != nil {
			return nil, err
		}
		all = append(all, *r)
	}
	slices.SortStableFunc(all, func(a, b store.Run) int { return a.CreatedAt.Compare(b.CreatedAt) })
	var out []store.Run
	for _, r := range all {
		b, err := json.Marshal(r)
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(w.sent[r.ID], b) {
			w.sent[r.ID] = b
			out = append(out, r)
		}
	}
	return out, nil
}
