package claude

import (
	"encoding/json"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/jsonscan"
	"github.com/drover-run/drover/internal/runner"
)

// line is the union of the fields drover reads from Claude's stream-json lines.
type line struct {
	Type            string          `json:"type"`
	Subtype         string          `json:"subtype"`
	SessionID       string          `json:"session_id"`
	ParentToolUseID *string         `json:"parent_tool_use_id"`
	Message         message         `json:"message"` // an object, or a string on system lines
	Event           json.RawMessage `json:"event"`   // stream_event
	Error           string          `json:"error"`   // synthetic assistant error line

	// system/init
	Cwd               string   `json:"cwd"`
	Tools             []string `json:"tools"`
	Model             string   `json:"model"`
	PermissionMode    string   `json:"permissionMode"`
	ClaudeCodeVersion string   `json:"claude_code_version"`

	// result
	IsError        bool                  `json:"is_error"`
	APIErrorStatus *int                  `json:"api_error_status"`
	DurationMs     int64                 `json:"duration_ms"`
	NumTurns       *int64                `json:"num_turns"`
	Result         string                `json:"result"`
	StopReason     *string               `json:"stop_reason"`
	TotalCostUSD   *float64              `json:"total_cost_usd"`
	Usage          *resultUsage          `json:"usage"`
	ModelUsage     map[string]modelUsage `json:"modelUsage"`
	// ModelUsageSince is model_usage_since_last_result: the usage and cost
	// of the calls made since the process's previous result (2.1.330; nil
	// when absent, which is not {}).
	ModelUsageSince   map[string]modelUsage `json:"model_usage_since_last_result"`
	PermissionDenials []permissionDenial    `json:"permission_denials"`
	Errors            []string              `json:"errors"`
	TerminalReason    string                `json:"terminal_reason"`

	// system/permission_denied (2.1.330)
	ToolUseID string `json:"tool_use_id"`

	// a conversation (--input-format stream-json): control_request,
	// control_cancel_request, control_response, and the echo of a user
	// message of drover's (--replay-user-messages)
	RequestID string          `json:"request_id"`
	Request   *controlRequest `json:"request"`
	IsReplay  bool            `json:"isReplay"`
}

// controlRequest is the request of a control_request line: Claude asking
// whether it may use a tool (can_use_tool), or something drover does not
// serve.
type controlRequest struct {
	Subtype               string          `json:"subtype"`
	ToolName              string          `json:"tool_name"`
	Input                 map[string]any  `json:"input"`
	Description           string          `json:"description"`
	PermissionSuggestions json.RawMessage `json:"permission_suggestions"`
	DecisionReason        string          `json:"decision_reason"`
	ToolUseID             string          `json:"tool_use_id"`
}

type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     map[string]any  `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// modelUsage is a result's per-model usage (modelUsage,
// model_usage_since_last_result), in Claude's camelCase.
type modelUsage struct {
	InputTokens              int64    `json:"inputTokens"`
	OutputTokens             int64    `json:"outputTokens"`
	CacheReadInputTokens     int64    `json:"cacheReadInputTokens"`
	CacheCreationInputTokens int64    `json:"cacheCreationInputTokens"`
	CostUSD                  *float64 `json:"costUSD"`
}

type resultUsage struct {
	InputTokens              int64  `json:"input_tokens"`
	OutputTokens             int64  `json:"output_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
}

type permissionDenial struct {
	ToolName  string         `json:"tool_name"`
	ToolUseID string         `json:"tool_use_id"`
	ToolInput map[string]any `json:"tool_input"`
}

