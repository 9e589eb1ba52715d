package fakemodel

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const geminiSession = "<session_context>\nThis is the Gemini CLI.\nMy operating system is: linux\n- **Workspace Directories:**\n  - /w\n- **Directory Structure:**\n\n/w/\n</session_context>"

// geminiTools are the tools Gemini CLI 0.61.0 offers with --approval-mode
// yolo (trimmed).
var geminiTools = []string{"list_directory", "read_file", "replace", "write_file", "run_shell_command"}

func gText(s string) map[string]any { return map[string]any{"text": s} }

func gContent(role string, parts ...map[string]any) map[string]any {
	return map[string]any{"role": role, "parts": parts}
}

func gCall(name string, args any) map[string]any {
	return map[string]any{"functionCall": map[string]any{"id": name + "_1", "name": name, "args": args}, "thoughtSignature": "skip"}
}

func gResponse(id, name string, resp any) map[string]any {
	return map[string]any{"functionResponse": map[string]any{"id": id, "name": name, "response": resp}}
}

// geminiBody builds a generateContent request the way Gemini CLI does.
func geminiBody(tools []string, contents ...map[string]any) []byte {
	var decls []any
	for _, n := range tools {
		decls = append(decls, map[string]any{"name": n, "parametersJsonSchema": map[string]any{"type": "object"}})
	}
	b := map[string]any{
		"contents":          contents,
		"systemInstruction": map[string]any{"role": "user", "parts": []any{gText("You are a non-interactive CLI agent.")}},
		"generationConfig":  map[string]any{"temperature": 1, "thinkingConfig": map[string]any{"includeThoughts": true}},
	}
	if decls != nil {
		b["tools"] = []any{map[string]any{"functionDeclarations": decls}}
	}
	return mustJSON(b)
}

func geminiFirst(prompt string) []byte {
	return geminiBody(geminiTools, gContent("user", gText(geminiSession), gText(prompt)))
}

func geminiPath(model string, stream bool) string {
	if stream {
		return "/v1beta/models/" + model + ":streamGenerateContent?alt=sse"
	}
	return "/v1beta/models/" + model + ":generateContent"
}

