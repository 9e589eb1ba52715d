package claude

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/testkit/uestest"
)

// liveMeta is the part of a live capture's .meta.json (written by
// e2e/capture_claude_test.go) a replay needs: the lines drover wrote to
// claude (the prompt first), the inputs it passed on with the number of
// claude's lines before each, and after how many lines stdin was closed.
type liveMeta struct {
	Stdin  []string `json:"stdin"`
	Inputs []struct {
		AfterLine int                             `json:"afterLine"`
		Answer    *drover.PermissionAnswerPayload `json:"answer"`
		Steer     *drover.SteerPayload            `json:"steer"`
		Interrupt *drover.InterruptPayload        `json:"interrupt"`
	} `json:"inputs"`
	ClosedAfter int `json:"stdinClosedAfterLine"`
}

// prompt is the text of the first message drover wrote.
func (m liveMeta) prompt(t testing.TB) string {
	var first struct {
		Message struct {
			Content []struct{ Text string } `json:"content"`
		} `json:"message"`
	}
	if err := json.Unmarshal([]byte(m.Stdin[0]), &first); err != nil || len(first.Message.Content) != 1 {
		t.Fatalf("first line written %q: %v", m.Stdin[0], err)
	}
	return first.Message.Content[0].Text
}

// replay is the conversation the capture recorded: the lines written
// (compared as JSON values, whatever the key order), the inputs, and after
// which of claude's lines stdin was closed.
func (m liveMeta) replay() uestest.ConversationReplay {
	r := uestest.ConversationReplay{Written: m.Stdin, ClosedAfter: &m.ClosedAfter}
	for _, in := range m.Inputs {
		r.Inputs = append(r.Inputs, uestest.Input{After: in.AfterLine,
			LiveInput: drover.LiveInput{Answer: in.Answer, Steer: in.Steer, Interrupt: in.Interrupt}})
	}
	return r
}

// TestPERM2_AlwaysAsSessionRule: an "always" answer carries Claude's own
// suggestion as a session rule only when it allows exactly that call.
func TestPERM2_AlwaysAsSessionRule(t *testing.T) {
	conv := newConversation(newTranslator(uestest.Stamp(ID), false), "p")
	ask := func(id, command, suggestions string) {
		line := `{"type":"control_request","request_id":"` + id + `","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"` +
			command + `"},"permission_suggestions":` + suggestions + `,"tool_use_id":"tu-` + id + `"}}`
		if evs, err := conv.Translate([]byte(line)); err != nil || len(evs) != 1 || evs[0].Type != drover.TypePermissionRequest {
			t.Fatalf("%s: %v %v", id, evs, err)
		}
	}
	always := func(id string) map[string]any {
		out, err := conv.Pass(drover.LiveInput{Answer: &drover.PermissionAnswerPayload{RequestID: id,
			PermissionDecision: drover.PermissionDecision{Behavior: drover.Allow, Always: true}}})
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Response struct {
				Response map[string]any `json:"response"`
			} `json:"response"`
		}
		json.Unmarshal(out, &m)
		return m.Response.Response
	}
	ask("a", "touch x", `[{"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"touch x"}],"behavior":"allow","destination":"localSettings"}]`)
	got := always("a")
	want := []any{map[string]any{"type": "addRules", "rules": []any{map[string]any{"toolName": "Bash", "ruleContent": "touch x"}},
		"behavior": "allow", "destination": "session"}}
	if !reflect.DeepEqual(got["updatedPermissions"], want) || !reflect.DeepEqual(got["updatedInput"], map[string]any{"command": "touch x"}) {
		t.Fatalf("allow always: %v", got)
	}
	for id, sugg := range map[string]string{
		"prefix":   `[{"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"touch:*"}],"behavior":"allow","destination":"localSettings"}]`,
		"mode":     `[{"type":"setMode","mode":"acceptEdits","destination":"session"}]`,
		"wildcard": `[{"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"touch *"}],"behavior":"allow","destination":"localSettings"}]`,
		"none":     `null`,
	} {
		cmd := "touch x"
		if id == "wildcard" {
			cmd = "touch *"
		}
		ask(id, cmd, sugg)
		if got := always(id); got["updatedPermissions"] != nil {
			t.Errorf("%s: a broader rule was sent: %v", id, got["updatedPermissions"])
		}
	}
}

