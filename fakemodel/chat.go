package fakemodel

// The OpenAI Chat Completions API, as OpenCode speaks it through
// @ai-sdk/openai-compatible (measured with 1.18.33).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

type chatWire struct{}

var _ wire = chatWire{}

func (chatWire) name() string { return "openai-chat" }

func (chatWire) endpoints() []endpoint {
	return []endpoint{{method: http.MethodPost, path: "/v1/chat/completions"}}
}

type openCodeBashInput struct {
	Command     string `json:"command"`
	Description string `json:"description"`
}

type openCodeWriteInput struct {
	FilePath string `json:"filePath"`
	Content  string `json:"content"`
}

// openCodeEditInput with an empty oldString makes OpenCode's edit tool
// write the whole file.
type openCodeEditInput struct {
	FilePath  string `json:"filePath"`
	OldString string `json:"oldString"`
	NewString string `json:"newString"`
}

type openCodeReadInput struct {
	FilePath string `json:"filePath"`
}

// tools are OpenCode's (its file tools want absolute paths).
func (chatWire) tools() toolTable {
	return toolTable{
		shell: []toolCandidate{{name: "bash", input: func(a toolArgs) any {
			return openCodeBashInput{Command: a.command, Description: describeCommand(a.command)}
		}}},
		write: []toolCandidate{
			{name: "write", input: func(a toolArgs) any { return openCodeWriteInput{FilePath: a.absPath, Content: a.content} }},
			{name: "edit", input: func(a toolArgs) any { return openCodeEditInput{FilePath: a.absPath, NewString: a.content} }},
		},
		read: []toolCandidate{{name: "read", input: func(a toolArgs) any { return openCodeReadInput{FilePath: a.absPath} }}},
	}
}

type chatRequest struct {
	Model    string        `json:"model"`
	Stream   bool          `json:"stream"`
	Messages []chatMessage `json:"messages"`
	Tools    []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
}

// titleRequest markers: OpenCode's title request has no tools, a system
// prompt "You are a title generator. …" and a user message "Generate a
// title for this conversation:" before the user's prompt.
const (
	titleSystemMarker = "title generator"
	titleUserPrefix   = "Generate a title for this conversation"
)

// decode finds the prompt (the last user text of the last user message
// that has one), counts the assistant turns after it (a run of assistant
// messages is one turn; tool and user messages end it; system messages are
// neutral) and collects the log fields. A request offering no tools whose
// system prompt calls the model a title generator, or that asks to
// "Generate a title for this conversation", is OpenCode's title request:
// auxiliary, answered with a title made from the prompt.
func (chatWire) decode(_ *http.Request, body []byte) (*exchange, error) {
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil, errors.New("empty request body")
	}
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("malformed request body: %v", err)
	}
	if req.Messages == nil {
		return nil, errors.New("messages: field required")
	}
	x := &exchange{model: req.Model, stream: req.Stream}
	for _, t := range req.Tools {
		if t.Function.Name != "" {
			x.toolsOffered = append(x.toolsOffered, t.Function.Name)
		}
	}
	var sysTexts, ctxTexts []string
	title := false
	prompt := -1
	for i, m := range req.Messages {
		parts, err := openAIParts(m.Content)
		if err != nil {
			return nil, fmt.Errorf("messages.%d.content: %v", i, err)
		}
		var texts []string
		for _, p := range parts {
			if isTextPart(p) {
				texts = append(texts, p.Text)
			}
		}
		switch m.Role {
		case "system", "developer":
			sysTexts = append(sysTexts, texts...)
			for _, t := range texts {
				if strings.Contains(t, titleSystemMarker) {
					title = true
				}
			}
		case "user":
			var own []string
			for _, t := range texts {
				if strings.HasPrefix(strings.TrimSpace(t), titleUserPrefix) {
					title = true
					continue
				}
				own = append(own, t)
			}
			if promptTexts(own, &ctxTexts, &x.userTexts) {
				x.prompt = x.userTexts[len(x.userTexts)-1]
				prompt = i
			}
		}
	}
	if title && len(x.toolsOffered) == 0 {
		x.aux, x.auxText = "title", titleOf(x.prompt)
	}

	var tc turnCounter
	for _, m := range req.Messages[prompt+1:] {
		switch m.Role {
		case "assistant":
			tc.model()
		case "tool":
			tc.client()
			x.toolResults = append(x.toolResults, ToolResult{ToolUseID: m.ToolCallID, Content: openAIText(m.Content)})
		case "user":
			tc.client()
		}
	}
	x.turns = tc.turns
	x.cwd = findCwd(append(sysTexts, ctxTexts...))
	return x, nil
}

