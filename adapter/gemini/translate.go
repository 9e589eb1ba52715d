package gemini

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/runner"
)

// translatorConfig is what the translator knows from the options.
type translatorConfig struct {
	resume  bool     // a resume token was passed: watch for its rejection
	partial bool     // emit text_delta for gemini's streamed chunks
	cwd     string   // for the init event
	model   string   // for a synthesized init
	tools   []string // the tools the run offers (gemini's init lists none)
}

// line is the union of the fields drover reads from gemini's stream-json lines.
type line struct {
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`

	// init
	SessionID string `json:"session_id"`
	Model     string `json:"model"`

	// message
	Role    string `json:"role"`
	Content string `json:"content"`
	Delta   bool   `json:"delta"`

	// tool_use / tool_result
	ToolName   string         `json:"tool_name"`
	ToolID     string         `json:"tool_id"`
	Parameters map[string]any `json:"parameters"`
	Status     string         `json:"status"`
	Output     *string        `json:"output"`
	Error      *lineError     `json:"error"`

	// error
	Severity string `json:"severity"`
	Message  string `json:"message"`

	// result
	Stats *stats `json:"stats"`
}

type lineError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

type stats struct {
	DurationMs   int64  `json:"duration_ms"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
	Cached       *int64 `json:"cached"`
	Thoughts     *int64 `json:"thoughts"`
	ToolCalls    int64  `json:"tool_calls"`
}

// translator turns gemini stream-json lines into UES events. It is pure
// apart from its clock, so golden tests drive it with captured streams.
type translator struct {
	runner.Stamp
	cfg translatorConfig

	sawInit    bool
	sawResult  bool
	vendorSess string
	model      string
	text       strings.Builder  // the assistant message being streamed
	lastText   string           // the last complete assistant message
	calls      runner.ToolCalls // started at the tool_use line's own timestamp, when it parses
	toolUses   int64

	// The result line arrives before gemini exits; its done (and error) are
	// held until Finish, where the exit code completes them: the HTTP status
	// of a failed API call is in the exit code (status mod 256).
	res *line
}

func newTranslator(s runner.Stamp, cfg translatorConfig) *translator {
	return &translator{Stamp: s, cfg: cfg}
}

// initEvent builds the init event; gemini's own init carries only the
// session id and model, the rest comes from the options.
func (t *translator) initEvent(model string) drover.Event {
	t.sawInit = true
	if model == "" {
		model = t.cfg.model
	}
	t.model = model
	return t.Init(model, t.cfg.cwd, t.cfg.tools, runner.SessionMeta(t.vendorSess))
}

var _ runner.Warmer = (*translator)(nil)

// Decodes implements runner.Warmer.
func (*translator) Decodes() []any { return []any{new(line)} }

// Translate implements runner.Translator: one native line → events. A line
// that is not a JSON object with a type is an error (skipped by the runner).
func (t *translator) Translate(raw []byte) ([]drover.Event, error) {
	var l line
	if err := t.Decode(raw, &l, &l.Type); err != nil {
		return nil, err
	}
	var evs []drover.Event
	if l.Type == "init" {
		if l.SessionID != "" {
			t.vendorSess = l.SessionID
		}
		if t.sawInit {
			return []drover.Event{t.Extension("init", raw)}, nil
		}
		return []drover.Event{t.initEvent(l.Model)}, nil
	}
	if !t.sawInit {
		// Every run starts with init, even if gemini printed none.
		evs = append(evs, t.initEvent(""))
	}
	switch l.Type {
	case "message":
		evs = append(evs, t.message(l, raw)...)
	case "tool_use", "tool_result":
		evs = append(evs, t.flush()...)
		switch {
		case l.ToolID == "" || l.Type == "tool_use" && l.ToolName == "":
			// Not a call UES can name; kept verbatim rather than invented.
			evs = append(evs, t.Extension(l.Type, raw))
		case l.Type == "tool_use":
			evs = append(evs, t.toolUse(l))
		default:
			evs = append(evs, t.toolResult(l))
		}
	case "error":
		evs = append(evs, t.flush()...)
		evs = append(evs, t.warning(l))
	case "result":
		evs = append(evs, t.flush()...)
		t.sawResult = true
		t.res = &l
	default:
		evs = append(evs, t.Extension(l.Type, raw))
	}
	return evs, nil
}

