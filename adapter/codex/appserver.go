package codex

// Live runs (Request.Live set) drive `codex app-server`: newline-delimited
// JSON-RPC on stdio. `codex exec` forces the approval policy "never", so
// only the app-server can ask before a tool call, take a steering message
// or interrupt a turn. The conversation (runner.Conversation) writes
// initialize, then initialized and thread/start (or thread/resume) once
// the server answered, then turn/start with the prompt once the thread id
// is known; it translates the server's notifications with the same mapping
// as exec (translate.go), answers the server's requests (approvals become
// permission_request events, answered by Pass), and closes stdin once the
// turn has ended, upon which the server exits. The mapping and the tier
// measurements are in docs/adapters/codex.md.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/contain"
	"github.com/drover-run/drover/internal/jsonrpc"
	"github.com/drover-run/drover/internal/jsonscan"
	"github.com/drover-run/drover/internal/runner"
)

// clientName is how drover introduces itself in initialize; Codex puts it
// in its user agent and in the requests' originator header.
const clientName = "drover"

// AppServerArgs returns the command line of a live run: `codex app-server`
// with the -c overrides of opts (the same ones exec gets, as configuration:
// the app-server has no -s, -m, --add-dir or --ignore-rules). The approval
// policy and sandbox mode are not among them; they go in thread/start's
// params (see LiveTier).
func AppServerArgs(opts drover.Options) ([]string, error) {
	if err := checkOptions(opts); err != nil {
		return nil, err
	}
	lt, err := LiveTier(opts)
	if err != nil {
		return nil, err
	}
	common, err := overrides(opts)
	if err != nil {
		return nil, err
	}
	args := append([]string{"app-server"}, lt.Overrides...)
	if m := runner.Model(opts, DefaultEndpointModel); m != "" {
		args = append(args, "-c", "model="+tomlString(m))
	}
	return append(args, common...), nil
}

// LiveTierSettings is how a live run enforces its tier (PERM-1): Codex's
// approval policy and sandbox mode (thread/start's params) and the -c
// overrides that go with them.
type LiveTierSettings struct {
	Overrides      []string
	ApprovalPolicy string
	Sandbox        string
}

// LiveTier returns the settings of opts's tier in a live run (measured on
// 0.169.0, table in docs/adapters/codex.md):
//
//   - sandbox and dry-run: "never" and "read-only", as exec: nothing is
//     ever asked, writes are refused (and hidden, see hidden.go);
//   - supervised: "untrusted": Codex asks before every shell command (and
//     escalation, MCP tool, edit); Codex asks for every edit too: the
//     conversation approves edits inside the workspace and AddDirs itself
//     (see insideRoots) and asks a person for the rest. Contained
//     (opts.Containment, as the adapter kit resolves it), Codex's sandbox
//     is "danger-full-access": an approved command runs once, under the
//     kernel's boundary. Uncontained it is "workspace-write", with the
//     network open to commands: an approved command runs in the sandbox
//     and, should the sandbox block it, again outside, unasked;
//   - autonomous: "on-request" and "danger-full-access": nothing is
//     sandboxed, and what Codex still asks (MCP tools) is approved.
func LiveTier(opts drover.Options) (LiveTierSettings, error) {
	switch opts.EffectiveTier() {
	case drover.TierSandbox:
		return LiveTierSettings{Overrides: sandboxSwitches, ApprovalPolicy: "never", Sandbox: "read-only"}, nil
	case drover.TierDryRun:
		return LiveTierSettings{ApprovalPolicy: "never", Sandbox: "read-only"}, nil
	case drover.TierSupervised:
		if contained, _ := opts.Containment(); contained {
			// Codex's sandbox would break under Landlock, and its rerun of
			// a blocked command outside it is what containment prevents.
			return LiveTierSettings{ApprovalPolicy: "untrusted", Sandbox: "danger-full-access"}, nil
		}
		roots := make([]string, 0, len(opts.AddDirs))
		for _, d := range addDirs(opts) {
			roots = append(roots, tomlString(d))
		}
		// Every command is asked for, so the network is open to what a
		// person approved (else an approved curl fails: Codex retries
		// outside the sandbox only after a file-system denial). /tmp and
		// $TMPDIR stay closed as in exec; an approved command that needs
		// them is retried outside the sandbox.
		return LiveTierSettings{Overrides: []string{
			"-c", "sandbox_workspace_write.network_access=true",
			"-c", "sandbox_workspace_write.exclude_slash_tmp=true",
			"-c", "sandbox_workspace_write.exclude_tmpdir_env_var=true",
			"-c", "sandbox_workspace_write.writable_roots=[" + strings.Join(roots, ",") + "]",
		}, ApprovalPolicy: "untrusted", Sandbox: "workspace-write"}, nil
	case drover.TierAutonomous:
		return LiveTierSettings{ApprovalPolicy: "on-request", Sandbox: "danger-full-access"}, nil
	}
	return LiveTierSettings{}, &drover.Error{Code: drover.CodeUnsupportedOption, Message: fmt.Sprintf("unknown tier %q", opts.Tier)}
}

