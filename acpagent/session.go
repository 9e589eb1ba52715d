package acpagent

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/drover-run/drover"
	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/store"
)

// The session config options drover offers (ACP session config options;
// the tier is also offered as ACP modes, for editors that only know those).
const (
	optAgent = "agent"
	optModel = "model"
	optTier  = "tier"
	// optWorktree runs the session in a git workspace of its own (WS-1):
	// its first prompt makes it, the next ones continue there (revise).
	optWorktree = "worktree"
	// defaultModel is the model option's value for "the agent's own".
	defaultModel = "default"
)

// session is one ACP session of this connection: a drover session with
// the same id, and what its next run will use. Guarded by agent.mu.
type session struct {
	id    string
	cwd   string
	mcp   map[string]drover.MCPServer
	agent string // canonical id
	model string // "" is the agent's own
	tier  drover.Tier
	// worktree: the session's runs work in a workspace of their own;
	// lastRun is the run of its last prompt there, whose workspace the
	// next prompt continues.
	worktree bool
	lastRun  string
	// recorded: the ledger has the session, so its agent is fixed (a
	// drover session is a conversation with one agent).
	recorded bool
	// always are the calls the editor allowed "always": rules for the
	// session's later runs (within a run drover remembers them itself).
	always []drover.PermissionRule
	turn   *turn // the prompt turn running, or nil
}

