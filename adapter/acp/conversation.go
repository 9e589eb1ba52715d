package acp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/contain"
	"github.com/drover-run/drover/internal/jsonrpc"
	"github.com/drover-run/drover/internal/jsonscan"
	"github.com/drover-run/drover/internal/runner"
)

// Session is what one run's conversation knows of the run.
type Session struct {
	// Prompt is the run's prompt: session/prompt's one text block.
	Prompt string
	// Cwd is the session's working directory, absolute: session/new's cwd
	// and the first directory drover serves files in.
	Cwd string
	// AddDirs are the run's other directories, absolute; drover serves
	// files in them too.
	AddDirs []string
	// Tier is the run's tier: what drover answers by itself (see
	// docs/adapters/acp.md) and whether it writes files.
	Tier drover.Tier
	// Resume, when set, is the ACP session to continue with session/load
	// instead of starting one with session/new.
	Resume string
	// Mode, when set, is the session mode selected with session/set_mode
	// before the prompt (OpenCode's drover agent).
	Mode string
	// PartialText asks for text_delta events.
	PartialText bool
	// MCPServers are passed to the session in ACP's shape.
	MCPServers map[string]drover.MCPServer
	// Model and Tools are the init event's, where the agent names no model
	// of its own in the session.
	Model string
	Tools []string
	// Live says that the run's permission requests can be answered (it has
	// a drover.Live): what the tier does not decide becomes a
	// permission_request. Without it, such a request is denied at once.
	Live bool
	// OpenTimeout is the launch's runner.Launch.OpenTimeout, for the
	// message of an agent that never answered.
	OpenTimeout time.Duration
}

// Dialect is what an agent does its own way within ACP, for the
// conversation to absorb. The zero value is plain ACP.
type Dialect struct {
	// ReadTextFile and WriteTextFile are the file-system methods drover
	// offers in initialize (clientCapabilities.fs).
	ReadTextFile, WriteTextFile bool
	// ToolName names a tool call, once, when it is first seen; nil (or
	// "") names it by its ACP kind ("execute", "edit", …).
	ToolName func(c Call) string
	// Tools describe the calls ToolName names (UES-5), by those names; a
	// call they do not list is described by its ACP kind when it is named
	// by it, else by its title.
	Tools runner.Tools
	// Denied reports whether the output of a failed call says the agent
	// refused it itself (its own permission rules): the result is
	// "denied", not "error".
	Denied func(output string) bool
	// Usage reads the usage of a prompt result that has no ACP usage
	// (Gemini's _meta.quota); ok false when it has none either.
	Usage func(result json.RawMessage) (u drover.Usage, ok bool)
	// RunUsage, when set, returns the usage of every model response of
	// the run in session sessionID, as the agent recorded it outside ACP
	// (OpenCode: its session database), for an agent whose prompt result
	// gives only the last response's tokens; ok false when it recorded
	// none. It is called once the process has ended, when the prompt was
	// sent. Its tokens and turns replace the prompt result's; its cost,
	// when above 0, is the run's own, over what usage_update tells.
	RunUsage func(sessionID string) (u drover.Usage, ok bool)
	// StatusRules classify a failed prompt by its HTTP status and text.
	StatusRules runner.StatusRules
	// UnknownSession, when set, also recognises a session/load error that
	// means the session does not exist (a rejected resume, ADP-5) where the
	// agent says so its own way (OpenCode: a "session" service failure).
	UnknownSession func(code int, message string, data json.RawMessage) bool
	// FailureStatus, when set, returns the HTTP status of the agent's last
	// failed model call, for an agent whose errors do not carry it
	// (OpenCode); 0 when unknown. It is called once the process has ended.
	FailureStatus func() int
}

// Call is what the agent first said of a tool call, for Dialect.ToolName.
type Call struct {
	// ID is the ACP toolCallId.
	ID string
	// Title is its title at first sight.
	Title string
	// Kind is its ACP kind ("execute", "edit", …), "" when not given.
	Kind string
}

// Conversation is one run's ACP session: a runner.Conversation (and an
// Opener and Canceller) that writes initialize, session/new (or
// session/load) and session/prompt, translates the agent's session/update
// notifications into UES events, answers the agent's requests (permission
// requests, file reads and writes) and passes the run's answers and
// interrupts on. It is used from one goroutine, the runner's conversation
// loop, and is not safe for concurrent use.
type Conversation struct {
	runner.Stamp
	sess  Session
	d     Dialect
	roots []string // Cwd and AddDirs, symbolic links resolved

	nextID  int
	sent    map[string]string // our requests awaiting an answer: id → method
	out     []byte            // for Outbox
	closeIn bool

	initialized bool // initialize answered
	loadSession bool // the agent offers session/load
	agentInfo   map[string]any
	loading     bool // session/load sent, not answered: updates replay history
	ready       bool // the session is known: events flow
	sessionID   string
	model       string
	held        []drover.Event // events before the session was known
	prompted    bool           // session/prompt sent
	prompting   bool           // session/prompt sent, not answered
	interrupt   bool           // an interrupt came before the prompt was sent

	text     strings.Builder // the agent's message being streamed
	textID   string          // its messageId, if the agent gives one
	thought  strings.Builder
	lastText string

	calls    map[string]*call
	timing   runner.ToolCalls
	toolUses int64
	rejected []string        // calls drover rejected that have no result yet
	asks     map[string]*ask // open permission requests by request id
	asked    map[string]int  // questions asked per call id
	queued   []drover.Event  // to go before the next line's events

	// cost is the session's cumulative cost as the last usage_update
	// reported it; costBefore what it was when the prompt was sent (a
	// continued session's cost so far); costSeen says a usage_update
	// reported it after the prompt was sent.
	cost, costBefore *sessionCost
	costSeen         bool

	stop           *promptResult
	failed         *jsonrpc.Error // session/prompt failed
	startErr       *drover.Error
	resumeRejected bool
}

