package fakemodel

// The Anthropic Messages API, as Claude Code speaks it (measured with
// 2.1.197 and 2.1.330).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

type anthropicWire struct{}

var _ wire = anthropicWire{}

func (anthropicWire) name() string { return "anthropic" }

func (anthropicWire) endpoints() []endpoint {
	return []endpoint{
		{method: http.MethodPost, path: "/v1/messages"},
		{method: http.MethodPost, path: "/v1/messages/count_tokens", serve: anthropicCountTokens},
	}
}

type bashInput struct {
	Command     string `json:"command"`
	Description string `json:"description"`
}

type writeInput struct {
	FilePath string `json:"file_path"`
	Content  string `json:"content"`
}

// editInput with an empty old_string makes Claude Code's Edit create the
// file; offered instead of Write with --bare.
type editInput struct {
	FilePath  string `json:"file_path"`
	OldString string `json:"old_string"`
	NewString string `json:"new_string"`
}

type readInput struct {
	FilePath string `json:"file_path"`
}

func (anthropicWire) tools() toolTable {
	return toolTable{
		shell: []toolCandidate{{name: "Bash", input: func(a toolArgs) any {
			return bashInput{Command: a.command, Description: describeCommand(a.command)}
		}}},
		write: []toolCandidate{
			{name: "Write", input: func(a toolArgs) any { return writeInput{FilePath: a.absPath, Content: a.content} }},
			{name: "Edit", input: func(a toolArgs) any { return editInput{FilePath: a.absPath, NewString: a.content} }},
		},
		read: []toolCandidate{{name: "Read", input: func(a toolArgs) any { return readInput{FilePath: a.absPath} }}},
	}
}

// describeCommand is the Bash call's description, which Claude Code shows.
func describeCommand(cmd string) string {
	line, _, more := strings.Cut(cmd, "\n")
	if r := []rune(line); len(r) > 60 {
		line, more = string(r[:60]), true
	}
	if more {
		line += "…"
	}
	return "Run " + line
}

type anthropicRequest struct {
	Model    string             `json:"model"`
	Stream   bool               `json:"stream"`
	System   json.RawMessage    `json:"system"`
	Messages []anthropicMessage `json:"messages"`
	Tools    []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// anthropicBlocks decodes message content, which is a string or an array of
// blocks.
func anthropicBlocks(raw json.RawMessage) ([]anthropicBlock, error) {
	raw = json.RawMessage(strings.TrimSpace(string(raw)))
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return []anthropicBlock{{Type: "text", Text: s}}, nil
	}
	var blocks []anthropicBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, err
	}
	return blocks, nil
}

// userText returns the user-authored part of a text block: the text without
// its <system-reminder>…</system-reminder> sections (trimmed when it had
// any), and false when nothing else is left.
func userText(text string) (string, bool) {
	const open, end = "<system-reminder>", "</system-reminder>"
	if !strings.Contains(text, open) {
		return text, strings.TrimSpace(text) != ""
	}
	var b strings.Builder
	rest := text
	for {
		i := strings.Index(rest, open)
		if i < 0 {
			b.WriteString(rest)
			break
		}
		b.WriteString(rest[:i])
		j := strings.Index(rest[i:], end)
		if j < 0 {
			break // unterminated: the rest is reminder
		}
		rest = rest[i+j+len(end):]
	}
	s := strings.TrimSpace(b.String())
	return s, s != ""
}

// steeringText extracts the user's words from the mid-conversation system
// message Claude Code sends when the user writes while a tool runs
// (measured with 2.1.330):
//
//	The user sent a new message while you were working:\n<text>\n\nThis is how Claude Code surfaces messages …
func steeringText(s string) (string, bool) {
	const head = "The user sent a new message while you were working:"
	const tail = "\n\nThis is how Claude Code surfaces messages"
	rest, ok := strings.CutPrefix(s, head)
	if !ok {
		return "", false
	}
	if i := strings.LastIndex(rest, tail); i >= 0 {
		rest = rest[:i]
	}
	rest = strings.TrimSpace(rest)
	return rest, rest != ""
}

