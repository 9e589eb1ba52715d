package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const codexEnv = "<environment_context>\n  <cwd>/w</cwd>\n  <shell>bash</shell>\n</environment_context>"

func rMsg(role, text string) map[string]any {
	typ := "input_text"
	if role == "assistant" {
		typ = "output_text"
	}
	return map[string]any{"type": "message", "role": role, "content": []any{map[string]any{"type": typ, "text": text}}}
}

func rCall(callID, name, args string) map[string]any {
	return map[string]any{"type": "function_call", "id": "fc_" + callID, "call_id": callID, "name": name, "arguments": args}
}

func rOutput(callID string, output any) map[string]any {
	return map[string]any{"type": "function_call_output", "call_id": callID, "output": output}
}

// codexTools are the tools Codex 0.169.0 offers (trimmed).
var codexTools = []map[string]any{
	{"type": "function", "name": "exec_command", "parameters": map[string]any{"type": "object"}},
	{"type": "function", "name": "write_stdin"},
	{"type": "custom", "name": "apply_patch", "format": map[string]any{"type": "grammar"}},
	{"type": "web_search"},
}

// respBody builds a /v1/responses request the way Codex does.
func respBody(stream bool, tools []map[string]any, items ...map[string]any) []byte {
	return mustJSON(map[string]any{
		"model": "gpt-test", "instructions": nil, "input": items, "tools": tools,
		"tool_choice": "auto", "stream": stream, "store": false,
	})
}

// respFirst is Codex's first request for prompt.
func respFirst(stream bool, prompt string) []byte {
	return respBody(stream, codexTools,
		rMsg("developer", "You are Codex."),
		rMsg("user", "# AGENTS.md instructions for /w\n\n<INSTRUCTIONS>\nbe nice\n</INSTRUCTIONS>"),
		rMsg("user", codexEnv),
		rMsg("user", prompt))
}

// respAnswer posts b and decodes the answer (streamed or not) into the
// output items, the final response object and, for a stream, the events.
func respAnswer(t *testing.T, c *http.Client, url string, b []byte) (items []map[string]any, resp map[string]any, events []sse) {
	t.Helper()
	r := postTo(t, c, url, "/v1/responses", b)
	defer r.Body.Close()
	if r.StatusCode != 200 {
		t.Fatalf("status %d", r.StatusCode)
	}
	var req struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal(b, &req)
	if !req.Stream {
		if err := json.NewDecoder(r.Body).Decode(&resp); err != nil {
			t.Fatal(err)
		}
		for _, it := range resp["output"].([]any) {
			items = append(items, it.(map[string]any))
		}
		return items, resp, nil
	}
	if ct := r.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	events, err := readEvents(r.Body)
	if err != nil {
		t.Fatalf("read stream: %v", err)
	}
	deltas := map[string]string{}
	for i, e := range events {
		var d map[string]any
		if err := json.Unmarshal([]byte(e.data), &d); err != nil {
			t.Fatalf("event %s: %v", e.event, err)
		}
		if d["type"] != e.event || d["sequence_number"] != float64(i) {
			t.Errorf("event %d %q: type %v sequence %v", i, e.event, d["type"], d["sequence_number"])
		}
		switch e.event {
		case "response.output_item.done":
			items = append(items, d["item"].(map[string]any))
		case "response.output_text.delta", "response.reasoning_summary_text.delta",
			"response.function_call_arguments.delta", "response.custom_tool_call_input.delta":
			deltas[d["item_id"].(string)] += d["delta"].(string)
		case "response.completed", "response.incomplete":
			resp = d["response"].(map[string]any)
		}
	}
	if resp == nil {
		t.Fatalf("no response.completed; events %v", events)
	}
	// The deltas add up to the finished items.
	for _, it := range items {
		var whole string
		switch it["type"] {
		case "message":
			whole = it["content"].([]any)[0].(map[string]any)["text"].(string)
		case "reasoning":
			whole = it["summary"].([]any)[0].(map[string]any)["text"].(string)
		case "function_call":
			whole = it["arguments"].(string)
		case "custom_tool_call":
			whole = it["input"].(string)
		}
		if deltas[it["id"].(string)] != whole {
			t.Errorf("item %v: deltas %q, want %q", it["id"], deltas[it["id"].(string)], whole)
		}
	}
	return items, resp, events
}

// respView turns output items into an answerView; a namespaced call is
// named "NS.NAME".
func respView(items []map[string]any) answerView {
	var v answerView
	for _, it := range items {
		switch it["type"] {
		case "reasoning":
			v.thinking = it["summary"].([]any)[0].(map[string]any)["text"].(string)
		case "message":
			v.text = it["content"].([]any)[0].(map[string]any)["text"].(string)
		case "function_call":
			name := it["name"].(string)
			if ns, ok := it["namespace"].(string); ok {
				name = ns + "." + name
			}
			v.calls = append(v.calls, callView{name, it["arguments"].(string)})
		case "custom_tool_call":
			v.calls = append(v.calls, callView{it["name"].(string), it["input"].(string)})
		}
	}
	return v
}