// addDirs returns opts.AddDirs as absolute paths (relative ones are taken
// from the run's working directory, as Codex's --add-dir does).
func addDirs(opts drover.Options) []string {
	base := opts.Cwd
	if base == "" {
		base, _ = os.Getwd()
	}
	out := make([]string, 0, len(opts.AddDirs))
	for _, d := range opts.AddDirs {
		if !filepath.IsAbs(d) {
			d = filepath.Join(base, d)
		}
		out = append(out, filepath.Clean(d))
	}
	return out
}

// quietNotifications are what the conversation opts out of in initialize
// and drops should they come: streamed fragments of items that are mapped
// whole when they complete, and the server's bookkeeping.
// item/agentMessage/delta is added unless text deltas were asked for.
var quietNotifications = []string{
	"item/reasoning/summaryTextDelta", "item/reasoning/summaryPartAdded", "item/reasoning/textDelta",
	"item/commandExecution/outputDelta", "item/fileChange/outputDelta", "item/fileChange/patchUpdated",
	"item/plan/delta", "turn/diff/updated", "account/rateLimits/updated", "thread/status/changed",
	"remoteControl/status/changed", "serverRequest/resolved",
}

// conversation is a live run's runner.Conversation over `codex
// app-server`. It is used from one goroutine (the runner's conversation
// loop) and is not safe for concurrent use.
type conversation struct {
	*translator
	prompt  string
	resume  string
	partial bool
	tier    LiveTierSettings
	roots   []string // the workspace and AddDirs, symbolic links resolved

	nextID  int
	sent    map[string]string // our requests awaiting an answer: id → method
	out     []byte            // for Outbox
	closeIn bool

	started bool           // the thread is known: events flow
	held    []drover.Event // events before that (nothing is yielded from a rejected resume)
	turnID  string
	// recorded: Codex has recorded the turn's prompt (its userMessage item
	// completed). Steering and interrupts wait for it: an interrupt that
	// comes sooner drops the prompt from the thread (measured), and a
	// resumed run would not see it.
	recorded bool
	waiting  []drover.LiveInput // steering and interrupts waiting for that
	asks     map[string]*ask    // open approvals by request id
	asked    map[string]bool    // request ids handed out
	changes  map[string][]appChange
	mcpCalls []appItem // MCP tool calls started and not completed, oldest first

	resumeRejected bool
	startErr       *string // initialize, thread/start|resume or turn/start failed
}

var _ runner.Conversation = (*conversation)(nil)

// newConversation returns the conversation of one live run of prompt.
func newConversation(s runner.Stamp, info runInfo, prompt string, opts drover.Options) *conversation {
	lt, _ := LiveTier(opts) // AppServerArgs has checked the tier
	c := &conversation{translator: newTranslator(s, info), prompt: prompt, resume: opts.Resume,
		partial: opts.PartialText, tier: lt, sent: map[string]string{}, asks: map[string]*ask{},
		asked: map[string]bool{}, changes: map[string][]appChange{}}
	for _, r := range append([]string{info.cwd}, addDirs(opts)...) {
		c.roots = append(c.roots, contain.Resolve(r))
	}
	return c
}