// decode finds the prompt (the last user text of the last user message that
// has one), counts the assistant turns after it, and collects the log
// fields. Mid-conversation "system" role messages neither are the prompt
// nor end an assistant turn; steering text in them is a user text.
func (anthropicWire) decode(_ *http.Request, body []byte) (*exchange, error) {
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil, errors.New("empty request body")
	}
	var req anthropicRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("malformed request body: %v", err)
	}
	if req.Messages == nil {
		return nil, errors.New("messages: field required")
	}
	x := &exchange{model: req.Model, stream: req.Stream}
	for _, t := range req.Tools {
		if t.Name != "" {
			x.toolsOffered = append(x.toolsOffered, t.Name)
		}
	}

	// The working directory is looked for in system texts first (the system
	// prompt, then mid-conversation system messages), then in the others, so
	// a prompt quoting the pattern does not win.
	var sysTexts, otherTexts []string
	if sys, err := anthropicBlocks(req.System); err == nil {
		for _, b := range sys {
			sysTexts = append(sysTexts, b.Text)
		}
	}

	msgs := make([][]anthropicBlock, len(req.Messages))
	prompt := -1
	for i, m := range req.Messages {
		blocks, err := anthropicBlocks(m.Content)
		if err != nil {
			return nil, fmt.Errorf("messages.%d.content: %v", i, err)
		}
		msgs[i] = blocks
		for _, b := range blocks {
			if b.Type != "text" {
				continue
			}
			switch m.Role {
			case "system":
				sysTexts = append(sysTexts, b.Text)
				if t, ok := steeringText(b.Text); ok {
					x.userTexts = append(x.userTexts, t)
				}
			case "user":
				otherTexts = append(otherTexts, b.Text)
				if t, ok := userText(b.Text); ok {
					x.userTexts = append(x.userTexts, t)
					x.prompt = t
					prompt = i
				}
			default:
				otherTexts = append(otherTexts, b.Text)
			}
		}
	}

	inAssistantTurn := false
	for i := prompt + 1; i < len(req.Messages); i++ {
		switch req.Messages[i].Role {
		case "assistant":
			if !inAssistantTurn {
				x.turns++
			}
			inAssistantTurn = true
		case "user":
			inAssistantTurn = false
			for _, b := range msgs[i] {
				if b.Type == "tool_result" {
					x.toolResults = append(x.toolResults, ToolResult{
						ToolUseID: b.ToolUseID,
						Content:   toolResultText(b.Content),
						IsError:   b.IsError,
					})
				}
			}
		}
	}
	x.cwd = findCwd(append(sysTexts, otherTexts...))
	return x, nil
}

// toolResultText flattens tool_result content (a string or an array of
// blocks) to text; non-text blocks become "[type]".
func toolResultText(raw json.RawMessage) string {
	blocks, err := anthropicBlocks(raw)
	if err != nil {
		return string(raw)
	}
	parts := make([]string, 0, len(blocks))
	for _, b := range blocks {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		} else {
			parts = append(parts, "["+b.Type+"]")
		}
	}
	return strings.Join(parts, "\n")
}

