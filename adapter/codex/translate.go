package codex

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/runner"
)

// line is the union of the fields drover reads from `codex exec --json` lines.
type line struct {
	Type     string          `json:"type"`
	ThreadID string          `json:"thread_id"`
	Item     json.RawMessage `json:"item"`
	Usage    *usage          `json:"usage"`
	Message  string          `json:"message"` // top-level "error"
	Error    *struct {
		Message string `json:"message"`
	} `json:"error"` // turn.failed
}

// usage is Codex's token usage: cumulative over the thread in turn.completed
// and in the rollout's token_count events.
type usage struct {
	InputTokens       int64 `json:"input_tokens"`
	CachedInputTokens int64 `json:"cached_input_tokens"`
	CacheWriteTokens  int64 `json:"cache_write_input_tokens"`
	OutputTokens      int64 `json:"output_tokens"`
	ReasoningTokens   int64 `json:"reasoning_output_tokens"`
}

func (u usage) minus(b usage) usage {
	return usage{
		InputTokens:       u.InputTokens - b.InputTokens,
		CachedInputTokens: u.CachedInputTokens - b.CachedInputTokens,
		CacheWriteTokens:  u.CacheWriteTokens - b.CacheWriteTokens,
		OutputTokens:      u.OutputTokens - b.OutputTokens,
		ReasoningTokens:   u.ReasoningTokens - b.ReasoningTokens,
	}
}

func (u usage) plus(b usage) usage {
	return usage{
		InputTokens:       u.InputTokens + b.InputTokens,
		CachedInputTokens: u.CachedInputTokens + b.CachedInputTokens,
		CacheWriteTokens:  u.CacheWriteTokens + b.CacheWriteTokens,
		OutputTokens:      u.OutputTokens + b.OutputTokens,
		ReasoningTokens:   u.ReasoningTokens + b.ReasoningTokens,
	}
}

type item struct {
	ID               string          `json:"id"`
	Type             string          `json:"type"`
	Text             string          `json:"text"`
	Message          string          `json:"message"`
	Command          string          `json:"command"`
	AggregatedOutput string          `json:"aggregated_output"`
	ExitCode         *int            `json:"exit_code"`
	Status           string          `json:"status"`
	Changes          []change        `json:"changes"`
	Server           string          `json:"server"`
	Tool             string          `json:"tool"`
	Arguments        json.RawMessage `json:"arguments"`
	Result           *mcpResult      `json:"result"`
	ItemError        *struct {
		Message string `json:"message"`
	} `json:"error"`
	Query string `json:"query"`
}

type change struct {
	Path string `json:"path"`
	Kind string `json:"kind"`
}

type mcpResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

// runInfo is what the translator knows about the run from its options.
type runInfo struct {
	resume    bool
	model     string
	cwd       string
	tier      drover.Tier
	tools     []string // reported in the synthesized init
	removed   []string // native tools removed by tier or tool filter
	codexHome string   // where the rollout file is; "" = do not read it
}

// translator turns `codex exec --json` lines into UES events. It is pure
// apart from its clock and, in Finish, reading the thread's rollout file
// (which golden tests switch off with an empty codexHome).
type translator struct {
	runner.Stamp
	info runInfo

	sawInit  bool
	threadID string
	calls    runner.ToolCalls // by Codex item id
	// finishedItems are the tool items whose item.completed was mapped.
	finishedItems map[string]bool
	toolUses      int64
	visible       map[string]int // tool items seen, by kind: "exec", "patch", "mcp"
	lastText      string

	turnDone bool
	usage    *usage // exec: the thread's cumulative total at turn.completed
	failed   *string
	// failStatus is the HTTP status of the failure when Codex named it
	// (app-server's codexErrorInfo), else 0: it is read from the text.
	failStatus int
	// failHint is Codex's own error class (app-server), classified with
	// the message.
	failHint    string
	interrupted bool // the turn ended interrupted (app-server)
	// perResponse is this run's usage summed over its model responses, when
	// Codex reported each one (app-server); responses counts them.
	perResponse *usage
	responses   int64
}

func newTranslator(s runner.Stamp, info runInfo) *translator {
	return &translator{Stamp: s, info: info, visible: map[string]int{}}
}

