package acpagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/drover-run/drover"
	"github.com/drover-run/drover/api"
)

// Config configures the ACP agent. Agent, Models and Tier are the defaults
// of each new session; the editor changes them per session through the
// session's config options.
type Config struct {
	// Agent is the default agent, by id or alias; "" means "claude-code"
	// if the supervisor runs it, else the first of its agents. The values
	// of the "agent" config option are the supervisor's agents.
	Agent string
	// Models are the models offered in the "model" config option besides
	// the agent's own default; the first is a new session's model. None:
	// the agent picks.
	Models []string
	// Tier is a new session's permission tier; "" means supervised.
	Tier drover.Tier
	// ApprovalTimeout is how long a permission request waits for the
	// editor's answer before it is denied; 0 means 10 minutes.
	ApprovalTimeout time.Duration
	// InterruptGrace is how long a cancelled prompt's run may take to end
	// after its interrupt before it is cancelled outright; 0 means 10 s.
	InterruptGrace time.Duration
	// Defaults, when set, fills in each run's options before the run
	// starts ('drover acp --fakemodel' points every run at its model server
	// this way). It must only add to what the session set.
	Defaults func(*drover.Options)
	// Version is drover's version, told to the editor in initialize.
	Version string
	// Logger receives what the editor cannot be told: updates that could
	// not be written, answers that came too late. nil means none.
	Logger *slog.Logger
}

// by is who answers a permission request, as the ledger records it.
const by = "acp"

// errShutdown refuses requests that arrive while the connection ends.
var errShutdown = errors.New("drover acp is shutting down")

// peer is what the agent asks of its connection to the editor:
// *acp.AgentSideConnection, or a test's fake.
type peer interface {
	SessionUpdate(ctx context.Context, n acp.SessionNotification) error
	RequestPermission(ctx context.Context, r acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error)
}

// agent is one connection's ACP agent: its sessions, and the prompt turns
// running in them. It implements acp.Agent and acp.AgentLoader.
type agent struct {
	svc  api.Service
	reg  agents // svc's, as it listed them at the start
	cfg  Config
	log  *slog.Logger
	peer peer
	gone <-chan struct{} // closed when the editor's side of the connection ends
	// ctx outlives every request: runs are followed and updates sent under
	// it, so that a request context the SDK cancels (a second prompt, a
	// session/cancel) never cuts a turn short.
	ctx context.Context

	mu       sync.Mutex
	closing  bool
	sessions map[string]*session
	turns    map[*turn]bool // the prompt turns running, also of closed sessions
	// wg counts the handlers at work (prompts, loads): shutdown waits for
	// them, so that Serve returns only once this connection's runs have
	// ended and been recorded.
	wg sync.WaitGroup
}

var (
	_ acp.Agent       = (*agent)(nil)
	_ acp.AgentLoader = (*agent)(nil)
)

// Serve speaks ACP as the agent, reading the editor's messages from in and
// writing to out, and runs every prompt through svc. It returns nil when in
// ends (the editor went away): then it cancels the runs this connection
// started and waits until they are recorded, like 'drover serve --stdio'.
// When ctx ends first it does the same and returns ctx's error; the SDK's
// reader goes on until in ends, so the caller closes in (or exits).
// Nothing is written to out once Serve has returned: a response the SDK
// had not begun to write by then (a cancelled prompt's, say) is dropped.
func Serve(ctx context.Context, svc api.Service, cfg Config, in io.Reader, out io.Writer) error {
	a, err := newAgent(ctx, svc, cfg)
	if err != nil {
		return err
	}
	// The SDK's connection starts reading at once and logs through its
	// logger; the gate holds its first read until the logger and the
	// peer are set, so that no handler or log line races with them.
	gate := make(chan struct{})
	w := &guarded{w: out}
	defer w.close()
	conn := acp.NewAgentSideConnection(a, w, &gated{r: in, open: gate})
	conn.SetLogger(a.log)
	a.peer, a.gone = conn, conn.Done()
	close(gate)
	select {
	case <-conn.Done():
	case <-ctx.Done():
	}
	a.shutdown()
	return ctx.Err()
}

func newAgent(ctx context.Context, svc api.Service, cfg Config) (*agent, error) {
	ctx = api.WithClient(ctx, by)
	list, err := svc.Agents(ctx, api.AgentsParams{})
	if err != nil {
		return nil, fmt.Errorf("acpagent: list the agents: %w", err)
	}
	reg := agents{}
	for _, ai := range list.Agents {
		reg[ai.ID] = ai
	}
	if len(reg) == 0 {
		return nil, errors.New("acpagent: the service runs no agents")
	}
	if cfg.Agent == "" {
		cfg.Agent = "claude-code"
		if _, ok := reg.Get(cfg.Agent); !ok {
			cfg.Agent = reg.List()[0]
		}
	}
	ad, ok := reg.Get(cfg.Agent)
	if !ok {
		return nil, fmt.Errorf("%w %q (want one of %s)", drover.ErrUnknownAgent, cfg.Agent, strings.Join(reg.List(), ", "))
	}
	cfg.Agent = ad.ID
	if cfg.Tier == "" {
		cfg.Tier = drover.DefaultTier
	}
	t, err := drover.ParseTier(string(cfg.Tier))
	if err != nil {
		return nil, err
	}
	cfg.Tier = t
	if cfg.ApprovalTimeout <= 0 {
		cfg.ApprovalTimeout = 10 * time.Minute
	}
	if cfg.InterruptGrace <= 0 {
		cfg.InterruptGrace = 10 * time.Second
	}
	cfg.Models = slices.DeleteFunc(slices.Clone(cfg.Models), func(m string) bool { return m == "" || m == defaultModel })
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &agent{svc: svc, reg: reg, cfg: cfg, log: log, ctx: context.WithoutCancel(ctx), sessions: map[string]*session{}, turns: map[*turn]bool{}}, nil
}

