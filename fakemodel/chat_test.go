package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const openCodeSystem = "You are opencode.\n<env>\n  Working directory: /w\n  Workspace root folder: /\n</env>"

// openCodeTools are the tools OpenCode 1.18.33 offers (trimmed).
var openCodeTools = []string{"bash", "edit", "glob", "read", "write"}

func cMsg(role string, content any) map[string]any {
	return map[string]any{"role": role, "content": content}
}

func cAssistantCall(id, name, args string) map[string]any {
	return map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{
		"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": args}}}}
}

func cTool(id, content string) map[string]any {
	return map[string]any{"role": "tool", "tool_call_id": id, "content": content}
}

// chatBody builds a /v1/chat/completions request the way OpenCode does.
func chatBody(stream bool, tools []string, msgs ...map[string]any) []byte {
	b := map[string]any{"model": "fake-model", "max_tokens": 32000, "messages": msgs, "stream": stream}
	if stream {
		b["stream_options"] = map[string]any{"include_usage": true}
	}
	if tools != nil {
		var ts []any
		for _, n := range tools {
			ts = append(ts, map[string]any{"type": "function", "function": map[string]any{"name": n, "parameters": map[string]any{"type": "object"}}})
		}
		b["tools"], b["tool_choice"] = ts, "auto"
	}
	return mustJSON(b)
}

func chatFirst(stream bool, prompt string) []byte {
	return chatBody(stream, openCodeTools, cMsg("system", openCodeSystem), cMsg("user", prompt))
}

// chatResult is a decoded Chat Completions answer.
type chatResult struct {
	answerView
	finish   string
	usage    map[string]any
	chunks   int
	done     bool
	deltas   int // content deltas
	callIDs  []string
	response map[string]any // non-stream only
}

