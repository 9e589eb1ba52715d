// Package mcpserver is drover as an MCP server (MCP-1, docs/mcp.md): tools
// with which an agent runs other agents (run_agent, start_run, await_run,
// get_run, cancel_run, list_agents) through a runs.Supervisor, so that each
// has drover's tiers and is recorded in its ledger. Started inside a run
// (Config.ParentID), every run it starts is that run's child: it ends when
// the parent ends, and the parent's cost rolls up over it. The supervisor
// is this process's (Local) or, inside a contained run that cannot write
// the ledger, the one of the drover that runs it, reached over its
// nested-run socket (Remote).
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
)

// Config tunes a Server; the zero value serves runs in at most the
// supervised tier, under no parent.
type Config struct {
	// ParentID, when set, makes every run the server starts a child of
	// that run (RUN-5, MCP-1): the run of the agent that started this
	// server, which drover names in the agent's environment
	// (runs.EnvRunID). Its owner may be another drover process on the
	// same ledger. The runs are never above the parent's tier.
	ParentID string
	// MaxTier is the highest tier a client may ask for; "" means
	// supervised. Autonomous runs need the operator's consent, never a
	// client's (SEC-1).
	MaxTier drover.Tier
	// Defaults, when set, adds to the options of every run before it
	// starts (`drover mcp --fakemodel` points the runs at its model
	// server); it must only add to what the client asked for.
	Defaults func(*drover.Options)
	// Logger receives the MCP session's own log; nil means none.
	Logger *slog.Logger
}

// Server serves the tools over one Backend. Its runs belong to the
// backend's supervisor; Serve ends the ones still going when its session
// ends.
type Server struct {
	b   Backend
	cfg Config
	mcp *mcp.Server

	mu      sync.Mutex
	started []string // ids of the runs this server started, oldest first
}

// New returns a server whose tools run agents through sup (Local). A
// Config naming an unknown tier is an error.
func New(sup *runs.Supervisor, cfg Config) (*Server, error) { return NewOver(Local(sup), cfg) }

// NewOver returns a server whose tools run agents through b: Local, or
// Remote for a nested drover mcp that reaches its parent drover over its
// socket. A Config naming an unknown tier is an error.
func NewOver(b Backend, cfg Config) (*Server, error) {
	if cfg.MaxTier == "" {
		cfg.MaxTier = drover.TierSupervised
	}
	t, err := drover.ParseTier(string(cfg.MaxTier))
	if err != nil {
		return nil, fmt.Errorf("max tier: %w", err)
	}
	cfg.MaxTier = t
	s := &Server{b: b, cfg: cfg}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "drover", Title: "drover", Version: version()},
		&mcp.ServerOptions{Logger: cfg.Logger, Instructions: instructions})
	s.addTools()
	return s, nil
}

// instructions are what the server tells a client about itself.
const instructions = `drover runs AI coding agents (Claude Code, Codex, Gemini CLI, OpenCode) as supervised runs recorded in a ledger. ` +
	`run_agent runs one agent on a task and returns its final text; start_run and await_run do the same in two steps, ` +
	`so that several agents can work at once. Every run has a permission tier and a run id; get_run shows a run, its children and its cost.`

// MCP returns the MCP server itself, to serve it over another transport
// (several sessions may share it). Only Serve ends the server's runs when
// its session ends.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Serve serves one MCP session over t until the client ends it (on stdio:
// closes stdin) or ctx ends. Then it cancels the runs the server started
// that are still going, waits until the ledger has their end (a client
// that went away leaves no agent behind), and returns: nil when the client
// ended the session, ctx's error when ctx ended it.
func (s *Server) Serve(ctx context.Context, t mcp.Transport) error {
	err := s.mcp.Run(ctx, t)
	s.endRuns()
	return err
}

// endRuns cancels the runs this server started and waits until each has
// ended and is recorded.
func (s *Server) endRuns() {
	s.mu.Lock()
	ids := slices.Clone(s.started)
	s.mu.Unlock()
	// The session's context is gone: this cleanup must finish regardless.
	ctx := context.Background()
	for _, id := range ids {
		if err := s.b.Cancel(ctx, id); err != nil {
			s.log().Warn("mcp: could not cancel a run at the session's end", "run", id, "err", err)
		}
	}
	if err := s.b.Await(ctx, ids...); err != nil {
		s.log().Warn("mcp: could not await the runs at the session's end", "err", err)
	}
}

func (s *Server) log() *slog.Logger {
	if s.cfg.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.cfg.Logger
}

