package api

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/contain"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
)

// Confined is a Service as a client inside a run may use it (MCP-1: a
// drover started inside a run; SEC-5): the client is the run's agent,
// untrusted. Every operation is confined to the runs started through it
// and their descendants, and, with a root, to the root run's subtree:
//
//   - Run starts a child of the root (another parent is BOUNDARY_VIOLATION),
//     never above the root's tier or MaxTier, less contained than the root,
//     or with a vendor config home outside the directories the root may
//     write (BOUNDARY_VIOLATION); with only the options an agent may choose
//     for a child — no fork, session, resume token, environment, binary,
//     MCP servers, allowed tools, permission rules or failover profiles
//     (VALIDATION_ERROR);
//   - Get, Events, List (its parent by default the root) and Follow see the
//     root and its descendants; Await, Cancel, Steer and Interrupt act on
//     its descendants only; any other run is NOT_FOUND, as if it did not
//     exist;
//   - Respond is refused: an agent never answers its own children's
//     permission requests; Sessions, FollowAll and WatchRuns, which see
//     every run, are refused too.
type Confined struct {
	svc     Service
	root    string
	maxTier drover.Tier

	mu      sync.Mutex
	started []string
}

var _ Service = (*Confined)(nil)

// Confine returns svc confined to run root's subtree ("" confines it to
// the runs started through it) and to runs of at most maxTier (""
// means autonomous: only the root's tier bounds them).
func Confine(svc Service, root string, maxTier drover.Tier) *Confined {
	if maxTier == "" {
		maxTier = drover.TierAutonomous
	}
	return &Confined{svc: svc, root: root, maxTier: maxTier}
}

// Started returns the runs started through c, oldest first.
func (c *Confined) Started() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.started)
}

// rank orders the tiers from sandbox (0) to autonomous (3).
func rank(t drover.Tier) int { return slices.Index(drover.Tiers(), t) }

// bound returns p as the root's child may run, or why it may not.
func (c *Confined) bound(ctx context.Context, p RunParams) (RunParams, error) {
	switch {
	case p.Agent == "":
		return p, Errorf(CodeValidation, "agent is required")
	case p.Parent != "" && p.Parent != c.root:
		return p, Errorf(CodeBoundaryViolation, "a run started from inside run %s is its child: parent %s is refused", c.root, p.Parent)
	case p.Fork != "":
		return p, Errorf(CodeValidation, "a run started from inside a run cannot fork a run: start a new one")
	case p.NewSession:
		return p, Errorf(CodeValidation, "a run started from inside a run cannot name its session")
	}
	var opts drover.Options
	if p.Options != nil {
		opts = *p.Options
	}
	if err := childOptions(opts); err != nil {
		return p, err
	}
	limit, why := c.maxTier, "the highest this server allows (its operator sets it: drover mcp --max-tier)"
	var parent rootBounds
	if c.root != "" {
		var err error
		if parent, err = c.rootBounds(ctx); err != nil {
			return p, err
		}
		if rank(parent.tier) < rank(limit) {
			limit, why = parent.tier, "the tier of the run this server works for ("+c.root+"): a nested run never has more permissions than its parent"
		}
	}
	switch {
	case opts.Tier != "":
		t, err := drover.ParseTier(string(opts.Tier))
		if err != nil {
			return p, Errorf(CodeValidation, "%v", err)
		}
		if rank(t) > rank(limit) {
			return p, Errorf(CodeBoundaryViolation, "tier %s is above %s, %s; ask for %s or less", t, limit, why, limit)
		}
		opts.Tier = t
	case rank(drover.DefaultTier) > rank(limit):
		opts.Tier = limit
	default:
		// Recorded as the tier it is, whatever the default may become.
		opts.Tier = drover.DefaultTier
	}
	if c.root != "" {
		if on, explicit := opts.Containment(); parent.contained && !on {
			if explicit {
				return p, Errorf(CodeBoundaryViolation, "run %s is contained: a run started from inside it is contained too (contain: false is refused)", c.root)
			}
			yes := true
			opts.Contain = &yes
		}
		switch {
		case parent.network == "":
		case opts.Network == "":
			opts.Network = parent.network
		case opts.Network != parent.network:
			return p, Errorf(CodeBoundaryViolation, "run %s has network %q: a run started from inside it has the same (network %q is refused)", c.root, parent.network, opts.Network)
		}
		if err := parent.allowsConfigDir(c.root, opts); err != nil {
			return p, err
		}
	}
	p.Parent, p.Options = c.root, &opts
	return p, nil
}