// rpc writes the app-server's lines: JSON-RPC 2.0 without the "jsonrpc"
// member.
var rpc = jsonrpc.Codec{Unversioned: true}

// request returns the line of a request of ours and remembers it.
func (c *conversation) request(method string, params any) []byte {
	c.nextID++
	c.sent[fmt.Sprint(c.nextID)] = method
	return rpc.Request(c.nextID, method, params)
}

// Open implements runner.Conversation: initialize, opting out of the
// notifications drover does not map.
func (c *conversation) Open() ([]byte, error) {
	quiet := slices.Clone(quietNotifications)
	if !c.partial {
		quiet = append(quiet, "item/agentMessage/delta")
	}
	return c.request("initialize", map[string]any{
		"clientInfo":   map[string]any{"name": clientName, "version": "dev"},
		"capabilities": map[string]any{"optOutNotificationMethods": quiet},
	}), nil
}

// Outbox implements runner.Conversation: the requests and answers the last
// lines called for, and whether stdin is to close (the turn has ended, or
// the session could not start): the app-server exits at end of input.
func (c *conversation) Outbox() ([]byte, bool) {
	out := c.out
	c.out = nil
	return out, c.closeIn
}

// Finished implements runner.Translator: the turn has ended, or the
// session could not start; the process is expected to exit.
func (c *conversation) Finished() bool {
	return c.turnDone || c.resumeRejected || c.startErr != nil
}

var _ runner.Warmer = (*conversation)(nil)

// Decodes implements runner.Warmer.
func (*conversation) Decodes() []any { return []any{new(jsonrpc.Message)} }

// Translate implements runner.Translator for one JSON-RPC line. Until the
// thread is known nothing is returned (a rejected resume must yield
// nothing); what came before follows the synthesized init.
func (c *conversation) Translate(raw []byte) ([]drover.Event, error) {
	var evs []drover.Event
	if method, it, ok := scanItemLine(raw); ok {
		evs = c.item(it, method == "item/started", raw)
	} else {
		var err error
		if evs, err = c.translate(raw); err != nil {
			return nil, err
		}
	}
	if !c.started {
		c.held = append(c.held, evs...)
		return nil, nil
	}
	return evs, nil
}

// translate maps any line, decoded the general way.
func (c *conversation) translate(raw []byte) ([]drover.Event, error) {
	var m jsonrpc.Message
	if err := runner.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("undecodable %s line: %w", c.Agent, err)
	}
	switch {
	case m.Method != "" && len(m.ID) > 0:
		return c.serverRequest(m, raw), nil
	case m.Method != "":
		return c.notification(m, raw), nil
	case len(m.ID) > 0:
		return c.response(m, raw), nil
	}
	return nil, errors.New("codex app-server line that is no request, response or notification")
}

