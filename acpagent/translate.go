package acpagent

import (
	"encoding/json"
	"strings"

	acp "github.com/coder/acp-go-sdk"
	"github.com/drover-run/drover"
)

// translator turns one run's UES events into ACP session updates, in
// order (the table is in docs/acp.md). It keeps what a later event needs:
// whether the message being written was streamed, and which tool calls the
// editor has been shown. A translator serves one run; it is not safe for
// concurrent use.
type translator struct {
	// streamed: text_delta events came since the last text, which repeats
	// them in full and is then not sent again.
	streamed bool
	// calls are the tool calls the editor was shown (tool_call sent).
	calls map[string]bool
	// plans are the calls shown as the session's plan instead (a to-do
	// tool): their results are not shown.
	plans map[string]bool
}

func newTranslator() *translator {
	return &translator{calls: map[string]bool{}, plans: map[string]bool{}}
}

// updates returns what the editor is shown of ev; nothing for events that
// have no ACP form (init, done, errors, extension events other than plans).
func (t *translator) updates(ev drover.Event) []acp.SessionUpdate {
	switch p := ev.Payload.(type) {
	case drover.TextDeltaPayload:
		t.streamed = true
		if p.Delta != "" {
			return []acp.SessionUpdate{acp.UpdateAgentMessageText(p.Delta)}
		}
	case drover.TextPayload:
		streamed := t.streamed
		t.streamed = false
		if !streamed && p.Content != "" {
			return []acp.SessionUpdate{acp.UpdateAgentMessageText(p.Content)}
		}
	case drover.ThinkingPayload:
		if p.Summary != "" {
			return []acp.SessionUpdate{acp.UpdateAgentThoughtText(p.Summary)}
		}
	case drover.ToolUsePayload:
		return t.toolUse(p)
	case drover.ToolResultPayload:
		return t.toolResult(p)
	case drover.PermissionRequestPayload:
		return t.announce(callID(p.ToolUseID, p.RequestID), p.ToolName, p.Description, p.Input)
	case drover.PermissionAnswerPayload:
		id := callID(p.ToolUseID, p.RequestID)
		if t.plans[id] {
			return nil
		}
		if p.Behavior == drover.Allow {
			return []acp.SessionUpdate{acp.UpdateToolCall(acp.ToolCallId(id), acp.WithUpdateStatus(acp.ToolCallStatusInProgress))}
		}
		opts := []acp.ToolCallUpdateOpt{acp.WithUpdateStatus(acp.ToolCallStatusFailed)}
		if p.Message != "" {
			opts = append(opts, acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock(p.Message))}))
		}
		return []acp.SessionUpdate{acp.UpdateToolCall(acp.ToolCallId(id), opts...)}
	case drover.SteerPayload:
		if p.Message != "" {
			return []acp.SessionUpdate{acp.UpdateUserMessageText(p.Message)}
		}
	case json.RawMessage:
		if strings.HasSuffix(string(ev.Type), ":plan_update") {
			if entries := extensionPlan(p); entries != nil {
				return []acp.SessionUpdate{acp.UpdatePlan(entries...)}
			}
		}
	}
	return nil
}

// callID names a tool call for the editor: the vendor's tool use id, or
// the permission request's id when a vendor asks about a call it has not
// shown.
func callID(toolUseID, requestID string) string {
	if toolUseID != "" {
		return toolUseID
	}
	return requestID
}

// toolUse shows a call, pending; a to-do tool's call is shown as the plan.
func (t *translator) toolUse(p drover.ToolUsePayload) []acp.SessionUpdate {
	if isPlanTool(p.ToolName) {
		if entries := planEntries(p.Input); entries != nil {
			t.plans[p.ToolUseID] = true
			return []acp.SessionUpdate{acp.UpdatePlan(entries...)}
		}
	}
	if t.calls[p.ToolUseID] {
		return []acp.SessionUpdate{acp.UpdateToolCall(acp.ToolCallId(p.ToolUseID), acp.WithUpdateRawInput(p.Input))}
	}
	return t.announce(p.ToolUseID, p.ToolName, p.Description, p.Input)
}

// announce shows the call id to the editor, pending, unless it has been
// shown already.
func (t *translator) announce(id, name, description string, input map[string]any) []acp.SessionUpdate {
	if t.calls[id] || t.plans[id] {
		return nil
	}
	t.calls[id] = true
	return []acp.SessionUpdate{{ToolCall: toolCall(id, name, description, input)}}
}

// toolResult ends a shown call: completed, or failed (an error or a denied
// call), with the output as its content.
func (t *translator) toolResult(p drover.ToolResultPayload) []acp.SessionUpdate {
	if t.plans[p.ToolUseID] {
		return nil
	}
	status := acp.ToolCallStatusCompleted
	if p.Status != drover.ToolSuccess {
		status = acp.ToolCallStatusFailed
	}
	var content []acp.ToolCallContent
	if p.Output != "" {
		content = []acp.ToolCallContent{acp.ToolContent(acp.TextBlock(p.Output))}
	}
	raw := map[string]any{"status": p.Status, "output": p.Output}
	if !t.calls[p.ToolUseID] {
		// A result of a call never shown: show it ended.
		t.calls[p.ToolUseID] = true
		tc := toolCall(p.ToolUseID, p.ToolName, "", nil)
		tc.Status, tc.Content, tc.RawOutput = status, content, raw
		return []acp.SessionUpdate{{ToolCall: tc}}
	}
	return []acp.SessionUpdate{acp.UpdateToolCall(acp.ToolCallId(p.ToolUseID), acp.WithUpdateStatus(status),
		acp.WithUpdateContent(content), acp.WithUpdateRawOutput(raw))}
}

