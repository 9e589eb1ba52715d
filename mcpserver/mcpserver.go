// Package mcpserver is drover as an MCP server (MCP-1, docs/mcp.md): tools
// with which an agent runs other agents, over an api.Service confined to
// what an agent may do (api.Confine), so that each run has drover's tiers
// and is recorded in its ledger. Every agent-callable operation of the
// service (api.Op.Agent) is a tool; the table in tools.go gives the core
// ones a name and shape made for models (run_agent, start_run, await_run,
// get_run, cancel_run, list_agents). Started inside a run
// (Config.ParentID), every run it starts is that run's child: it ends when
// the parent ends, and the parent's cost rolls up over it. The service is
// this process's (api.Local) or, inside a contained run that cannot write
// the ledger, the drover that runs it, reached over its nested-run socket
// (a protocol.Client).
package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/runs"
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
	// Ops are the service's operations offered as tools (those an agent
	// may call); nil means api.Ops.
	Ops []api.Op
	// Logger receives the MCP session's own log; nil means none.
	Logger *slog.Logger
}

// Server serves the tools over a service. Its runs belong to the
// service's supervisor; Serve ends the ones still going when its session
// ends.
type Server struct {
	svc *api.Confined
	cfg Config
	mcp *mcp.Server
}

// New returns a server whose tools run agents through svc, confined to
// cfg.ParentID's subtree and cfg.MaxTier. A Config naming an unknown tier
// is an error.
func New(svc api.Service, cfg Config) (*Server, error) {
	if cfg.MaxTier == "" {
		cfg.MaxTier = drover.TierSupervised
	}
	t, err := drover.ParseTier(string(cfg.MaxTier))
	if err != nil {
		return nil, fmt.Errorf("max tier: %w", err)
	}
	cfg.MaxTier = t
	if cfg.Ops == nil {
		cfg.Ops = api.Ops
	}
	s := &Server{svc: api.Confine(svc, cfg.ParentID, t), cfg: cfg}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "drover", Title: "drover", Version: api.DroverVersion()},
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
	ids := s.svc.Started()
	// The session's context is gone: this cleanup must finish regardless.
	ctx := api.WithClient(context.Background(), "mcp")
	for _, id := range ids {
		if _, err := s.svc.Cancel(ctx, api.RunIDParams{RunID: id}); err != nil {
			s.log().Warn("mcp: could not cancel a run at the session's end", "run", id, "err", err)
		}
	}
	if len(ids) > 0 {
		if _, err := s.svc.Await(ctx, api.AwaitParams{Runs: ids}); err != nil {
			s.log().Warn("mcp: could not await the runs at the session's end", "err", err)
		}
	}
}

func (s *Server) log() *slog.Logger {
	if s.cfg.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.cfg.Logger
}

// start starts one run for a client's request: cwd resolved from this
// server's, Defaults applied; refusals said as a model can act on them.
func (s *Server) start(ctx context.Context, in RunInput) (*runs.Started, error) {
	if in.Agent == "" || in.Prompt == "" {
		return nil, errors.New("agent and prompt are required (list_agents names the agents)")
	}
	if in.TimeoutSeconds < 0 {
		return nil, errors.New("timeoutSeconds must not be negative")
	}
	cwd := in.Cwd
	if cwd == "" {
		cwd = "."
	}
	cwd, err := filepath.Abs(cwd)
	if err != nil {
		return nil, fmt.Errorf("cwd %q: %w", in.Cwd, err)
	}
	if fi, err := os.Stat(cwd); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("cwd %s is not a directory", cwd)
	}
	opts := drover.Options{Tier: drover.Tier(in.Tier), Cwd: cwd, Model: in.Model, Timeout: time.Duration(in.TimeoutSeconds) * time.Second}
	if s.cfg.Defaults != nil {
		s.cfg.Defaults(&opts)
	}
	started, err := s.svc.Run(ctx, api.RunParams{Agent: in.Agent, Prompt: in.Prompt, Options: &opts})
	if err != nil && strings.HasPrefix(api.ErrorOf(err).Message, drover.ErrUnknownAgent.Error()) {
		return nil, fmt.Errorf("%s %q (list_agents names the agents)", drover.ErrUnknownAgent, in.Agent)
	}
	if err != nil {
		return nil, errors.New(api.ErrorOf(err).Message)
	}
	return started, nil
}