// anthropicErrorType is the error.type Anthropic sends with status.
func anthropicErrorType(status int) string {
	switch status {
	case 400:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 500:
		return "api_error"
	case 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

func (anthropicWire) writeError(w http.ResponseWriter, status int, msg string) {
	writeAnthropicError(w, status, msg)
}

func writeAnthropicError(w http.ResponseWriter, status int, msg string) {
	if status == http.StatusTooManyRequests || status >= 500 {
		w.Header().Set("retry-after", "0")
	}
	w.Header().Set("request-id", newID("req_"))
	writeJSON(w, status, map[string]any{
		"type":  "error",
		"error": map[string]any{"type": anthropicErrorType(status), "message": msg},
	})
}

func (anthropicWire) writeAnswer(ctx context.Context, w http.ResponseWriter, x *exchange, a *answer) {
	model := x.model
	if model == "" {
		model = "fakemodel"
	}
	id := newID("msg_")
	stop := a.stopReason
	if stop == "" {
		stop = "end_turn"
		if len(a.calls) > 0 {
			stop = "tool_use"
		}
	}
	signature := newID("fakemodel-sig-")
	toolIDs := make([]string, len(a.calls))
	for i := range a.calls {
		toolIDs[i] = newID("toolu_")
	}
	w.Header().Set("request-id", newID("req_"))

	if !x.stream {
		var content []any
		if a.thinking != "" {
			content = append(content, map[string]any{"type": "thinking", "thinking": a.thinking, "signature": signature})
		}
		if a.text != "" {
			content = append(content, map[string]any{"type": "text", "text": a.text})
		}
		for i, c := range a.calls {
			content = append(content, map[string]any{"type": "tool_use", "id": toolIDs[i], "name": c.name, "input": c.input})
		}
		if content == nil {
			content = []any{}
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"id": id, "type": "message", "role": "assistant", "model": model,
			"content": content, "stop_reason": stop, "stop_sequence": nil,
			"usage": map[string]any{
				"input_tokens":                a.usage.Input,
				"output_tokens":               a.usage.Output,
				"cache_creation_input_tokens": a.usage.CacheWrite,
				"cache_read_input_tokens":     a.usage.CacheRead,
			},
		})
		return
	}

	startOutput := min(a.usage.Output, 1)
	events := []sseEvent{{"message_start", map[string]any{
		"type": "message_start",
		"message": map[string]any{
			"id": id, "type": "message", "role": "assistant", "model": model,
			"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
			"usage": map[string]any{
				"input_tokens":                a.usage.Input,
				"output_tokens":               startOutput,
				"cache_creation_input_tokens": a.usage.CacheWrite,
				"cache_read_input_tokens":     a.usage.CacheRead,
			},
		},
	}}}
	index := 0
	block := func(start map[string]any, deltas []map[string]any) {
		events = append(events, sseEvent{"content_block_start", map[string]any{
			"type": "content_block_start", "index": index, "content_block": start,
		}})
		for _, d := range deltas {
			events = append(events, sseEvent{"content_block_delta", map[string]any{
				"type": "content_block_delta", "index": index, "delta": d,
			}})
		}
		events = append(events, sseEvent{"content_block_stop", map[string]any{
			"type": "content_block_stop", "index": index,
		}})
		index++
	}
	if a.thinking != "" {
		var deltas []map[string]any
		for _, chunk := range splitWords(a.thinking, 3) {
			deltas = append(deltas, map[string]any{"type": "thinking_delta", "thinking": chunk})
		}
		deltas = append(deltas, map[string]any{"type": "signature_delta", "signature": signature})
		block(map[string]any{"type": "thinking", "thinking": "", "signature": ""}, deltas)
	}
	if a.text != "" {
		var deltas []map[string]any
		for _, chunk := range splitWords(a.text, 3) {
			deltas = append(deltas, map[string]any{"type": "text_delta", "text": chunk})
		}
		block(map[string]any{"type": "text", "text": ""}, deltas)
	}
	for i, c := range a.calls {
		var deltas []map[string]any
		for _, chunk := range splitRunes(string(c.input), 2) {
			deltas = append(deltas, map[string]any{"type": "input_json_delta", "partial_json": chunk})
		}
		block(map[string]any{"type": "tool_use", "id": toolIDs[i], "name": c.name, "input": map[string]any{}}, deltas)
	}
	events = append(events,
		sseEvent{"message_delta", map[string]any{
			"type":  "message_delta",
			"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
			"usage": map[string]any{"output_tokens": a.usage.Output},
		}},
		sseEvent{"message_stop", map[string]any{"type": "message_stop"}},
	)

	cutAfter := -1
	if a.cut {
		// Send everything up to and including the first content delta.
		for i, ev := range events {
			if ev.event == "content_block_delta" {
				cutAfter = i + 1
				break
			}
		}
		if cutAfter < 0 {
			cutAfter = 1
		}
	}
	writeSSE(ctx, w, events, a.chunkDelay, cutAfter)
}

// anthropicCountTokens answers POST /v1/messages/count_tokens with a rough
// count: a quarter of the body's length, at least 1.
func anthropicCountTokens(_ *Server, w http.ResponseWriter, _ *http.Request, body []byte, _ *Request) {
	if !json.Valid(body) {
		writeAnthropicError(w, http.StatusBadRequest, "malformed request body")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"input_tokens": max(1, len(body)/4)})
}
