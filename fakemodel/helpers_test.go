package fakemodel

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// mustParse parses a script or fails the test.
func mustParse(t *testing.T, js string) *Script {
	t.Helper()
	s, err := ParseScript([]byte(js))
	if err != nil {
		t.Fatalf("ParseScript: %v", err)
	}
	return s
}

// start starts a server on a free loopback port, closed at the end of the
// test, and returns it with an HTTP client whose idle connections are
// closed at the end too (goleak would see them otherwise).
func start(t *testing.T, script *Script) (*Server, *http.Client) {
	t.Helper()
	s := New(script)
	if _, err := s.Start(""); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, newClient(t)
}

func newClient(t *testing.T) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 200}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// msg builds an Anthropic message; content is a string or a slice of
// blocks.
func msg(role string, content any) map[string]any {
	return map[string]any{"role": role, "content": content}
}

func text(s string) map[string]any { return map[string]any{"type": "text", "text": s} }

func toolUseBlock(id, name string, input any) map[string]any {
	return map[string]any{"type": "tool_use", "id": id, "name": name, "input": input}
}

func toolResultBlock(id string, content any, isError bool) map[string]any {
	return map[string]any{"type": "tool_result", "tool_use_id": id, "content": content, "is_error": isError}
}

const reminder = "<system-reminder>\nToday's date is 2026-11-22.\n</system-reminder>\n\n"

// body builds a /v1/messages request body the way Claude Code does.
func body(stream bool, tools []string, system string, msgs ...map[string]any) []byte {
	var ts []map[string]any
	for _, n := range tools {
		ts = append(ts, map[string]any{"name": n, "description": "d", "input_schema": map[string]any{"type": "object"}})
	}
	b := map[string]any{
		"model":      "claude-test-1",
		"max_tokens": 64000,
		"messages":   msgs,
		"tools":      ts,
		"system":     []any{map[string]any{"type": "text", "text": system}},
	}
	if stream {
		b["stream"] = true
	}
	out, err := json.Marshal(b)
	if err != nil {
		panic(err)
	}
	return out
}

// promptBody is a first request for prompt offering Claude Code's usual
// tools.
func promptBody(stream bool, prompt string) []byte {
	return body(stream, []string{"Bash", "Edit", "Read", "Write"}, "You are Claude.",
		msg("user", []any{text(reminder), text(prompt)}))
}

func post(ctx context.Context, t *testing.T, c *http.Client, url string, b []byte) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/messages?beta=true", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	return resp
}

// message is an Anthropic message, as answered in JSON or reassembled from
// a stream.
type message struct {
	ID         string  `json:"id"`
	Type       string  `json:"type"`
	Role       string  `json:"role"`
	Model      string  `json:"model"`
	Content    []block `json:"content"`
	StopReason string  `json:"stop_reason"`
	Usage      struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
		CacheRead    int `json:"cache_read_input_tokens"`
		CacheWrite   int `json:"cache_creation_input_tokens"`
	} `json:"usage"`
	// Stream only:
	Events  []string `json:"-"` // event names in order
	Stopped bool     `json:"-"` // message_stop seen
}

type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	Signature string          `json:"signature,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	// Stream only: the deltas received.
	Deltas int `json:"-"`
}

// readSSE reassembles an Anthropic SSE stream into a message. It returns
// what it got so far with the read error when the stream breaks.
func readSSE(r io.Reader) (*message, error) {
	m := &message{}
	br := bufio.NewReader(r)
	var event, data string
	partial := map[int]*strings.Builder{}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if err == io.EOF && line == "" && event == "" {
				return m, nil
			}
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return m, err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
			continue
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
			continue
		case line != "":
			return m, fmt.Errorf("unexpected SSE line %q", line)
		}
		if err := m.apply(event, data, partial); err != nil {
			return m, err
		}
		event, data = "", ""
	}
}

func (m *message) apply(event, data string, partial map[int]*strings.Builder) error {
	m.Events = append(m.Events, event)
	var ev struct {
		Type         string          `json:"type"`
		Index        int             `json:"index"`
		Message      json.RawMessage `json:"message"`
		ContentBlock block           `json:"content_block"`
		Delta        struct {
			Type        string `json:"type"`
			Text        string `json:"text"`
			Thinking    string `json:"thinking"`
			Signature   string `json:"signature"`
			PartialJSON string `json:"partial_json"`
			StopReason  string `json:"stop_reason"`
		} `json:"delta"`
		Usage struct {
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(data), &ev); err != nil {
		return fmt.Errorf("event %s: %v", event, err)
	}
	if ev.Type != event {
		return fmt.Errorf("event %q carries type %q", event, ev.Type)
	}
	switch event {
	case "message_start":
		return json.Unmarshal(ev.Message, m)
	case "content_block_start":
		if ev.Index != len(m.Content) {
			return fmt.Errorf("block index %d, want %d", ev.Index, len(m.Content))
		}
		b := ev.ContentBlock
		if b.Type == "tool_use" {
			b.Input = nil
			partial[ev.Index] = &strings.Builder{}
		}
		m.Content = append(m.Content, b)
	case "content_block_delta":
		if ev.Index >= len(m.Content) {
			return fmt.Errorf("delta for unknown block %d", ev.Index)
		}
		b := &m.Content[ev.Index]
		b.Deltas++
		switch ev.Delta.Type {
		case "text_delta":
			b.Text += ev.Delta.Text
		case "thinking_delta":
			b.Thinking += ev.Delta.Thinking
		case "signature_delta":
			b.Signature += ev.Delta.Signature
		case "input_json_delta":
			partial[ev.Index].WriteString(ev.Delta.PartialJSON)
		default:
			return fmt.Errorf("unknown delta type %q", ev.Delta.Type)
		}
	case "content_block_stop":
		if p, ok := partial[ev.Index]; ok {
			m.Content[ev.Index].Input = json.RawMessage(p.String())
		}
	case "message_delta":
		m.StopReason = ev.Delta.StopReason
		m.Usage.OutputTokens = ev.Usage.OutputTokens
	case "message_stop":
		m.Stopped = true
	default:
		return fmt.Errorf("unknown event %q", event)
	}
	return nil
}

// turn posts b and returns the decoded answer (streamed or not).
func turn(t *testing.T, c *http.Client, url string, b []byte) *message {
	t.Helper()
	var req struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal(b, &req)
	resp := post(context.Background(), t, c, url, b)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, raw)
	}
	if !req.Stream {
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q", ct)
		}
		var m message
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatalf("decode: %v", err)
		}
		return &m
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	m, err := readSSE(resp.Body)
	if err != nil {
		t.Fatalf("read SSE: %v", err)
	}
	if !m.Stopped {
		t.Fatalf("stream ended without message_stop; events %v", m.Events)
	}
	return m
}

// jsonDiff compares a JSON document with want (marshalled) as values and
// returns a cmp diff, "" when equal.
func jsonDiff(t *testing.T, want any, got json.RawMessage) string {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("unmarshal %s: %v", got, err)
	}
	wb, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(wb, &w); err != nil {
		t.Fatal(err)
	}
	return cmp.Diff(w, g)
}