// childOptions refuses the options an agent may not choose for a child:
// those that continue another conversation, change what runs or with
// which environment, or allow tools without anybody asked.
func childOptions(o drover.Options) error {
	var refused []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"sessionId", o.SessionID != ""}, {"resume", o.Resume != ""}, {"fork", o.Fork},
		{"env", len(o.Env) > 0}, {"binary", o.Binary != ""}, {"mcpServers", len(o.MCPServers) > 0},
		{"allowedTools", len(o.AllowedTools) > 0}, {"permissionRules", len(o.PermissionRules) > 0},
		{"failover", o.Failover != nil}, // its profiles are environments and config homes
		{"worktree", o.Worktree != nil}, // a workspace lies outside the run's boundary
	} {
		if f.set {
			refused = append(refused, f.name)
		}
	}
	if len(refused) > 0 {
		return Errorf(CodeValidation, "a run started from inside a run cannot set %v", refused)
	}
	return nil
}

// rootBounds are what bounds the root's children, as the ledger recorded
// the root.
type rootBounds struct {
	tier      drover.Tier
	contained bool
	network   string   // the root's Options.Network
	write     []string // the directories the root may write
}

func (c *Confined) rootBounds(ctx context.Context) (rootBounds, error) {
	g, err := c.svc.Get(ctx, GetParams{RunID: c.root, RecordOnly: true})
	if err != nil {
		if CodeOf(err) == CodeNotFound {
			return rootBounds{}, Errorf(CodeValidation, "the run this server works for (%s) has ended: no run can start under it", c.root)
		}
		return rootBounds{}, err
	}
	// Only what bounds the child is read: options recorded by another
	// drover version may have fields this one does not know.
	var po struct {
		Tier      drover.Tier `json:"tier"`
		Contain   *bool       `json:"contain"`
		Cwd       string      `json:"cwd"`
		AddDirs   []string    `json:"addDirs"`
		ConfigDir string      `json:"configDir"`
		Network   string      `json:"network"`
	}
	if len(g.Run.Options) > 0 {
		if err := json.Unmarshal(g.Run.Options, &po); err != nil {
			return rootBounds{}, Errorf(CodeInternal, "the options of run %s: %v", c.root, err)
		}
	}
	b := rootBounds{tier: drover.DefaultTier}
	if po.Tier != "" {
		// A tier this drover does not know is taken for the lowest.
		b.tier = drover.TierSandbox
		if t, err := drover.ParseTier(string(po.Tier)); err == nil {
			b.tier = t
		}
	}
	b.contained, _ = drover.Options{Tier: b.tier, Contain: po.Contain, Network: po.Network}.Containment()
	b.network = po.Network
	cwd, dirs := drover.Options{Cwd: po.Cwd, AddDirs: po.AddDirs}.WorkDirs()
	b.write = append([]string{cwd}, dirs...)
	if po.ConfigDir != "" {
		b.write = append(b.write, po.ConfigDir)
	}
	return b, nil
}

// allowsConfigDir refuses a child's vendor config home outside what the
// root may write: Start lets a run's config home lie anywhere (it is the
// run's own state), and a contained run may write it, so a client inside
// the root would otherwise get a directory to write that its own run may
// not.
func (b rootBounds) allowsConfigDir(root string, o drover.Options) error {
	if o.ConfigDir == "" {
		return nil
	}
	base := o.Cwd
	if base == "" {
		base = b.write[0]
	}
	cd := o.ConfigDir
	if !filepath.IsAbs(cd) {
		cd = filepath.Join(base, cd)
	}
	cd = contain.Resolve(cd)
	if !slices.ContainsFunc(b.write, func(a string) bool { return contain.Within(cd, contain.Resolve(a)) }) {
		return Errorf(CodeBoundaryViolation, "configDir %s is outside the directories run %s may write (%v): a run started from inside it gets no other directory to write", cd, root, b.write)
	}
	return nil
}

