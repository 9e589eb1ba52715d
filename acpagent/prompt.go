package acpagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/drover-run/drover"
	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/runs"
)

// turn is one prompt turn of a session: how it is asked to end early.
type turn struct {
	cancel     chan struct{} // closed by session/cancel or session/close
	cancelOnce sync.Once
	stop       chan struct{} // closed when the connection ends
	stopOnce   sync.Once
}

func newTurn() *turn { return &turn{cancel: make(chan struct{}), stop: make(chan struct{})} }

// requestCancel asks the turn to end as the editor's session/cancel does:
// the run is interrupted, its session kept. Idempotent.
func (t *turn) requestCancel() { t.cancelOnce.Do(func() { close(t.cancel) }) }

// abort ends the turn because the editor is gone: the run is cancelled.
// Idempotent.
func (t *turn) abort() { t.stopOnce.Do(func() { close(t.stop) }) }

func (t *turn) cancelled() bool { return closed(t.cancel) }
func (t *turn) aborted() bool   { return closed(t.stop) }

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Prompt runs the prompt as one run of the session's drover session (the
// first prompt records the session; later ones continue its conversation),
// streams the run's events to the editor as session/update, asks the
// editor the run's permission requests, and answers when the run has
// ended: end_turn, cancelled (after session/cancel, or an interrupt),
// max_turn_requests, max_tokens (a budget), or a JSON-RPC error with the
// run's error message. An unknown session is RESOURCE_NOT_FOUND; a second
// prompt while one runs is INVALID_REQUEST and leaves the first one
// running. The request's own context is not used: only session/cancel
// (and the connection ending) end a turn early.
func (a *agent) Prompt(_ context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	text, err := promptText(p.Prompt)
	if err != nil {
		return acp.PromptResponse{}, err
	}
	leave, err := a.enter()
	if err != nil {
		return acp.PromptResponse{}, err
	}
	defer leave()

	a.mu.Lock()
	s, err := a.sessionLocked(string(p.SessionId))
	if err != nil {
		a.mu.Unlock()
		return acp.PromptResponse{}, err
	}
	if s.turn != nil {
		a.mu.Unlock()
		return acp.PromptResponse{}, invalidRequest("session %s is already answering a prompt: wait for its answer, or cancel it (session/cancel)", s.id)
	}
	t := newTurn()
	s.turn = t
	a.turns[t] = true
	req := a.requestLocked(s, text)
	record, lastRun := !s.recorded, s.lastRun
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		s.turn = nil
		delete(a.turns, t)
		a.mu.Unlock()
	}()

	if t.aborted() || t.cancelled() {
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	}
	var started *runs.Started
	if req.Options.Worktree != nil && lastRun != "" {
		// The session's workspace, continued: the change accumulates.
		started, err = a.svc.Revise(a.ctx, api.ReviseParams{RunID: lastRun, Prompt: req.Prompt, Options: req.Options, By: "acp"})
	} else {
		started, err = a.svc.Run(a.ctx, req)
	}
	if err != nil {
		return acp.PromptResponse{}, startError(err)
	}
	if req.Options.Worktree != nil {
		a.mu.Lock()
		s.lastRun = started.RunID
		a.mu.Unlock()
	}
	if record {
		a.recorded(s)
	}
	return a.follow(s, t, started.RunID)
}

// Cancel (session/cancel) asks the session's prompt turn to end: its run
// is interrupted, or cancelled when its agent cannot be interrupted, and
// the prompt answers "cancelled". No turn running, or an unknown session:
// nothing happens.
func (a *agent) Cancel(_ context.Context, p acp.CancelNotification) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s := a.sessions[string(p.SessionId)]; s != nil && s.turn != nil {
		s.turn.requestCancel()
	}
	return nil
}

