package fakemodel

// The Gemini API (generativelanguage v1beta), as Gemini CLI speaks it
// (measured with 0.61.0).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

type geminiWire struct{}

var _ wire = geminiWire{}

func (geminiWire) name() string { return "gemini" }

const geminiPrefix = "/v1beta/models/"

func (geminiWire) endpoints() []endpoint {
	return []endpoint{{method: http.MethodPost, path: geminiPrefix, serve: geminiServe}}
}

// geminiMethod splits a Gemini URL path, /v1beta/models/MODEL:METHOD, into
// the model and the method.
func geminiMethod(p string) (model, method string) {
	rest := strings.TrimPrefix(p, geminiPrefix)
	i := strings.LastIndexByte(rest, ':')
	if i < 0 {
		return rest, ""
	}
	return rest[:i], rest[i+1:]
}

// geminiServe dispatches on the method after the model in the path.
func geminiServe(s *Server, w http.ResponseWriter, r *http.Request, body []byte, rec *Request) {
	_, method := geminiMethod(r.URL.Path)
	switch method {
	case "streamGenerateContent", "generateContent":
		s.serveTurn(w, r, geminiWire{}, body, rec)
	case "countTokens":
		if !json.Valid(body) {
			writeGeminiError(w, http.StatusBadRequest, "malformed request body")
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"totalTokens": max(1, len(body)/4)})
	default:
		writeGeminiError(w, http.StatusNotFound, fmt.Sprintf("fakemodel: no endpoint %s %s (have :streamGenerateContent, :generateContent, :countTokens)", r.Method, r.URL.Path))
	}
}

type geminiShellInput struct {
	Command     string `json:"command"`
	Description string `json:"description"`
}

type geminiWriteInput struct {
	FilePath string `json:"file_path"`
	Content  string `json:"content"`
}

type geminiReadInput struct {
	FilePath string `json:"file_path"`
}

// tools are Gemini CLI's. Its file tools take file_path (0.61.0; older
// versions called read_file's parameter absolute_path).
func (geminiWire) tools() toolTable {
	return toolTable{
		shell: []toolCandidate{{name: "run_shell_command", input: func(a toolArgs) any {
			return geminiShellInput{Command: a.command, Description: describeCommand(a.command)}
		}}},
		write: []toolCandidate{{name: "write_file", input: func(a toolArgs) any {
			return geminiWriteInput{FilePath: a.absPath, Content: a.content}
		}}},
		read: []toolCandidate{{name: "read_file", input: func(a toolArgs) any { return geminiReadInput{FilePath: a.absPath} }}},
	}
}

