package fakemodel

// The OpenAI Responses API, as Codex speaks it (measured with 0.169.0).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

type responsesWire struct{}

var _ wire = responsesWire{}

func (responsesWire) name() string { return "openai-responses" }

func (responsesWire) endpoints() []endpoint {
	return []endpoint{{method: http.MethodPost, path: "/v1/responses"}}
}

type execCommandInput struct {
	Cmd string `json:"cmd"`
}

type shellCommandInput struct {
	Command string `json:"command"`
}

type shellArgvInput struct {
	Command []string `json:"command"`
}

// applyPatchAdd is an apply_patch patch that creates path with content.
// The patch format has whole lines only: content without a final newline
// gets one.
func applyPatchAdd(path, content string) string {
	var b strings.Builder
	b.WriteString("*** Begin Patch\n*** Add File: " + path + "\n")
	lines := strings.Split(strings.TrimSuffix(content, "\n"), "\n")
	for _, l := range lines {
		b.WriteString("+" + l + "\n")
	}
	b.WriteString("*** End Patch\n")
	return b.String()
}

// tools: Codex's unified exec tool (exec_command {cmd}) first, then the
// older shell tools; writes as an apply_patch freeform patch, else through
// the shell; reads through the shell (Codex has no file-reading tool).
// Paths are left as the script gives them: Codex resolves relative ones
// against the turn's working directory.
func (responsesWire) tools() toolTable {
	shellCandidates := func(cmd func(toolArgs) string) []toolCandidate {
		return []toolCandidate{
			{name: "exec_command", input: func(a toolArgs) any { return execCommandInput{Cmd: cmd(a)} }},
			{name: "shell_command", input: func(a toolArgs) any { return shellCommandInput{Command: cmd(a)} }},
			{name: "shell", input: func(a toolArgs) any { return shellArgvInput{Command: []string{"bash", "-lc", cmd(a)}} }},
		}
	}
	return toolTable{
		shell: shellCandidates(func(a toolArgs) string { return a.command }),
		write: append([]toolCandidate{{name: "apply_patch", custom: true, input: func(a toolArgs) any {
			return applyPatchAdd(a.path, a.content)
		}}}, shellCandidates(func(a toolArgs) string { return shellWrite(a.path, a.content) })...),
		read: shellCandidates(func(a toolArgs) string { return "cat " + shellQuote(a.path) }),
	}
}

type responsesRequest struct {
	Model        string          `json:"model"`
	Stream       bool            `json:"stream"`
	Instructions json.RawMessage `json:"instructions"`
	Input        json.RawMessage `json:"input"`
	Tools        []struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tools"`
}

type responsesItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	CallID  string          `json:"call_id"`
	Output  json.RawMessage `json:"output"`
}

// isModelItem reports whether an input item is one the model produced
// (echoed back by a stateless client).
func isModelItem(it responsesItem) bool {
	switch it.Type {
	case "message", "":
		return it.Role == "assistant"
	case "reasoning", "compaction":
		return true
	}
	return strings.HasSuffix(it.Type, "_call")
}