// toolCall is the ACP form of a call, pending: its title, kind, the file
// it touches and, for an edit, the change as a diff.
func toolCall(id, name, description string, input map[string]any) *acp.SessionUpdateToolCall {
	if description == "" {
		description = drover.DescribeCall(drover.ToolOther, name, "")
	}
	tc := &acp.SessionUpdateToolCall{ToolCallId: acp.ToolCallId(id), Title: description, Kind: toolKind(name),
		Status: acp.ToolCallStatusPending}
	if input != nil {
		tc.RawInput = input
	}
	path := str(input, "file_path", "filePath", "path", "notebook_path", "absolute_path")
	if path != "" {
		tc.Locations = []acp.ToolCallLocation{{Path: path}}
	}
	if tc.Kind == acp.ToolKindEdit && path != "" {
		if text, ok := input["content"].(string); ok {
			tc.Content = []acp.ToolCallContent{acp.ToolDiffContent(path, text)}
		} else if text := str(input, "new_string", "newString"); text != "" {
			tc.Content = []acp.ToolCallContent{acp.ToolDiffContent(path, text, str(input, "old_string", "oldString"))}
		}
	}
	return tc
}

// str returns the first of keys that holds a non-empty string in m.
func str(m map[string]any, keys ...string) string {
	for _, k := range keys {
		if s, ok := m[k].(string); ok && s != "" {
			return s
		}
	}
	return ""
}

// kinds maps the vendors' tool names (lower case) to ACP tool kinds; any
// other tool (MCP tools, say) is "other".
var kinds = func() map[string]acp.ToolKind {
	m := map[string]acp.ToolKind{}
	for kind, names := range map[acp.ToolKind][]string{
		acp.ToolKindExecute: {"bash", "shell", "exec_command", "run_shell_command", "local_shell", "command"},
		acp.ToolKindEdit:    {"write", "write_file", "create_file", "edit", "multiedit", "replace", "edit_file", "str_replace", "notebookedit", "apply_patch", "patch"},
		acp.ToolKindRead:    {"read", "read_file", "view", "read_many_files"},
		acp.ToolKindSearch:  {"grep", "search_file_content", "search", "rg", "glob", "ls", "list", "list_directory", "find"},
		acp.ToolKindFetch:   {"webfetch", "web_fetch", "fetch", "websearch", "web_search", "google_web_search"},
		acp.ToolKindThink:   {"task", "agent"},
	} {
		for _, n := range names {
			m[n] = kind
		}
	}
	return m
}()

func toolKind(name string) acp.ToolKind {
	if k, ok := kinds[strings.ToLower(name)]; ok {
		return k
	}
	return acp.ToolKindOther
}

// isPlanTool: the vendors' to-do tools, whose input is the plan.
func isPlanTool(name string) bool {
	switch strings.ToLower(name) {
	case "todowrite", "todo_write", "write_todos", "update_plan":
		return true
	}
	return false
}

// planEntries reads a to-do tool's input: a list under "todos" or "plan".
func planEntries(input map[string]any) []acp.PlanEntry {
	for _, k := range []string{"todos", "plan"} {
		if list, ok := input[k].([]any); ok {
			return entries(list)
		}
	}
	return nil
}

// extensionPlan reads a vendor's plan event: Codex's todo_list item
// ({"item":{"items":[{"text","completed"}]}}) or its app-server
// turn/plan/updated ({"params":{"plan":[{"step","status"}]}}).
func extensionPlan(raw json.RawMessage) []acp.PlanEntry {
	var v struct {
		Item struct {
			Items []any `json:"items"`
		} `json:"item"`
		Params struct {
			Plan []any `json:"plan"`
		} `json:"params"`
	}
	if json.Unmarshal(raw, &v) != nil {
		return nil
	}
	if v.Item.Items != nil {
		return entries(v.Item.Items)
	}
	if v.Params.Plan != nil {
		return entries(v.Params.Plan)
	}
	return nil
}

// entries reads plan entries: each an object with its text (content,
// description, step or text) and a status, or a "completed" flag. An empty
// list is an empty plan; nil means it was not a plan.
func entries(list []any) []acp.PlanEntry {
	out := []acp.PlanEntry{}
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			return nil
		}
		e := acp.PlanEntry{Content: str(m, "content", "description", "step", "text"), Priority: acp.PlanEntryPriorityMedium,
			Status: acp.PlanEntryStatusPending}
		switch s, _ := m["status"].(string); strings.ToLower(strings.ReplaceAll(s, "-", "_")) {
		case "in_progress", "inprogress", "active":
			e.Status = acp.PlanEntryStatusInProgress
		case "completed", "done", "cancelled", "canceled":
			e.Status = acp.PlanEntryStatusCompleted
		}
		if done, _ := m["completed"].(bool); done {
			e.Status = acp.PlanEntryStatusCompleted
		}
		if p, _ := m["priority"].(string); p == "high" || p == "low" {
			e.Priority = acp.PlanEntryPriority(p)
		}
		out = append(out, e)
	}
	return out
}