// enter registers a handler that does work shutdown must wait for; it
// refuses once the connection is ending. The caller calls the returned
// function when done.
func (a *agent) enter() (func(), error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closing {
		return nil, errShutdown
	}
	a.wg.Add(1)
	return a.wg.Done, nil
}

// shutdown refuses new work, cancels the runs of this connection's prompt
// turns and waits for their handlers to return.
func (a *agent) shutdown() {
	a.mu.Lock()
	a.closing = true
	for t := range a.turns {
		t.abort()
	}
	a.mu.Unlock()
	a.wg.Wait()
}

// Initialize tells the editor what drover can do: load sessions, list,
// resume and close them, take text and embedded context in prompts. drover
// needs none of the editor's file system or terminals: its agents use
// their own tools.
func (a *agent) Initialize(_ context.Context, p acp.InitializeRequest) (acp.InitializeResponse, error) {
	var mcp acp.McpCapabilities
	for _, id := range a.reg.List() {
		if ad, ok := a.reg.Get(id); ok {
			ts := ad.Capabilities.MCPTransports
			mcp.Http = mcp.Http || slices.Contains(ts, "http")
			mcp.Sse = mcp.Sse || slices.Contains(ts, "sse")
		}
	}
	version := a.cfg.Version
	if version == "" {
		version = "dev"
	}
	return acp.InitializeResponse{
		ProtocolVersion: acp.ProtocolVersionNumber,
		AgentInfo:       &acp.Implementation{Name: "drover", Title: acp.Ptr("drover"), Version: version},
		AuthMethods:     []acp.AuthMethod{},
		AgentCapabilities: acp.AgentCapabilities{
			LoadSession:        true,
			PromptCapabilities: acp.PromptCapabilities{EmbeddedContext: true},
			McpCapabilities:    mcp,
			SessionCapabilities: acp.SessionCapabilities{
				List:   &acp.SessionListCapabilities{},
				Resume: &acp.SessionResumeCapabilities{},
				Close:  &acp.SessionCloseCapabilities{},
			},
		},
	}, nil
}

// Authenticate accepts anything: drover offers no authentication methods
// (each agent CLI uses its own credentials).
func (a *agent) Authenticate(context.Context, acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, nil
}

// update sends one session/update; a failure (the editor went away) is
// logged, not returned: the run goes on and is recorded either way.
func (a *agent) update(sessionID string, u acp.SessionUpdate) {
	if err := a.peer.SessionUpdate(a.ctx, acp.SessionNotification{SessionId: acp.SessionId(sessionID), Update: u}); err != nil {
		a.log.Debug("acp: session/update not sent", "session", sessionID, "err", err)
	}
}

// gated is a reader whose first Read waits until open is closed.
type gated struct {
	r    io.Reader
	open chan struct{}
}

func (g *gated) Read(p []byte) (int, error) {
	<-g.open
	return g.r.Read(p)
}

// guarded passes writes on to w until close, and drops them after: the
// SDK writes a response after its handler has returned, on a goroutine
// Serve cannot wait for.
type guarded struct {
	mu     sync.Mutex
	w      io.Writer
	closed bool
}

func (g *guarded) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return 0, io.ErrClosedPipe
	}
	return g.w.Write(p)
}

// close waits for a write in progress and drops every later one.
func (g *guarded) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
}

// Errors as ACP has them (JSON-RPC codes), with drover's own message.
func invalidParams(format string, args ...any) error {
	return &acp.RequestError{Code: -32602, Message: fmt.Sprintf(format, args...)}
}

func invalidRequest(format string, args ...any) error {
	return &acp.RequestError{Code: -32600, Message: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) error {
	return &acp.RequestError{Code: -32002, Message: fmt.Sprintf(format, args...)}
}

func internal(err error) error {
	return &acp.RequestError{Code: -32603, Message: err.Error()}
}

// agents are the agents a service runs, by id.
type agents map[string]api.AgentInfo

// Get returns the agent id.
func (r agents) Get(id string) (api.AgentInfo, bool) {
	a, ok := r[id]
	return a, ok
}

// List returns the agents' ids, sorted.
func (r agents) List() []string { return slices.Sorted(maps.Keys(r)) }