// decode finds the prompt (the last user text of the last user message
// that has one, not counting injected context such as
// <environment_context>), counts the model turns after it (runs of model
// items, ended by tool outputs) and collects the log fields. Developer
// messages and user messages holding only injected context are neutral.
func (responsesWire) decode(_ *http.Request, body []byte) (*exchange, error) {
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil, errors.New("empty request body")
	}
	var req responsesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("malformed request body: %v", err)
	}
	if len(req.Input) == 0 || string(req.Input) == "null" {
		return nil, errors.New("input: field required")
	}
	x := &exchange{model: req.Model, stream: req.Stream}
	for _, t := range req.Tools {
		name := t.Name
		if name == "" {
			name = t.Type // built-in tools: web_search, tool_search, …
		}
		if name != "" {
			x.toolsOffered = append(x.toolsOffered, name)
		}
	}
	var sysTexts, ctxTexts []string
	var instructions string
	if json.Unmarshal(req.Instructions, &instructions) == nil && instructions != "" {
		sysTexts = append(sysTexts, instructions)
	}

	var items []responsesItem
	if req.Input[0] == '"' {
		var s string
		if err := json.Unmarshal(req.Input, &s); err != nil {
			return nil, fmt.Errorf("input: %v", err)
		}
		items = []responsesItem{{Type: "message", Role: "user", Content: req.Input}}
	} else if err := json.Unmarshal(req.Input, &items); err != nil {
		return nil, fmt.Errorf("input: %v", err)
	}

	prompt := -1
	for i, it := range items {
		if it.Type != "message" && it.Type != "" {
			continue
		}
		parts, err := openAIParts(it.Content)
		if err != nil {
			return nil, fmt.Errorf("input.%d.content: %v", i, err)
		}
		var texts []string
		for _, p := range parts {
			if isTextPart(p) {
				texts = append(texts, p.Text)
			}
		}
		switch it.Role {
		case "user":
			if promptTexts(texts, &ctxTexts, &x.userTexts) {
				x.prompt = x.userTexts[len(x.userTexts)-1]
				prompt = i
			}
		case "developer", "system":
			sysTexts = append(sysTexts, texts...)
		}
	}

	var tc turnCounter
	for _, it := range items[prompt+1:] {
		switch {
		case isModelItem(it):
			tc.model()
		case strings.HasSuffix(it.Type, "_output"):
			tc.client()
			x.toolResults = append(x.toolResults, ToolResult{ToolUseID: it.CallID, Content: openAIText(it.Output)})
		}
	}
	x.turns = tc.turns
	x.cwd = findCwd(append(sysTexts, ctxTexts...))
	return x, nil
}

func (responsesWire) writeError(w http.ResponseWriter, status int, msg string) {
	writeOpenAIError(w, status, msg)
}

// responsesCall splits a scripted tool name into Codex's namespace and
// name: "NS.TOOL" is TOOL in namespace NS, and an MCP tool name
// "mcp__SERVER__TOOL" that the request does not offer as such becomes TOOL
// in namespace "mcp__SERVER" (how Codex addresses MCP tools).
func responsesCall(name string, offered []string) (ns, tool string) {
	if ns, tool, ok := strings.Cut(name, "."); ok && ns != "" && tool != "" {
		return ns, tool
	}
	if rest, ok := strings.CutPrefix(name, "mcp__"); ok && !slices.Contains(offered, name) {
		if server, tool, ok := strings.Cut(rest, "__"); ok && server != "" && tool != "" {
			return "mcp__" + server, tool
		}
	}
	return "", name
}