// init synthesizes the init event: Codex prints none.
func (t *translator) initEvent() drover.Event {
	t.sawInit = true
	return t.Init(t.info.model, t.info.cwd, t.info.tools, runner.SessionMeta(t.threadID))
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
	if l.Type == "thread.started" && l.ThreadID != "" {
		t.threadID = l.ThreadID
	}
	if !t.sawInit {
		evs = append(evs, t.initEvent())
		if l.Type == "thread.started" {
			return evs, nil
		}
	}
	switch l.Type {
	case "thread.started":
		evs = append(evs, t.Extension("thread_started", raw))
	case "turn.started":
		evs = append(evs, t.Extension("turn_started", raw))
	case "item.started", "item.updated", "item.completed":
		evs = append(evs, t.itemLine(l, raw)...)
	case "turn.completed":
		t.turnDone = true
		if l.Usage != nil {
			u := *l.Usage
			t.usage = &u
		} else {
			t.usage = &usage{}
		}
	case "turn.failed":
		t.turnDone = true
		msg := "codex turn failed"
		if l.Error != nil && l.Error.Message != "" {
			msg = l.Error.Message
		}
		t.failed = &msg
	case "error":
		// Not fatal by itself (retry notices, the message repeated by
		// turn.failed); kept for consumers that want it.
		evs = append(evs, t.Extension("error", raw))
	default:
		evs = append(evs, t.Extension(strings.ReplaceAll(l.Type, ".", "_"), raw))
	}
	return evs, nil
}

func (t *translator) itemLine(l line, raw []byte) []drover.Event {
	var it item
	if len(l.Item) == 0 || runner.Unmarshal(l.Item, &it) != nil || it.Type == "" {
		return []drover.Event{t.Extension(strings.ReplaceAll(l.Type, ".", "_"), raw)}
	}
	return t.itemEvents(it, l.Type == "item.started", l.Type == "item.completed", raw)
}

// itemEvents maps one item as it started, changed (neither) or completed;
// raw is the native line that carried it, for extension events. Both modes
// come here: app-server items are converted to exec's shape first.
func (t *translator) itemEvents(it item, started, completed bool, raw []byte) []drover.Event {
	if !started && !completed && it.Type != "todo_list" {
		// Progress of an item whose start and end are mapped.
		return []drover.Event{t.Extension("item_updated", raw)}
	}
	switch it.Type {
	case "agent_message":
		if completed && it.Text != "" {
			t.lastText = it.Text
			return []drover.Event{t.Event(drover.TypeText, drover.TextPayload{Content: it.Text})}
		}
		return nil
	case "reasoning":
		if completed && it.Text != "" {
			return []drover.Event{t.Event(drover.TypeThinking, drover.ThinkingPayload{Summary: it.Text})}
		}
		return nil
	case "command_execution":
		return t.toolItem(it, started, completed, "exec", "exec_command",
			map[string]any{"command": it.Command}, describeCommand(it.Command), func() (drover.ToolStatus, string) {
				return itemStatus(it.Status), it.AggregatedOutput
			}, nil)
	case "file_change":
		var ext []drover.Event
		if completed {
			ext = []drover.Event{t.Extension("file_change", raw)}
		}
		return t.toolItem(it, started, completed, "patch", "apply_patch",
			map[string]any{"changes": changesInput(it.Changes)}, "", func() (drover.ToolStatus, string) {
				return itemStatus(it.Status), changesSummary(it.Changes)
			}, ext)
	case "mcp_tool_call":
		name := "mcp__" + it.Server + "__" + it.Tool
		input := map[string]any{}
		if len(it.Arguments) > 0 {
			_ = runner.Unmarshal(it.Arguments, &input)
			if input == nil {
				input = map[string]any{}
			}
		}
		return t.toolItem(it, started, completed, "mcp", name, input, "", func() (drover.ToolStatus, string) {
			st := itemStatus(it.Status)
			if it.ItemError != nil && it.ItemError.Message != "" {
				// exec: "…requires approval, but approval policy is never";
				// app-server: "user rejected MCP tool call".
				if strings.Contains(it.ItemError.Message, "requires approval") || strings.Contains(it.ItemError.Message, "user rejected") {
					st = drover.ToolDenied
				}
				return st, it.ItemError.Message
			}
			return st, mcpText(it.Result)
		}, nil)
	case "web_search":
		return t.toolItem(it, started, completed, "web", "web_search", map[string]any{"query": it.Query}, "",
			func() (drover.ToolStatus, string) { return drover.ToolSuccess, "" }, nil)
	case "todo_list":
		return []drover.Event{t.Extension("plan_update", raw)}
	case "error":
		// A non-fatal warning item (e.g. unknown model metadata).
		return []drover.Event{t.Extension("error", raw)}
	}
	return []drover.Event{t.Extension("item_"+it.Type, raw)}
}