// start starts one run for a client's request.
func (s *Server) start(ctx context.Context, in RunInput) (runs.Started, error) {
	if in.Agent == "" || in.Prompt == "" {
		return runs.Started{}, errors.New("agent and prompt are required (list_agents names the agents)")
	}
	if in.TimeoutSeconds < 0 {
		return runs.Started{}, errors.New("timeoutSeconds must not be negative")
	}
	tier, err := s.tier(ctx, in.Tier)
	if err != nil {
		return runs.Started{}, err
	}
	cwd := in.Cwd
	if cwd == "" {
		cwd = "."
	}
	if cwd, err = filepath.Abs(cwd); err != nil {
		return runs.Started{}, fmt.Errorf("cwd %q: %w", in.Cwd, err)
	}
	if fi, err := os.Stat(cwd); err != nil || !fi.IsDir() {
		return runs.Started{}, fmt.Errorf("cwd %s is not a directory", cwd)
	}
	opts := drover.Options{Tier: tier, Cwd: cwd, Model: in.Model, Timeout: time.Duration(in.TimeoutSeconds) * time.Second}
	if s.cfg.Defaults != nil {
		s.cfg.Defaults(&opts)
	}
	// The list is appended to before Start returns, under the lock, so
	// that a session ending meanwhile (endRuns) sees every run started.
	s.mu.Lock()
	defer s.mu.Unlock()
	started, err := s.b.Start(ctx, runs.StartRequest{Agent: in.Agent, Prompt: in.Prompt, Options: opts, ParentID: s.cfg.ParentID})
	switch {
	case errors.Is(err, drover.ErrUnknownAgent):
		return runs.Started{}, fmt.Errorf("%w (list_agents names the agents)", err)
	case errors.Is(err, runs.ErrParentEnded):
		return runs.Started{}, fmt.Errorf("the run this server works for (%s) has ended: no run can start under it", s.cfg.ParentID)
	case err != nil:
		return runs.Started{}, err
	}
	s.started = append(s.started, started.RunID)
	return started, nil
}

// tier returns the tier of a new run: asked, or supervised; never above
// MaxTier or the parent's tier, and the lower of the two when not asked.
func (s *Server) tier(ctx context.Context, asked string) (drover.Tier, error) {
	limit, why := s.cfg.MaxTier, "the highest this server allows (its operator sets it: drover mcp --max-tier)"
	if s.cfg.ParentID != "" {
		p, err := s.b.Run(ctx, s.cfg.ParentID)
		if err != nil {
			return "", fmt.Errorf("the run this server works for (%s): %w", s.cfg.ParentID, err)
		}
		// Only the tier is read: options recorded by another drover
		// version may have fields this one does not know.
		var po struct {
			Tier drover.Tier `json:"tier"`
		}
		if len(p.Options) > 0 {
			if err := json.Unmarshal(p.Options, &po); err != nil {
				return "", fmt.Errorf("the options of run %s: %w", p.ID, err)
			}
		}
		pt := drover.DefaultTier
		if po.Tier != "" {
			// A tier this drover does not know is taken for the lowest.
			pt = drover.TierSandbox
			if t, err := drover.ParseTier(string(po.Tier)); err == nil {
				pt = t
			}
		}
		if rank(pt) < rank(limit) {
			limit, why = pt, "the tier of the run this server works for ("+p.ID+"): a nested run never has more permissions than its parent"
		}
	}
	if asked == "" {
		if rank(limit) < rank(drover.TierSupervised) {
			return limit, nil
		}
		return drover.TierSupervised, nil
	}
	t, err := drover.ParseTier(asked)
	if err != nil {
		return "", err
	}
	if rank(t) > rank(limit) {
		return "", fmt.Errorf("tier %s is above %s, %s; ask for %s or less", t, limit, why, limit)
	}
	return t, nil
}

// rank orders the tiers from sandbox (0) to autonomous (3).
func rank(t drover.Tier) int { return slices.Index(drover.Tiers(), t) }

// visible returns run id if it is one of this server's: started through
// it, or the run it works for (Config.ParentID), or a descendant of one
// of those. Other runs of the ledger are not the client's business.
func (s *Server) visible(ctx context.Context, id string) (*store.Run, error) {
	notFound := fmt.Errorf("no run %q among the runs started through this server", id)
	if id == "" {
		return nil, errors.New("runId is required")
	}
	r, err := s.b.Run(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound
	}
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	started := slices.Clone(s.started)
	s.mu.Unlock()
	seen := map[string]bool{}
	for cur := r; ; {
		if slices.Contains(started, cur.ID) || (s.cfg.ParentID != "" && cur.ID == s.cfg.ParentID) {
			return r, nil
		}
		if cur.ParentID == "" || seen[cur.ParentID] {
			return nil, notFound
		}
		seen[cur.ID] = true
		if cur, err = s.b.Run(ctx, cur.ParentID); err != nil {
			return nil, notFound
		}
	}
}

// version is drover's module version as built, "devel" when unknown.
func version() string {
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
