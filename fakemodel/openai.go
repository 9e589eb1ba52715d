package fakemodel

// What the two OpenAI wires (Responses, Chat Completions) share: the error
// shape and message content decoding.

import (
	"encoding/json"
	"net/http"
	"strings"
)

// openAIErrorType is the error type and code OpenAI sends with status
// ("" code is sent as null).
func openAIErrorType(status int) (typ, code string) {
	switch {
	case status == 401:
		return "invalid_request_error", "invalid_api_key"
	case status == 403:
		return "permission_error", ""
	case status == 404:
		return "invalid_request_error", "not_found"
	case status == 413:
		return "invalid_request_error", "request_too_large"
	case status == 429:
		return "rate_limit_error", "rate_limit_exceeded"
	case status >= 500:
		return "server_error", "server_error"
	}
	return "invalid_request_error", ""
}

// writeOpenAIError answers an OpenAI-shaped error,
// {"error":{"message","type","code","param"}}. Every error carries
// "retry-after: 0" and "retry-after-ms: 0": clients that retry (Codex,
// OpenCode, the OpenAI SDKs) then do so at once instead of backing off.
func writeOpenAIError(w http.ResponseWriter, status int, msg string) {
	h := w.Header()
	h.Set("retry-after", "0")
	h.Set("retry-after-ms", "0")
	h.Set("x-request-id", newID("req_"))
	typ, code := openAIErrorType(status)
	var c any
	if code != "" {
		c = code
	}
	writeJSON(w, status, map[string]any{
		"error": map[string]any{"message": msg, "type": typ, "code": c, "param": nil},
	})
}

// openAIPart is one part of OpenAI message content.
type openAIPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// openAIParts decodes OpenAI message content or tool output: a string, null,
// or an array of parts.
func openAIParts(raw json.RawMessage) ([]openAIPart, error) {
	raw = json.RawMessage(strings.TrimSpace(string(raw)))
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return []openAIPart{{Type: "text", Text: s}}, nil
	}
	var parts []openAIPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, err
	}
	return parts, nil
}

// isTextPart reports whether a content part carries text.
func isTextPart(p openAIPart) bool {
	switch p.Type {
	case "text", "input_text", "output_text":
		return true
	}
	return false
}

// openAIText flattens tool output to text: text parts joined with "\n",
// other parts shown as "[type]"; anything undecodable verbatim.
func openAIText(raw json.RawMessage) string {
	parts, err := openAIParts(raw)
	if err != nil {
		return string(raw)
	}
	out := make([]string, 0, len(parts))
	for _, p := range parts {
		if isTextPart(p) {
			out = append(out, p.Text)
		} else {
			out = append(out, "["+p.Type+"]")
		}
	}
	return strings.Join(out, "\n")
}

// promptTexts classifies the texts of one user message: context the
// client injected goes to ctx, the rest (without <system-reminder> blocks)
// to user. It reports whether the message had user text.
func promptTexts(texts []string, ctx, user *[]string) bool {
	found := false
	for _, t := range texts {
		if injectedBlock(t) {
			*ctx = append(*ctx, t)
			continue
		}
		if u, ok := userText(t); ok {
			*user = append(*user, u)
			found = true
		}
	}
	return found
}