// toolItem maps a tool item: tool_use when it starts (or completes without
// having started), tool_result when it completes.
func (t *translator) toolItem(it item, started, completed bool, kind, name string, input map[string]any, desc string,
	result func() (drover.ToolStatus, string), extra []drover.Event) []drover.Event {
	var evs []drover.Event
	id := it.ID
	if id == "" {
		id = fmt.Sprintf("codex-%s-%d", kind, t.toolUses)
	}
	if !t.calls.Known(id) {
		if desc == "" {
			desc = tools.Describe(name, input)
		}
		t.calls.Start(id, name, t.Now())
		t.toolUses++
		t.visible[kind]++
		evs = append(evs, t.Event(drover.TypeToolUse, drover.ToolUsePayload{ToolName: name, ToolUseID: id, Input: input, Description: desc}))
	}
	if completed {
		if t.finishedItems[id] {
			// Codex repeats item.completed for one item at times: one
			// tool_result (and its extension events) per item.
			return evs
		}
		if t.finishedItems == nil {
			t.finishedItems = map[string]bool{}
		}
		t.finishedItems[id] = true
		st, out := result()
		evs = append(evs, t.toolResult(id, st, out))
	}
	return append(evs, extra...)
}

func (t *translator) toolResult(id string, st drover.ToolStatus, out string) drover.Event {
	return t.Event(drover.TypeToolResult, t.calls.Result(id, st, out, t.Now()))
}

// itemStatus maps a Codex item status to a tool status.
func itemStatus(s string) drover.ToolStatus {
	switch s {
	case "completed", "":
		return drover.ToolSuccess
	case "declined", "rejected", "denied":
		return drover.ToolDenied
	}
	return drover.ToolError // failed, in_progress at completion, anything else
}

var shellWrapRe = regexp.MustCompile(`^/(?:usr/)?bin/(?:ba|z)?sh -lc (.*)$`)