// promptResult is session/prompt's result as drover reads it.
type promptResult struct {
	StopReason acpsdk.StopReason `json:"stopReason"`
	Usage      *acpsdk.Usage     `json:"usage"`
	raw        json.RawMessage
}

var (
	_ runner.Opener    = (*Conversation)(nil)
	_ runner.Canceller = (*Conversation)(nil)
)

// NewConversation returns the conversation of one run, whose events s
// stamps.
func NewConversation(s runner.Stamp, sess Session, d Dialect) *Conversation {
	c := &Conversation{Stamp: s, sess: sess, d: d, sent: map[string]string{}, calls: map[string]*call{},
		asks: map[string]*ask{}, asked: map[string]int{}}
	for _, r := range append([]string{sess.Cwd}, sess.AddDirs...) {
		if r != "" {
			c.roots = append(c.roots, contain.Resolve(r))
		}
	}
	return c
}

// request returns the line of a request of ours and remembers it.
func (c *Conversation) request(method string, params any) []byte {
	c.nextID++
	c.sent[fmt.Sprint(c.nextID)] = method
	return rpc.Request(c.nextID, method, params)
}

// Open implements runner.Conversation: initialize, offering the file
// methods of the dialect and no terminal.
func (c *Conversation) Open() ([]byte, error) {
	return c.request(acpsdk.AgentMethodInitialize, acpsdk.InitializeRequest{
		ProtocolVersion: ProtocolVersion,
		ClientCapabilities: acpsdk.ClientCapabilities{Fs: acpsdk.FileSystemCapabilities{
			ReadTextFile: c.d.ReadTextFile, WriteTextFile: c.d.WriteTextFile}},
		ClientInfo: &acpsdk.Implementation{Name: clientName, Version: clientVersion},
	}), nil
}

// Opened implements runner.Opener: the session is known and the prompt
// sent (an agent that never answers session/set_mode has not opened).
func (c *Conversation) Opened() bool { return c.prompted }

// Outbox implements runner.Conversation: the requests and answers the last
// lines called for, and whether stdin is to close: once the prompt has
// been answered, or the session could not start, the agent's work is over
// and it exits at the end of its input.
func (c *Conversation) Outbox() ([]byte, bool) {
	out := c.out
	c.out = nil
	return out, c.closeIn
}

// Finished implements runner.Translator: the prompt has been answered, or
// the session could not start.
func (c *Conversation) Finished() bool {
	return c.stop != nil || c.failed != nil || c.startErr != nil || c.resumeRejected
}

// Cancel implements runner.Canceller: session/cancel while a prompt runs
// (the agent answers the prompt "cancelled"), after answering the open
// permission requests "cancelled", as ACP asks of a client that cancels.
func (c *Conversation) Cancel() []byte {
	if !c.prompting {
		return nil
	}
	return c.cancelTurn()
}

// cancelTurn withdraws the open permission requests and asks the agent to
// end its turn.
func (c *Conversation) cancelTurn() []byte {
	var out []byte
	for _, id := range slices.Sorted(maps.Keys(c.asks)) {
		a := c.asks[id]
		delete(c.asks, id)
		out = append(out, rpc.Result(a.rpcID, acpsdk.RequestPermissionResponse{Outcome: acpsdk.NewRequestPermissionOutcomeCancelled()})...)
		c.reject(a.call)
		c.queued = append(c.queued, c.Event(drover.TypePermissionWithdrawn, drover.PermissionWithdrawnPayload{
			RequestID: id, Reason: "the turn was cancelled"}))
	}
	return append(out, rpc.Notification(acpsdk.AgentMethodSessionCancel, acpsdk.CancelNotification{SessionId: acpsdk.SessionId(c.sessionID)})...)
}

// Pass implements runner.Conversation. An answer becomes the result of its
// session/request_permission: the agent's option of the kind the answer
// asks for (allow_always for allow with always, allow_once for allow,
// reject_once for deny; the other option of the same behaviour when the
// agent offers only that one, "cancelled" when it offers neither). ACP's
// answer carries no message and no changed input: an allow with a changed
// input is a rejection, and a denial's message reaches only the ledger. An
// interrupt is session/cancel. Steering is refused: ACP v1 has no message
// into a running turn.
func (c *Conversation) Pass(in drover.LiveInput) ([]byte, error) {
	switch {
	case in.Answer != nil:
		a, ok := c.asks[in.Answer.RequestID]
		if !ok {
			return nil, fmt.Errorf("%s has no open permission request %q", c.Agent, in.Answer.RequestID)
		}
		delete(c.asks, in.Answer.RequestID)
		allow := in.Answer.Behavior == drover.Allow && len(in.Answer.UpdatedInput) == 0
		if !allow {
			c.reject(a.call)
		}
		return rpc.Result(a.rpcID, a.answer(allow, allow && in.Answer.Always)), nil
	case in.Interrupt != nil:
		switch {
		case c.prompting:
			return c.cancelTurn(), nil
		case !c.prompted && !c.Finished():
			// The session is starting: the turn is cancelled as soon as
			// it starts.
			c.interrupt = true
			return nil, nil
		}
		return nil, fmt.Errorf("%s has no turn to interrupt", c.Agent)
	case in.Steer != nil:
		return nil, errors.New("ACP has no message into a running turn")
	}
	return nil, errors.New("empty live input")
}