// response handles the answer to a request of ours.
func (c *conversation) response(m jsonrpc.Message, raw []byte) []drover.Event {
	key := string(bytes.TrimSpace(m.ID))
	method, ok := c.sent[key]
	if !ok {
		return nil // not ours (or answered twice)
	}
	delete(c.sent, key)
	if m.Error != nil {
		switch method {
		case "turn/steer", "turn/interrupt":
			// The turn ended (or moved on) before it arrived; the run goes on.
			return []drover.Event{c.Extension(strings.ReplaceAll(method, "/", "_")+"_failed", raw)}
		case "thread/resume":
			if resumeRejectedText(m.Error.Message) {
				c.resumeRejected, c.closeIn = true, true
				return nil
			}
		}
		msg := fmt.Sprintf("codex %s: %s", method, m.Error.Message)
		c.startErr, c.closeIn = &msg, true
		return nil
	}
	switch method {
	case "initialize":
		c.out = append(c.out, rpc.Notification("initialized", nil)...)
		params := map[string]any{"cwd": c.info.cwd, "approvalPolicy": c.tier.ApprovalPolicy, "sandbox": c.tier.Sandbox}
		name := "thread/start"
		if c.resume != "" {
			name = "thread/resume"
			params["threadId"] = c.resume
			params["excludeTurns"] = true // the history is not needed
		}
		c.out = append(c.out, c.request(name, params)...)
	case "thread/start", "thread/resume":
		var r struct {
			Model string `json:"model"`
		}
		_ = runner.Unmarshal(m.Result, &r)
		evs := c.startThread(idAt(m.Result, "thread"), r.Model)
		c.out = append(c.out, c.request("turn/start", map[string]any{"threadId": c.threadID,
			"input": []any{map[string]any{"type": "text", "text": c.prompt}}})...)
		return evs
	case "turn/start":
		c.turnStarted(idAt(m.Result, "turn"))
	}
	return nil
}

// idAt returns the id of the object at key in a JSON object (the thread
// of {"thread":{"id":…}}), or "".
func idAt(raw json.RawMessage, key string) string {
	var outer map[string]json.RawMessage
	var inner struct {
		ID string `json:"id"`
	}
	if runner.Unmarshal(raw, &outer) == nil {
		_ = runner.Unmarshal(outer[key], &inner)
	}
	return inner.ID
}

// startThread makes the thread known (once): the synthesized init, with
// the model Codex reports, then the events held until now.
func (c *conversation) startThread(id, model string) []drover.Event {
	if c.started {
		return nil
	}
	c.started = true
	if id != "" {
		c.threadID = id
	}
	if model != "" {
		c.info.model = model
	}
	evs := append([]drover.Event{c.initEvent()}, c.held...)
	c.held = nil
	return evs
}

// turnStarted learns the turn's id (once).
func (c *conversation) turnStarted(id string) {
	if c.turnID != "" || id == "" {
		return
	}
	c.turnID = id
	c.sendWaiting()
}

// ready reports whether steering and interrupts can go to the turn now.
func (c *conversation) ready() bool { return c.turnID != "" && c.recorded }

// sendWaiting sends the steering and interrupts that waited, once the turn
// is ready for them.
func (c *conversation) sendWaiting() {
	if !c.ready() {
		return
	}
	for _, in := range c.waiting {
		c.out = append(c.out, c.turnInput(in)...)
	}
	c.waiting = nil
}

// turnInput is the request passing a steering message or an interrupt on
// to the current turn.
func (c *conversation) turnInput(in drover.LiveInput) []byte {
	if in.Interrupt != nil {
		return c.request("turn/interrupt", map[string]any{"threadId": c.threadID, "turnId": c.turnID})
	}
	return c.steer(in.Steer.Message)
}

func (c *conversation) steer(text string) []byte {
	return c.request("turn/steer", map[string]any{"threadId": c.threadID, "expectedTurnId": c.turnID,
		"input": []any{map[string]any{"type": "text", "text": text}}})
}

// notification maps one server notification.
func (c *conversation) notification(m jsonrpc.Message, raw []byte) []drover.Event {
	switch m.Method {
	case "thread/started":
		return c.startThread(idAt(m.Params, "thread"), "")
	case "turn/started":
		c.turnStarted(idAt(m.Params, "turn"))
		return []drover.Event{c.Extension("turn_started", raw)}
	case "item/started", "item/completed":
		it, ok := itemOf(m.Params)
		if !ok {
			return []drover.Event{c.Extension(strings.ReplaceAll(m.Method, "/", "_"), raw)}
		}
		return c.item(it, m.Method == "item/started", raw)
	case "item/agentMessage/delta":
		var p struct {
			Delta string `json:"delta"`
		}
		if c.partial && runner.Unmarshal(m.Params, &p) == nil && p.Delta != "" {
			return []drover.Event{c.Event(drover.TypeTextDelta, drover.TextDeltaPayload{Delta: p.Delta})}
		}
		return nil
	case "thread/tokenUsage/updated":
		c.addUsage(m.Params)
		return nil
	case "turn/completed":
		c.turnCompleted(m.Params)
		return nil
	case "error":
		// Not fatal by itself (retry notices, the error a failed turn
		// repeats), as in exec.
		return []drover.Event{c.Extension("error", raw)}
	case "turn/plan/updated":
		return []drover.Event{c.Extension("plan_update", raw)}
	}
	if slices.Contains(quietNotifications, m.Method) {
		return nil
	}
	return []drover.Event{c.Extension(strings.ReplaceAll(m.Method, "/", "_"), raw)}
}