type geminiRequest struct {
	Contents          []geminiContent `json:"contents"`
	SystemInstruction *geminiContent  `json:"systemInstruction"`
	Tools             []struct {
		FunctionDeclarations []struct {
			Name string `json:"name"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	GenerationConfig struct {
		ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
		ResponseSchema     json.RawMessage `json:"responseSchema"`
	} `json:"generationConfig"`
}

type geminiContent struct {
	Role  string       `json:"role"`
	Parts []geminiPart `json:"parts"`
}

type geminiPart struct {
	Text             *string `json:"text"`
	Thought          bool    `json:"thought"`
	FunctionResponse *struct {
		ID       string          `json:"id"`
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse"`
}

// decode finds the prompt (the last user text of the last user content
// that has one, not counting Gemini CLI's <session_context>), counts the
// model turns after it (a run of model contents is one turn; user contents,
// which carry functionResponse parts, end it) and collects the log fields.
// A generateContent request asking for JSON output with a schema (the
// model router's classifier, next-speaker checks) is auxiliary: it is
// answered with a JSON value that fits the schema.
func (geminiWire) decode(r *http.Request, body []byte) (*exchange, error) {
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil, errors.New("empty request body")
	}
	var req geminiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("malformed request body: %v", err)
	}
	if req.Contents == nil {
		return nil, errors.New("contents: field required")
	}
	model, method := "", "streamGenerateContent"
	if r != nil {
		model, method = geminiMethod(r.URL.Path)
	}
	x := &exchange{model: model, stream: method == "streamGenerateContent"}
	for _, t := range req.Tools {
		for _, f := range t.FunctionDeclarations {
			if f.Name != "" {
				x.toolsOffered = append(x.toolsOffered, f.Name)
			}
		}
	}
	var sysTexts, ctxTexts []string
	if si := req.SystemInstruction; si != nil {
		for _, p := range si.Parts {
			if p.Text != nil {
				sysTexts = append(sysTexts, *p.Text)
			}
		}
	}
	prompt := -1
	for i, c := range req.Contents {
		if c.Role != "user" && c.Role != "" {
			continue
		}
		var texts []string
		for _, p := range c.Parts {
			if p.Text != nil && !p.Thought {
				texts = append(texts, *p.Text)
			}
		}
		if promptTexts(texts, &ctxTexts, &x.userTexts) {
			x.prompt = x.userTexts[len(x.userTexts)-1]
			prompt = i
		}
	}
	var tc turnCounter
	for _, c := range req.Contents[prompt+1:] {
		if c.Role == "model" {
			tc.model()
			continue
		}
		tc.client()
		for _, p := range c.Parts {
			if fr := p.FunctionResponse; fr != nil {
				x.toolResults = append(x.toolResults, geminiToolResult(fr.ID, fr.Name, fr.Response))
			}
		}
	}
	x.turns = tc.turns
	x.cwd = findCwd(append(sysTexts, ctxTexts...))

	schema := req.GenerationConfig.ResponseJSONSchema
	if len(schema) == 0 || string(schema) == "null" {
		schema = req.GenerationConfig.ResponseSchema
	}
	if !x.stream && len(schema) > 0 && string(schema) != "null" {
		var s any
		if err := json.Unmarshal(schema, &s); err != nil {
			return nil, fmt.Errorf("generationConfig.responseJsonSchema: %v", err)
		}
		out, _ := json.Marshal(schemaValue(s, ""))
		x.aux, x.auxText = "json-schema", string(out)
	}
	return x, nil
}

// geminiToolResult reads a functionResponse: Gemini CLI sends
// {"output": …} on success and {"error": …} on failure.
func geminiToolResult(id, name string, raw json.RawMessage) ToolResult {
	if id == "" {
		id = name
	}
	var resp map[string]json.RawMessage
	if json.Unmarshal(raw, &resp) == nil {
		for _, k := range []string{"output", "error"} {
			v, ok := resp[k]
			if !ok {
				continue
			}
			var s string
			if json.Unmarshal(v, &s) != nil {
				s = string(v)
			}
			return ToolResult{ToolUseID: id, Content: s, IsError: k == "error"}
		}
	}
	return ToolResult{ToolUseID: id, Content: string(raw)}
}

// schemaValue makes a value that fits a JSON schema (or a Gemini
// OpenAPI-style schema, whose types are upper case): the first enum value,
// false, an integer within any bounds (10 when unbounded: Gemini CLI's
// router needs a complexity_score of at least 1), "fakemodel", an empty
// array, or an object with every property. A property named next_speaker
// gets "user" (Gemini CLI's next-speaker check then ends the turn).
func schemaValue(s any, prop string) any {
	m, _ := s.(map[string]any)
	if e, ok := m["enum"].([]any); ok && len(e) > 0 {
		if prop == "next_speaker" {
			for _, v := range e {
				if v == "user" {
					return v
				}
			}
		}
		return e[0]
	}
	typ, _ := m["type"].(string)
	if ts, ok := m["type"].([]any); ok && len(ts) > 0 {
		typ, _ = ts[0].(string)
	}
	switch strings.ToLower(typ) {
	case "boolean":
		return false
	case "integer", "number":
		n := 10.0
		if lo, ok := m["minimum"].(float64); ok && n < lo {
			n = lo
		}
		if hi, ok := m["maximum"].(float64); ok && n > hi {
			n = hi
		}
		return n
	case "array":
		return []any{}
	case "string":
		if prop == "next_speaker" {
			return "user"
		}
		return "fakemodel"
	}
	props, _ := m["properties"].(map[string]any)
	obj := map[string]any{}
	for k, v := range props {
		obj[k] = schemaValue(v, k)
	}
	return obj
}