// within checks that every run of ids is in c's reach: started through
// c, or a descendant of such a run or of the root, or (unless strict) the
// root itself. Any other run is NOT_FOUND; the root itself, when strict,
// BOUNDARY_VIOLATION. Empty ids are left to the op to refuse.
func (c *Confined) within(ctx context.Context, strict bool, ids ...string) error {
	started := c.Started()
	for _, id := range ids {
		if id == "" {
			continue
		}
		if id == c.root {
			if strict {
				return Errorf(CodeBoundaryViolation, "run %s is the run this connection works for: a client inside it acts on its descendants only", c.root)
			}
			continue
		}
		notFound := Errorf(CodeNotFound, "no run %q among the runs started through this server (a client inside a run sees the runs started from inside it, and their descendants)", id)
		seen := map[string]bool{}
		for cur := id; ; {
			if slices.Contains(started, cur) {
				break
			}
			g, err := c.svc.Get(ctx, GetParams{RunID: cur, RecordOnly: true})
			switch {
			case err != nil && CodeOf(err) == CodeNotFound:
				return notFound
			case err != nil:
				return err
			}
			parent := g.Run.ParentID
			if parent == "" || seen[parent] {
				return notFound
			}
			if c.root != "" && parent == c.root {
				break
			}
			seen[cur] = true
			cur = parent
		}
	}
	return nil
}

// Run implements Service: a child of the root, within its bounds.
func (c *Confined) Run(ctx context.Context, p RunParams) (*runs.Started, error) {
	p, err := c.bound(ctx, p)
	if err != nil {
		return nil, err
	}
	// The list is appended to under the lock, before Run returns, so that
	// a client that goes away meanwhile finds every run it started.
	c.mu.Lock()
	defer c.mu.Unlock()
	started, err := c.svc.Run(ctx, p)
	if err != nil {
		if c.root != "" && parentEnded(err) {
			return nil, Errorf(CodeValidation, "the run this server works for (%s) has ended: no run can start under it", c.root)
		}
		return nil, err
	}
	c.started = append(c.started, started.RunID)
	return started, nil
}

// parentEnded recognises runs.ErrParentEnded, also in an error that came
// over the wire, by its text: the only thing it carries besides its code.
func parentEnded(err error) bool {
	return errors.Is(err, runs.ErrParentEnded) || strings.HasPrefix(ErrorOf(err).Message, runs.ErrParentEnded.Error())
}

// Check implements Service: what Run would answer.
func (c *Confined) Check(ctx context.Context, p RunParams) (*CheckResult, error) {
	p, err := c.bound(ctx, p)
	if err != nil {
		return nil, err
	}
	return c.svc.Check(ctx, p)
}

// Get implements Service: runs within reach, not sessions.
func (c *Confined) Get(ctx context.Context, p GetParams) (*GetResult, error) {
	if p.SessionID != "" {
		return nil, Errorf(CodeValidation, "a client inside a run gets runs, not sessions")
	}
	if err := c.within(ctx, false, p.RunID); err != nil {
		return nil, err
	}
	return c.svc.Get(ctx, p)
}

// List implements Service: the children of a run within reach, the
// root's by default.
func (c *Confined) List(ctx context.Context, p ListParams) (*RunsResult, error) {
	if p.Parent == "" {
		if c.root == "" {
			return c.listStarted(ctx, p)
		}
		p.Parent = c.root
	}
	if err := c.within(ctx, false, p.Parent); err != nil {
		return nil, err
	}
	return c.svc.List(ctx, p)
}