var _ runner.Warmer = (*Conversation)(nil)

// Decodes implements runner.Warmer.
func (*Conversation) Decodes() []any { return []any{new(jsonrpc.Message), new(chunkLine)} }

// Translate implements runner.Translator for one JSON-RPC line. Until the
// session is known its events are held (a session/load the agent rejects
// yields nothing); they follow the init event.
func (c *Conversation) Translate(raw []byte) ([]drover.Event, error) {
	if evs, ok := c.textChunkLine(raw); ok {
		return c.deliver(evs), nil
	}
	return c.translate(raw)
}

// translate is Translate of any line, decoded the general way.
func (c *Conversation) translate(raw []byte) ([]drover.Event, error) {
	var m jsonrpc.Message
	if err := runner.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("undecodable %s line: %w", c.Agent, err)
	}
	evs := c.settle(m)
	switch {
	case m.Method != "" && m.HasID():
		evs = append(evs, c.agentRequest(m, raw)...)
	case m.Method != "":
		evs = append(evs, c.notify(m, raw)...)
	case m.HasID():
		evs = append(evs, c.response(m)...)
	default:
		return evs, fmt.Errorf("%s line that is no request, response or notification", c.Agent)
	}
	return c.deliver(evs), nil
}

// deliver returns evs, or holds them (and returns none) until the
// conversation is ready.
func (c *Conversation) deliver(evs []drover.Event) []drover.Event {
	if !c.ready {
		c.held = append(c.held, evs...)
		return nil
	}
	return evs
}

// chunkLine is as much of a session/update notification as a text chunk
// of the agent's message or thought needs, decoded in one pass.
type chunkLine struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Update struct {
			Kind    string `json:"sessionUpdate"`
			Content struct {
				Type string  `json:"type"`
				Text *string `json:"text"`
			} `json:"content"`
			MessageID *string `json:"messageId"`
		} `json:"update"`
	} `json:"params"`
}

var (
	kindMessageChunk = []byte(`"agent_message_chunk"`)
	kindThoughtChunk = []byte(`"agent_thought_chunk"`)
)

// textChunkLine translates raw when it is a notification of a text chunk
// of the agent's message or thought, the lines a streamed turn is made
// of, decoding it once: the general path decodes the envelope, its params
// and the update one inside another, which was a quarter of a streamed
// gemini run's CPU. ok is false for any other line (nothing is
// changed then), which Translate decodes as before; the events are the
// same either way.
func (c *Conversation) textChunkLine(raw []byte) (_ []drover.Event, ok bool) {
	if len(c.rejected) > 0 || !bytes.Contains(raw, kindMessageChunk) && !bytes.Contains(raw, kindThoughtChunk) {
		return nil, false
	}
	var l chunkLine
	if !decodeChunkLine(raw, &l) || l.Method != acpsdk.ClientMethodSessionUpdate || (jsonrpc.Message{ID: l.ID}).HasID() {
		return nil, false
	}
	u := l.Params.Update
	if u.Content.Type != "text" || u.Content.Text == nil || u.Kind != "agent_message_chunk" && u.Kind != "agent_thought_chunk" {
		return nil, false
	}
	evs := c.settle(jsonrpc.Message{})
	if c.loading {
		return evs, true // session/load replays the history: not this run's events
	}
	if u.Kind == "agent_thought_chunk" {
		evs = append(evs, c.flushText()...)
		growWrite(&c.thought, *u.Content.Text)
		return evs, true
	}
	return append(evs, c.messageChunk(*u.Content.Text, u.MessageID)...), true
}

// decodeChunkLine decodes raw into l as runner.Unmarshal does: with the
// scanner when raw has the shape of a text chunk's notification (most
// lines of a streamed turn: reflection was two thirds of their decoding),
// else with runner.Unmarshal. It reports whether raw decoded.
func decodeChunkLine(raw []byte, l *chunkLine) bool {
	if scanChunkLine(raw, l) {
		return true
	}
	*l = chunkLine{}
	return runner.Unmarshal(raw, l) == nil
}

// chunkFields are the member names the general decoding takes at each
// level of a chunkLine: a walk that meets one it does not read gives up.
var chunkFields = func() (f struct{ line, params, update, content jsonscan.Fields }) {
	line := reflect.TypeFor[chunkLine]()
	params, _ := line.FieldByName("Params")
	update, _ := params.Type.FieldByName("Update")
	content, _ := update.Type.FieldByName("Content")
	f.line, f.params = jsonscan.FieldsOf(line), jsonscan.FieldsOf(params.Type)
	f.update, f.content = jsonscan.FieldsOf(update.Type), jsonscan.FieldsOf(content.Type)
	return f
}()

