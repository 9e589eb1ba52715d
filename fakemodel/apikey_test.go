package fakemodel

import (
	"bytes"
	"net/http"
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