// geminiStatus is the google.rpc status name Google sends with an HTTP
// status.
func geminiStatus(status int) string {
	switch status {
	case 400:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 409:
		return "ABORTED"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 499:
		return "CANCELLED"
	case 500:
		return "INTERNAL"
	case 501:
		return "NOT_IMPLEMENTED"
	case 503:
		return "UNAVAILABLE"
	case 504:
		return "DEADLINE_EXCEEDED"
	}
	if status >= 500 {
		return "INTERNAL"
	}
	return "FAILED_PRECONDITION"
}

func (geminiWire) writeError(w http.ResponseWriter, status int, msg string) {
	writeGeminiError(w, status, msg)
}

// writeGeminiError answers a Google-shaped error,
// {"error":{"code","message","status"}}; 429 and 5xx carry
// "retry-after: 0".
func writeGeminiError(w http.ResponseWriter, status int, msg string) {
	if status == http.StatusTooManyRequests || status >= 500 {
		w.Header().Set("retry-after", "0")
	}
	writeJSON(w, status, map[string]any{
		"error": map[string]any{"code": status, "message": msg, "status": geminiStatus(status)},
	})
}

func (geminiWire) writeAnswer(ctx context.Context, w http.ResponseWriter, x *exchange, a *answer) {
	model := x.model
	if model == "" {
		model = "fakemodel"
	}
	id := newID("")
	finish := a.stopReason
	if finish == "" {
		finish = "STOP"
	}
	usage := map[string]any{
		"promptTokenCount":        a.usage.Input,
		"candidatesTokenCount":    a.usage.Output,
		"cachedContentTokenCount": a.usage.CacheRead,
		"thoughtsTokenCount":      a.usage.Reasoning,
		"totalTokenCount":         a.usage.Input + a.usage.Output + a.usage.Reasoning,
	}
	var calls []any
	for _, c := range a.calls {
		calls = append(calls, map[string]any{"functionCall": map[string]any{"name": c.name, "args": c.input}})
	}
	response := func(parts []any, last bool) map[string]any {
		cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
		r := map[string]any{"candidates": []any{cand}, "modelVersion": model, "responseId": id}
		if last {
			cand["finishReason"] = finish
			r["usageMetadata"] = usage
		}
		return r
	}

	if !x.stream {
		var parts []any
		if a.thinking != "" {
			parts = append(parts, map[string]any{"text": a.thinking, "thought": true})
		}
		if a.text != "" {
			parts = append(parts, map[string]any{"text": a.text})
		}
		parts = append(parts, calls...)
		if parts == nil {
			parts = []any{}
		}
		writeJSON(w, http.StatusOK, response(parts, true))
		return
	}

	var chunks [][]any
	if a.thinking != "" {
		for _, s := range splitWords(a.thinking, 2) {
			chunks = append(chunks, []any{map[string]any{"text": s, "thought": true}})
		}
	}
	if a.text != "" {
		for _, s := range splitWords(a.text, 3) {
			chunks = append(chunks, []any{map[string]any{"text": s}})
		}
	}
	if calls != nil {
		chunks = append(chunks, calls)
	}
	if chunks == nil {
		chunks = [][]any{{}}
	}
	events := make([]sseEvent, len(chunks))
	for i, parts := range chunks {
		events[i] = sseEvent{data: response(parts, i == len(chunks)-1)}
	}
	cutAfter := -1
	if a.cut {
		// The stream ends when the connection closes, so a cut is an abort
		// after the first chunk, with the rest never sent.
		cutAfter = min(1, len(events)-1)
	}
	writeSSE(ctx, w, events, a.chunkDelay, cutAfter)
}