// scanChunkLine decodes raw into l (zero) with the scanner: ok is false,
// l undefined, for a line it does not read exactly as runner.Unmarshal
// would (not JSON, a name it does not read that the general decoding
// would, a name twice, a value of another type or null).
func scanChunkLine(raw []byte, l *chunkLine) (ok bool) {
	s := jsonscan.New(raw)
	var seen jsonscan.Seen
	for k := range s.Members() {
		switch {
		case string(k) == "id" && seen.Once(0):
			l.ID, ok = s.Raw()
		case string(k) == "method" && seen.Once(1):
			l.Method, ok = s.StringOf(acpsdk.ClientMethodSessionUpdate)
		case string(k) == "params" && seen.Once(2):
			ok = scanChunkParams(&s, l)
		default:
			ok = !chunkFields.line.Claims(k) && s.Skip()
		}
		if !ok {
			return false
		}
	}
	return s.End()
}

// scanChunkParams is scanChunkLine of the params object.
func scanChunkParams(s *jsonscan.Scanner, l *chunkLine) (ok bool) {
	var seen jsonscan.Seen
	for k := range s.Members() {
		if string(k) == "update" && seen.Once(0) {
			ok = scanChunkUpdate(s, l)
		} else {
			ok = !chunkFields.params.Claims(k) && s.Skip()
		}
		if !ok {
			return false
		}
	}
	return !s.Failed()
}

// scanChunkUpdate is scanChunkLine of the update object.
func scanChunkUpdate(s *jsonscan.Scanner, l *chunkLine) (ok bool) {
	u := &l.Params.Update
	var seen jsonscan.Seen
	for k := range s.Members() {
		switch {
		case string(k) == "sessionUpdate" && seen.Once(0):
			u.Kind, ok = s.StringOf("agent_message_chunk", "agent_thought_chunk")
		case string(k) == "messageId" && seen.Once(1):
			var id string
			id, ok = s.String()
			u.MessageID = &id
		case string(k) == "content" && seen.Once(2):
			ok = scanChunkContent(s, l)
		default:
			ok = !chunkFields.update.Claims(k) && s.Skip()
		}
		if !ok {
			return false
		}
	}
	return !s.Failed()
}

// scanChunkContent is scanChunkLine of the content object.
func scanChunkContent(s *jsonscan.Scanner, l *chunkLine) (ok bool) {
	c := &l.Params.Update.Content
	var seen jsonscan.Seen
	for k := range s.Members() {
		switch {
		case string(k) == "type" && seen.Once(0):
			c.Type, ok = s.StringOf("text")
		case string(k) == "text" && seen.Once(1):
			var text string
			text, ok = s.String()
			c.Text = &text
		default:
			ok = !chunkFields.content.Claims(k) && s.Skip()
		}
		if !ok {
			return false
		}
	}
	return !s.Failed()
}

// settle returns what goes before the events of m: the events queued
// since the last line, and a denied result for each call drover rejected
// that m does not report on (Gemini reports nothing on a rejected call:
// the model is told, and the turn goes on).
func (c *Conversation) settle(m jsonrpc.Message) []drover.Event {
	evs := c.queued
	c.queued = nil
	if len(c.rejected) == 0 {
		return evs
	}
	about := ""
	if m.Method == acpsdk.ClientMethodSessionUpdate {
		var p struct {
			Update struct {
				ToolCallID string `json:"toolCallId"`
			} `json:"update"`
		}
		_ = runner.Unmarshal(m.Params, &p)
		about = p.Update.ToolCallID
	}
	var keep []string
	for _, id := range c.rejected {
		if id == about {
			keep = append(keep, id)
			continue
		}
		evs = append(evs, c.result(c.calls[id], drover.ToolDenied, "rejected: the call did not run")...)
	}
	c.rejected = keep
	return evs
}

// agentRequest answers a request of the agent's.
func (c *Conversation) agentRequest(m jsonrpc.Message, raw []byte) []drover.Event {
	switch m.Method {
	case acpsdk.ClientMethodSessionRequestPermission:
		return c.requestPermission(m, raw)
	case acpsdk.ClientMethodFsReadTextFile:
		return c.readTextFile(m, raw)
	case acpsdk.ClientMethodFsWriteTextFile:
		return c.writeTextFile(m, raw)
	}
	// Terminals (never offered), elicitations and anything else: refused,
	// so that the agent does not wait for an answer.
	c.out = append(c.out, rpc.Error(m.ID, jsonrpc.CodeMethodNotFound, "drover does not handle "+m.Method)...)
	return []drover.Event{c.Extension(extName(m.Method), raw)}
}

// extName is the extension event name of a method ("fs/x_y" → "fs_x_y").
func extName(method string) string { return strings.ReplaceAll(method, "/", "_") }

