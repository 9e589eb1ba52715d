package fakemodel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const richScript = `{"rules":[
	{"name":"rich","match":"^rich (\\S+)","steps":[
		{"thinking":"I should write $1 and look around.","text":"Writing $1 now, then listing the directory.",
		 "tools":[{"write":"$1","content":"hi\n"},{"shell":"ls -la"},{"name":"mcp__echo__echo","input":{"text":"ping"}}],
		 "usage":{"input":100,"output":20,"cacheRead":7,"cacheWrite":3}},
		{"text":"All done.","stopReason":"max_tokens"}
	]}
]}`

// TestStreamAndJSON checks that a streamed answer reassembles into the same
// message a non-streaming request gets, block by block.
func TestStreamAndJSON(t *testing.T) {
	s, c := start(t, mustParse(t, richScript))
	system := "# Environment\n - Primary working directory: /work/ws\n"
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			b := body(stream, []string{"Bash", "Write", "Read"}, system, msg("user", []any{text(reminder), text("rich out.txt")}))
			m := turn(t, c, s.URL(), b)
			if m.Type != "message" || m.Role != "assistant" || m.Model != "claude-test-1" || !strings.HasPrefix(m.ID, "msg_") {
				t.Errorf("envelope: %+v", m)
			}
			if m.StopReason != "tool_use" {
				t.Errorf("stop_reason %q", m.StopReason)
			}
			if m.Usage.InputTokens != 100 || m.Usage.OutputTokens != 20 || m.Usage.CacheRead != 7 || m.Usage.CacheWrite != 3 {
				t.Errorf("usage %+v", m.Usage)
			}
			var types []string
			for _, b := range m.Content {
				types = append(types, b.Type)
			}
			if diff := cmp.Diff([]string{"thinking", "text", "tool_use", "tool_use", "tool_use"}, types); diff != "" {
				t.Fatalf("blocks (-want +got):\n%s", diff)
			}
			th, tx := m.Content[0], m.Content[1]
			if th.Thinking != "I should write out.txt and look around." || !strings.HasPrefix(th.Signature, "fakemodel-sig-") {
				t.Errorf("thinking block %+v", th)
			}
			if tx.Text != "Writing out.txt now, then listing the directory." {
				t.Errorf("text %q", tx.Text)
			}
			if stream && tx.Deltas < 2 {
				t.Errorf("text came in %d deltas, want several", tx.Deltas)
			}
			wantInputs := []struct {
				name  string
				input any
			}{
				{"Write", map[string]any{"file_path": "/work/ws/out.txt", "content": "hi\n"}},
				{"Bash", map[string]any{"command": "ls -la", "description": "Run ls -la"}},
				{"mcp__echo__echo", map[string]any{"text": "ping"}},
			}
			ids := map[string]bool{}
			for i, w := range wantInputs {
				b := m.Content[2+i]
				if b.Name != w.name || !strings.HasPrefix(b.ID, "toolu_") || ids[b.ID] {
					t.Errorf("tool block %d: name %q id %q", i, b.Name, b.ID)
				}
				ids[b.ID] = true
				if diff := jsonDiff(t, w.input, b.Input); diff != "" {
					t.Errorf("tool %s input (-want +got):\n%s", w.name, diff)
				}
			}
			if stream {
				if m.Events[0] != "message_start" || m.Events[len(m.Events)-2] != "message_delta" {
					t.Errorf("events %v", m.Events)
				}
			}
		})
	}
	reqs := s.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests logged", len(reqs))
	}
	r := reqs[0]
	if r.API != "anthropic" || r.Path != "/v1/messages?beta=true" || r.Method != "POST" || !r.Stream || r.Rule != "rich" ||
		r.Step != 0 || r.Status != 200 || r.Prompt != "rich out.txt" || r.Model != "claude-test-1" {
		t.Errorf("log entry %+v", r)
	}
	if diff := cmp.Diff([]string{"write:Write", "shell:Bash", "name:mcp__echo__echo:not-offered"}, r.Resolution); diff != "" {
		t.Errorf("resolution (-want +got):\n%s", diff)
	}
	if !json.Valid(r.Body) || reqs[1].Stream {
		t.Errorf("body %s, second stream %v", r.Body, reqs[1].Stream)
	}
}