// requestLocked is the run the session's next prompt starts: its first
// records the session, under the ACP session's id (so that a refused
// prompt leaves no empty session behind).
func (a *agent) requestLocked(s *session, prompt string) api.RunParams {
	o := drover.Options{Cwd: s.cwd, Model: s.model, Tier: s.tier, SessionID: s.id}
	if ad, ok := a.reg.Get(s.agent); ok {
		caps := ad.Capabilities
		// The editor shows text as it comes.
		o.PartialText = caps.PartialText
		if caps.Permissions {
			o.ApprovalTimeout = a.cfg.ApprovalTimeout
			o.PermissionRules = slices.Clone(s.always)
		}
		for name, m := range s.mcp {
			if !slices.Contains(caps.MCPTransports, m.Transport()) {
				a.log.Warn("acp: mcp server left out: the agent does not take its transport", "server", name,
					"transport", m.Transport(), "agent", s.agent)
				continue
			}
			if o.MCPServers == nil {
				o.MCPServers = map[string]drover.MCPServer{}
			}
			o.MCPServers[name] = m
		}
	}
	if s.worktree {
		o.Worktree = &drover.Worktree{}
	}
	if a.cfg.Defaults != nil {
		a.cfg.Defaults(&o)
	}
	return api.RunParams{Agent: s.agent, Prompt: prompt, Options: &o, NewSession: !s.recorded}
}

// recorded notes that the ledger has the session since its first run
// started: from then on the session's agent is fixed, and the editor is
// sent the options as they now are.
func (a *agent) recorded(s *session) {
	a.mu.Lock()
	s.recorded = true
	opts := a.optionsLocked(s)
	a.mu.Unlock()
	a.update(s.id, acp.SessionUpdate{ConfigOptionUpdate: &acp.SessionConfigOptionUpdate{ConfigOptions: opts}})
}

// startError is a refused run as ACP has it: what the editor asked that
// drover cannot do is INVALID_PARAMS, anything else INTERNAL_ERROR.
func startError(err error) error {
	switch e := api.ErrorOf(err); e.Code {
	case api.CodeValidation, api.CodeNotFound, api.CodeBoundaryViolation, api.CodeInvalidRequest:
		return invalidParams("%s", e.Message)
	default:
		return internal(errors.New(e.Message))
	}
}

// follow streams run runID to the editor until it has ended, asks the
// editor its permission requests, and answers the prompt.
func (a *agent) follow(s *session, t *turn, runID string) (acp.PromptResponse, error) {
	// asking ends the run's open questions to the editor once the run has
	// ended; ended stops the watcher. Both goroutine kinds are this
	// turn's: waited for before the prompt is answered.
	asking, stopAsking := context.WithCancel(a.ctx)
	ended := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { a.watch(t, runID, ended) })

	tr := newTranslator()
	asks := map[string]context.CancelFunc{}
	var done *drover.DonePayload
	var lastErr string
	var followErr error
	for sev, err := range runs.Flatten(a.svc.Follow(a.ctx, api.FollowParams{Runs: []string{runID}})) {
		if err != nil {
			followErr = err
			break
		}
		var ev drover.Event
		if err := json.Unmarshal(sev.JSON, &ev); err != nil {
			a.log.Warn("acp: undecodable event", "run", runID, "seq", sev.Seq, "err", err)
			continue
		}
		for _, u := range tr.updates(ev) {
			a.update(s.id, u)
		}
		switch p := ev.Payload.(type) {
		case drover.PermissionRequestPayload:
			if !a.open(runID, p.RequestID) {
				continue // answered already (a rule, an "always"): nothing to ask
			}
			ctx, cancel := context.WithCancel(asking)
			asks[p.RequestID] = cancel
			call := tr.permissionCall(p)
			wg.Go(func() {
				defer cancel()
				a.ask(ctx, s, t, runID, p, call)
			})
		case drover.PermissionAnswerPayload:
			// Answered (by the editor, a rule, the deadline, another
			// client): the editor's question, if still open, is withdrawn.
			if cancel := asks[p.RequestID]; cancel != nil {
				cancel()
			}
		case drover.ErrorPayload:
			if !p.Recoverable {
				lastErr = p.Message
			}
		case drover.DonePayload:
			done = &p
		}
	}
	if followErr != nil {
		// The ledger cannot be read: the turn cannot be shown, so the run
		// is not left going unseen.
		a.cancelRun(runID)
	}
	close(ended)
	stopAsking()
	wg.Wait()
	if followErr != nil {
		return acp.PromptResponse{}, internal(fmt.Errorf("follow run %s: %w", runID, followErr))
	}

	resp := acp.PromptResponse{Meta: map[string]any{"drover": map[string]any{"runId": runID, "sessionId": s.id}}}
	if done != nil {
		resp.Usage = usage(done.Usage)
	}
	if t.cancelled() || t.aborted() {
		// ACP: a cancelled turn answers "cancelled", however the run ended.
		resp.StopReason = acp.StopReasonCancelled
		return resp, nil
	}
	if done != nil {
		if reason, ok := stopReasons[done.Status]; ok {
			resp.StopReason = reason
			return resp, nil
		}
	}
	if lastErr == "" {
		if rs, err := a.svc.Await(a.ctx, api.AwaitParams{RunID: runID}); err == nil && rs.Runs[0].Error != "" {
			lastErr = rs.Runs[0].Error
		} else {
			lastErr = "the run failed"
		}
	}
	return acp.PromptResponse{}, &acp.RequestError{Code: -32603, Message: lastErr, Data: map[string]any{"runId": runID, "sessionId": s.id}}
}