// item maps an item's start or completion with exec's mapping.
func (c *conversation) item(a appItem, started bool, raw []byte) []drover.Event {
	switch a.Type {
	case "userMessage":
		if !started && !c.recorded {
			c.recorded = true // the first is the prompt
			c.sendWaiting()
		}
		return nil // the prompt and steering messages echoed: already in the stream
	case "fileChange":
		c.changes[a.ID] = a.Changes
	case "mcpToolCall":
		c.mcpCalls = slices.DeleteFunc(c.mcpCalls, func(x appItem) bool { return x.ID == a.ID })
		if started {
			c.mcpCalls = append(c.mcpCalls, a)
		}
	}
	return c.itemEvents(a.exec(), started, !started, raw)
}

// addUsage adds one model response's usage (tokenUsage.last) of this
// run's turn; tokenUsage.total is the thread's.
func (c *conversation) addUsage(params json.RawMessage) {
	var p struct {
		TurnID     string `json:"turnId"`
		TokenUsage struct {
			Last *appUsage `json:"last"`
		} `json:"tokenUsage"`
	}
	if runner.Unmarshal(params, &p) != nil || p.TokenUsage.Last == nil || c.turnID == "" || p.TurnID != c.turnID {
		return
	}
	u := p.TokenUsage.Last.usage()
	if c.perResponse == nil {
		c.perResponse = &usage{}
	}
	*c.perResponse = c.perResponse.plus(u)
	c.responses++
}

// turnCompleted ends the turn: completed, failed (classified in Finish)
// or interrupted. Stdin closes; the server then exits.
func (c *conversation) turnCompleted(params json.RawMessage) {
	var p struct {
		Turn struct {
			ID     string `json:"id"`
			Status string `json:"status"`
			Error  *struct {
				Message        string          `json:"message"`
				CodexErrorInfo json.RawMessage `json:"codexErrorInfo"`
			} `json:"error"`
		} `json:"turn"`
	}
	_ = runner.Unmarshal(params, &p)
	if c.turnID != "" && p.Turn.ID != "" && p.Turn.ID != c.turnID {
		return // not this run's turn
	}
	c.turnDone, c.closeIn = true, true
	switch p.Turn.Status {
	case "failed":
		msg := "codex turn failed"
		if e := p.Turn.Error; e != nil {
			if e.Message != "" {
				msg = e.Message
			}
			c.failStatus, c.failHint = errorInfo(e.CodexErrorInfo)
		}
		c.failed = &msg
	case "interrupted":
		c.interrupted = true
	}
	if c.perResponse == nil && c.failed == nil {
		c.perResponse = &usage{}
	}
}

// errorInfo reads Codex's error class: an HTTP status when it names one
// ({"httpConnectionFailed":{"httpStatusCode":401}}), and for the plain
// classes a text the shared status rules classify.
func errorInfo(raw json.RawMessage) (status int, hint string) {
	var class string
	if runner.Unmarshal(raw, &class) == nil {
		return 0, errorClassHints[class]
	}
	var obj map[string]struct {
		HTTPStatusCode *int `json:"httpStatusCode"`
	}
	if runner.Unmarshal(raw, &obj) == nil {
		for _, v := range obj {
			if v.HTTPStatusCode != nil {
				return *v.HTTPStatusCode, ""
			}
		}
	}
	return 0, ""
}