func TestResponsesStreamAndJSON(t *testing.T) {
	s, c := start(t, mustParse(t, richScript))
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			items, resp, events := respAnswer(t, c, s.URL(), respFirst(stream, "rich out.txt"))
			v := respView(items)
			if v.thinking != "I should write out.txt and look around." || v.text != "Writing out.txt now, then listing the directory." {
				t.Errorf("thinking %q text %q", v.thinking, v.text)
			}
			want := []callView{
				{"apply_patch", "*** Begin Patch\n*** Add File: out.txt\n+hi\n*** End Patch\n"},
				{"exec_command", `{"cmd":"ls -la"}`},
				{"mcp__echo.echo", `{"text":"ping"}`},
			}
			if diff := cmp.Diff(want, v.calls, cmp.AllowUnexported(callView{})); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			types := []string{}
			for _, it := range items {
				types = append(types, it["type"].(string))
				if id, _ := it["call_id"].(string); it["type"] != "message" && it["type"] != "reasoning" && !strings.HasPrefix(id, "call_") {
					t.Errorf("call_id %q", id)
				}
			}
			if diff := cmp.Diff([]string{"reasoning", "message", "custom_tool_call", "function_call", "function_call"}, types); diff != "" {
				t.Errorf("item types (-want +got):\n%s", diff)
			}
			if resp["status"] != "completed" || resp["model"] != "gpt-test" || !strings.HasPrefix(resp["id"].(string), "resp_") {
				t.Errorf("response %v", resp)
			}
			wantUsage := map[string]any{"input_tokens": 100, "output_tokens": 20, "total_tokens": 120,
				"input_tokens_details": map[string]any{"cached_tokens": 7}, "output_tokens_details": map[string]any{"reasoning_tokens": 0}}
			if diff := jsonDiff(t, wantUsage, mustJSON(resp["usage"])); diff != "" {
				t.Errorf("usage (-want +got):\n%s", diff)
			}
			if stream {
				var names []string
				for _, e := range events[:3] {
					names = append(names, e.event)
				}
				if diff := cmp.Diff([]string{"response.created", "response.in_progress", "response.output_item.added"}, names); diff != "" {
					t.Errorf("first events (-want +got):\n%s", diff)
				}
				if n := strings.Count(fmt.Sprint(events), "response.output_text.delta"); n < 2 {
					t.Errorf("%d text deltas, want several", n)
				}
			}
		})
	}
	r := s.Requests()[0]
	if r.API != "openai-responses" || r.Path != "/v1/responses" || !r.Stream || r.Model != "gpt-test" || r.Prompt != "rich out.txt" ||
		r.Rule != "rich" || r.Step != 0 || r.Status != 200 {
		t.Errorf("log entry %+v", r)
	}
	if diff := cmp.Diff([]string{"rich out.txt"}, r.UserTexts); diff != "" {
		t.Errorf("UserTexts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"exec_command", "write_stdin", "apply_patch", "web_search"}, r.ToolsOffered); diff != "" {
		t.Errorf("ToolsOffered (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"write:apply_patch", "shell:exec_command", "name:mcp__echo__echo:not-offered"}, r.Resolution); diff != "" {
		t.Errorf("Resolution (-want +got):\n%s", diff)
	}
}

func TestResponsesStepSelection(t *testing.T) {
	prompt := rMsg("user", "write a.txt then run ls")
	reasoning := map[string]any{"type": "reasoning", "id": "rs_1", "summary": []any{}, "encrypted_content": "xyz"}
	patch := map[string]any{"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_1", "name": "apply_patch", "input": "*** Begin Patch\n"}
	patchOut := map[string]any{"type": "custom_tool_call_output", "call_id": "call_1", "output": "Success."}
	call2 := rCall("call_2", "exec_command", `{"cmd":"ls"}`)
	out2 := rOutput("call_2", "Process exited with code 0\nOutput:\na.txt\n")
	tests := []struct {
		name       string
		items      []map[string]any
		wantPrompt string
		wantStep   int
		wantTexts  []string
		wantRes    []ToolResult
	}{
		{"prompt only", []map[string]any{rMsg("developer", "dev"), rMsg("user", codexEnv), prompt}, "write a.txt then run ls", 0,
			[]string{"write a.txt then run ls"}, nil},
		{"one round", []map[string]any{rMsg("user", codexEnv), prompt, reasoning, patch, patchOut}, "write a.txt then run ls", 1,
			[]string{"write a.txt then run ls"}, []ToolResult{{ToolUseID: "call_1", Content: "Success."}}},
		{"two rounds", []map[string]any{rMsg("user", codexEnv), prompt, patch, patchOut, call2, out2}, "write a.txt then run ls", 2,
			[]string{"write a.txt then run ls"}, []ToolResult{{ToolUseID: "call_1", Content: "Success."},
				{ToolUseID: "call_2", Content: "Process exited with code 0\nOutput:\na.txt\n"}}},
		{"parallel calls are one turn", []map[string]any{prompt, patch, call2, patchOut, out2}, "write a.txt then run ls", 1,
			[]string{"write a.txt then run ls"}, []ToolResult{{ToolUseID: "call_1", Content: "Success."},
				{ToolUseID: "call_2", Content: "Process exited with code 0\nOutput:\na.txt\n"}}},
		{"developer message mid-turn is neutral", []map[string]any{prompt, patch, rMsg("developer", "note"), patchOut}, "write a.txt then run ls", 1,
			[]string{"write a.txt then run ls"}, []ToolResult{{ToolUseID: "call_1", Content: "Success."}}},
		{"new prompt after a resumed history", []map[string]any{rMsg("user", codexEnv), rMsg("user", "first"), rMsg("assistant", "answer"),
			rMsg("user", codexEnv), rMsg("user", "second")}, "second", 0, []string{"first", "second"}, nil},
		{"MCP output parts", []map[string]any{prompt, rCall("call_3", "echo", "{}"), rOutput("call_3", []any{
			map[string]any{"type": "input_text", "text": "Wall time: 0.1 seconds\nOutput:"}, map[string]any{"type": "input_text", "text": "echo: ping"},
			map[string]any{"type": "input_image"}})}, "write a.txt then run ls", 1,
			[]string{"write a.txt then run ls"}, []ToolResult{{ToolUseID: "call_3", Content: "Wall time: 0.1 seconds\nOutput:\necho: ping\n[input_image]"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x, err := responsesWire{}.decode(nil, respBody(true, codexTools, tt.items...))
			if err != nil {
				t.Fatal(err)
			}
			if x.prompt != tt.wantPrompt || x.turns != tt.wantStep {
				t.Errorf("prompt %q step %d, want %q step %d", x.prompt, x.turns, tt.wantPrompt, tt.wantStep)
			}
			if diff := cmp.Diff(tt.wantTexts, x.userTexts); diff != "" {
				t.Errorf("userTexts (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantRes, x.toolResults); diff != "" {
				t.Errorf("toolResults (-want +got):\n%s", diff)
			}
		})
	}
	// A plain string input is the prompt; instructions may reveal the cwd.
	x, err := responsesWire{}.decode(nil, mustJSON(map[string]any{"model": "m", "input": "hi there", "instructions": "<cwd>/srv</cwd>"}))
	if err != nil || x.prompt != "hi there" || x.turns != 0 || x.cwd != "/srv" {
		t.Errorf("string input: %+v %v", x, err)
	}
	if x := decodeOK(t, responsesWire{}, respFirst(true, "hi")); x.cwd != "/w" {
		t.Errorf("cwd %q", x.cwd)
	}
	for _, b := range []string{``, `{`, `{"model":"m"}`, `{"input":5}`, `{"input":[{"type":"message","role":"user","content":7}]}`} {
		if _, err := (responsesWire{}).decode(nil, []byte(b)); err == nil {
			t.Errorf("decode(%q) succeeded", b)
		}
	}
}

// decodeOK decodes b with wi or fails the test.
func decodeOK(t *testing.T, wi wire, b []byte) *exchange {
	t.Helper()
	x, err := wi.decode(nil, b)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return x
}

func TestResponsesToolFallbacks(t *testing.T) {
	p, _ := compile(mustParse(t, `{"rules":[{"match":"","steps":[{"tools":[
		{"write":"it's.txt","content":"a\nb"},{"read":"x y.txt"},{"shell":"ls"},{"name":"mcp__srv__do"},{"name":"exec_command","input":{"cmd":"pwd"}}]}]}]}`))
	a := p.resolve(&exchange{prompt: "x", toolsOffered: []string{"exec_command"}, cwd: "/w"}, responsesWire{}.tools())
	want := []struct{ name, input, res string }{
		{"exec_command", `{"cmd":"printf '%s' 'a\nb' \u003e 'it'\\''s.txt'"}`, "write:exec_command"},
		{"exec_command", `{"cmd":"cat 'x y.txt'"}`, "read:exec_command"},
		{"exec_command", `{"cmd":"ls"}`, "shell:exec_command"},
		{"mcp__srv__do", `{}`, "name:mcp__srv__do:not-offered"},
		{"exec_command", `{"cmd":"pwd"}`, "name:exec_command"},
	}
	if len(a.calls) != len(want) {
		t.Fatalf("calls %+v", a.calls)
	}
	for i, w := range want {
		c := a.calls[i]
		if c.name != w.name || string(c.input) != w.input || c.resolution != w.res || c.custom {
			t.Errorf("call %d: %s %s %s custom=%v, want %s %s %s", i, c.name, c.input, c.resolution, c.custom, w.name, w.input, w.res)
		}
	}
	// Older Codex tools.
	a = p.resolve(&exchange{prompt: "x", toolsOffered: []string{"shell"}}, responsesWire{}.tools())
	if c := a.calls[2]; c.name != "shell" || string(c.input) != `{"command":["bash","-lc","ls"]}` {
		t.Errorf("shell fallback %s %s", c.name, c.input)
	}
	// Namespaces.
	for _, tt := range []struct{ name, ns, tool string }{
		{"mcp__echo.echo", "mcp__echo", "echo"}, {"mcp__echo__echo", "mcp__echo", "echo"}, {"exec_command", "", "exec_command"},
		{"mcp__x", "", "mcp__x"}, {"a.b.c", "a", "b.c"},
	} {
		if ns, tool := responsesCall(tt.name, nil); ns != tt.ns || tool != tt.tool {
			t.Errorf("responsesCall(%q) = %q %q", tt.name, ns, tool)
		}
	}
	if ns, tool := responsesCall("mcp__echo__echo", []string{"mcp__echo__echo"}); ns != "" || tool != "mcp__echo__echo" {
		t.Errorf("offered MCP name split: %q %q", ns, tool)
	}
	if got := applyPatchAdd("f.txt", ""); got != "*** Begin Patch\n*** Add File: f.txt\n+\n*** End Patch\n" {
		t.Errorf("empty patch %q", got)
	}
}

func TestResponsesErrors(t *testing.T) {
	s, c := start(t, mustParse(t, `{"rules":[
		{"match":"^e429","steps":[{"error":{"status":429,"message":"slow down"}}]},
		{"match":"^e400","steps":[{"error":{"status":400}}]},
		{"match":"^e500","steps":[{"error":{"status":500,"message":"boom"}}]}]}`))
	for _, tt := range []struct {
		prompt, msg, typ string
		status           int
		code             any
	}{
		{"e429", "slow down", "rate_limit_error", 429, "rate_limit_exceeded"},
		{"e400", "fakemodel: scripted error 400", "invalid_request_error", 400, nil},
		{"e500", "boom", "server_error", 500, "server_error"},
	} {
		resp, e := errorAnswer(t, c, s.URL(), "/v1/responses", respFirst(true, tt.prompt))
		if resp.StatusCode != tt.status || e.Error.Message != tt.msg || e.Error.Type != tt.typ || e.Error.Code != tt.code || e.Error.Param != nil {
			t.Errorf("%s: %d %+v", tt.prompt, resp.StatusCode, e)
		}
		if resp.Header.Get("retry-after") != "0" || resp.Header.Get("retry-after-ms") != "0" || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s: headers %v", tt.prompt, resp.Header)
		}
	}
	resp, e := errorAnswer(t, c, s.URL(), "/v1/responses", []byte(`{"model":"m"}`))
	if resp.StatusCode != 400 || e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, "input") {
		t.Errorf("bad request: %d %+v", resp.StatusCode, e)
	}
	for _, r := range s.Requests() {
		if r.API != "openai-responses" || r.Status < 400 {
			t.Errorf("logged %s status %d", r.API, r.Status)
		}
	}
}

func TestResponsesCutAndStopReason(t *testing.T) {
	s, c := start(t, mustParse(t, `{"rules":[
		{"match":"^cut","steps":[{"text":"a partial answer that breaks","cut":true}]},
		{"match":"^long","steps":[{"text":"truncated","stopReason":"max_output_tokens"}]}]}`))
	evs := readCut(t, postTo(t, c, s.URL(), "/v1/responses", respFirst(true, "cut")))
	var names []string
	for _, e := range evs {
		names = append(names, e.event)
	}
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added", "response.output_text.delta"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("cut events (-want +got):\n%s", diff)
	}
	// Not streamed, the same step gets the whole answer.
	items, _, _ := respAnswer(t, c, s.URL(), respFirst(false, "cut"))
	if v := respView(items); v.text != "a partial answer that breaks" {
		t.Errorf("non-stream answer %+v", v)
	}
	_, resp, events := respAnswer(t, c, s.URL(), respFirst(true, "long"))
	if last := events[len(events)-1].event; last != "response.incomplete" || resp["status"] != "incomplete" ||
		resp["incomplete_details"].(map[string]any)["reason"] != "max_output_tokens" {
		t.Errorf("stop reason: last event %s response %v", last, resp)
	}
}
