package fakemodel

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// sse is one server-sent event as read back.
type sse struct {
	event string
	data  string
}

// readEvents reads a whole SSE stream. It returns what it got with
// io.ErrUnexpectedEOF when the stream breaks off (the connection aborted
// mid-body or mid-event).
func readEvents(r io.Reader) ([]sse, error) {
	var out []sse
	br := bufio.NewReader(r)
	var cur sse
	have := false
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if err == io.EOF && line == "" && !have {
				return out, nil
			}
			return out, io.ErrUnexpectedEOF
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case strings.HasPrefix(line, "event: "):
			cur.event, have = strings.TrimPrefix(line, "event: "), true
		case strings.HasPrefix(line, "data: "):
			cur.data, have = strings.TrimPrefix(line, "data: "), true
		case line == "":
			if have {
				out = append(out, cur)
			}
			cur, have = sse{}, false
		default:
			return out, fmt.Errorf("unexpected SSE line %q", line)
		}
	}
}

// postTo posts b to path and returns the response; the caller closes it.
func postTo(t *testing.T, c *http.Client, url, path string, b []byte) *http.Response {
	t.Helper()
	resp, err := c.Post(url+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	return resp
}

// mustJSON marshals v or panics.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// apiError is an error body of any of the three new shapes.
type apiError struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    any    `json:"code"`
		Status  string `json:"status"`
		Param   any    `json:"param"`
	} `json:"error"`
}

// errorAnswer posts b and decodes an error answer.
func errorAnswer(t *testing.T, c *http.Client, url, path string, b []byte) (*http.Response, apiError) {
	t.Helper()
	resp := postTo(t, c, url, path, b)
	defer resp.Body.Close()
	var e apiError
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatalf("decode error body: %v", err)
	}
	return resp, e
}

// readCut reads a stream that must break off.
func readCut(t *testing.T, resp *http.Response) []sse {
	t.Helper()
	defer resp.Body.Close()
	evs, err := readEvents(resp.Body)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("read error %v, want unexpected EOF", err)
	}
	return evs
}

// answerView is an answer in neutral terms, decoded from any wire.
type answerView struct {
	thinking, text string
	calls          []callView
}

type callView struct {
	name  string
	input string // JSON, or the freeform text of a custom tool
}

// inputMap decodes a call's JSON input.
func (c callView) inputMap(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(c.input), &m); err != nil {
		t.Fatalf("call %s input %q: %v", c.name, c.input, err)
	}
	return m
}