func (t *translator) message(l line, raw []byte) []drover.Event {
	if l.Role != "assistant" {
		// The echo of the prompt (role "user").
		return []drover.Event{t.Extension(l.Role+"_message", raw)}
	}
	if !l.Delta {
		// A whole message: ends whatever was streaming, and is one itself.
		evs := t.flush()
		if l.Content != "" {
			t.lastText = l.Content
			evs = append(evs, t.Event(drover.TypeText, drover.TextPayload{Content: l.Content}))
		}
		return evs
	}
	t.text.WriteString(l.Content)
	if t.cfg.partial && l.Content != "" {
		return []drover.Event{t.Event(drover.TypeTextDelta, drover.TextDeltaPayload{Delta: l.Content})}
	}
	return nil
}

// flush ends the assistant message being streamed: UES text is one complete
// message, assembled from gemini's delta chunks.
func (t *translator) flush() []drover.Event {
	if t.text.Len() == 0 {
		return nil
	}
	s := t.text.String()
	t.text.Reset()
	t.lastText = s
	return []drover.Event{t.Event(drover.TypeText, drover.TextPayload{Content: s})}
}

func parseTime(s string) time.Time {
	ts, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return ts
}

func (t *translator) toolUse(l line) drover.Event {
	input := l.Parameters
	if input == nil {
		input = map[string]any{}
	}
	t.calls.Start(l.ToolID, l.ToolName, parseTime(l.Timestamp))
	t.toolUses++
	return t.Event(drover.TypeToolUse, drover.ToolUsePayload{ToolName: l.ToolName, ToolUseID: l.ToolID,
		Input: input, Description: tools.Describe(l.ToolName, input)})
}

// deniedTypes are gemini's error types for a call its permission system
// refused: a tool the tier (or approval mode) did not register, and a
// policy deny.
var deniedTypes = []string{"tool_not_registered", "policy_violation"}

// deniedPrefixes are error texts of calls refused for where they act:
// outside the workspace, or outside the plans directory in plan mode.
var deniedPrefixes = []string{"Path not in workspace", "Access denied"}

func (t *translator) toolResult(l line) drover.Event {
	out := ""
	if l.Output != nil {
		out = *l.Output
	}
	st := drover.ToolSuccess
	if l.Status != "success" {
		st = drover.ToolError
		if out == "" && l.Error != nil {
			out = l.Error.Message
		}
		if l.Error != nil && slices.Contains(deniedTypes, l.Error.Type) {
			st = drover.ToolDenied
		}
		for _, p := range deniedPrefixes {
			if strings.HasPrefix(out, p) {
				st = drover.ToolDenied
			}
		}
	}
	p := t.calls.Result(l.ToolID, st, out, parseTime(l.Timestamp))
	if p.ToolName == "" {
		p.ToolName = l.ToolName
	}
	if p.ToolName == "" {
		// Gemini's tool ids are "<name>__<name>_<ms>_<n>".
		p.ToolName, _, _ = strings.Cut(l.ToolID, "__")
	}
	ev := t.Event(drover.TypeToolResult, p)
	if l.Error != nil && l.Error.Type != "" {
		ev.Metadata = map[string]any{"errorType": l.Error.Type}
	}
	return ev
}

// warning maps gemini's non-fatal "error" line (severity warning or error;
// the run goes on to its result).
func (t *translator) warning(l line) drover.Event {
	p := drover.ErrorPayload{Message: l.Message, Recoverable: true}
	if p.Message == "" {
		p.Message = "gemini reported an error"
	}
	if l.Severity == "error" {
		p.Code = drover.CodeModelError
	}
	ev := t.Event(drover.TypeError, p)
	ev.Metadata = map[string]any{"severity": l.Severity}
	return ev
}

// Finished reports whether the result line has arrived.
func (t *translator) Finished() bool { return t.sawResult }

// Exit codes of gemini 0.61.0 (measured).
const (
	exitTurnLimit = 53 // FatalTurnLimitedError
	exitBadInput  = 42 // a rejected --resume id, among other bad input
)

// Finish returns the events that end the run, or reports a rejected resume:
// exit 42 with no init printed ("Error resuming session: …").
func (t *translator) Finish(exit runner.Exit) ([]drover.Event, bool) {
	if t.cfg.resume && !t.sawInit && (exit.Code == exitBadInput || strings.Contains(exit.StderrTail, "Error resuming session")) {
		return nil, true
	}
	return t.finish(exit), false
}