// TestCTL3_ConversationWrites: what the conversation writes for each
// input: the prompt and a steering message as user messages, an interrupt
// as Claude's interrupt request, a changed input with an allow; an answer
// to a request Claude withdrew is recorded but not written, one to a
// request never asked is refused; an unknown control request is answered
// with an error; stdin closes after a result unless a steering message has
// not come back yet.
func TestCTL3_ConversationWrites(t *testing.T) {
	conv := newConversation(newTranslator(uestest.Stamp(ID), false), "hello")
	decode := func(b []byte) map[string]any {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil || !strings.HasSuffix(string(b), "\n") || strings.Count(string(b), "\n") != 1 {
			t.Fatalf("not one JSON line: %q", b)
		}
		return m
	}
	open, _ := conv.Open()
	if m := decode(open); m["type"] != "user" || !strings.Contains(string(open), `"text":"hello"`) {
		t.Fatalf("open %s", open)
	}
	out, _ := conv.Pass(drover.LiveInput{Steer: &drover.SteerPayload{Message: "left"}})
	if m := decode(out); m["type"] != "user" || !strings.Contains(string(out), `"text":"left"`) {
		t.Fatalf("steer %s", out)
	}
	out, _ = conv.Pass(drover.LiveInput{Interrupt: &drover.InterruptPayload{}})
	if m := decode(out); m["type"] != "control_request" || m["request_id"] != "drover-interrupt-1" ||
		m["request"].(map[string]any)["subtype"] != "interrupt" {
		t.Fatalf("interrupt %s", out)
	}

	conv.Translate([]byte(`{"type":"control_request","request_id":"r1","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"make"},"tool_use_id":"tu1"}}`))
	out, _ = conv.Pass(drover.LiveInput{Answer: &drover.PermissionAnswerPayload{RequestID: "r1",
		PermissionDecision: drover.PermissionDecision{Behavior: drover.Allow, UpdatedInput: map[string]any{"command": "make -n"}}}})
	if !strings.Contains(string(out), `"updatedInput":{"command":"make -n"}`) {
		t.Fatalf("allow with a changed input: %s", out)
	}
	conv.Translate([]byte(`{"type":"control_request","request_id":"r2","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"rm x"},"tool_use_id":"tu2"}}`))
	conv.Translate([]byte(`{"type":"control_cancel_request","request_id":"r2"}`))
	if out, err := conv.Pass(drover.LiveInput{Answer: &drover.PermissionAnswerPayload{RequestID: "r2",
		PermissionDecision: drover.PermissionDecision{Behavior: drover.Allow}}}); out != nil || err != nil {
		t.Fatalf("answer to a withdrawn request: %q %v", out, err)
	}
	if _, err := conv.Pass(drover.LiveInput{Answer: &drover.PermissionAnswerPayload{RequestID: "r9"}}); err == nil {
		t.Fatal("an answer to a request never asked was passed on")
	}
	evs, _ := conv.Translate([]byte(`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","content":"The user doesn't want to proceed","is_error":true,"tool_use_id":"tu2"}]}}`))
	if p := evs[0].Payload.(drover.ToolResultPayload); p.Status != drover.ToolDenied {
		t.Fatalf("the withdrawn call's result %+v, want denied", p)
	}

	conv.Translate([]byte(`{"type":"control_request","request_id":"h1","request":{"subtype":"hook_callback"}}`))
	if out, closeInput := conv.Outbox(); !strings.Contains(string(out), `"subtype":"error"`) || !strings.Contains(string(out), `"request_id":"h1"`) || closeInput {
		t.Fatalf("outbox after an unknown request: %s %v", out, closeInput)
	}
	conv.Translate([]byte(`{"type":"result","subtype":"success","session_id":"s"}`))
	if _, closeInput := conv.Outbox(); closeInput {
		t.Fatal("stdin closed while a steering message is still to come back")
	}
	conv.Translate([]byte(`{"type":"user","isReplay":true,"message":{"role":"user","content":[{"type":"text","text":"left\n"}]}}`))
	conv.Translate([]byte(`{"type":"result","subtype":"success","session_id":"s"}`))
	if _, closeInput := conv.Outbox(); !closeInput {
		t.Fatal("stdin still open after the last turn's result")
	}
	if _, err := conv.Pass(drover.LiveInput{Steer: &drover.SteerPayload{Message: "late"}}); err == nil {
		t.Fatal("an input was passed on after stdin closed")
	}
}