// response handles the answer to a request of ours.
func (c *Conversation) response(m jsonrpc.Message) []drover.Event {
	key := strings.TrimSpace(string(m.ID))
	method, ok := c.sent[key]
	if !ok {
		return nil // not ours, or answered twice
	}
	delete(c.sent, key)
	switch method {
	case acpsdk.AgentMethodInitialize:
		return c.onInitialize(m)
	case acpsdk.AgentMethodSessionNew, acpsdk.AgentMethodSessionLoad:
		return c.sessionStarted(method, m)
	case acpsdk.AgentMethodSessionSetMode:
		if m.Error != nil {
			c.fail(drover.CodeAdapterError, fmt.Sprintf("%s: select mode %q: %s", c.Agent, c.sess.Mode, m.Error.Message))
			return nil
		}
		c.prompt()
	case acpsdk.AgentMethodSessionPrompt:
		return c.onPrompted(m)
	}
	return nil
}

// fail ends a session that could not start.
func (c *Conversation) fail(code drover.ErrorCode, msg string) {
	c.startErr, c.closeIn = &drover.Error{Code: code, Message: msg}, true
}

// onInitialize handles initialize's answer: the session is started or
// loaded, unless the agent cannot take what the run needs.
func (c *Conversation) onInitialize(m jsonrpc.Message) []drover.Event {
	if m.Error != nil {
		c.fail(drover.CodeAdapterError, fmt.Sprintf("%s: initialize: %s", c.Agent, m.Error.Message))
		return nil
	}
	var r acpsdk.InitializeResponse
	if err := runner.Unmarshal(m.Result, &r); err != nil {
		c.fail(drover.CodeAdapterError, fmt.Sprintf("%s: initialize answered %s: %v", c.Agent, m.Result, err))
		return nil
	}
	if r.ProtocolVersion != ProtocolVersion {
		c.fail(drover.CodeAdapterError, fmt.Sprintf("%s speaks ACP version %d; drover speaks %d", c.Agent, r.ProtocolVersion, ProtocolVersion))
		return nil
	}
	c.initialized = true
	c.loadSession = r.AgentCapabilities.LoadSession
	if r.AgentInfo != nil {
		c.agentInfo = map[string]any{"name": r.AgentInfo.Name, "version": r.AgentInfo.Version}
	}
	servers, err := mcpServers(c.sess.MCPServers, r.AgentCapabilities.McpCapabilities)
	if err != nil {
		c.fail(drover.CodeUnsupportedOption, fmt.Sprintf("%s: %v", c.Agent, err))
		return nil
	}
	if c.sess.Resume != "" {
		if !c.loadSession {
			c.fail(drover.CodeUnsupportedOption, fmt.Sprintf("resume is not supported by %s: the agent offers no session/load", c.Agent))
			return nil
		}
		c.loading = true
		c.out = append(c.out, c.request(acpsdk.AgentMethodSessionLoad, acpsdk.LoadSessionRequest{
			SessionId: acpsdk.SessionId(c.sess.Resume), Cwd: c.sess.Cwd, McpServers: servers})...)
		return nil
	}
	c.out = append(c.out, c.request(acpsdk.AgentMethodSessionNew, acpsdk.NewSessionRequest{Cwd: c.sess.Cwd, McpServers: servers})...)
	return nil
}

// sessionStarted handles the answer to session/new or session/load: the
// session is known (init, then what was held), the mode selected and the
// prompt sent. A session/load the agent refuses as unknown is a rejected
// resume.
func (c *Conversation) sessionStarted(method string, m jsonrpc.Message) []drover.Event {
	c.loading = false
	if m.Error != nil {
		if method == acpsdk.AgentMethodSessionLoad && (unknownSession(m.Error) ||
			c.d.UnknownSession != nil && c.d.UnknownSession(m.Error.Code, m.Error.Message, m.Error.Data)) {
			c.resumeRejected, c.closeIn = true, true
			return nil
		}
		code := drover.CodeAdapterError
		if m.Error.Code == -32000 { // ACP's auth_required
			code = drover.CodeAuthFailed
		}
		c.fail(code, fmt.Sprintf("%s: %s: %s", c.Agent, method, m.Error.Message))
		return nil
	}
	var r struct {
		SessionID string                       `json:"sessionId"`
		Models    *acpsdk.SessionModelState    `json:"models"`
		Config    []acpsdk.SessionConfigOption `json:"configOptions"`
	}
	_ = runner.Unmarshal(m.Result, &r)
	c.sessionID = r.SessionID
	if method == acpsdk.AgentMethodSessionLoad {
		c.sessionID = c.sess.Resume
	}
	if c.sessionID == "" {
		c.fail(drover.CodeAdapterError, fmt.Sprintf("%s: %s answered no session id", c.Agent, method))
		return nil
	}
	c.model = sessionModel(r.Models, r.Config)
	if c.model == "" {
		c.model = c.sess.Model
	}
	c.ready = true
	meta := runner.SessionMeta(c.sessionID)
	if c.agentInfo != nil {
		meta["agentInfo"] = c.agentInfo
	}
	evs := append([]drover.Event{c.Init(c.model, c.sess.Cwd, c.sess.Tools, meta)}, c.held...)
	c.held = nil
	if c.sess.Mode != "" {
		c.out = append(c.out, c.request(acpsdk.AgentMethodSessionSetMode, map[string]any{
			"sessionId": c.sessionID, "modeId": c.sess.Mode})...)
		return evs
	}
	c.prompt()
	return evs
}

