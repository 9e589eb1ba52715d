package opencode

import (
	"fmt"
	"strings"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/runner"
)

// line is the union of the fields drover reads from `opencode run --format
// json` lines.
type line struct {
	Type      string    `json:"type"`
	Timestamp int64     `json:"timestamp"`
	SessionID string    `json:"sessionID"`
	Part      part      `json:"part"`
	Error     *apiError `json:"error"`
}

type part struct {
	Type   string     `json:"type"`
	Text   string     `json:"text"`
	Tool   string     `json:"tool"`
	CallID string     `json:"callID"`
	State  toolState  `json:"state"`
	Reason string     `json:"reason"`
	Tokens *tokens    `json:"tokens"`
	Cost   *float64   `json:"cost"`
	Time   *timeRange `json:"time"`
}

type toolState struct {
	Status   string         `json:"status"`
	Input    map[string]any `json:"input"`
	Output   string         `json:"output"`
	Error    string         `json:"error"`
	Metadata struct {
		Exit *int `json:"exit"`
	} `json:"metadata"`
	Time *timeRange `json:"time"`
}

type timeRange struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
}

type tokens struct {
	Input     int64  `json:"input"`
	Output    int64  `json:"output"`
	Reasoning *int64 `json:"reasoning"`
	Cache     *struct {
		Read  *int64 `json:"read"`
		Write *int64 `json:"write"`
	} `json:"cache"`
}

type apiError struct {
	Name string `json:"name"`
	Data struct {
		Message      string `json:"message"`
		StatusCode   *int   `json:"statusCode"`
		IsRetryable  *bool  `json:"isRetryable"`
		ResponseBody string `json:"responseBody"`
	} `json:"data"`
}

// translator turns OpenCode's JSON lines into UES events. It is pure apart
// from its clock, so golden tests drive it with captured streams.
//
// OpenCode prints no init and no final result: init is synthesized before
// the first event from what drover passed, and done is built in Finish from
// the step_finish lines and the exit status.
type translator struct {
	runner.Stamp
	start  time.Time
	resume bool
	model  string
	cwd    string
	tools  []string

	sawInit    bool
	sawLine    bool
	vendorSess string
	apiErr     *apiError
	steps      int64
	lastReason string
	lastText   string
	toolUses   int64
	usage      drover.Usage
}

func newTranslator(s runner.Stamp, opts drover.Options, model string) *translator {
	return &translator{Stamp: s, start: s.Now(), resume: opts.Resume != "",
		model: model, cwd: opts.Cwd, tools: Tools(opts)}
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
	t.sawLine = true
	if l.SessionID != "" {
		t.vendorSess = l.SessionID
	}
	var evs []drover.Event
	if !t.sawInit {
		t.sawInit = true
		evs = append(evs, t.Init(t.model, t.cwd, t.tools, map[string]any{"vendorSessionId": l.SessionID, "synthesized": true}))
	}
	switch l.Type {
	case "step_start":
		evs = append(evs, t.Extension("step_start", raw))
	case "step_finish":
		t.stepFinish(l.Part)
		evs = append(evs, t.Extension("step_finish", raw))
	case "text":
		t.lastText = l.Part.Text
		evs = append(evs, t.Event(drover.TypeText, drover.TextPayload{Content: l.Part.Text}))
	case "reasoning":
		evs = append(evs, t.Event(drover.TypeThinking, drover.ThinkingPayload{Summary: l.Part.Text}))
	case "tool_use":
		evs = append(evs, t.toolUse(l.Part)...)
	case "error":
		evs = append(evs, t.apiError(l.Error))
	default:
		evs = append(evs, t.Extension(l.Type, raw))
	}
	return evs, nil
}

// stepFinish adds one model call's usage (addStep).
func (t *translator) stepFinish(p part) {
	t.steps++
	t.lastReason = p.Reason
	addStep(&t.usage, p.Tokens, p.Cost)
}

// toolUse maps OpenCode's single, finished tool line to tool_use and
// tool_result.
func (t *translator) toolUse(p part) []drover.Event {
	id := p.CallID
	if id == "" {
		id = "opencode-tool-" + fmt.Sprint(t.toolUses+1)
	}
	name := p.Tool
	input := p.State.Input
	if input == nil {
		input = map[string]any{}
	}
	st := drover.ToolSuccess
	out := p.State.Output
	switch {
	case p.Tool == "invalid":
		// OpenCode's stand-in for a call it could not make: the model asked
		// for a tool it was not offered (removed by the permission rules →
		// denied), or sent arguments that do not parse (→ error).
		if asked, ok := input["tool"].(string); ok && asked != "" {
			name = asked
		}
		st = drover.ToolError
		if msg, _ := input["error"].(string); strings.Contains(msg, "unavailable tool") {
			st = drover.ToolDenied
		}
	case p.State.Status == "error":
		out = p.State.Error
		st = drover.ToolError
		if runner.ContainsAny(out, denialMarkers) {
			st = drover.ToolDenied
		}
	case p.State.Status == "completed" && p.Tool == "bash" && p.State.Metadata.Exit != nil && *p.State.Metadata.Exit != 0:
		// A shell command that failed, as with every other vendor.
		st = drover.ToolError
	}
	if name == "" {
		name = "unknown"
	}
	t.toolUses++
	use := t.Event(drover.TypeToolUse, drover.ToolUsePayload{ToolName: name, ToolUseID: id, Input: input,
		Description: tools.Describe(name, input)})
	res := drover.ToolResultPayload{ToolUseID: id, ToolName: name, Status: st, Output: out}
	if tr := p.State.Time; tr != nil && tr.End >= tr.Start && tr.Start > 0 {
		d := tr.End - tr.Start
		res.DurationMs = &d
	}
	ev := t.Event(drover.TypeToolResult, res)
	if p.Tool == "invalid" {
		ev.Metadata = map[string]any{"vendorToolName": "invalid"}
	}
	return []drover.Event{use, ev}
}

