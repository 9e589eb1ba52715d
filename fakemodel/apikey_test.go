package fakemodel

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// FAIL-1: a rule with apiKey answers only requests carrying that key, in
// each vendor API's way of sending one; others fall through to later rules.
func TestRuleAPIKey(t *testing.T) {
	s, c := start(t, mustParse(t, `{"rules":[
		{"name":"limited","apiKey":"key-a","match":"","steps":[{"error":{"status":429,"message":"slow down"}}]},
		{"name":"ok","match":"","steps":[{"text":"fine"}]}]}`))
	tests := []struct {
		name   string
		header string
		value  string
		query  string
		status int
	}{
		{"x-api-key A", "x-api-key", "key-a", "", 429},
		{"x-api-key B", "x-api-key", "key-b", "", 200},
		{"bearer A", "Authorization", "Bearer key-a", "", 429},
		{"bearer B", "Authorization", "Bearer key-b", "", 200},
		{"goog A", "x-goog-api-key", "key-a", "", 429},
		{"query A", "", "", "&key=key-a", 429},
		{"no key", "", "", "", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, s.URL()+"/v1/messages?beta=true"+tt.query, bytes.NewReader(promptBody(false, "hi")))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			if tt.header != "" {
				req.Header.Set(tt.header, tt.value)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tt.status)
			}
		})
	}
}

// A rule with history answers only when an earlier user text of the
// conversation matches it, not the prompt itself.
func TestRuleHistory(t *testing.T) {
	s, c := start(t, mustParse(t, `{"rules":[
		{"name":"after","history":"continued from","match":"hello","steps":[{"text":"second time"}]},
		{"name":"first","match":"","steps":[{"text":"first time"}]}]}`))
	answer := func(msgs ...map[string]any) string {
		t.Helper()
		m := turn(t, c, s.URL(), body(false, nil, "", msgs...))
		var out strings.Builder
		for _, b := range m.Content {
			out.WriteString(b.Text)
		}
		return out.String()
	}
	if got := answer(msg("user", "hello")); got != "first time" {
		t.Errorf("no history: %q", got)
	}
	if got := answer(msg("user", "continued from hello")); got != "first time" {
		t.Errorf("the prompt is not history: %q", got)
	}
	if got := answer(msg("user", "This session is being continued from a previous conversation"), msg("assistant", []any{text("ok")}), msg("user", "hello")); got != "second time" {
		t.Errorf("with history: %q", got)
	}
}

// A rule with model answers only requests for that model.
func TestRuleModel(t *testing.T) {
	s, c := start(t, mustParse(t, `{"rules":[
		{"name":"busy","model":"claude-test-1","match":"","steps":[{"error":{"status":529}}]},
		{"name":"ok","match":"","steps":[{"text":"fine"}]}]}`))
	for model, want := range map[string]int{"claude-test-1": 529, "claude-test-2": 200} {
		var b map[string]any
		if err := json.Unmarshal(promptBody(false, "hi"), &b); err != nil {
			t.Fatal(err)
		}
		b["model"] = model
		raw, _ := json.Marshal(b)
		resp := post(context.Background(), t, c, s.URL(), raw)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: status %d, want %d", model, resp.StatusCode, want)
		}
	}
}