// TestConversation plays a whole turn by hand, the way Claude Code sends
// it, and checks the step follows the conversation.
func TestConversation(t *testing.T) {
	s, c := start(t, mustParse(t, richScript))
	prompt := msg("user", []any{text(reminder), text("rich a.txt")})
	m := turn(t, c, s.URL(), body(true, nil, "", prompt))
	var results []any
	for _, b := range m.Content[2:] {
		results = append(results, toolResultBlock(b.ID, "ok "+b.Name, false))
	}
	m2 := turn(t, c, s.URL(), body(true, nil, "", prompt, msg("assistant", m.Content), msg("user", results)))
	if len(m2.Content) != 1 || m2.Content[0].Text != "All done." || m2.StopReason != "max_tokens" {
		t.Errorf("step 1 answer %+v", m2)
	}
	if m2.Usage.InputTokens != 10 || m2.Usage.OutputTokens != 5 {
		t.Errorf("default usage %+v", m2.Usage)
	}
	r := s.Requests()[1]
	if r.Step != 1 || len(r.ToolResults) != 3 || r.ToolResults[1].Content != "ok Bash" || r.ToolResults[1].ToolUseID != m.Content[3].ID {
		t.Errorf("log entry step %d results %+v", r.Step, r.ToolResults)
	}
}

func TestHTTPErrors(t *testing.T) {
	tests := []struct {
		status     int
		typ        string
		retryAfter bool
	}{
		{400, "invalid_request_error", false},
		{401, "authentication_error", false},
		{403, "permission_error", false},
		{404, "not_found_error", false},
		{413, "request_too_large", false},
		{422, "invalid_request_error", false},
		{429, "rate_limit_error", true},
		{500, "api_error", true},
		{503, "api_error", true},
		{529, "overloaded_error", true},
	}
	var rules []string
	for _, tt := range tests {
		rules = append(rules, fmt.Sprintf(`{"match":"^e%d$","steps":[{"error":{"status":%d,"message":"fake %d"}}]}`, tt.status, tt.status, tt.status))
	}
	rules = append(rules, `{"match":"^default$","steps":[{"error":{"status":500}}]}`)
	s, c := start(t, mustParse(t, `{"rules":[`+strings.Join(rules, ",")+`]}`))
	check := func(t *testing.T, prompt string, status int, typ, message string, retryAfter bool) {
		t.Helper()
		for _, stream := range []bool{true, false} {
			resp := post(context.Background(), t, c, s.URL(), promptBody(stream, prompt))
			var e struct {
				Type  string `json:"type"`
				Error struct {
					Type    string `json:"type"`
					Message string `json:"message"`
				} `json:"error"`
			}
			err := json.NewDecoder(resp.Body).Decode(&e)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != status || e.Type != "error" || e.Error.Type != typ || e.Error.Message != message {
				t.Errorf("stream=%v: %d %+v, want %d %s %q", stream, resp.StatusCode, e, status, typ, message)
			}
			if got := resp.Header.Get("retry-after"); (got == "0") != retryAfter || (!retryAfter && got != "") {
				t.Errorf("stream=%v: retry-after %q", stream, got)
			}
		}
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			check(t, fmt.Sprintf("e%d", tt.status), tt.status, tt.typ, fmt.Sprintf("fake %d", tt.status), tt.retryAfter)
		})
	}
	t.Run("default message", func(t *testing.T) {
		check(t, "default", 500, "api_error", "fakemodel: scripted error 500", true)
	})
	for _, r := range s.Requests() {
		if r.Status < 400 {
			t.Errorf("logged status %d for %q", r.Status, r.Prompt)
		}
	}
}

func TestCut(t *testing.T) {
	s, c := start(t, mustParse(t, `{"rules":[{"match":"","steps":[{"text":"a partial answer that breaks","cut":true}]}]}`))
	resp := post(context.Background(), t, c, s.URL(), promptBody(true, "cut please"))
	m, err := readSSE(resp.Body)
	resp.Body.Close()
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("read error %v, want unexpected EOF", err)
	}
	if m.Stopped || len(m.Content) != 1 || m.Content[0].Text == "" || m.Content[0].Text == "a partial answer that breaks" {
		t.Errorf("cut stream gave %+v (events %v)", m.Content, m.Events)
	}
	if diff := cmp.Diff([]string{"message_start", "content_block_start", "content_block_delta"}, m.Events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// Claude Code's fallback: the same request without stream.
	full := turn(t, c, s.URL(), promptBody(false, "cut please"))
	if len(full.Content) != 1 || full.Content[0].Text != "a partial answer that breaks" || full.StopReason != "end_turn" {
		t.Errorf("fallback answer %+v", full)
	}
}