// NewSession opens a session in cwd (absolute) with the editor's MCP
// servers, on the default agent, model and tier. Nothing is recorded until
// its first prompt.
func (a *agent) NewSession(_ context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	mcp, err := mcpServers(p.McpServers)
	if err != nil {
		return acp.NewSessionResponse{}, err
	}
	if !filepath.IsAbs(p.Cwd) {
		return acp.NewSessionResponse{}, invalidParams("cwd %q is not an absolute path", p.Cwd)
	}
	s := &session{id: drover.NewSessionID(), cwd: p.Cwd, mcp: mcp, agent: a.cfg.Agent, tier: a.cfg.Tier}
	if len(a.cfg.Models) > 0 {
		s.model = a.cfg.Models[0]
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closing {
		return acp.NewSessionResponse{}, errShutdown
	}
	a.sessions[s.id] = s
	return acp.NewSessionResponse{SessionId: acp.SessionId(s.id), ConfigOptions: a.optionsLocked(s), Modes: a.modesLocked(s)}, nil
}

// LoadSession reopens a drover session from the ledger and replays its
// conversation to the editor (each run's prompt, then its events as
// session/update) before it answers. An unknown session is
// RESOURCE_NOT_FOUND; a session of this connection that is answering a
// prompt cannot be loaded.
func (a *agent) LoadSession(_ context.Context, p acp.LoadSessionRequest) (acp.LoadSessionResponse, error) {
	leave, err := a.enter()
	if err != nil {
		return acp.LoadSessionResponse{}, err
	}
	defer leave()
	s, rs, err := a.reopen(string(p.SessionId), p.Cwd, p.McpServers)
	if err != nil {
		return acp.LoadSessionResponse{}, err
	}
	if err := a.replay(s.id, rs); err != nil {
		return acp.LoadSessionResponse{}, internal(fmt.Errorf("replay session %s: %w", s.id, err))
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return acp.LoadSessionResponse{ConfigOptions: a.optionsLocked(s), Modes: a.modesLocked(s)}, nil
}

// ResumeSession reopens a drover session from the ledger without replaying
// it; errors as LoadSession.
func (a *agent) ResumeSession(_ context.Context, p acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	s, _, err := a.reopen(string(p.SessionId), p.Cwd, p.McpServers)
	if err != nil {
		return acp.ResumeSessionResponse{}, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return acp.ResumeSessionResponse{ConfigOptions: a.optionsLocked(s), Modes: a.modesLocked(s)}, nil
}

// reopen makes the ledger's session id a session of this connection, in
// cwd with mcp: its agent is the session's, its model and tier those of
// its latest run. It returns the session's runs, oldest first.
func (a *agent) reopen(id, cwd string, servers []acp.McpServer) (*session, []store.Run, error) {
	mcp, err := mcpServers(servers)
	if err != nil {
		return nil, nil, err
	}
	if !filepath.IsAbs(cwd) {
		return nil, nil, invalidParams("cwd %q is not an absolute path", cwd)
	}
	g, err := a.svc.Get(a.ctx, api.GetParams{SessionID: id})
	if err != nil && api.CodeOf(err) == api.CodeNotFound {
		return nil, nil, notFound("unknown session %q (see 'drover sessions')", id)
	} else if err != nil {
		return nil, nil, internal(err)
	}
	sess, rs := g.Session, g.Runs
	slices.Reverse(rs) // oldest first
	s := &session{id: id, cwd: cwd, mcp: mcp, agent: sess.Agent, tier: a.cfg.Tier, recorded: true}
	if s.agent == "" {
		s.agent = a.cfg.Agent
	}
	if len(rs) > 0 {
		var o drover.Options
		if err := json.Unmarshal(rs[len(rs)-1].Options, &o); err == nil {
			s.model = o.Model
			if o.Tier != "" {
				s.tier = o.EffectiveTier()
			}
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closing {
		return nil, nil, errShutdown
	}
	if old := a.sessions[id]; old != nil && old.turn != nil {
		return nil, nil, invalidRequest("session %s is answering a prompt: cancel it first (session/cancel)", id)
	}
	a.sessions[id] = s
	return s, rs, nil
}

// CloseSession cancels the session's prompt turn, if any (as session/cancel
// does), and forgets the session; the ledger keeps it. Closing an unknown
// session is not an error.
func (a *agent) CloseSession(_ context.Context, p acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s := a.sessions[string(p.SessionId)]; s != nil {
		if s.turn != nil {
			s.turn.requestCancel()
		}
		delete(a.sessions, s.id)
	}
	return acp.CloseSessionResponse{}, nil
}

// listLimit bounds session/list: it has no paging.
const listLimit = 100

// ListSessions lists the ledger's sessions, most recently updated first
// (at most 100), with the working directory and prompt of each one's
// latest run; with a cwd, only the sessions whose latest run ran there.
func (a *agent) ListSessions(ctx context.Context, p acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	ctx = api.WithClient(ctx, by)
	ss, err := a.svc.Sessions(ctx, api.SessionsParams{Limit: listLimit})
	if err != nil {
		return acp.ListSessionsResponse{}, internal(err)
	}
	out := acp.ListSessionsResponse{Sessions: []acp.SessionInfo{}}
	for _, s := range ss.Sessions {
		res, err := a.svc.List(ctx, api.ListParams{Session: s.ID, Limit: 1})
		if err != nil {
			return acp.ListSessionsResponse{}, internal(err)
		}
		rs := res.Runs
		info := acp.SessionInfo{SessionId: acp.SessionId(s.ID), UpdatedAt: acp.Ptr(s.UpdatedAt.UTC().Format(time.RFC3339))}
		if len(rs) > 0 {
			var o drover.Options
			_ = json.Unmarshal(rs[0].Options, &o)
			info.Cwd = o.Cwd
			if title := strings.Join(strings.Fields(rs[0].Prompt), " "); title != "" {
				if r := []rune(title); len(r) > 80 {
					title = string(r[:79]) + "…"
				}
				info.Title = &title
			}
		}
		if p.Cwd != nil && *p.Cwd != info.Cwd {
			continue
		}
		out.Sessions = append(out.Sessions, info)
	}
	return out, nil
}

// SetSessionConfigOption sets the session's agent, model or tier for its
// next prompt, and returns every option as it now is. An unknown value is
// INVALID_PARAMS, and so is another agent once the session has a
// conversation.
func (a *agent) SetSessionConfigOption(_ context.Context, p acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	if p.ValueId == nil {
		return acp.SetSessionConfigOptionResponse{}, invalidParams("drover's config options are selects: agent, model and tier")
	}
	v := p.ValueId
	a.mu.Lock()
	s, err := a.sessionLocked(string(v.SessionId))
	if err != nil {
		a.mu.Unlock()
		return acp.SetSessionConfigOptionResponse{}, err
	}
	tierBefore := s.tier
	if err := a.setLocked(s, string(v.ConfigId), string(v.Value)); err != nil {
		a.mu.Unlock()
		return acp.SetSessionConfigOptionResponse{}, err
	}
	tier, opts := s.tier, a.optionsLocked(s)
	a.mu.Unlock()
	if tier != tierBefore {
		a.update(s.id, acp.SessionUpdate{CurrentModeUpdate: &acp.SessionCurrentModeUpdate{CurrentModeId: acp.SessionModeId(tier)}})
	}
	return acp.SetSessionConfigOptionResponse{ConfigOptions: opts}, nil
}

// SetSessionMode sets the session's tier (its modes are the tiers).
func (a *agent) SetSessionMode(_ context.Context, p acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	a.mu.Lock()
	s, err := a.sessionLocked(string(p.SessionId))
	if err == nil {
		err = a.setLocked(s, optTier, string(p.ModeId))
	}
	if err != nil {
		a.mu.Unlock()
		return acp.SetSessionModeResponse{}, err
	}
	opts := a.optionsLocked(s)
	a.mu.Unlock()
	a.update(s.id, acp.SessionUpdate{ConfigOptionUpdate: &acp.SessionConfigOptionUpdate{ConfigOptions: opts}})
	return acp.SetSessionModeResponse{}, nil
}

func (a *agent) sessionLocked(id string) (*session, error) {
	s := a.sessions[id]
	if s == nil {
		return nil, notFound("unknown session %q: open it first (session/new or session/load)", id)
	}
	return s, nil
}

// setLocked sets one option of s.
func (a *agent) setLocked(s *session, option, value string) error {
	switch option {
	case optAgent:
		ad, ok := a.reg.Get(value)
		switch {
		case !ok:
			return invalidParams("unknown agent %q (want one of %s)", value, strings.Join(a.reg.List(), ", "))
		case s.recorded && ad.ID != s.agent:
			return invalidParams("session %s is a conversation with %s: open a new session for %s", s.id, s.agent, ad.ID)
		}
		s.agent = ad.ID
	case optModel:
		if value == defaultModel {
			value = ""
		}
		if value != "" && value != s.model && !slices.Contains(a.cfg.Models, value) {
			return invalidParams("unknown model %q (want %s)", value, strings.Join(append([]string{defaultModel}, a.cfg.Models...), ", "))
		}
		s.model = value
	case optTier:
		t, err := drover.ParseTier(value)
		if err != nil {
			return invalidParams("%v", err)
		}
		s.tier = t
	case optWorktree:
		switch value {
		case "on":
			s.worktree = true
		case "off":
			s.worktree, s.lastRun = false, ""
		default:
			return invalidParams("worktree is on or off, not %q", value)
		}
	default:
		return invalidParams("unknown config option %q (want agent, model, tier or worktree)", option)
	}
	return nil
}

// optionsLocked returns s's config options: the agent (only its own once
// the session has a conversation), the model, and the tiers the agent
// enforces.
func (a *agent) optionsLocked(s *session) []acp.SessionConfigOption {
	agents := []string{s.agent}
	if !s.recorded {
		agents = a.reg.List()
	}
	var agentOpts acp.SessionConfigSelectOptionsUngrouped
	for _, id := range agents {
		agentOpts = append(agentOpts, acp.SessionConfigSelectOption{Value: acp.SessionConfigValueId(id), Name: id})
	}
	modelOpts := acp.SessionConfigSelectOptionsUngrouped{{Value: defaultModel, Name: "Default",
		Description: acp.Ptr("the agent's own choice")}}
	models := a.cfg.Models
	if s.model != "" && !slices.Contains(models, s.model) {
		models = append(slices.Clone(models), s.model)
	}
	for _, m := range models {
		modelOpts = append(modelOpts, acp.SessionConfigSelectOption{Value: acp.SessionConfigValueId(m), Name: m})
	}
	model := s.model
	if model == "" {
		model = defaultModel
	}
	var tierOpts acp.SessionConfigSelectOptionsUngrouped
	for _, m := range a.modesLocked(s).AvailableModes {
		tierOpts = append(tierOpts, acp.SessionConfigSelectOption{Value: acp.SessionConfigValueId(m.Id), Name: m.Name, Description: m.Description})
	}
	sel := func(id, name string, cat *acp.SessionConfigOptionCategory, cur string, opts acp.SessionConfigSelectOptionsUngrouped) acp.SessionConfigOption {
		o := acp.NewSessionConfigOptionSelect(acp.SessionConfigValueId(cur), acp.SessionConfigSelectOptions{Ungrouped: &opts})
		o.Select.Id, o.Select.Name, o.Select.Category = acp.SessionConfigId(id), name, cat
		return o
	}
	return []acp.SessionConfigOption{
		sel(optAgent, "Agent", nil, s.agent, agentOpts),
		sel(optModel, "Model", acp.Ptr(acp.SessionConfigOptionCategoryModel), model, modelOpts),
		sel(optTier, "Permission tier", acp.Ptr(acp.SessionConfigOptionCategoryMode), string(s.tier), tierOpts),
		sel(optWorktree, "Git worktree", nil, map[bool]string{true: "on", false: "off"}[s.worktree], acp.SessionConfigSelectOptionsUngrouped{
			{Value: "off", Name: "Off", Description: acp.Ptr("work in the editor's directory")},
			{Value: "on", Name: "On", Description: acp.Ptr("work in a git workspace of the session's own, on a branch drover/RUN, for review (drover diff, apply, merge)")}}),
	}
}

// tierDescriptions say what each tier lets the agent do without asking
// (docs/permissions.md).
var tierDescriptions = map[drover.Tier]string{
	drover.TierSandbox:    "no native tools (MCP tools only)",
	drover.TierDryRun:     "read, search and plan; nothing else",
	drover.TierSupervised: "read and edit the workspace; ask for the rest",
	drover.TierAutonomous: "everything, without asking",
}

// modesLocked returns s's tiers as ACP modes: those its agent enforces.
func (a *agent) modesLocked(s *session) *acp.SessionModeState {
	tiers := drover.Tiers()
	if ad, ok := a.reg.Get(s.agent); ok && len(ad.Capabilities.Tiers) > 0 {
		tiers = ad.Capabilities.Tiers
	}
	m := &acp.SessionModeState{CurrentModeId: acp.SessionModeId(s.tier)}
	for _, t := range tiers {
		m.AvailableModes = append(m.AvailableModes, acp.SessionMode{Id: acp.SessionModeId(t), Name: string(t),
			Description: acp.Ptr(tierDescriptions[t])})
	}
	return m
}

// mcpServers turns the editor's MCP servers into Options.MCPServers: stdio,
// http or sse, by name. A duplicate name or another transport is
// INVALID_PARAMS.
func mcpServers(in []acp.McpServer) (map[string]drover.MCPServer, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := map[string]drover.MCPServer{}
	add := func(name string, m drover.MCPServer) error {
		if _, dup := out[name]; dup || name == "" {
			return invalidParams("mcp server %q: names must be given and unique", name)
		}
		out[name] = m
		return nil
	}
	headers := func(hs []acp.HttpHeader) map[string]string {
		if len(hs) == 0 {
			return nil
		}
		m := map[string]string{}
		for _, h := range hs {
			m[h.Name] = h.Value
		}
		return m
	}
	for _, s := range in {
		var err error
		switch {
		case s.Stdio != nil:
			var env map[string]string
			if len(s.Stdio.Env) > 0 {
				env = map[string]string{}
				for _, e := range s.Stdio.Env {
					env[e.Name] = e.Value
				}
			}
			err = add(s.Stdio.Name, drover.MCPServer{Type: "stdio", Command: s.Stdio.Command, Args: s.Stdio.Args, Env: env})
		case s.Http != nil:
			err = add(s.Http.Name, drover.MCPServer{Type: "http", URL: s.Http.Url, Headers: headers(s.Http.Headers)})
		case s.Sse != nil:
			err = add(s.Sse.Name, drover.MCPServer{Type: "sse", URL: s.Sse.Url, Headers: headers(s.Sse.Headers)})
		default:
			err = invalidParams("mcp server: only stdio, http and sse servers are supported")
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