// errorClassHints are the texts Codex's plain error classes are
// classified by (statusRules).
var errorClassHints = map[string]string{
	"contextWindowExceeded": "context window exceeded",
	"rateLimitExceeded":     "rate limit",
	"usageLimitExceeded":    "rate limit",
	"serverOverloaded":      "overloaded",
	"internalServerError":   "server_error",
	"unauthorized":          "unauthorized",
	"badRequest":            "invalid_request_error",
}

// Finish implements runner.Translator. A resume the server refused
// ("no rollout found for thread id") is reported as such; a session that
// could not start ends in error and done; otherwise, once the turn ended,
// the tool calls Codex hid (hidden.go: the rollout is the same as exec's),
// then error (failed turn) and done.
func (c *conversation) Finish(exit runner.Exit) ([]drover.Event, bool) {
	if c.resumeRejected {
		return nil, true
	}
	if !c.turnDone {
		if c.startErr == nil {
			return nil, false // the runner reports how the process ended
		}
		fail := c.failError(*c.startErr, 0, "")
		done := c.Event(drover.TypeDone, drover.DonePayload{Status: drover.StatusError, ResumeToken: c.threadID,
			DurationMs: exit.Duration.Milliseconds()})
		return append(c.held, fail, done), false
	}
	var ro *rollout
	if c.info.codexHome != "" && c.threadID != "" {
		ro = readRollout(c.info.codexHome, c.threadID)
	}
	evs := c.hiddenCalls(ro, exit.StderrTail)
	return append(evs, c.final(ro, exit)...), false
}

// itemOf is the item of an item/started or item/completed notification's
// params, decoded in one pass over them; ok is false when the params are
// not an object whose item is one (with a type).
func itemOf(params json.RawMessage) (appItem, bool) {
	var p struct {
		Item itemField `json:"item"`
	}
	if runner.Unmarshal(params, &p) != nil || !p.Item.ok || p.Item.Type == "" {
		return appItem{}, false
	}
	return p.Item.appItem, true
}

// itemLineFields are the member names the general decoding of an item
// notification takes at each level (jsonrpc.Message, itemOf's params, appItem):
// scanItemLine gives up on one it does not read.
var itemLineFields = struct{ line, params, item jsonscan.Fields }{
	jsonscan.FieldsOf(reflect.TypeFor[jsonrpc.Message]()),
	jsonscan.FieldsOf(reflect.TypeFor[struct {
		Item itemField `json:"item"`
	}]()),
	jsonscan.FieldsOf(reflect.TypeFor[appItem]()),
}

// scanItemLine reads an item/started or item/completed notification whose
// item has only a type, an id and a text (agent messages: most lines of a
// long run) with the scanner, giving what Translate's general decoding
// and itemOf give, in a fraction of their time. ok is false for
// any other line, or one it does not read exactly as they would (see
// jsonscan).
func scanItemLine(raw []byte) (method string, it appItem, ok bool) {
	s := jsonscan.New(raw)
	var seen jsonscan.Seen
	for k := range s.Members() {
		switch {
		case string(k) == "method" && seen.Once(0):
			method, ok = s.StringOf("item/completed", "item/started")
			ok = ok && (method == "item/completed" || method == "item/started")
		case string(k) == "params" && seen.Once(1):
			ok = scanItemParams(&s, &it)
		default:
			ok = !itemLineFields.line.Claims(k) && s.Skip()
		}
		if !ok {
			return "", appItem{}, false
		}
	}
	if !s.End() || seen != 0b11 || it.Type == "" {
		return "", appItem{}, false
	}
	return method, it, true
}

// scanItemParams is scanItemLine of the params object.
func scanItemParams(s *jsonscan.Scanner, it *appItem) (ok bool) {
	var seen jsonscan.Seen
	for k := range s.Members() {
		if string(k) == "item" && seen.Once(0) {
			ok = scanItem(s, it)
		} else {
			ok = !itemLineFields.params.Claims(k) && s.Skip()
		}
		if !ok {
			return false
		}
	}
	return !s.Failed() && seen != 0
}