// stopReasons are the ACP stop reasons of the ways a run ends; a run that
// ends otherwise (done error, or no done) is the prompt's error. ACP has no
// budget reason: max_tokens, a consumption limit, is the nearest.
var stopReasons = map[drover.DoneStatus]acp.StopReason{
	drover.StatusSuccess:     acp.StopReasonEndTurn,
	drover.StatusInterrupted: acp.StopReasonCancelled,
	drover.StatusMaxTurns:    acp.StopReasonMaxTurnRequests,
	drover.StatusMaxBudget:   acp.StopReasonMaxTokens,
}

// open reports whether run runID's permission request id still waits for
// an answer. A rule answers as the request is made, before the editor
// could be asked.
func (a *agent) open(runID, id string) bool {
	g, err := a.svc.Get(a.ctx, api.GetParams{RunID: runID})
	if err != nil {
		return true // asked anyway: an answer to a decided request is refused
	}
	return slices.ContainsFunc(g.Pending, func(p drover.PermissionRequestPayload) bool { return p.RequestID == id })
}

// watch ends run runID early when the turn is asked to: at session/cancel
// it interrupts the run (its session is kept), and cancels it if it cannot
// be interrupted or has not ended InterruptGrace later; when the
// connection ends it cancels the run. It returns once ended is closed or
// it has acted.
func (a *agent) watch(t *turn, runID string, ended <-chan struct{}) {
	select {
	case <-ended:
		return
	case <-t.stop:
		a.cancelRun(runID)
		return
	case <-t.cancel:
	}
	if _, err := a.svc.Interrupt(a.ctx, api.InterruptParams{RunID: runID}); err != nil {
		// Not live yet (pending, starting), or an agent that cannot be
		// interrupted.
		a.log.Debug("acp: interrupt refused; cancelling", "run", runID, "err", err)
		a.cancelRun(runID)
		return
	}
	grace := time.NewTimer(a.cfg.InterruptGrace)
	defer grace.Stop()
	select {
	case <-ended:
	case <-t.stop:
		a.cancelRun(runID)
	case <-grace.C:
		a.log.Info("acp: interrupted run still going; cancelling", "run", runID)
		a.cancelRun(runID)
	}
}

func (a *agent) cancelRun(runID string) {
	if _, err := a.svc.Cancel(a.ctx, api.RunIDParams{RunID: runID}); err != nil {
		a.log.Warn("acp: cancel run", "run", runID, "err", err)
	}
}

// The options of every permission question, one per kind.
const (
	optAllowOnce   = "allow_once"
	optAllowAlways = "allow_always"
	optRejectOnce  = "reject_once"
)

var permissionOptions = []acp.PermissionOption{
	{OptionId: optAllowOnce, Kind: acp.PermissionOptionKindAllowOnce, Name: "Allow"},
	{OptionId: optAllowAlways, Kind: acp.PermissionOptionKindAllowAlways, Name: "Always allow"},
	{OptionId: optRejectOnce, Kind: acp.PermissionOptionKindRejectOnce, Name: "Reject"},
}

// permissionCall is the call a permission request asks about, as the
// editor's question shows it.
func (t *translator) permissionCall(p drover.PermissionRequestPayload) acp.ToolCallUpdate {
	tc := toolCall(callID(p.ToolUseID, p.RequestID), p.ToolName, p.Description, p.Input)
	return acp.ToolCallUpdate{ToolCallId: tc.ToolCallId, Title: &tc.Title, Kind: &tc.Kind, Status: &tc.Status,
		RawInput: tc.RawInput, Locations: tc.Locations, Content: tc.Content}
}