type streamEvent struct {
	Type  string `json:"type"`
	Delta struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"delta"`
}

// translator turns Claude stream-json lines into UES events. It is pure
// apart from its clock, so golden tests drive it with captured streams.
type translator struct {
	runner.Stamp
	resume bool // a resume token was passed: watch for its rejection

	rejected bool // claude refused the resume token before starting

	calls     runner.ToolCalls
	results   map[string]bool // tool_use ids that already have a tool_result
	denied    map[string]bool // tool_use ids Claude reported as permission_denied
	toolUses  int64
	apiError  string // text of Claude's synthetic API-error assistant message
	sawInit   bool
	sawResult bool
	inTurn    bool // an init came after the last result: Claude is at work

	// A conversation's state (see conversation); zero in a headless run.
	live         bool
	asked        map[string]askedCall // open can_use_tool requests by request id
	cancelled    map[string]bool      // request ids Claude withdrew
	steers       []string             // steering messages not echoed yet
	interrupting bool                 // an interrupt was passed; its result is coming
	interrupts   int
	outbox       []byte
	inputClosed  bool

	// A run can print several result lines (one per segment when a
	// background subagent reports back); the done of the last one, with
	// usage summed over all, is held until the stream ends.
	final *drover.Event
	sum   drover.Usage
	durMs int64
	cost  runCost
}

func newTranslator(s runner.Stamp, resume bool) *translator {
	return &translator{Stamp: s, resume: resume,
		results: map[string]bool{}, denied: map[string]bool{}}
}

var _ runner.Warmer = (*translator)(nil)

// Decodes implements runner.Warmer.
func (*translator) Decodes() []any { return []any{new(line)} }

// Translate implements runner.Translator: one native line → events. A line
// that is not a JSON object with a type is an error (skipped by the runner).
func (t *translator) Translate(raw []byte) ([]drover.Event, error) {
	var l line
	if !scanLine(raw, &l) {
		l = line{}
		if err := t.Decode(raw, &l, &l.Type); err != nil {
			return nil, err
		}
	}
	var evs []drover.Event
	switch l.Type {
	case "system":
		evs = t.system(l, raw)
	case "assistant":
		evs = t.assistant(l)
	case "user":
		evs = t.user(l, raw)
	case "stream_event":
		evs = t.streamEvent(l)
	case "result":
		if t.resume && !t.sawInit && isResumeRejection(l) {
			t.rejected = true
			t.inputClosed = t.live // nothing more to say to it
			return nil, nil
		}
		evs = t.result(l)
	case "control_request":
		evs = t.controlRequest(l, raw)
	case "control_cancel_request":
		evs = t.controlCancel(l, raw)
	default:
		evs = []drover.Event{t.Extension(l.Type, raw)}
	}
	if l.ParentToolUseID != nil && *l.ParentToolUseID != "" {
		for i := range evs {
			if evs[i].Metadata == nil {
				evs[i].Metadata = map[string]any{}
			}
			evs[i].Metadata["parentToolUseId"] = *l.ParentToolUseID
		}
	}
	return evs, nil
}

func (t *translator) system(l line, raw []byte) []drover.Event {
	switch l.Subtype {
	case "init":
		t.inTurn = true
		if t.sawInit {
			// A later segment of the same run (after a background task).
			return []drover.Event{t.Extension("init", raw)}
		}
		t.sawInit = true
		return []drover.Event{t.Init(l.Model, l.Cwd, l.Tools, map[string]any{"vendorSessionId": l.SessionID,
			"permissionMode": l.PermissionMode, "version": l.ClaudeCodeVersion})}
	case "permission_denied":
		// Authoritative: the tool_result that follows is a denial whatever its text.
		t.denied[l.ToolUseID] = true
		return []drover.Event{t.Extension(l.Subtype, raw)}
	case "compact_boundary":
		return []drover.Event{t.Extension("compact", raw)}
	case "":
		return []drover.Event{t.Extension("system", raw)}
	}
	return []drover.Event{t.Extension(l.Subtype, raw)}
}

func (t *translator) blocks(l line) []block { return l.Message.blocks }

// scanFields are the member names the general decoding takes at each
// level of a line: scanLine gives up on one it does not read.
var scanFields = struct{ line, message, block jsonscan.Fields }{
	jsonscan.FieldsOf(reflect.TypeFor[line]()),
	jsonscan.FieldsOf(reflect.TypeFor[struct {
		Content []block `json:"content"`
	}]()),
	jsonscan.FieldsOf(reflect.TypeFor[block]()),
}

// scanLine decodes raw into l (zero) as Stamp.Decode does, with the
// scanner, when it is a line of the shape most of a run is made of: a
// message of text blocks (reflection was most of its decoding).
// ok is false, l undefined, for any other line or one it does not read
// exactly as the general decoding would (see jsonscan); a line it reads
// has a type.
func scanLine(raw []byte, l *line) (ok bool) {
	s := jsonscan.New(raw)
	var seen jsonscan.Seen
	for k := range s.Members() {
		switch {
		case string(k) == "type" && seen.Once(0):
			l.Type, ok = s.StringOf("assistant", "user")
		case string(k) == "message" && seen.Once(1):
			ok = scanMessage(&s, &l.Message)
		case string(k) == "parent_tool_use_id" && seen.Once(2):
			if ok = s.Null(); !ok {
				var id string
				id, ok = s.String()
				l.ParentToolUseID = &id
			}
		case string(k) == "session_id" && seen.Once(3):
			l.SessionID, ok = s.String()
		case string(k) == "request_id" && seen.Once(4):
			l.RequestID, ok = s.String()
		default:
			ok = !scanFields.line.Claims(k) && s.Skip()
		}
		if !ok {
			return false
		}
	}
	return s.End() && l.Type != ""
}

// scanMessage is scanLine of the message object: content, a list of
// text blocks.
func scanMessage(s *jsonscan.Scanner, m *message) (ok bool) {
	var seen jsonscan.Seen
	for k := range s.Members() {
		if string(k) == "content" && seen.Once(0) {
			m.blocks = []block{}
			for range s.Elements() {
				var b block
				if !scanBlock(s, &b) {
					return false
				}
				m.blocks = append(m.blocks, b)
			}
			ok = !s.Failed()
		} else {
			ok = !scanFields.message.Claims(k) && s.Skip()
		}
		if !ok {
			return false
		}
	}
	return !s.Failed()
}

// scanBlock is scanLine of a block with a type and a text.
func scanBlock(s *jsonscan.Scanner, b *block) (ok bool) {
	var seen jsonscan.Seen
	for k := range s.Members() {
		switch {
		case string(k) == "type" && seen.Once(0):
			b.Type, ok = s.StringOf("text")
		case string(k) == "text" && seen.Once(1):
			b.Text, ok = s.String()
		default:
			ok = !scanFields.block.Claims(k) && s.Skip()
		}
		if !ok {
			return false
		}
	}
	return !s.Failed()
}

// message is a line's message, decoded in the line's own pass: the blocks
// of its content when it is an object whose content is a list of blocks;
// none for a string (system lines), plain user input (a string content)
// or a content that is not blocks.
type message struct{ blocks []block }

// UnmarshalJSONFrom implements jsonv2's UnmarshalerFrom.
func (m *message) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	m.blocks = nil
	if dec.PeekKind() != '{' {
		return dec.SkipValue()
	}
	var v struct {
		Content []block `json:"content"`
	}
	ok, err := runner.DecodeOrSkip(dec, &v)
	if ok {
		m.blocks = v.Content
	}
	return err
}

func (t *translator) assistant(l line) []drover.Event {
	bs := t.blocks(l)
	if l.Error != "" {
		// Claude reports a failed API call as a synthetic assistant message
		// (model "<synthetic>", an "error" field); the result line that
		// follows carries the status, so keep the text for the error event.
		for _, b := range bs {
			if b.Type == "text" {
				t.apiError = b.Text
			}
		}
		return nil
	}
	var evs []drover.Event
	for _, b := range bs {
		switch b.Type {
		case "text":
			if b.Text != "" {
				evs = append(evs, t.Event(drover.TypeText, drover.TextPayload{Content: b.Text}))
			}
		case "thinking":
			if b.Thinking != "" {
				evs = append(evs, t.Event(drover.TypeThinking, drover.ThinkingPayload{Summary: b.Thinking}))
			}
		case "redacted_thinking":
			evs = append(evs, t.Event(drover.TypeThinking, drover.ThinkingPayload{Summary: "[redacted]"}))
		case "tool_use", "server_tool_use", "mcp_tool_use":
			input := b.Input
			if input == nil {
				input = map[string]any{}
			}
			t.calls.Start(b.ID, b.Name, t.Now())
			t.toolUses++
			evs = append(evs, t.Event(drover.TypeToolUse, drover.ToolUsePayload{ToolName: b.Name, ToolUseID: b.ID,
				Input: input, Description: tools.Describe(b.Name, input)}))
		}
	}
	return evs
}

func (t *translator) user(l line, raw []byte) []drover.Event {
	if l.IsReplay {
		t.echoed(l)
	}
	var evs []drover.Event
	for _, b := range t.blocks(l) {
		if b.Type != "tool_result" {
			continue
		}
		out := contentText(b.Content)
		st := drover.ToolSuccess
		if b.IsError {
			st = drover.ToolError
			if t.denied[b.ToolUseID] || runner.ContainsAny(out, denialMarkers) {
				st = drover.ToolDenied
			}
		}
		evs = append(evs, t.toolResult(b.ToolUseID, st, out))
	}
	if evs == nil {
		// Plain user text: an interrupt marker or a replayed input.
		return []drover.Event{t.Extension("user", raw)}
	}
	return evs
}

func (t *translator) toolResult(id string, st drover.ToolStatus, out string) drover.Event {
	t.results[id] = true
	return t.Event(drover.TypeToolResult, t.calls.Result(id, st, out, t.Now()))
}

// denialMarkers are the texts Claude 2.1.x puts in the error tool_result of a
// call refused by its permission system (measured; see docs/adapters/claude-code.md).
var denialMarkers = []string{
	"requested permissions to",
	"haven't granted it yet",
	"has been denied",
	"was blocked. For security",
	"while in plan mode",
	"don't ask mode",
	// Claude's question could not be answered: its input ended first.
	"Tool permission stream closed",
	// A tool removed from the session (tier or tool filter): refused by configuration.
	"is disabled for this session",
	"exists but is not enabled in this context",
}

// contentText flattens tool_result content: a string, or text blocks.
func contentText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if runner.Unmarshal(raw, &s) == nil {
		return s
	}
	var bs []block
	if runner.Unmarshal(raw, &bs) != nil {
		return string(raw)
	}
	var parts []string
	for _, b := range bs {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func (t *translator) streamEvent(l line) []drover.Event {
	var se streamEvent
	if runner.Unmarshal(l.Event, &se) != nil {
		return nil
	}
	if se.Type == "content_block_delta" && se.Delta.Type == "text_delta" && se.Delta.Text != "" {
		return []drover.Event{t.Event(drover.TypeTextDelta, drover.TextDeltaPayload{Delta: se.Delta.Text})}
	}
	// Other raw API events (block starts, tool input deltas, thinking deltas)
	// are repeated in full by the assistant line that follows.
	return nil
}

func (t *translator) result(l line) []drover.Event {
	t.sawResult = true
	var evs []drover.Event
	// Denials the stream did not show as a tool_result still reach the
	// consumer (result.permission_denials is the run-level record).
	for _, d := range l.PermissionDenials {
		if d.ToolUseID == "" || t.results[d.ToolUseID] {
			continue
		}
		if !t.calls.Known(d.ToolUseID) {
			t.calls.Record(d.ToolUseID, d.ToolName)
		}
		evs = append(evs, t.toolResult(d.ToolUseID, drover.ToolDenied, "permission denied"))
	}

	status := drover.StatusSuccess
	switch {
	case t.interrupting && l.Subtype == "error_during_execution":
		// The turn drover interrupted (CTL-3): the session goes on.
		status = drover.StatusInterrupted
	case l.Subtype == "error_max_turns":
		status = drover.StatusMaxTurns
	case l.Subtype == "error_max_budget_usd":
		status = drover.StatusMaxBudget
	case l.IsError || strings.HasPrefix(l.Subtype, "error"):
		status = drover.StatusError
		evs = append(evs, t.resultError(l))
	}

	t.add(l)
	done := drover.DonePayload{Status: status, ResumeToken: l.SessionID, DurationMs: t.durMs, Usage: t.sum}
	done.Usage.ToolUses = t.toolUses
	if status == drover.StatusSuccess {
		done.Result = l.Result
	}
	ev := t.Event(drover.TypeDone, done)
	ev.Metadata = map[string]any{"vendorSessionId": l.SessionID}
	if t.resume && l.TotalCostUSD != nil {
		// Claude's total_cost_usd is the whole session's running total: a
		// resumed run gives it beside its own cost, by which a failover
		// chain or the supervisor that knows what the session had cost
		// before counts this run's share (drover.MetaSessionCostUSD).
		ev.Metadata[drover.MetaSessionCostUSD] = *l.TotalCostUSD
	}
	if l.StopReason != nil {
		ev.Metadata["stopReason"] = *l.StopReason
	}
	if l.TerminalReason != "" {
		ev.Metadata["terminalReason"] = l.TerminalReason
	}
	t.final = &ev
	t.inTurn, t.interrupting = false, false
	// A conversation's stdin is closed once the turn is over, unless a
	// steering message is still to come back as a turn of its own (Claude
	// queues what comes while the model answers and takes it after this
	// result): stdin must stay open for that turn's questions.
	if t.live && len(t.steers) == 0 {
		t.inputClosed = true
	}
	return evs
}

// add accumulates a result's usage: tokens, turns and durations are per
// segment; the cost is the run's own (runCost).
func (t *translator) add(l line) {
	t.durMs += l.DurationMs
	t.cost.add(l)
	t.sum.TotalCostUSD = t.cost.own()
	runner.AddOptional(&t.sum.Turns, l.NumTurns)
	u := l.Usage
	if mu := l.calls(); (u == nil || u.InputTokens+u.OutputTokens == 0) && len(mu) > 0 {
		// After a broken stream Claude answers without streaming and its
		// result's usage stays all zero, while the per-model usage has the
		// tokens (measured; also a /compact's result): take them from there.
		var sum resultUsage
		var cr, cw int64
		for _, m := range mu {
			sum.InputTokens += m.InputTokens
			sum.OutputTokens += m.OutputTokens
			cr += m.CacheReadInputTokens
			cw += m.CacheCreationInputTokens
		}
		sum.CacheReadInputTokens, sum.CacheCreationInputTokens = &cr, &cw
		u = &sum
	}
	if u != nil {
		t.sum.InputTokens += u.InputTokens
		t.sum.OutputTokens += u.OutputTokens
		runner.AddOptional(&t.sum.CacheReadTokens, u.CacheReadInputTokens)
		runner.AddOptional(&t.sum.CacheWriteTokens, u.CacheCreationInputTokens)
	}
}

// calls is the per-model usage of the calls a result covers that are
// this run's: model_usage_since_last_result when Claude states it, else
// modelUsage (which, in a resumed session, also has the earlier runs').
func (l line) calls() map[string]modelUsage {
	if l.ModelUsageSince != nil {
		return l.ModelUsageSince
	}
	return l.ModelUsage
}

// runCost is the cost of the run's own calls. Claude's total_cost_usd is
// the running total of the session: a run that resumes one (--resume,
// --fork-session) starts from the total its transcript saved, so it also
// counts the earlier runs'. Claude 2.1.330 states each result's own calls
// in model_usage_since_last_result (per model, with costUSD: "sum it over
// a conversation's results instead of subtracting modelUsage totals");
// their sum is the run's cost. A result without it (an error result Claude
// numbers by hand, an older version) leaves the running total, less what
// the session had cost before this process when an earlier result told
// that.
type runCost struct {
	since   float64  // Σ costUSD of model_usage_since_last_result
	stated  bool     // a result stated model_usage_since_last_result
	missing bool     // a result did not
	total   *float64 // the last total_cost_usd
	before  *float64 // the session's cost before this process
}

func (c *runCost) add(l line) {
	if l.TotalCostUSD != nil {
		v := *l.TotalCostUSD
		c.total = &v
	}
	if l.ModelUsageSince == nil {
		c.missing = true
		return
	}
	// In a fixed order: a float sum depends on it.
	for _, name := range slices.Sorted(maps.Keys(l.ModelUsageSince)) {
		if v := l.ModelUsageSince[name].CostUSD; v != nil && *v >= 0 && !math.IsInf(*v, 0) {
			c.since += *v
		}
	}
	c.stated = true
	if !c.missing && c.before == nil && c.total != nil {
		// Every call of this process so far is in since: the rest of the
		// running total is the session's before it.
		b := max(roundCost(*c.total-c.since), 0)
		c.before = &b
	}
}

// own is the run's cost: nil when Claude reported none.
func (c *runCost) own() *float64 {
	switch {
	case c.stated && !c.missing:
		v := c.since
		return &v
	case c.total == nil:
		return nil
	case c.before != nil:
		v := max(roundCost(*c.total-*c.before), c.since)
		return &v
	}
	v := *c.total // no result said more: the running total
	return &v
}

// roundCost rounds a difference of costs to a billionth of a cent:
// 0.00042 - 0.00014 is 0.00028, not 0.00028000000000000003.
func roundCost(v float64) float64 { return math.Round(v*1e11) / 1e11 }

// Finished reports whether a result line has arrived and no turn has
// started since.
func (t *translator) Finished() bool { return t.sawResult && !t.inTurn }

// Finish returns the held done event, or reports a rejected resume: a
// rejecting result line, or (older versions) only the stderr text.
func (t *translator) Finish(exit runner.Exit) ([]drover.Event, bool) {
	if t.rejected || (t.resume && !t.sawInit && t.final == nil && resumeRejectedText(exit.StderrTail)) {
		return nil, true
	}
	if t.final == nil {
		return nil, false
	}
	ev := *t.final
	t.final = nil
	return []drover.Event{ev}, false
}

// resultError classifies a failed result (is_error / api_error_status, not
// subtype: a failed API call arrives with subtype "success").
func (t *translator) resultError(l line) drover.Event {
	msg := strings.TrimSpace(l.Result)
	if msg == "" {
		msg = t.apiError
	}
	if msg == "" && len(l.Errors) > 0 {
		msg = strings.Join(l.Errors, "; ")
	}
	if msg == "" {
		msg = "claude reported an error (" + l.Subtype + ")"
	}
	code := drover.CodeExecutionError
	meta := map[string]any{}
	if s := l.APIErrorStatus; s != nil {
		meta["httpStatus"] = *s
		code = statusRules.Code(*s, msg)
	}
	return t.Failure(code, msg, meta)
}

// statusRules are Claude's differences from the shared status mapping: a
// 413, or a 400 about the prompt's length, is a context overflow.
var statusRules = runner.StatusRules{ContextOverflow: []runner.Match{
	{Status: []int{413}},
	{Status: []int{400}, Texts: []runner.Text{{"prompt is too long"}, {"Prompt is too long"}, {"context"}}},
}}

// isResumeRejection reports whether a result line says Claude could not find
// the session to resume (exit 1, no init line before it).
func isResumeRejection(l line) bool {
	if !l.IsError {
		return false
	}
	for _, e := range l.Errors {
		if resumeRejectedText(e) {
			return true
		}
	}
	return false
}

func resumeRejectedText(s string) bool {
	return strings.Contains(s, "No conversation found") ||
		strings.Contains(s, "--resume requires a valid session ID")
}