// scanItem is scanItemLine of the item object.
func scanItem(s *jsonscan.Scanner, it *appItem) (ok bool) {
	var seen jsonscan.Seen
	for k := range s.Members() {
		switch {
		case string(k) == "type" && seen.Once(0):
			it.Type, ok = s.StringOf("agentMessage", "reasoning")
		case string(k) == "id" && seen.Once(1):
			it.ID, ok = s.String()
		case string(k) == "text" && seen.Once(2):
			it.Text, ok = s.String()
		default:
			ok = !itemLineFields.item.Claims(k) && s.Skip()
		}
		if !ok {
			return false
		}
	}
	return !s.Failed()
}

// itemField is a notification's item, decoded within the pass over its
// params: decoding it as raw bytes and then again into an appItem scanned
// and copied the line's bulk twice. ok is false for an item
// that is not an appItem's shape.
type itemField struct {
	appItem
	ok bool
}

// UnmarshalJSONFrom implements jsonv2's UnmarshalerFrom.
func (f *itemField) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	f.appItem = appItem{}
	var err error
	f.ok, err = runner.DecodeOrSkip(dec, &f.appItem)
	return err
}

// appItem is what drover reads from an app-server item (ThreadItem in its
// schema): exec's item for the fields both name alike (id, type, text,
// command, status, server, tool, arguments, result, error, query), and
// the app-server's own names and shapes for the rest.
type appItem struct {
	item
	Summary          []string        `json:"summary"`
	Content          json.RawMessage `json:"content"` // reasoning: strings; userMessage: parts
	AggregatedOutput *string         `json:"aggregatedOutput"`
	ExitCode         *int            `json:"exitCode"`
	Changes          []appChange     `json:"changes"`
}

type appChange struct {
	Path string `json:"path"`
	Kind struct {
		Type     string  `json:"type"`
		MovePath *string `json:"move_path"`
	} `json:"kind"`
}

// exec converts an app-server item to exec's shape, so that both modes
// share one mapping. Statuses need no conversion: exec's mapping takes
// completed as success, declined as denied and anything else at
// completion (failed, inProgress) as error.
func (a appItem) exec() item {
	it := a.item
	switch a.Type {
	case "agentMessage":
		it.Type = "agent_message"
	case "reasoning":
		parts := a.Summary
		if len(parts) == 0 {
			_ = runner.Unmarshal(a.Content, &parts)
		}
		it.Text = strings.Join(parts, "\n")
	case "commandExecution":
		it.Type, it.ExitCode = "command_execution", a.ExitCode
		if a.AggregatedOutput != nil {
			it.AggregatedOutput = *a.AggregatedOutput
		}
	case "fileChange":
		it.Type = "file_change"
		for _, ch := range a.Changes {
			it.Changes = append(it.Changes, change{Path: ch.Path, Kind: ch.Kind.Type})
		}
	case "mcpToolCall":
		it.Type = "mcp_tool_call"
	case "webSearch":
		it.Type = "web_search"
	}
	return it
}

// appUsage is the app-server's token usage (TokenUsageBreakdown).
type appUsage struct {
	InputTokens           int64 `json:"inputTokens"`
	CachedInputTokens     int64 `json:"cachedInputTokens"`
	CacheWriteInputTokens int64 `json:"cacheWriteInputTokens"`
	OutputTokens          int64 `json:"outputTokens"`
	ReasoningOutputTokens int64 `json:"reasoningOutputTokens"`
}

func (u appUsage) usage() usage {
	return usage{InputTokens: u.InputTokens, CachedInputTokens: u.CachedInputTokens,
		CacheWriteTokens: u.CacheWriteInputTokens, OutputTokens: u.OutputTokens, ReasoningTokens: u.ReasoningOutputTokens}
}