func (responsesWire) writeAnswer(ctx context.Context, w http.ResponseWriter, x *exchange, a *answer) {
	model := x.model
	if model == "" {
		model = "fakemodel"
	}
	id := newID("resp_")
	created := time.Now().Unix()
	w.Header().Set("x-request-id", newID("req_"))

	var items []map[string]any
	if a.thinking != "" {
		items = append(items, map[string]any{
			"type": "reasoning", "id": newID("rs_"),
			"summary":           []any{map[string]any{"type": "summary_text", "text": a.thinking}},
			"encrypted_content": nil,
		})
	}
	if a.text != "" {
		items = append(items, map[string]any{
			"type": "message", "id": newID("msg_"), "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": a.text, "annotations": []any{}}},
		})
	}
	for _, c := range a.calls {
		if c.custom {
			var input string
			_ = json.Unmarshal(c.input, &input)
			items = append(items, map[string]any{
				"type": "custom_tool_call", "id": newID("ctc_"), "status": "completed",
				"call_id": newID("call_"), "name": c.name, "input": input,
			})
			continue
		}
		item := map[string]any{
			"type": "function_call", "id": newID("fc_"), "status": "completed",
			"call_id": newID("call_"), "arguments": string(c.input),
		}
		ns, tool := responsesCall(c.name, x.toolsOffered)
		item["name"] = tool
		if ns != "" {
			item["namespace"] = ns
		}
		items = append(items, item)
	}
	if items == nil {
		items = []map[string]any{}
	}

	status, terminal := "completed", "response.completed"
	var incomplete any
	if a.stopReason != "" {
		// The Responses API has no stop reason; a response cut short says
		// why in incomplete_details.
		status, terminal = "incomplete", "response.incomplete"
		incomplete = map[string]any{"reason": a.stopReason}
	}
	response := func(status string, output any, usage bool) map[string]any {
		r := map[string]any{
			"id": id, "object": "response", "created_at": created, "model": model,
			"status": status, "output": output, "incomplete_details": nil, "error": nil,
		}
		if status == "incomplete" {
			r["incomplete_details"] = incomplete
		}
		if usage {
			r["usage"] = map[string]any{
				"input_tokens":          a.usage.Input,
				"input_tokens_details":  map[string]any{"cached_tokens": a.usage.CacheRead},
				"output_tokens":         a.usage.Output,
				"output_tokens_details": map[string]any{"reasoning_tokens": a.usage.Reasoning},
				"total_tokens":          a.usage.Input + a.usage.Output,
			}
		}
		return r
	}

	if !x.stream {
		writeJSON(w, http.StatusOK, response(status, items, true))
		return
	}

	var events []sseEvent
	ev := func(typ string, fields map[string]any) {
		fields["type"] = typ
		fields["sequence_number"] = len(events)
		events = append(events, sseEvent{typ, fields})
	}
	ev("response.created", map[string]any{"response": response("in_progress", []any{}, false)})
	ev("response.in_progress", map[string]any{"response": response("in_progress", []any{}, false)})
	for idx, it := range items {
		itemID := it["id"]
		added := func(override map[string]any) {
			start := map[string]any{}
			for k, v := range it {
				start[k] = v
			}
			for k, v := range override {
				start[k] = v
			}
			ev("response.output_item.added", map[string]any{"output_index": idx, "item": start})
		}
		at := func(fields map[string]any) map[string]any {
			fields["item_id"] = itemID
			fields["output_index"] = idx
			return fields
		}
		switch it["type"] {
		case "reasoning":
			text := a.thinking
			part := map[string]any{"type": "summary_text", "text": text}
			added(map[string]any{"summary": []any{}})
			ev("response.reasoning_summary_part.added", at(map[string]any{"summary_index": 0, "part": map[string]any{"type": "summary_text", "text": ""}}))
			for _, chunk := range splitWords(text, 3) {
				ev("response.reasoning_summary_text.delta", at(map[string]any{"summary_index": 0, "delta": chunk}))
			}
			ev("response.reasoning_summary_text.done", at(map[string]any{"summary_index": 0, "text": text}))
			ev("response.reasoning_summary_part.done", at(map[string]any{"summary_index": 0, "part": part}))
		case "message":
			text := a.text
			added(map[string]any{"status": "in_progress", "content": []any{}})
			ev("response.content_part.added", at(map[string]any{"content_index": 0, "part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}}))
			for _, chunk := range splitWords(text, 3) {
				ev("response.output_text.delta", at(map[string]any{"content_index": 0, "delta": chunk}))
			}
			ev("response.output_text.done", at(map[string]any{"content_index": 0, "text": text}))
			ev("response.content_part.done", at(map[string]any{"content_index": 0, "part": map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}))
		case "custom_tool_call":
			input := it["input"].(string)
			added(map[string]any{"status": "in_progress", "input": ""})
			for _, chunk := range splitRunes(input, 2) {
				ev("response.custom_tool_call_input.delta", at(map[string]any{"delta": chunk}))
			}
			ev("response.custom_tool_call_input.done", at(map[string]any{"input": input}))
		case "function_call":
			args := it["arguments"].(string)
			added(map[string]any{"status": "in_progress", "arguments": ""})
			for _, chunk := range splitRunes(args, 2) {
				ev("response.function_call_arguments.delta", at(map[string]any{"delta": chunk}))
			}
			ev("response.function_call_arguments.done", at(map[string]any{"arguments": args}))
		}
		ev("response.output_item.done", map[string]any{"output_index": idx, "item": it})
	}
	ev(terminal, map[string]any{"response": response(status, items, true)})

	cutAfter := -1
	if a.cut {
		// Send everything up to and including the first delta.
		cutAfter = 2
		for i, e := range events {
			if strings.HasSuffix(e.event, ".delta") {
				cutAfter = i + 1
				break
			}
		}
	}
	writeSSE(ctx, w, events, a.chunkDelay, cutAfter)
}