// ask puts permission request p of run runID to the editor and answers it
// with the editor's choice: allow once, allow always (also for the
// session's later runs), reject. A question the editor cancels, or fails to
// answer, is denied. ctx ends when the request is answered otherwise or the
// run ends; then, and when the editor is gone, nothing is answered.
func (a *agent) ask(ctx context.Context, s *session, t *turn, runID string, p drover.PermissionRequestPayload, call acp.ToolCallUpdate) {
	resp, err := a.peer.RequestPermission(ctx, acp.RequestPermissionRequest{SessionId: acp.SessionId(s.id),
		ToolCall: call, Options: permissionOptions})
	if ctx.Err() != nil || t.aborted() || closed(a.gone) {
		return // answered otherwise, the run ended, or the editor is gone
	}
	d := drover.PermissionDecision{Behavior: drover.Deny}
	switch {
	case err != nil:
		a.log.Warn("acp: session/request_permission failed; denying", "run", runID, "request", p.RequestID, "err", err)
		d.Message = "denied: the editor did not answer"
	case resp.Outcome.Selected != nil:
		switch resp.Outcome.Selected.OptionId {
		case optAllowOnce:
			d.Behavior = drover.Allow
		case optAllowAlways:
			d.Behavior, d.Always = drover.Allow, true
			a.allowAlways(s, p)
		case optRejectOnce:
		default:
			d.Message = fmt.Sprintf("denied: the editor chose an unknown option %q", resp.Outcome.Selected.OptionId)
		}
	default: // the editor cancelled the question (its turn was cancelled)
		d.Message = "denied: the question was cancelled in the editor"
	}
	if _, err := a.svc.Respond(a.ctx, api.RespondParams{RunID: runID, RequestID: p.RequestID, PermissionDecision: d}); err != nil {
		a.log.Info("acp: answer not taken", "run", runID, "request", p.RequestID, "err", err)
	}
}

// allowAlways remembers an "always" answer for the session's later runs,
// as a rule allowing the same tool with the same subject. A subject with
// a wildcard character is not remembered: as a rule's pattern it would
// allow more than what was asked.
func (a *agent) allowAlways(s *session, p drover.PermissionRequestPayload) {
	subject := drover.CallSubject(p.Input)
	if subject == "" || strings.ContainsAny(subject, "*?") {
		return
	}
	r := drover.PermissionRule{Behavior: drover.Allow, Tool: p.ToolName, Pattern: subject}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !slices.Contains(s.always, r) {
		s.always = append(s.always, r)
	}
}

// usage is a run's usage as ACP has it.
func usage(u drover.Usage) *acp.Usage {
	return &acp.Usage{InputTokens: int(u.InputTokens), OutputTokens: int(u.OutputTokens),
		TotalTokens: int(u.InputTokens + u.OutputTokens), CachedReadTokens: optional(u.CacheReadTokens),
		CachedWriteTokens: optional(u.CacheWriteTokens), ThoughtTokens: optional(u.ReasoningTokens)}
}

// optional is a count the vendor may not report: nil stays nil.
func optional(n *int64) *int {
	if n == nil {
		return nil
	}
	return acp.Ptr(int(*n))
}

// promptText is the prompt as one text for the agent: text blocks as they
// are, a resource link as its path (or URI), and embedded context (a text
// resource) appended in a <context> element. Images, audio and binary
// resources are INVALID_PARAMS: drover's agents take text.
func promptText(blocks []acp.ContentBlock) (string, error) {
	var text, context strings.Builder
	for _, b := range blocks {
		switch {
		case b.Text != nil:
			text.WriteString(b.Text.Text)
		case b.ResourceLink != nil:
			text.WriteString(linkText(b.ResourceLink.Uri))
		case b.Resource != nil && b.Resource.Resource.TextResourceContents != nil:
			r := b.Resource.Resource.TextResourceContents
			text.WriteString(linkText(r.Uri))
			fmt.Fprintf(&context, "\n\n<context ref=%q>\n%s\n</context>", r.Uri, r.Text)
		default:
			return "", invalidParams("drover takes text, resource links and text resources in a prompt: no images, audio or binary resources")
		}
	}
	out := text.String() + context.String()
	if strings.TrimSpace(out) == "" {
		return "", invalidParams("the prompt is empty")
	}
	return out, nil
}

// linkText is how a resource is named in the prompt: a file's path, else
// its URI.
func linkText(uri string) string {
	if u, err := url.Parse(uri); err == nil && u.Scheme == "file" && u.Path != "" {
		return u.Path
	}
	return uri
}