func (t *translator) finish(exit runner.Exit) []drover.Event {
	var evs []drover.Event
	if t.res == nil && exit.Stopped {
		return nil // cancelled or timed out: the engine reports the interruption
	}
	if !t.sawInit {
		evs = append(evs, t.initEvent(""))
	}
	evs = append(evs, t.flush()...)
	done := drover.DonePayload{Status: drover.StatusSuccess, ResumeToken: t.vendorSess}
	meta := map[string]any{}
	if t.vendorSess != "" {
		meta["vendorSessionId"] = t.vendorSess
	}
	switch {
	case t.res == nil && exit.Code == exitTurnLimit:
		// The turn limit, reported by the exit status alone: gemini printed
		// no result line (measured), and it is max_turns all the same.
		done.Status = drover.StatusMaxTurns
	case t.res == nil:
		// No result: gemini died or failed before its turn (exit 41 for a
		// bad auth setup, 55 for an untrusted folder, …).
		e := runner.ExitError(ID, exit)
		evs = append(evs, t.Failure(e.Code, e.Message, nil))
		done.Status = drover.StatusError
	case t.res.Status == "success":
		done.Result = t.lastText
	case t.res.Error != nil && t.res.Error.Type == "FatalTurnLimitedError" || exit.Code == exitTurnLimit:
		done.Status = drover.StatusMaxTurns
	default:
		done.Status = drover.StatusError
		evs = append(evs, t.resultError(*t.res, exit))
	}
	if t.res != nil {
		meta["exitCode"] = exit.Code
		if s := t.res.Stats; s != nil {
			done.Usage.InputTokens, done.Usage.OutputTokens = s.InputTokens, s.OutputTokens
			runner.AddOptional(&done.Usage.CacheReadTokens, s.Cached)
			runner.AddOptional(&done.Usage.ReasoningTokens, s.Thoughts)
			done.DurationMs = s.DurationMs
		}
	}
	if done.DurationMs == 0 {
		done.DurationMs = exit.Duration.Milliseconds()
	}
	done.Usage.ToolUses = t.toolUses
	ev := t.Event(drover.TypeDone, done)
	if len(meta) > 0 {
		ev.Metadata = meta
	}
	t.res = nil
	return append(evs, ev)
}

// statusRe finds the HTTP status in gemini's "[API Error: {"error":{"code":500,…".
var statusRe = regexp.MustCompile(`"code":\s*(\d{3})`)

// httpStatuses are the statuses drover recognizes from an exit code.
var httpStatuses = []int{429, 500, 503, 502, 504, 529, 400, 401, 403, 404, 413}

// resultError classifies a failed result. Gemini reports API failures with
// error.type "unknown" and the status only inside the message text or, in
// stream-json mode, as the exit code (HTTP status mod 256: 429 → 173,
// 500 → 244, 400 → 144, 401 → 145).
func (t *translator) resultError(l line, exit runner.Exit) drover.Event {
	msg, typ := "gemini reported an error", ""
	if l.Error != nil {
		if l.Error.Message != "" {
			msg = l.Error.Message
		}
		typ = l.Error.Type
	}
	status := 0
	if m := statusRe.FindStringSubmatch(msg); m != nil {
		status, _ = strconv.Atoi(m[1])
	}
	if status == 0 && exit.Code > 0 {
		for _, s := range httpStatuses {
			if s%256 == exit.Code {
				status = s
				break
			}
		}
	}
	meta := map[string]any{}
	if typ != "" {
		meta["errorType"] = typ
	}
	code := drover.CodeExecutionError
	if status != 0 {
		meta["httpStatus"] = status
		code = statusRules.Code(status, msg)
	}
	return t.Failure(code, msg, meta)
}

// statusRules are Gemini's differences from the shared status mapping: a
// 503 is overload, and a 413, or a 400 about the token count, a context
// overflow.
var statusRules = runner.StatusRules{
	Overloaded: []runner.Match{{Status: []int{503}}},
	ContextOverflow: []runner.Match{
		{Status: []int{413}},
		{Status: []int{400}, Texts: []runner.Text{{"token count"}, {"context"}}},
	},
}