type geminiChunk struct {
	Candidates []struct {
		Content struct {
			Role  string `json:"role"`
			Parts []struct {
				Text         *string `json:"text"`
				Thought      bool    `json:"thought"`
				FunctionCall *struct {
					Name string          `json:"name"`
					Args json.RawMessage `json:"args"`
				} `json:"functionCall"`
			} `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	UsageMetadata map[string]any `json:"usageMetadata"`
	ModelVersion  string         `json:"modelVersion"`
}

type geminiResult struct {
	answerView
	finish string
	usage  map[string]any
	model  string
	chunks int
}

func (r *geminiResult) add(t *testing.T, ch geminiChunk) {
	t.Helper()
	if len(ch.Candidates) != 1 || ch.Candidates[0].Content.Role != "model" {
		t.Fatalf("chunk %+v", ch)
	}
	r.chunks++
	for _, p := range ch.Candidates[0].Content.Parts {
		switch {
		case p.FunctionCall != nil:
			r.calls = append(r.calls, callView{p.FunctionCall.Name, string(p.FunctionCall.Args)})
		case p.Thought && p.Text != nil:
			r.thinking += *p.Text
		case p.Text != nil:
			r.text += *p.Text
		}
	}
	if f := ch.Candidates[0].FinishReason; f != "" {
		r.finish = f
	}
	if ch.UsageMetadata != nil {
		r.usage = ch.UsageMetadata
	}
	r.model = ch.ModelVersion
}

// geminiAnswer posts b to the model's stream or non-stream endpoint and
// decodes the answer.
func geminiAnswer(t *testing.T, c *http.Client, url, model string, stream bool, b []byte) geminiResult {
	t.Helper()
	r := postTo(t, c, url, geminiPath(model, stream), b)
	defer r.Body.Close()
	if r.StatusCode != 200 {
		body, _ := io.ReadAll(r.Body)
		t.Fatalf("status %d: %s", r.StatusCode, body)
	}
	var res geminiResult
	if !stream {
		var ch geminiChunk
		if err := json.NewDecoder(r.Body).Decode(&ch); err != nil {
			t.Fatal(err)
		}
		res.add(t, ch)
		return res
	}
	events, err := readEvents(r.Body)
	if err != nil {
		t.Fatalf("read stream: %v", err)
	}
	for i, e := range events {
		var ch geminiChunk
		if err := json.Unmarshal([]byte(e.data), &ch); err != nil || e.event != "" {
			t.Fatalf("chunk %q %s: %v", e.event, e.data, err)
		}
		if (ch.Candidates[0].FinishReason != "") != (i == len(events)-1) {
			t.Errorf("chunk %d of %d has finishReason %q", i, len(events), ch.Candidates[0].FinishReason)
		}
		res.add(t, ch)
	}
	return res
}

func TestGeminiStreamAndJSON(t *testing.T) {
	s, c := start(t, mustParse(t, richScript))
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			res := geminiAnswer(t, c, s.URL(), "gemini-test", stream, geminiFirst("rich out.txt"))
			if res.thinking != "I should write out.txt and look around." || res.text != "Writing out.txt now, then listing the directory." {
				t.Errorf("thinking %q text %q", res.thinking, res.text)
			}
			want := []callView{
				{"write_file", `{"file_path":"/w/out.txt","content":"hi\n"}`},
				{"run_shell_command", `{"command":"ls -la","description":"Run ls -la"}`},
				{"mcp__echo__echo", `{"text":"ping"}`},
			}
			if diff := cmp.Diff(want, res.calls, cmp.AllowUnexported(callView{})); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			wantUsage := map[string]any{"promptTokenCount": 100, "candidatesTokenCount": 20, "cachedContentTokenCount": 7,
				"thoughtsTokenCount": 0, "totalTokenCount": 120}
			if diff := jsonDiff(t, wantUsage, mustJSON(res.usage)); diff != "" {
				t.Errorf("usage (-want +got):\n%s", diff)
			}
			if res.finish != "STOP" || res.model != "gemini-test" {
				t.Errorf("finish %q model %q", res.finish, res.model)
			}
			if stream && res.chunks < 4 {
				t.Errorf("%d chunks, want thinking, text and calls apart", res.chunks)
			}
		})
	}
	r := s.Requests()
	if r[0].API != "gemini" || r[0].Path != "/v1beta/models/gemini-test:streamGenerateContent?alt=sse" || !r[0].Stream || r[1].Stream ||
		r[0].Model != "gemini-test" || r[0].Prompt != "rich out.txt" || r[0].Rule != "rich" || r[0].Status != 200 {
		t.Errorf("log entries %+v / %+v", r[0], r[1])
	}
	if diff := cmp.Diff([]string{"rich out.txt"}, r[0].UserTexts); diff != "" {
		t.Errorf("UserTexts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(geminiTools, r[0].ToolsOffered); diff != "" {
		t.Errorf("ToolsOffered (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"write:write_file", "shell:run_shell_command", "name:mcp__echo__echo:not-offered"}, r[0].Resolution); diff != "" {
		t.Errorf("Resolution (-want +got):\n%s", diff)
	}
}

func TestGeminiStepSelection(t *testing.T) {
	prompt := gContent("user", gText(geminiSession), gText("write a.txt then run ls"))
	call1 := gContent("model", gCall("write_file", map[string]any{"file_path": "/w/a.txt"}))
	res1 := gContent("user", gResponse("write_file_1", "write_file", map[string]any{"output": "Successfully wrote"}))
	call2 := gContent("model", map[string]any{"text": "let me think", "thought": true}, gCall("run_shell_command", map[string]any{"command": "ls"}))
	res2 := gContent("user", gResponse("run_shell_command_1", "run_shell_command", map[string]any{"error": "denied"}))
	tests := []struct {
		name      string
		contents  []map[string]any
		wantStep  int
		wantTexts []string
		wantRes   []ToolResult
	}{
		{"prompt only", []map[string]any{prompt}, 0, []string{"write a.txt then run ls"}, nil},
		{"one round", []map[string]any{prompt, call1, res1}, 1, []string{"write a.txt then run ls"},
			[]ToolResult{{ToolUseID: "write_file_1", Content: "Successfully wrote"}}},
		{"two rounds, an error result", []map[string]any{prompt, call1, res1, call2, res2}, 2, []string{"write a.txt then run ls"},
			[]ToolResult{{ToolUseID: "write_file_1", Content: "Successfully wrote"}, {ToolUseID: "run_shell_command_1", Content: "denied", IsError: true}}},
		{"split model contents are one turn", []map[string]any{prompt, gContent("model", gText("ok")), call1, res1}, 1,
			[]string{"write a.txt then run ls"}, []ToolResult{{ToolUseID: "write_file_1", Content: "Successfully wrote"}}},
		{"resumed: new prompt", []map[string]any{prompt, gContent("model", gText("done")), gContent("user", gText("second"))}, 0,
			[]string{"write a.txt then run ls", "second"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, geminiPath("m", true), nil)
			x, err := geminiWire{}.decode(req, geminiBody(geminiTools, tt.contents...))
			if err != nil {
				t.Fatal(err)
			}
			if x.turns != tt.wantStep || x.prompt != tt.wantTexts[len(tt.wantTexts)-1] || x.cwd != "/w" || !x.stream || x.model != "m" {
				t.Errorf("step %d prompt %q cwd %q stream %v model %q", x.turns, x.prompt, x.cwd, x.stream, x.model)
			}
			if diff := cmp.Diff(tt.wantTexts, x.userTexts); diff != "" {
				t.Errorf("userTexts (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantRes, x.toolResults); diff != "" {
				t.Errorf("toolResults (-want +got):\n%s", diff)
			}
		})
	}
	for _, b := range []string{``, `{`, `{"model":"m"}`, `{"contents":[{"role":"user","parts":5}]}`} {
		if _, err := (geminiWire{}).decode(nil, []byte(b)); err == nil {
			t.Errorf("decode(%q) succeeded", b)
		}
	}
}

// TestGeminiRouter checks the model router's classifier request (and any
// generateContent asking for JSON by schema) gets JSON that fits, without
// consuming the script.
func TestGeminiRouter(t *testing.T) {
	s, c := start(t, nil)
	router := mustJSON(map[string]any{
		"contents": []any{gContent("user", gText("write hello.txt, then run ls"))},
		"generationConfig": map[string]any{"responseMimeType": "application/json", "responseJsonSchema": map[string]any{
			"type": "OBJECT", "properties": map[string]any{
				"complexity_reasoning": map[string]any{"type": "STRING"},
				"complexity_score":     map[string]any{"type": "INTEGER", "description": "Complexity score from 1-100."},
			}, "required": []any{"complexity_reasoning", "complexity_score"}}},
	})
	res := geminiAnswer(t, c, s.URL(), "gemini-3.5-flash-lite", false, router)
	var v struct {
		Reasoning string `json:"complexity_reasoning"`
		Score     int    `json:"complexity_score"`
	}
	if err := json.Unmarshal([]byte(res.text), &v); err != nil || v.Score < 1 || v.Reasoning == "" || len(res.calls) != 0 {
		t.Errorf("router answer %q: %v", res.text, err)
	}
	r := s.Requests()[0]
	if r.Aux != "json-schema" || r.Rule != "" || r.Stream || r.Model != "gemini-3.5-flash-lite" || r.Prompt != "write hello.txt, then run ls" {
		t.Errorf("log entry %+v", r)
	}
	// Other schemas.
	for _, tt := range []struct {
		schema string
		want   string
	}{
		{`{"type":"object","properties":{"next_speaker":{"type":"string","enum":["model","user"]},"reasoning":{"type":"string"}}}`,
			`{"next_speaker":"user","reasoning":"fakemodel"}`},
		{`{"type":"object","properties":{"n":{"type":"integer","minimum":20},"m":{"type":"number","maximum":3},"ok":{"type":"boolean"},"l":{"type":"array"},"o":{"type":"object"}}}`,
			`{"n":20,"m":3,"ok":false,"l":[],"o":{}}`},
		{`{"type":["string","null"],"enum":["a","b"]}`, `"a"`},
	} {
		var sch any
		_ = json.Unmarshal([]byte(tt.schema), &sch)
		var want any
		_ = json.Unmarshal([]byte(tt.want), &want)
		if diff := jsonDiff(t, want, mustJSON(schemaValue(sch, ""))); diff != "" {
			t.Errorf("schemaValue(%s) (-want +got):\n%s", tt.schema, diff)
		}
	}
	// Without a schema, generateContent is an ordinary, scripted, JSON turn.
	res = geminiAnswer(t, c, s.URL(), "gemini-x", false, geminiFirst("run ls"))
	if len(res.calls) != 1 || res.calls[0].name != "run_shell_command" || res.finish != "STOP" {
		t.Errorf("non-stream turn %+v", res)
	}
}

func TestGeminiErrorsCutAndOtherMethods(t *testing.T) {
	s, c := start(t, mustParse(t, `{"rules":[
		{"match":"^e429","steps":[{"error":{"status":429,"message":"slow down"}}]},
		{"match":"^e400","steps":[{"error":{"status":400}}]},
		{"match":"^e503","steps":[{"error":{"status":503,"message":"busy"}}]},
		{"match":"^cut","steps":[{"text":"a partial answer that breaks","cut":true}]},
		{"match":"^safety","steps":[{"text":"no","stopReason":"SAFETY"}]}]}`))
	for _, tt := range []struct {
		prompt, msg, status string
		code                int
		retryAfter          bool
	}{
		{"e429", "slow down", "RESOURCE_EXHAUSTED", 429, true},
		{"e400", "fakemodel: scripted error 400", "INVALID_ARGUMENT", 400, false},
		{"e503", "busy", "UNAVAILABLE", 503, true},
	} {
		resp, e := errorAnswer(t, c, s.URL(), geminiPath("m", true), geminiFirst(tt.prompt))
		if resp.StatusCode != tt.code || e.Error.Code != float64(tt.code) || e.Error.Message != tt.msg || e.Error.Status != tt.status {
			t.Errorf("%s: %d %+v", tt.prompt, resp.StatusCode, e)
		}
		if (resp.Header.Get("retry-after") == "0") != tt.retryAfter {
			t.Errorf("%s: retry-after %q", tt.prompt, resp.Header.Get("retry-after"))
		}
	}
	evs := readCut(t, postTo(t, c, s.URL(), geminiPath("m", true), geminiFirst("cut")))
	if len(evs) != 1 || !strings.Contains(evs[0].data, `"text":"a `) || strings.Contains(evs[0].data, "finishReason") {
		t.Errorf("cut stream %v", evs)
	}
	if res := geminiAnswer(t, c, s.URL(), "m", false, geminiFirst("cut")); res.text != "a partial answer that breaks" {
		t.Errorf("non-stream after cut: %+v", res)
	}
	if res := geminiAnswer(t, c, s.URL(), "m", true, geminiFirst("safety")); res.finish != "SAFETY" {
		t.Errorf("finishReason %q", res.finish)
	}
	// countTokens, an unknown method, a wrong HTTP method.
	resp := postTo(t, c, s.URL(), "/v1beta/models/m:countTokens", geminiFirst("x"))
	var ct struct {
		TotalTokens int `json:"totalTokens"`
	}
	err := json.NewDecoder(resp.Body).Decode(&ct)
	resp.Body.Close()
	if resp.StatusCode != 200 || err != nil || ct.TotalTokens < 1 {
		t.Errorf("countTokens: %d %v %+v", resp.StatusCode, err, ct)
	}
	resp, e := errorAnswer(t, c, s.URL(), "/v1beta/models/m:embedContent", []byte(`{}`))
	if resp.StatusCode != 404 || e.Error.Status != "NOT_FOUND" {
		t.Errorf("unknown method: %d %+v", resp.StatusCode, e)
	}
	r, _ := c.Get(s.URL() + geminiPath("m", true))
	r.Body.Close()
	if r.StatusCode != 405 {
		t.Errorf("GET: %d", r.StatusCode)
	}
	for _, r := range s.Requests() {
		if r.API != "gemini" {
			t.Errorf("%s logged with api %q", r.Path, r.API)
		}
	}
}