// unknownSession reports whether a session/load error says the session
// does not exist (invalid params, or a text saying so), rather than that
// loading failed.
func unknownSession(e *jsonrpc.Error) bool {
	if e.Code == jsonrpc.CodeInvalidParams {
		return true
	}
	msg := strings.ToLower(e.Message + " " + string(e.Data))
	return runner.ContainsAny(msg, []string{"not found", "no such session", "unknown session", "invalid session"})
}

// sessionModel is the model the session reports: its current model, or
// the current value of its "model" config option.
func sessionModel(models *acpsdk.SessionModelState, config []acpsdk.SessionConfigOption) string {
	if models != nil && models.CurrentModelId != "" {
		return string(models.CurrentModelId)
	}
	for _, o := range config {
		if s := o.Select; s != nil && (s.Id == "model" || s.Category != nil && *s.Category == "model") {
			return string(s.CurrentValue)
		}
	}
	return ""
}

// prompt sends the run's prompt, and at once session/cancel if an
// interrupt came first.
func (c *Conversation) prompt() {
	c.prompted, c.prompting = true, true
	c.costBefore = c.cost
	c.out = append(c.out, c.request(acpsdk.AgentMethodSessionPrompt, acpsdk.PromptRequest{
		SessionId: acpsdk.SessionId(c.sessionID), Prompt: []acpsdk.ContentBlock{acpsdk.TextBlock(c.sess.Prompt)}})...)
	if c.interrupt {
		c.out = append(c.out, c.cancelTurn()...)
	}
}

// onPrompted handles session/prompt's answer: the turn is over, and stdin
// closes.
func (c *Conversation) onPrompted(m jsonrpc.Message) []drover.Event {
	c.prompting, c.closeIn = false, true
	evs := c.flush()
	if m.Error != nil {
		c.failed = m.Error
		return evs
	}
	r := promptResult{raw: m.Result}
	_ = runner.Unmarshal(m.Result, &r)
	c.stop = &r
	return evs
}

// flush ends the message and the thought being streamed: UES text and
// thinking are whole.
func (c *Conversation) flush() []drover.Event {
	var evs []drover.Event
	if c.thought.Len() > 0 {
		evs = append(evs, c.Event(drover.TypeThinking, drover.ThinkingPayload{Summary: c.thought.String()}))
		c.thought.Reset()
	}
	if c.text.Len() > 0 {
		c.lastText = c.text.String()
		evs = append(evs, c.Event(drover.TypeText, drover.TextPayload{Content: c.lastText}))
		c.text.Reset()
	}
	c.textID = ""
	return evs
}

// notify maps a notification: session/update, or an extension event.
func (c *Conversation) notify(m jsonrpc.Message, raw []byte) []drover.Event {
	if m.Method != acpsdk.ClientMethodSessionUpdate {
		return []drover.Event{c.Extension(extName(m.Method), raw)}
	}
	var p struct {
		SessionID string          `json:"sessionId"`
		Update    json.RawMessage `json:"update"`
	}
	var head struct {
		Kind string `json:"sessionUpdate"`
	}
	if runner.Unmarshal(m.Params, &p) != nil || runner.Unmarshal(p.Update, &head) != nil || head.Kind == "" {
		return []drover.Event{c.Extension("session_update", raw)}
	}
	if head.Kind == "usage_update" {
		c.usageUpdate(p.Update) // also while session/load replays: the cost so far
	}
	if c.loading {
		return nil // session/load replays the history: not this run's events
	}
	switch head.Kind {
	case "agent_message_chunk":
		if text, id, ok := textChunk(p.Update); ok {
			return c.messageChunk(text, id)
		}
		var u acpsdk.SessionUpdateAgentMessageChunk
		if runner.Unmarshal(p.Update, &u) == nil && u.Content.Text != nil {
			return c.messageChunk(u.Content.Text.Text, u.MessageId)
		}
	case "agent_thought_chunk":
		if text, _, ok := textChunk(p.Update); ok {
			evs := c.flushText()
			growWrite(&c.thought, text)
			return evs
		}
		var u acpsdk.SessionUpdateAgentThoughtChunk
		if runner.Unmarshal(p.Update, &u) == nil && u.Content.Text != nil {
			evs := c.flushText()
			growWrite(&c.thought, u.Content.Text.Text)
			return evs
		}
	case "tool_call", "tool_call_update":
		var u toolUpdate
		if runner.Unmarshal(p.Update, &u) == nil && u.ToolCallID != "" {
			evs := c.flush()
			return append(evs, c.toolUpdate(u, head.Kind == "tool_call", p.Update)...)
		}
	}
	// plan, available commands, modes, config options, usage (whose cost
	// is also kept for done), the user's message echoed, content that is
	// not text, and what ACP adds later.
	return []drover.Event{c.Extension(head.Kind, p.Update)}
}

// sessionCost is the cost of a usage_update (ACP's SessionUsageUpdate,
// unstable in acp-go-sdk v0.13.0: {used, size, cost?: {amount, currency}}):
// the session's cumulative cost.
type sessionCost struct {
	Amount   *float64 `json:"amount"`
	Currency string   `json:"currency"`
}

// usd reports the amount when the cost is in US dollars.
func (s *sessionCost) usd() (float64, bool) {
	if s == nil || !strings.EqualFold(s.Currency, "USD") {
		return 0, false
	}
	return *s.Amount, true
}