// denialMarkers are the texts OpenCode 1.18.33 puts in the error of a call
// its permission system refused (measured; see docs/adapters/opencode.md).
var denialMarkers = []string{
	"rejected permission",              // an "ask" auto-rejected by `opencode run`
	"specified a rule which prevents",  // a pattern rule that denies this call
	"prevents you from using this",     // same, other wording
	"permission to use this tool call", // generic rejection text
	// The model called a tool the permission rules removed (deny): OpenCode
	// repairs the call to its "invalid" tool, which is itself removed when
	// everything is denied, and reports this text on the original name.
	"tried to call unavailable tool",
}

// apiError maps OpenCode's error line (a failed model call after its own
// retries, or any other session error) to a non-recoverable error event.
func (t *translator) apiError(e *apiError) drover.Event {
	if e == nil {
		e = &apiError{Name: "UnknownError"}
	}
	t.apiErr = e
	msg := strings.TrimSpace(e.Data.Message)
	if msg == "" {
		msg = "opencode reported " + e.Name
	}
	code := drover.CodeExecutionError
	meta := map[string]any{"errorName": e.Name}
	switch e.Name {
	case "APIError":
		code = drover.CodeModelError
		if s := e.Data.StatusCode; s != nil {
			meta["httpStatus"] = *s
			code = statusRules.Code(*s, msg+" "+e.Data.ResponseBody)
		}
	case "ContextOverflowError":
		code = drover.CodeContextOverflow
	case "ProviderAuthError":
		code = drover.CodeAuthFailed
	case "MessageOutputLengthError":
		code = drover.CodeModelError
	}
	if e.Data.IsRetryable != nil {
		meta["retryable"] = *e.Data.IsRetryable
	}
	return t.Failure(code, msg, meta)
}

// statusRules are OpenCode's differences from the shared status mapping,
// its texts compared in lower case: a 503 that says so is overload, a 413
// or a 400 about the context's size a context overflow, and any other 4xx
// a bad request.
var statusRules = runner.StatusRules{
	FoldCase:   true,
	Overloaded: []runner.Match{{Status: []int{503}, Texts: []runner.Text{{"overload"}}}},
	ContextOverflow: []runner.Match{
		{Status: []int{413}},
		{Status: []int{400}, Texts: []runner.Text{{"context"}, {"too long"}, {"maximum", "token"}}},
	},
	BadRequest: []runner.Match{{From: 400, To: 499}},
}

// Finished reports whether the run's final step has finished (reason
// "stop"); the linger watchdog starts then. OpenCode may still go on (a
// follow-up step), which restarts the watchdog.
func (t *translator) Finished() bool { return t.lastReason == "stop" || t.apiErr != nil }

// Finish builds the done event from what the stream showed and the exit
// status, or reports a rejected resume token ("Session not found" on stderr,
// exit 1, nothing on stdout).
func (t *translator) Finish(exit runner.Exit) ([]drover.Event, bool) {
	if t.resume && !t.sawLine && !exit.Success() && strings.Contains(exit.StderrTail, "Session not found") {
		return nil, true
	}
	var status drover.DoneStatus
	switch {
	case t.apiErr != nil:
		status = drover.StatusError
	case t.steps == 0:
		return nil, false // no model call finished: the runner reports the exit
	case exit.Success() || t.lastReason == "stop" && exit.Signal != "":
		// Stopped by the linger watchdog after its last step is still a
		// finished run.
		status = drover.StatusSuccess
	default:
		return nil, false
	}
	return []drover.Event{t.done(status)}, false
}

func (t *translator) done(status drover.DoneStatus) drover.Event {
	u := t.usage
	u.ToolUses = t.toolUses
	if t.steps > 0 {
		n := t.steps
		u.Turns = &n
	}
	d := drover.DonePayload{Status: status, ResumeToken: t.vendorSess, Usage: u,
		DurationMs: max(0, t.Now().Sub(t.start).Milliseconds())}
	if status == drover.StatusSuccess {
		d.Result = t.lastText
	}
	ev := t.Event(drover.TypeDone, d)
	ev.Metadata = map[string]any{"vendorSessionId": t.vendorSess}
	if t.lastReason != "" {
		ev.Metadata["stopReason"] = t.lastReason
	}
	return ev
}