func (chatWire) writeError(w http.ResponseWriter, status int, msg string) {
	writeOpenAIError(w, status, msg)
}

func (chatWire) writeAnswer(ctx context.Context, w http.ResponseWriter, x *exchange, a *answer) {
	model := x.model
	if model == "" {
		model = "fakemodel"
	}
	id := newID("chatcmpl-")
	created := time.Now().Unix()
	finish := a.stopReason
	if finish == "" {
		finish = "stop"
		if len(a.calls) > 0 {
			finish = "tool_calls"
		}
	}
	usage := map[string]any{
		"prompt_tokens":             a.usage.Input,
		"completion_tokens":         a.usage.Output,
		"total_tokens":              a.usage.Input + a.usage.Output,
		"prompt_tokens_details":     map[string]any{"cached_tokens": a.usage.CacheRead},
		"completion_tokens_details": map[string]any{"reasoning_tokens": a.usage.Reasoning},
	}
	callIDs := make([]string, len(a.calls))
	for i := range a.calls {
		callIDs[i] = newID("call_")
	}
	w.Header().Set("x-request-id", newID("req_"))

	if !x.stream {
		msg := map[string]any{"role": "assistant", "content": nil}
		if a.text != "" {
			msg["content"] = a.text
		}
		if a.thinking != "" {
			msg["reasoning_content"] = a.thinking
		}
		if len(a.calls) > 0 {
			var calls []any
			for i, c := range a.calls {
				calls = append(calls, map[string]any{
					"id": callIDs[i], "type": "function",
					"function": map[string]any{"name": c.name, "arguments": string(c.input)},
				})
			}
			msg["tool_calls"] = calls
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"id": id, "object": "chat.completion", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
			"usage":   usage,
		})
		return
	}

	var events []sseEvent
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
		}
	}
	add := func(delta map[string]any) { events = append(events, sseEvent{data: chunk(delta, nil)}) }
	add(map[string]any{"role": "assistant", "content": ""})
	if a.thinking != "" {
		for _, s := range splitWords(a.thinking, 3) {
			add(map[string]any{"reasoning_content": s})
		}
	}
	if a.text != "" {
		for _, s := range splitWords(a.text, 3) {
			add(map[string]any{"content": s})
		}
	}
	for i, c := range a.calls {
		add(map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": callIDs[i], "type": "function",
			"function": map[string]any{"name": c.name, "arguments": ""},
		}}})
		for _, s := range splitRunes(string(c.input), 2) {
			add(map[string]any{"tool_calls": []any{map[string]any{
				"index": i, "function": map[string]any{"arguments": s},
			}}})
		}
	}
	// Usage rides on the finishing chunk, where clients that asked for it
	// (stream_options.include_usage) and clients that did not both cope.
	last := chunk(map[string]any{}, finish)
	last["usage"] = usage
	events = append(events, sseEvent{data: last}, sseEvent{data: "[DONE]"})

	cutAfter := -1
	if a.cut {
		cutAfter = min(2, len(events)-2) // the role chunk and the first delta
	}
	writeSSE(ctx, w, events, a.chunkDelay, cutAfter)
}