// usageUpdate keeps the cost a usage_update reports. An update without a
// cost, or with an amount that is missing, negative or not finite, leaves
// the last one.
func (c *Conversation) usageUpdate(update json.RawMessage) {
	var u struct {
		Cost *sessionCost `json:"cost"`
	}
	if runner.Unmarshal(update, &u) != nil || u.Cost == nil || u.Cost.Amount == nil ||
		*u.Cost.Amount < 0 || math.IsNaN(*u.Cost.Amount) || math.IsInf(*u.Cost.Amount, 0) {
		return
	}
	c.cost = u.Cost
	if c.prompted {
		c.costSeen = true
	}
}

// runCost is the run's own cost as the agent reported it: the last
// cumulative session cost reported after the prompt was sent, less the
// session's cost before it (a resumed session's, reported while it was
// loaded or before the prompt; 0 when none was). A cost lower than that
// is a session that started over: it is taken as it is. ok is false when
// the agent reported no cost after the prompt, or not in US dollars.
// session is the session's cumulative cost.
func (c *Conversation) runCost() (own, session float64, ok bool) {
	if !c.costSeen {
		return 0, 0, false
	}
	session, ok = c.cost.usd()
	if !ok {
		return 0, 0, false
	}
	own = session
	if before, ok := c.costBefore.usd(); ok && before > 0 && before <= session {
		// Rounded to a billionth of a cent: 0.05 - 0.03 is 0.02, not
		// 0.020000000000000004.
		own = math.Round((session-before)*1e11) / 1e11
	}
	return own, session, true
}

// textChunk reads the text of a message or thought chunk whose content is
// a text block ({"type":"text","text":…}), and its messageId, decoding
// only those fields: acp-go-sdk's ContentBlock decodes the block again
// with encoding/json, for every chunk, which was a fifth of a streamed
// gemini run's CPU. ok is false for any other chunk, which the
// caller decodes with the SDK's types as before.
func textChunk(update []byte) (text string, messageID *string, ok bool) {
	var u struct {
		Content struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		} `json:"content"`
		MessageID *string `json:"messageId"`
	}
	if runner.Unmarshal(update, &u) != nil || u.Content.Type != "text" || u.Content.Text == nil {
		return "", nil, false
	}
	return *u.Content.Text, u.MessageID, true
}

// messageChunk streams a chunk of the agent's message; a new messageId
// starts a new message.
func (c *Conversation) messageChunk(s string, id *string) []drover.Event {
	var evs []drover.Event
	if c.thought.Len() > 0 || id != nil && *id != c.textID && c.text.Len() > 0 {
		evs = c.flush()
	}
	if id != nil {
		c.textID = *id
	}
	growWrite(&c.text, s)
	if c.sess.PartialText && s != "" {
		evs = append(evs, c.Event(drover.TypeTextDelta, drover.TextDeltaPayload{Delta: s}))
	}
	return evs
}

// growWrite appends s to b, doubling b's capacity when it is full: a
// Builder grows a large buffer by a quarter at a time, which copied a
// streamed message of 100,000 chunks about four times over.
// Grow(n) makes the capacity 2×cap+n, so n is only what s needs.
func growWrite(b *strings.Builder, s string) {
	if b.Cap()-b.Len() < len(s) {
		b.Grow(len(s))
	}
	b.WriteString(s)
}

// flushText ends the message being streamed, leaving a thought.
func (c *Conversation) flushText() []drover.Event {
	if c.text.Len() == 0 {
		return nil
	}
	c.lastText = c.text.String()
	c.text.Reset()
	c.textID = ""
	return []drover.Event{c.Event(drover.TypeText, drover.TextPayload{Content: c.lastText})}
}