func TestDelayClientCancel(t *testing.T) {
	s, c := start(t, mustParse(t, `{"rules":[{"match":"","steps":[{"text":"late","delayMs":10000}]}]}`))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/v1/messages", bytes.NewReader(promptBody(true, "x")))
	t0 := time.Now()
	resp, err := c.Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatal("request succeeded, want the client's cancellation")
	}
	// The handler notices the client is gone and logs the request unanswered.
	for len(s.Requests()) == 0 {
		if time.Since(t0) > 3*time.Second {
			t.Fatal("the delayed request was not aborted")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if r := s.Requests()[0]; r.Status != 0 {
		t.Errorf("status %d, want 0 (no answer)", r.Status)
	}
}

func TestDelayAndStreamAbortedByClose(t *testing.T) {
	for _, mode := range []string{"Start", "Handler"} {
		t.Run(mode, func(t *testing.T) {
			script := mustParse(t, `{"rules":[
				{"match":"^sleep","steps":[{"text":"late","delayMs":10000}]},
				{"match":"^slow","steps":[{"text":"one two three four five six","chunkDelayMs":10000}]}]}`)
			s := New(script)
			url := ""
			switch mode {
			case "Start":
				var err error
				if url, err = s.Start("127.0.0.1:0"); err != nil {
					t.Fatal(err)
				}
			case "Handler":
				ts := httptest.NewServer(s.Handler())
				defer ts.Close()
				url = ts.URL
			}
			c := newClient(t)
			var wg sync.WaitGroup
			errs := make(chan error, 2)
			for _, p := range []string{"sleep", "slow"} {
				wg.Go(func() {
					req, _ := http.NewRequest(http.MethodPost, url+"/v1/messages", bytes.NewReader(promptBody(true, p)))
					resp, err := c.Do(req)
					if err != nil {
						errs <- nil // aborted before the answer: fine
						return
					}
					defer resp.Body.Close()
					m, err := readSSE(resp.Body)
					if err == nil || m.Stopped {
						errs <- fmt.Errorf("%s: stream completed (%v), want it aborted", p, m.Events)
						return
					}
					errs <- nil
				})
			}
			time.Sleep(200 * time.Millisecond) // let both requests reach their wait
			t0 := time.Now()
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			wg.Wait()
			if d := time.Since(t0); d > 3*time.Second {
				t.Errorf("Close and the requests took %v", d)
			}
			close(errs)
			for err := range errs {
				if err != nil {
					t.Error(err)
				}
			}
			if err := s.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			// After Close, Handler refuses requests.
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			if rec.Code != http.StatusServiceUnavailable {
				t.Errorf("after Close: status %d", rec.Code)
			}
		})
	}
}

func TestChunkDelay(t *testing.T) {
	s, c := start(t, mustParse(t, `{"rules":[{"match":"","steps":[{"text":"one two three four five six","chunkDelayMs":15}]}]}`))
	t0 := time.Now()
	m := turn(t, c, s.URL(), promptBody(true, "x"))
	if d, min := time.Since(t0), time.Duration(len(m.Events)-1)*15*time.Millisecond; d < min {
		t.Errorf("stream of %d events took %v, want at least %v", len(m.Events), d, min)
	}
}

func TestRequestLogAndLogWriter(t *testing.T) {
	s, c := start(t, nil)
	var buf syncBuffer
	s.SetLog(&buf)
	b := body(false, []string{"Bash"}, "sys",
		msg("user", []any{text(reminder), text("first prompt")}),
		msg("assistant", []any{text("first answer")}),
		msg("user", []any{text(reminder), text("run echo hi")}),
		msg("assistant", []any{toolUseBlock("toolu_x", "Bash", map[string]any{"command": "echo hi"})}),
		msg("user", []any{toolResultBlock("toolu_x", []any{text("hi")}, false), text(reminder)}),
	)
	m := turn(t, c, s.URL(), b)
	if m.Content[0].Text != "Done: I ran `echo hi`." {
		t.Errorf("answer %+v", m.Content)
	}
	r := s.Requests()[0]
	if diff := cmp.Diff([]string{"first prompt", "run echo hi"}, r.UserTexts); diff != "" {
		t.Errorf("UserTexts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]ToolResult{{ToolUseID: "toolu_x", Content: "hi"}}, r.ToolResults); diff != "" {
		t.Errorf("ToolResults (-want +got):\n%s", diff)
	}
	if r.Rule != "run" || r.Step != 1 || r.Prompt != "run echo hi" {
		t.Errorf("rule %q step %d prompt %q", r.Rule, r.Step, r.Prompt)
	}

	// The log writer got the same entry as a JSON line.
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("%d log lines", len(lines))
	}
	var fromLine Request
	if err := json.Unmarshal([]byte(lines[0]), &fromLine); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r, fromLine, cmp.Comparer(func(a, b json.RawMessage) bool { return jsonDiff(t, a, b) == "" })); diff != "" {
		t.Errorf("log line (-Requests +line):\n%s", diff)
	}

	// GET /_fakemodel/requests serves the same, and is not logged itself.
	resp, err := c.Get(s.URL() + "/_fakemodel/requests")
	if err != nil {
		t.Fatal(err)
	}
	var served []Request
	err = json.NewDecoder(resp.Body).Decode(&served)
	resp.Body.Close()
	if err != nil || len(served) != 1 || served[0].Prompt != "run echo hi" {
		t.Errorf("GET /_fakemodel/requests: %v %+v", err, served)
	}
	if n := len(s.Requests()); n != 1 {
		t.Errorf("%d requests logged, want the control request unlogged", n)
	}
	// Requests returns a copy.
	s.Requests()[0].UserTexts[0] = "changed"
	if s.Requests()[0].UserTexts[0] != "first prompt" {
		t.Error("Requests shares memory with the log")
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func TestPutScript(t *testing.T) {
	s, c := start(t, nil)
	put := func(script string) (int, string) {
		req, _ := http.NewRequest(http.MethodPut, s.URL()+"/_fakemodel/script", strings.NewReader(script))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, b := put(`{"rules":[{"match":"","steps":[{"text":"replaced"}]}]}`); st != 200 {
		t.Fatalf("good PUT: %d %s", st, b)
	}
	if m := turn(t, c, s.URL(), promptBody(false, "hi")); m.Content[0].Text != "replaced" {
		t.Errorf("after PUT: %+v", m.Content)
	}
	st, b := put(`{"rules":[{"match":"(","steps":[{"text":"x"}]}]}`)
	if st != 400 || !strings.Contains(b, "bad match regexp") || !strings.Contains(b, "invalid_request_error") {
		t.Errorf("bad PUT: %d %s", st, b)
	}
	if m := turn(t, c, s.URL(), promptBody(false, "hi")); m.Content[0].Text != "replaced" {
		t.Errorf("a bad PUT changed the script: %+v", m.Content)
	}
}

func TestOtherEndpoints(t *testing.T) {
	s, c := start(t, nil)
	do := func(method, path, body string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, s.URL()+path, strings.NewReader(body))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	if resp, _ := do(http.MethodHead, "/", ""); resp.StatusCode != 200 {
		t.Errorf("HEAD /: %d", resp.StatusCode)
	}
	if resp, _ := do(http.MethodGet, "/", ""); resp.StatusCode != 200 {
		t.Errorf("GET /: %d", resp.StatusCode)
	}
	resp, b := do(http.MethodPost, "/v1/messages/count_tokens", string(promptBody(false, "count me")))
	var ct struct {
		InputTokens int `json:"input_tokens"`
	}
	if err := json.Unmarshal([]byte(b), &ct); resp.StatusCode != 200 || err != nil || ct.InputTokens < 1 {
		t.Errorf("count_tokens: %d %s", resp.StatusCode, b)
	}
	resp, b = do(http.MethodPost, "/v1/unknown", `{"a":1}`)
	if resp.StatusCode != 404 || !strings.Contains(b, `"not_found_error"`) || !strings.Contains(b, "/v1/unknown") {
		t.Errorf("unknown path: %d %s", resp.StatusCode, b)
	}
	resp, b = do(http.MethodPost, "/v1/messages", `{"model": "m", "messages": [`)
	if resp.StatusCode != 400 || !strings.Contains(b, `"invalid_request_error"`) || resp.Header.Get("retry-after") != "" {
		t.Errorf("malformed body: %d %s", resp.StatusCode, b)
	}
	resp, b = do(http.MethodGet, "/v1/messages", "")
	if resp.StatusCode != 405 || !strings.Contains(b, `"error"`) {
		t.Errorf("GET /v1/messages: %d %s", resp.StatusCode, b)
	}
	got := map[string]int{}
	for _, r := range s.Requests() {
		got[r.Method+" "+r.Path] = r.Status
	}
	want := map[string]int{
		"HEAD /": 200, "GET /": 200, "POST /v1/messages/count_tokens": 200,
		"POST /v1/unknown": 404, "POST /v1/messages": 400, "GET /v1/messages": 405,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("logged (-want +got):\n%s", diff)
	}
	for _, r := range s.Requests() {
		if r.Path == "/v1/unknown" && string(r.Body) != `{"a":1}` {
			t.Errorf("unknown path body logged as %s", r.Body)
		}
		if r.Method == "POST" && r.Path == "/v1/messages" && !json.Valid(r.Body) {
			t.Errorf("malformed body logged as invalid JSON: %s", r.Body)
		}
	}
}

func TestBodyTooLarge(t *testing.T) {
	s := New(nil)
	defer s.Close()
	big := bytes.Repeat([]byte("x"), maxBody+1)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/messages", bytes.NewReader(big)))
	if rec.Code != 413 || !strings.Contains(rec.Body.String(), `"request_too_large"`) {
		t.Errorf("status %d body %s", rec.Code, rec.Body)
	}
	if r := s.Requests(); len(r) != 1 || r[0].Status != 413 {
		t.Errorf("log %+v", r)
	}
}

func TestStart(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "example.com:80", "192.168.1.1:0", "nonsense"} {
		s := New(nil)
		if _, err := s.Start(addr); err == nil {
			t.Errorf("Start(%q) succeeded", addr)
		}
		s.Close()
	}
	s := New(nil)
	defer s.Close()
	if s.URL() != "" {
		t.Errorf("URL before Start: %q", s.URL())
	}
	url, err := s.Start("")
	if err != nil || !strings.HasPrefix(url, "http://127.0.0.1:") || s.URL() != url {
		t.Fatalf("Start: %q %v (URL %q)", url, err, s.URL())
	}
	if _, err := s.Start(""); err == nil {
		t.Error("second Start succeeded")
	}
	s.Close()
	if _, err := s.Start(""); err == nil {
		t.Error("Start after Close succeeded")
	}
}

func TestServe(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var logBuf syncBuffer
	urls := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, "127.0.0.1:0", nil, &logBuf, func(u string) { urls <- u }) }()
	url := <-urls
	c := newClient(t)
	m := turn(t, c, url, promptBody(true, "hello?"))
	if !strings.Contains(m.Content[0].Text, "You said: hello?") {
		t.Errorf("answer %+v", m.Content)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if !strings.Contains(logBuf.String(), `"prompt":"hello?"`) {
		t.Errorf("log: %s", logBuf.String())
	}
	if err := Serve(context.Background(), "0.0.0.0:0", nil, nil, nil); err == nil {
		t.Error("Serve on a non-loopback address succeeded")
	}
	bad := &Script{Rules: []Rule{{Match: "(", Steps: []Step{{Text: "x"}}}}}
	if err := Serve(context.Background(), "", bad, nil, nil); err == nil {
		t.Error("Serve with an invalid script succeeded")
	}
}

func TestConcurrentRequests(t *testing.T) {
	s, c := start(t, mustParse(t, richScript))
	const n = 100
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := range n {
		wg.Go(func() {
			stream := i%2 == 0
			b := body(stream, []string{"Bash", "Write"}, "Primary working directory: /w",
				msg("user", []any{text(fmt.Sprintf("rich f%d.txt", i))}))
			resp, err := c.Post(s.URL()+"/v1/messages", "application/json", bytes.NewReader(b))
			if err != nil {
				errs <- fmt.Sprintf("request %d: %v", i, err)
				return
			}
			defer resp.Body.Close()
			var m *message
			if stream {
				m, err = readSSE(resp.Body)
			} else {
				m = &message{}
				err = json.NewDecoder(resp.Body).Decode(m)
			}
			if err != nil || len(m.Content) != 5 {
				errs <- fmt.Sprintf("request %d: %v %+v", i, err, m)
				return
			}
			var in map[string]string
			_ = json.Unmarshal(m.Content[2].Input, &in)
			if want := fmt.Sprintf("/w/f%d.txt", i); in["file_path"] != want {
				errs <- fmt.Sprintf("request %d: wrote %q, want %q", i, in["file_path"], want)
			}
		})
		if i == n/2 {
			s.SetScript(mustParse(t, richScript)) // concurrently with requests
		}
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if got := len(s.Requests()); got != n {
		t.Errorf("%d requests logged, want %d", got, n)
	}
}