// unwrapShell returns the script of a `/bin/bash -lc SCRIPT` command line,
// unquoted, or cmd unchanged.
func unwrapShell(cmd string) string {
	m := shellWrapRe.FindStringSubmatch(cmd)
	if m == nil {
		return cmd
	}
	s := m[1]
	switch {
	case len(s) >= 2 && s[0] == '\'' && s[len(s)-1] == '\'':
		return strings.ReplaceAll(s[1:len(s)-1], `'"'"'`, `'`)
	case len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"':
		r := strings.NewReplacer(`\"`, `"`, `\\`, `\`, `\$`, `$`, "\\`", "`")
		return r.Replace(s[1 : len(s)-1])
	}
	return s
}

func changesInput(cs []change) []any {
	out := make([]any, 0, len(cs))
	for _, c := range cs {
		out = append(out, map[string]any{"path": c.Path, "kind": c.Kind})
	}
	return out
}

// changesSummary renders file changes the way apply_patch reports them
// ("A path", "M path", "D path").
func changesSummary(cs []change) string {
	var b strings.Builder
	for _, c := range cs {
		k := "M"
		switch c.Kind {
		case "add":
			k = "A"
		case "delete":
			k = "D"
		}
		fmt.Fprintf(&b, "%s %s\n", k, c.Path)
	}
	return b.String()
}

func mcpText(r *mcpResult) string {
	if r == nil {
		return ""
	}
	var parts []string
	for _, c := range r.Content {
		if c.Type == "text" {
			parts = append(parts, c.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// Finished reports whether the turn has ended (turn.completed or
// turn.failed); the linger watchdog starts then.
func (t *translator) Finished() bool { return t.turnDone }

// Finish implements runner.Translator. A resume Codex rejected (exit 1,
// nothing on stdout, "no rollout found" on stderr) is reported as such.
// Otherwise, once the turn ended: the tool calls Codex hid from its JSON
// output (denials, see hidden.go), then error (for turn.failed) and done.
func (t *translator) Finish(exit runner.Exit) ([]drover.Event, bool) {
	if t.info.resume && t.threadID == "" && resumeRejectedText(exit.StderrTail) {
		return nil, true
	}
	if !t.turnDone {
		return nil, false
	}
	var ro *rollout
	if t.info.codexHome != "" && t.threadID != "" {
		ro = readRollout(t.info.codexHome, t.threadID)
	}
	evs := t.hiddenCalls(ro, exit.StderrTail)
	return append(evs, t.final(ro, exit)...), false
}

// final returns the events that end the run: error (turn.failed) and done.
func (t *translator) final(ro *rollout, exit runner.Exit) []drover.Event {
	var evs []drover.Event
	status := drover.StatusSuccess
	switch {
	case t.failed != nil:
		status = drover.StatusError
		evs = append(evs, t.failError(*t.failed, t.failStatus, t.failHint))
	case t.interrupted:
		status = drover.StatusInterrupted
	}
	done := drover.DonePayload{Status: status, ResumeToken: t.threadID}
	meta := map[string]any{"vendorSessionId": t.threadID}
	if status == drover.StatusSuccess {
		done.Result = t.lastText
	}
	if run, turns, cumulative, ok := t.runUsage(ro); ok {
		done.Usage.Turns = turns
		if cumulative {
			// The thread's earlier totals are unknown: these are cumulative.
			meta["usageCumulative"] = true
		}
		done.Usage.InputTokens = max(run.InputTokens-run.CachedInputTokens, 0)
		done.Usage.OutputTokens = run.OutputTokens
		cr, cw, rt := run.CachedInputTokens, run.CacheWriteTokens, run.ReasoningTokens
		done.Usage.CacheReadTokens, done.Usage.CacheWriteTokens, done.Usage.ReasoningTokens = &cr, &cw, &rt
	}
	done.Usage.ToolUses = t.toolUses
	done.DurationMs = exit.Duration.Milliseconds()
	ev := t.Event(drover.TypeDone, done)
	ev.Metadata = meta
	return append(evs, ev)
}

// runUsage returns this run's token usage, the model responses it took
// when known, and whether the numbers are the thread's cumulative ones; ok
// is false when Codex reported none (a failed exec turn). Summed responses
// (app-server) are exact; otherwise Codex's thread total is reduced by the
// total before this run's turn, read from the rollout, when there is one.
func (t *translator) runUsage(ro *rollout) (run usage, turns *int64, cumulative, ok bool) {
	if t.perResponse != nil {
		n := t.responses
		return *t.perResponse, &n, false, true
	}
	if t.usage == nil {
		return usage{}, nil, false, false
	}
	switch {
	case ro != nil && ro.found:
		n := ro.responses
		return t.usage.minus(ro.before), &n, false, true
	case t.info.resume:
		return *t.usage, nil, true, true
	}
	return *t.usage, nil, false, true
}

var statusRe = regexp.MustCompile(`(?:last status: |unexpected status |status[ =:]+)(\d{3})\b`)

// failError classifies the message of a failed turn. `codex exec` reports
// HTTP failures as text only: "exceeded retry limit, last status: 429 Too
// Many Requests", "unexpected status 401 Unauthorized: …", the raw body of
// a 400, and for a 500 a fixed "We’re currently experiencing high demand"
// sentence. The app-server adds the status when it has one (status, else 0:
// read from the text) and its own error class (hint, classified with the
// message).
func (t *translator) failError(msg string, status int, hint string) drover.Event {
	if m := statusRe.FindStringSubmatch(msg); m != nil && status == 0 {
		status, _ = strconv.Atoi(m[1])
	}
	meta := map[string]any{}
	if status != 0 {
		meta["httpStatus"] = status
	}
	return t.Failure(statusRules.Code(status, strings.TrimSpace(msg+" "+hint)), msg, meta)
}

// statusRules are Codex's differences from the shared status mapping: the
// text alone classifies a message without a status, a 503 is overload, and
// 404, 413 and 422 are bad requests.
var statusRules = runner.StatusRules{
	FoldCase:        true,
	RateLimited:     []runner.Match{{Texts: []runner.Text{{"rate limit"}, {"rate_limit"}}}},
	Overloaded:      []runner.Match{{Status: []int{503}}, {Texts: []runner.Text{{"overloaded"}}}},
	AuthFailed:      []runner.Match{{Texts: []runner.Text{{"unauthorized"}}}},
	ContextOverflow: []runner.Match{{Texts: []runner.Text{{"context_length_exceeded"}, {"context window"}, {"maximum context length"}}}},
	BadRequest:      []runner.Match{{Status: []int{404, 413, 422}}, {Texts: []runner.Text{{"invalid_request_error"}}}},
	ServerError: []runner.Match{{Texts: []runner.Text{{"high demand"}, {"server_error"}, {"internal server error"},
		{"stream disconnected"}}}},
}

// resumeRejectedText reports whether stderr says Codex found no thread to
// resume: "thread/resume failed: no rollout found for thread id …".
func resumeRejectedText(s string) bool {
	return strings.Contains(s, "no rollout found for thread id") || strings.Contains(s, "thread/resume failed")
}