// Finish implements runner.Translator. A session/load the agent refused
// is reported as a rejected resume. Otherwise the run ends with the
// events still due, then: for an answered prompt, its stop reason as done
// (with an error event for a failure or a refusal); for a session that
// never started, an error and done; for an agent that ended mid-turn by
// itself, PROCESS_EXIT and done. An agent drover stopped mid-turn (the
// run was cancelled) yields nothing more: the engine reports it.
func (c *Conversation) Finish(exit runner.Exit) ([]drover.Event, bool) {
	if c.resumeRejected {
		return nil, true
	}
	evs := c.settle(jsonrpc.Message{})
	evs = append(evs, c.flush()...)
	done := drover.DonePayload{Status: drover.StatusError, ResumeToken: c.sessionID, DurationMs: exit.Duration.Milliseconds()}
	meta := runner.SessionMeta(c.sessionID)
	switch {
	case c.startErr != nil:
		evs = append(evs, c.Failure(c.startErr.Code, c.startErr.Message, nil))
	case !c.prompted && exit.Stopped:
		// Stopped before its session was open: at the open deadline (a
		// cancelled run's events are the engine's to drop).
		what := "answer initialize"
		if c.initialized {
			what = "start a session"
		}
		evs = append(evs, c.Failure(drover.CodeTimeout, fmt.Sprintf("%s did not %s within %s; stopped", c.Agent, what, c.sess.OpenTimeout), nil))
	case c.stop == nil && c.failed == nil && exit.Stopped:
		return nil, false // cancelled or timed out: the engine reports it
	case c.stop == nil && c.failed == nil:
		e := runner.ExitError(c.Agent, exit)
		evs = append(evs, c.Failure(e.Code, e.Message, nil))
	case c.failed != nil:
		evs = append(evs, c.promptFailure(*c.failed))
	default:
		done.Status, done.Result = c.doneStatus(&evs)
		meta = setMeta(meta, "stopReason", string(c.stop.StopReason))
		done.Usage = c.usage()
	}
	run, recorded := c.runUsage()
	if recorded {
		// Every response of the run, where the prompt result has the
		// last one's (a failed prompt's responses before it count too).
		done.Usage = run
		done.Usage.TotalCostUSD = nil
	}
	own, session, ok := c.runCost()
	if recorded && run.TotalCostUSD != nil && *run.TotalCostUSD > 0 {
		// The cost the agent recorded for each response of the run, when
		// it knows a price: the run's own also where usage_update could
		// not tell it (OpenCode reports no cost while session/load
		// replays a session, so a resumed run's last total is the
		// session's), and also where it sends none (a model whose
		// context limit it does not know).
		own, ok = *run.TotalCostUSD, true
	}
	if ok {
		done.Usage.TotalCostUSD, done.Usage.CostEstimated = &own, false
		if c.sess.Resume != "" && session > 0 {
			// The session was continued: its running total too, by which
			// a failover chain that has already counted part of it counts
			// only this run's share (drover.MetaSessionCostUSD).
			meta = setMeta(meta, drover.MetaSessionCostUSD, session)
		}
	}
	done.Usage.ToolUses = c.toolUses
	ev := c.Event(drover.TypeDone, done)
	ev.Metadata = meta
	if !c.ready {
		return append(c.held, append(evs, ev)...), false
	}
	return append(evs, ev), false
}

// setMeta sets k in meta, creating it.
func setMeta(meta map[string]any, k string, v any) map[string]any {
	if meta == nil {
		meta = map[string]any{}
	}
	meta[k] = v
	return meta
}

// doneStatus maps the prompt's stop reason: end_turn is success, and so is
// max_tokens (the answer was cut; done says stopReason max_tokens);
// max_turn_requests is max_turns; cancelled is interrupted; a refusal is
// an error with its own event.
func (c *Conversation) doneStatus(evs *[]drover.Event) (drover.DoneStatus, string) {
	switch c.stop.StopReason {
	case acpsdk.StopReasonEndTurn, acpsdk.StopReasonMaxTokens:
		return drover.StatusSuccess, c.lastText
	case acpsdk.StopReasonMaxTurnRequests:
		return drover.StatusMaxTurns, ""
	case acpsdk.StopReasonCancelled:
		return drover.StatusInterrupted, ""
	case acpsdk.StopReasonRefusal:
		*evs = append(*evs, c.Failure(drover.CodeModelError, c.Agent+" refused to go on (stop reason refusal)", nil))
		return drover.StatusError, ""
	}
	*evs = append(*evs, c.Failure(drover.CodeModelError, fmt.Sprintf("%s stopped with an unknown reason %q", c.Agent, c.stop.StopReason), nil))
	return drover.StatusError, ""
}

// usage is the prompt's usage as the agent reports it: ACP's usage, else
// the dialect's; nothing invented.
func (c *Conversation) usage() drover.Usage {
	if u := c.stop.Usage; u != nil {
		out := drover.Usage{InputTokens: int64(u.InputTokens), OutputTokens: int64(u.OutputTokens)}
		runner.AddOptional(&out.CacheReadTokens, count(u.CachedReadTokens))
		runner.AddOptional(&out.CacheWriteTokens, count(u.CachedWriteTokens))
		runner.AddOptional(&out.ReasoningTokens, count(u.ThoughtTokens))
		return out
	}
	if c.d.Usage != nil {
		if u, ok := c.d.Usage(c.stop.raw); ok {
			return u
		}
	}
	return drover.Usage{}
}

// runUsage is the dialect's RunUsage of a run whose prompt was sent.
func (c *Conversation) runUsage() (drover.Usage, bool) {
	if c.d.RunUsage == nil || !c.prompted || c.sessionID == "" {
		return drover.Usage{}, false
	}
	return c.d.RunUsage(c.sessionID)
}

func count(n *int) *int64 {
	if n == nil {
		return nil
	}
	v := int64(*n)
	return &v
}

// promptFailure classifies a failed prompt: a JSON-RPC error whose code is
// an HTTP status (Gemini) or the dialect's FailureStatus, with the shared
// status rules and the dialect's differences; with neither, by its text.
func (c *Conversation) promptFailure(e jsonrpc.Error) drover.Event {
	status := 0
	if e.Code >= 400 && e.Code <= 599 {
		status = e.Code
	} else if c.d.FailureStatus != nil {
		status = c.d.FailureStatus()
	}
	msg := e.Message
	if len(e.Data) > 0 && string(e.Data) != "null" {
		msg += " " + string(e.Data)
	}
	meta := map[string]any{"rpcCode": e.Code}
	code := c.d.StatusRules.Code(status, msg)
	if status != 0 {
		meta["httpStatus"] = status
	}
	return c.Failure(code, e.Message, meta)
}