// listStarted lists the runs started through c that match p.
func (c *Confined) listStarted(ctx context.Context, p ListParams) (*RunsResult, error) {
	out := &RunsResult{Runs: []store.Run{}}
	started := c.Started()
	for i := len(started) - 1; i >= 0 && (p.Limit == 0 || len(out.Runs) < p.Limit); i-- {
		g, err := c.svc.Get(ctx, GetParams{RunID: started[i], RecordOnly: true})
		if err != nil {
			return nil, err
		}
		r := *g.Run
		if (len(p.Status) == 0 || slices.Contains(p.Status, r.Status)) && (p.Agent == "" || p.Agent == r.Agent) &&
			(p.Session == "" || p.Session == r.SessionID) && !r.CreatedAt.Before(p.Since) {
			out.Runs = append(out.Runs, r)
		}
	}
	return out, nil
}

// Sessions implements Service: refused.
func (c *Confined) Sessions(context.Context, SessionsParams) (*SessionsResult, error) {
	return nil, Errorf(CodeValidation, "a client inside a run lists runs, not sessions")
}

// Events implements Service.
func (c *Confined) Events(ctx context.Context, p EventsParams) (*EventsResult, error) {
	if err := c.within(ctx, false, p.RunID); err != nil {
		return nil, err
	}
	return c.svc.Events(ctx, p)
}

// Await implements Service: descendants only.
func (c *Confined) Await(ctx context.Context, p AwaitParams) (*RunsResult, error) {
	if err := c.within(ctx, true, p.ids()...); err != nil {
		return nil, err
	}
	return c.svc.Await(ctx, p)
}

// Cancel implements Service: descendants only.
func (c *Confined) Cancel(ctx context.Context, p RunIDParams) (struct{}, error) {
	if err := c.within(ctx, true, p.RunID); err != nil {
		return struct{}{}, err
	}
	return c.svc.Cancel(ctx, p)
}

// Respond implements Service: refused.
func (c *Confined) Respond(context.Context, RespondParams) (struct{}, error) {
	return struct{}{}, Errorf(CodeBoundaryViolation, "a client inside a run cannot answer permission requests: an agent never approves its own children's tools (drover approve, the dashboard)")
}

// Requests implements Service: refused, as Respond is; other runs'
// requests are not an agent's to see.
func (c *Confined) Requests(context.Context, RequestsParams) (*RequestsResult, error) {
	return nil, Errorf(CodeBoundaryViolation, "a client inside a run cannot list permission requests: they are answered by people (drover inbox, the dashboard)")
}

// Steer implements Service: descendants only.
func (c *Confined) Steer(ctx context.Context, p SteerParams) (struct{}, error) {
	if err := c.within(ctx, true, p.RunID); err != nil {
		return struct{}{}, err
	}
	return c.svc.Steer(ctx, p)
}

// Interrupt implements Service: descendants only.
func (c *Confined) Interrupt(ctx context.Context, p InterruptParams) (struct{}, error) {
	if err := c.within(ctx, true, p.RunID); err != nil {
		return struct{}{}, err
	}
	return c.svc.Interrupt(ctx, p)
}

// Agents implements Service.
func (c *Confined) Agents(ctx context.Context, p AgentsParams) (*AgentsResult, error) {
	return c.svc.Agents(ctx, p)
}

// Info implements Service.
func (c *Confined) Info(ctx context.Context, p InfoParams) (*Info, error) { return c.svc.Info(ctx, p) }

// Follow implements Service: runs within reach.
func (c *Confined) Follow(ctx context.Context, p FollowParams) iter.Seq2[[]store.Event, error] {
	if err := c.within(ctx, false, p.Runs...); err != nil {
		return func(yield func([]store.Event, error) bool) { yield(nil, err) }
	}
	return c.svc.Follow(ctx, p)
}

// FollowAll implements Service: refused.
func (c *Confined) FollowAll(context.Context, FollowAllParams) iter.Seq2[store.Event, error] {
	return func(yield func(store.Event, error) bool) {
		yield(store.Event{}, Errorf(CodeValidation, "a client inside a run follows runs, not all"))
	}
}

// WatchRuns implements Service: refused.
func (c *Confined) WatchRuns(context.Context, WatchParams) iter.Seq2[[]store.Run, error] {
	return func(yield func([]store.Run, error) bool) {
		yield(nil, Errorf(CodeValidation, "a client inside a run follows runs, not all"))
	}
}