// TestDefaultScriptEveryAPI plays "write hello.txt, then run ls" with the
// built-in script on every vendor API, sending each step's tool results
// back the way the vendor's CLI does.
func TestDefaultScriptEveryAPI(t *testing.T) {
	s, c := start(t, nil)
	const prompt = "write hello.txt, then run ls"
	type step struct{ name, input string }
	check := func(t *testing.T, api string, got []step, final string, wantCalls []step) {
		t.Helper()
		if diff := cmp.Diff(wantCalls, got, cmp.AllowUnexported(step{})); diff != "" {
			t.Errorf("calls (-want +got):\n%s", diff)
		}
		if final != "Done: I wrote hello.txt and ran `ls`." {
			t.Errorf("final text %q", final)
		}
		var steps []int
		for _, r := range s.Requests() {
			if r.API == api && r.Aux == "" {
				steps = append(steps, r.Step)
				if r.Rule != "write-then-run" {
					t.Errorf("rule %q", r.Rule)
				}
			}
		}
		if diff := cmp.Diff([]int{0, 1, 2}, steps); diff != "" {
			t.Errorf("logged steps (-want +got):\n%s", diff)
		}
	}

	t.Run("openai-responses", func(t *testing.T) {
		items := []map[string]any{rMsg("developer", "You are Codex."), rMsg("user", codexEnv), rMsg("user", prompt)}
		var got []step
		for i := 0; i < 2; i++ {
			out, _, _ := respAnswer(t, c, s.URL(), respBody(true, codexTools, items...))
			for _, it := range out {
				items = append(items, it)
				v := respView([]map[string]any{it})
				for _, call := range v.calls {
					got = append(got, step{call.name, call.input})
					typ := "function_call_output"
					if it["type"] == "custom_tool_call" {
						typ = "custom_tool_call_output"
					}
					items = append(items, map[string]any{"type": typ, "call_id": it["call_id"], "output": "ok"})
				}
			}
		}
		out, _, _ := respAnswer(t, c, s.URL(), respBody(true, codexTools, items...))
		check(t, "openai-responses", got, respView(out).text, []step{
			{"apply_patch", "*** Begin Patch\n*** Add File: hello.txt\n+hello from drover\n*** End Patch\n"},
			{"exec_command", `{"cmd":"ls"}`},
		})
	})

	t.Run("openai-chat", func(t *testing.T) {
		msgs := []map[string]any{cMsg("system", openCodeSystem), cMsg("user", prompt+"\n")}
		var got []step
		for i := 0; i < 2; i++ {
			res := chatAnswer(t, c, s.URL(), chatBody(true, openCodeTools, msgs...))
			for j, call := range res.calls {
				got = append(got, step{call.name, call.input})
				msgs = append(msgs, cAssistantCall(res.callIDs[j], call.name, call.input), cTool(res.callIDs[j], "ok"))
			}
		}
		res := chatAnswer(t, c, s.URL(), chatBody(true, openCodeTools, msgs...))
		check(t, "openai-chat", got, res.text, []step{
			{"write", `{"filePath":"/w/hello.txt","content":"hello from drover\n"}`},
			{"bash", `{"command":"ls","description":"Run ls"}`},
		})
	})

	t.Run("gemini", func(t *testing.T) {
		contents := []map[string]any{gContent("user", gText(geminiSession), gText(prompt))}
		var got []step
		for i := 0; i < 2; i++ {
			res := geminiAnswer(t, c, s.URL(), "gemini-2.5-pro", true, geminiBody(geminiTools, contents...))
			for _, call := range res.calls {
				got = append(got, step{call.name, call.input})
				contents = append(contents, gContent("model", gCall(call.name, json.RawMessage(call.input))),
					gContent("user", gResponse(call.name+"_1", call.name, map[string]any{"output": "ok"})))
			}
		}
		res := geminiAnswer(t, c, s.URL(), "gemini-2.5-pro", true, geminiBody(geminiTools, contents...))
		check(t, "gemini", got, res.text, []step{
			{"write_file", `{"file_path":"/w/hello.txt","content":"hello from drover\n"}`},
			{"run_shell_command", `{"command":"ls","description":"Run ls"}`},
		})
	})
}

func TestInjectedBlockAndCwd(t *testing.T) {
	for text, want := range map[string]bool{
		codexEnv:      true,
		geminiSession: true,
		"<user_instructions>\nx\n</user_instructions>":       true,
		"# AGENTS.md instructions for /w\n\n<INSTRUCTIONS>x": true,
		"write hello.txt":             false,
		"<b>bold</b> and more":        false,
		"<cwd>/x</cwd> please run ls": false,
		"<not closed":                 false,
		"<a>\nx\n</b>":                false,
		"  <environment_context>x</environment_context>\n": true,
		"<tag attr=\"1\">x</tag>":                          true,
	} {
		if got := injectedBlock(text); got != want {
			t.Errorf("injectedBlock(%q) = %v", text, got)
		}
	}
	for text, want := range map[string]string{
		geminiSession: "/w",
		"- **Workspace Directories:**\r\n  - /a b\r\n  - /c\r\n": "/a b",
		openCodeSystem: "/w",
		codexEnv:       "/w",
	} {
		if got := findCwd([]string{text}); got != want {
			t.Errorf("findCwd(%q) = %q, want %q", text, got, want)
		}
	}
	if got := titleOf(strings.Repeat("word ", 20) + "\nsecond line"); len([]rune(got)) > 51 || !strings.HasSuffix(got, "…") {
		t.Errorf("titleOf long = %q", got)
	}
	if titleOf("  \n") != "Fakemodel session" {
		t.Errorf("titleOf empty = %q", titleOf(""))
	}
}