// chatAnswer posts b and decodes the answer, streamed or not.
func chatAnswer(t *testing.T, c *http.Client, url string, b []byte) chatResult {
	t.Helper()
	r := postTo(t, c, url, "/v1/chat/completions", b)
	defer r.Body.Close()
	if r.StatusCode != 200 {
		t.Fatalf("status %d", r.StatusCode)
	}
	var req struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal(b, &req)
	var res chatResult
	if !req.Stream {
		var resp struct {
			Object  string `json:"object"`
			Choices []struct {
				Message struct {
					Content          *string `json:"content"`
					ReasoningContent string  `json:"reasoning_content"`
					ToolCalls        []struct {
						ID       string `json:"id"`
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage map[string]any `json:"usage"`
		}
		raw := map[string]any{}
		dec := json.NewDecoder(r.Body)
		var body json.RawMessage
		if err := dec.Decode(&body); err != nil {
			t.Fatal(err)
		}
		_ = json.Unmarshal(body, &raw)
		if err := json.Unmarshal(body, &resp); err != nil || resp.Object != "chat.completion" || len(resp.Choices) != 1 {
			t.Fatalf("answer %s: %v", body, err)
		}
		m := resp.Choices[0].Message
		if m.Content != nil {
			res.text = *m.Content
		}
		res.thinking = m.ReasoningContent
		for _, tc := range m.ToolCalls {
			res.calls = append(res.calls, callView{tc.Function.Name, tc.Function.Arguments})
			res.callIDs = append(res.callIDs, tc.ID)
		}
		res.finish, res.usage, res.response = resp.Choices[0].FinishReason, resp.Usage, raw
		return res
	}
	events, err := readEvents(r.Body)
	if err != nil {
		t.Fatalf("read stream: %v", err)
	}
	for i, e := range events {
		if e.data == "[DONE]" {
			if i != len(events)-1 {
				t.Errorf("[DONE] is event %d of %d", i, len(events))
			}
			res.done = true
			continue
		}
		var ch struct {
			Object  string `json:"object"`
			Choices []struct {
				Delta struct {
					Content          string `json:"content"`
					ReasoningContent string `json:"reasoning_content"`
					ToolCalls        []struct {
						Index    int    `json:"index"`
						ID       string `json:"id"`
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage map[string]any `json:"usage"`
		}
		if err := json.Unmarshal([]byte(e.data), &ch); err != nil || ch.Object != "chat.completion.chunk" || e.event != "" {
			t.Fatalf("chunk %q %s: %v", e.event, e.data, err)
		}
		res.chunks++
		if ch.Usage != nil {
			res.usage = ch.Usage
		}
		for _, choice := range ch.Choices {
			d := choice.Delta
			res.thinking += d.ReasoningContent
			res.text += d.Content
			if d.Content != "" {
				res.deltas++
			}
			for _, tc := range d.ToolCalls {
				if tc.Index == len(res.calls) {
					res.calls = append(res.calls, callView{name: tc.Function.Name})
					res.callIDs = append(res.callIDs, tc.ID)
				}
				res.calls[tc.Index].input += tc.Function.Arguments
			}
			if choice.FinishReason != nil {
				res.finish = *choice.FinishReason
			}
		}
	}
	if !res.done {
		t.Errorf("stream without [DONE]")
	}
	return res
}

func TestChatStreamAndJSON(t *testing.T) {
	s, c := start(t, mustParse(t, richScript))
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			res := chatAnswer(t, c, s.URL(), chatFirst(stream, "rich out.txt"))
			if res.thinking != "I should write out.txt and look around." || res.text != "Writing out.txt now, then listing the directory." {
				t.Errorf("thinking %q text %q", res.thinking, res.text)
			}
			want := []callView{
				{"write", `{"filePath":"/w/out.txt","content":"hi\n"}`},
				{"bash", `{"command":"ls -la","description":"Run ls -la"}`},
				{"mcp__echo__echo", `{"text":"ping"}`},
			}
			if diff := cmp.Diff(want, res.calls, cmp.AllowUnexported(callView{})); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			for _, id := range res.callIDs {
				if !strings.HasPrefix(id, "call_") {
					t.Errorf("call id %q", id)
				}
			}
			if res.finish != "tool_calls" {
				t.Errorf("finish_reason %q", res.finish)
			}
			wantUsage := map[string]any{"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120,
				"prompt_tokens_details": map[string]any{"cached_tokens": 7}, "completion_tokens_details": map[string]any{"reasoning_tokens": 0}}
			if diff := jsonDiff(t, wantUsage, mustJSON(res.usage)); diff != "" {
				t.Errorf("usage (-want +got):\n%s", diff)
			}
			if stream && res.deltas < 2 {
				t.Errorf("%d content deltas, want several", res.deltas)
			}
		})
	}
	r := s.Requests()[0]
	if r.API != "openai-chat" || r.Path != "/v1/chat/completions" || !r.Stream || r.Model != "fake-model" || r.Prompt != "rich out.txt" ||
		r.Rule != "rich" || r.Step != 0 || r.Status != 200 || r.Aux != "" {
		t.Errorf("log entry %+v", r)
	}
	if diff := cmp.Diff(openCodeTools, r.ToolsOffered); diff != "" {
		t.Errorf("ToolsOffered (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"write:write", "shell:bash", "name:mcp__echo__echo:not-offered"}, r.Resolution); diff != "" {
		t.Errorf("Resolution (-want +got):\n%s", diff)
	}
}

func TestChatStepSelection(t *testing.T) {
	prompt := cMsg("user", "write a.txt then run ls\n")
	tests := []struct {
		name      string
		msgs      []map[string]any
		wantStep  int
		wantTexts []string
		wantRes   []ToolResult
	}{
		{"prompt only", []map[string]any{cMsg("system", openCodeSystem), prompt}, 0, []string{"write a.txt then run ls\n"}, nil},
		{"one round", []map[string]any{cMsg("system", openCodeSystem), prompt, cAssistantCall("c1", "write", "{}"), cTool("c1", "Wrote file successfully.")}, 1,
			[]string{"write a.txt then run ls\n"}, []ToolResult{{ToolUseID: "c1", Content: "Wrote file successfully."}}},
		{"two rounds, text parts", []map[string]any{cMsg("user", []any{map[string]any{"type": "text", "text": "write a.txt then run ls\n"}}),
			cAssistantCall("c1", "write", "{}"), cTool("c1", "ok"), cMsg("assistant", "now ls"), cAssistantCall("c2", "bash", "{}"), cTool("c2", "a.txt\n")}, 2,
			[]string{"write a.txt then run ls\n"}, []ToolResult{{ToolUseID: "c1", Content: "ok"}, {ToolUseID: "c2", Content: "a.txt\n"}}},
		{"new prompt after history", []map[string]any{cMsg("user", "first"), cMsg("assistant", "answer"), cMsg("user", "second")}, 0,
			[]string{"first", "second"}, nil},
		{"system reminders are not the user's", []map[string]any{cMsg("user", []any{
			map[string]any{"type": "text", "text": "do it"}, map[string]any{"type": "text", "text": "<system-reminder>plan mode</system-reminder>"}})}, 0,
			[]string{"do it"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := decodeOK(t, chatWire{}, chatBody(true, openCodeTools, tt.msgs...))
			if x.turns != tt.wantStep || x.aux != "" {
				t.Errorf("step %d aux %q, want step %d", x.turns, x.aux, tt.wantStep)
			}
			if x.prompt != tt.wantTexts[len(tt.wantTexts)-1] {
				t.Errorf("prompt %q", x.prompt)
			}
			if diff := cmp.Diff(tt.wantTexts, x.userTexts); diff != "" {
				t.Errorf("userTexts (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantRes, x.toolResults); diff != "" {
				t.Errorf("toolResults (-want +got):\n%s", diff)
			}
		})
	}
	if x := decodeOK(t, chatWire{}, chatFirst(true, "x")); x.cwd != "/w" {
		t.Errorf("cwd %q", x.cwd)
	}
	for _, b := range []string{``, `{`, `{"model":"m"}`, `{"messages":[{"role":"user","content":5}]}`} {
		if _, err := (chatWire{}).decode(nil, []byte(b)); err == nil {
			t.Errorf("decode(%q) succeeded", b)
		}
	}
}

// TestChatTitle checks OpenCode's title request is answered with a title
// and does not consume the script, and that lookalikes are not taken for
// one.
func TestChatTitle(t *testing.T) {
	s, c := start(t, nil)
	title := chatBody(true, nil,
		cMsg("system", "You are a title generator. You output ONLY a thread title. Nothing else."),
		cMsg("user", "Generate a title for this conversation:\n"),
		cMsg("user", "write hello.txt, then run ls\n"))
	res := chatAnswer(t, c, s.URL(), title)
	if res.text != "write hello.txt, then run ls" || len(res.calls) != 0 || res.finish != "stop" {
		t.Errorf("title answer %+v", res)
	}
	// Without tools but no title markers: an ordinary scripted request.
	plain := chatAnswer(t, c, s.URL(), chatBody(false, nil, cMsg("user", "hello")))
	if !strings.Contains(plain.text, "You said: hello") {
		t.Errorf("tool-less request: %+v", plain)
	}
	// Title markers but tools offered: scripted.
	withTools := chatAnswer(t, c, s.URL(), chatBody(false, openCodeTools, cMsg("system", "You are a title generator."), cMsg("user", "run ls")))
	if len(withTools.calls) != 1 || withTools.calls[0].name != "bash" {
		t.Errorf("request with tools: %+v", withTools)
	}
	reqs := s.Requests()
	if r := reqs[0]; r.Aux != "title" || r.Rule != "" || r.Prompt != "write hello.txt, then run ls\n" || r.Status != 200 ||
		!cmp.Equal(r.UserTexts, []string{"write hello.txt, then run ls\n"}) {
		t.Errorf("title log entry %+v", r)
	}
	if reqs[1].Aux != "" || reqs[1].Rule != "hello" || reqs[2].Aux != "" || reqs[2].Rule != "run" {
		t.Errorf("later entries: %+v / %+v", reqs[1], reqs[2])
	}
}

func TestChatErrorsAndCut(t *testing.T) {
	s, c := start(t, mustParse(t, `{"rules":[
		{"match":"^e429","steps":[{"error":{"status":429,"message":"slow down"}}]},
		{"match":"^e401","steps":[{"error":{"status":401,"message":"who are you"}}]},
		{"match":"^cut","steps":[{"text":"a partial answer that breaks","cut":true}]},
		{"match":"^long","steps":[{"text":"cut short","stopReason":"length"}]}]}`))
	for _, tt := range []struct {
		prompt, msg, typ string
		status           int
		code             any
	}{
		{"e429", "slow down", "rate_limit_error", 429, "rate_limit_exceeded"},
		{"e401", "who are you", "invalid_request_error", 401, "invalid_api_key"},
	} {
		resp, e := errorAnswer(t, c, s.URL(), "/v1/chat/completions", chatFirst(true, tt.prompt))
		if resp.StatusCode != tt.status || e.Error.Message != tt.msg || e.Error.Type != tt.typ || e.Error.Code != tt.code {
			t.Errorf("%s: %d %+v", tt.prompt, resp.StatusCode, e)
		}
		if resp.Header.Get("retry-after-ms") != "0" || resp.Header.Get("retry-after") != "0" {
			t.Errorf("%s: headers %v", tt.prompt, resp.Header)
		}
	}
	evs := readCut(t, postTo(t, c, s.URL(), "/v1/chat/completions", chatFirst(true, "cut")))
	if len(evs) != 2 || !strings.Contains(evs[0].data, `"role":"assistant"`) || !strings.Contains(evs[1].data, `"content":"a `) {
		t.Errorf("cut stream %v", evs)
	}
	if res := chatAnswer(t, c, s.URL(), chatFirst(false, "cut")); res.text != "a partial answer that breaks" {
		t.Errorf("non-stream after cut: %+v", res)
	}
	if res := chatAnswer(t, c, s.URL(), chatFirst(true, "long")); res.finish != "length" {
		t.Errorf("finish_reason %q", res.finish)
	}
}
