package claude

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/runner"
	"github.com/drover-run/drover/internal/uestest"
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

// liveReplay replays a live capture the way the runner drove it: the
// recorded inputs passed on after as many of claude's lines as when they
// were written, each recorded as its event. It fails the test when the
// conversation would now write anything other than what was written to
// the real claude, in that order (Open, Pass, Outbox), or would close its
// stdin after another line.
type liveReplay struct {
	t        testing.TB
	name     string
	conv     *conversation
	meta     liveMeta
	stamp    runner.Stamp
	lines    int // claude's lines translated so far
	passed   int // inputs passed so far
	written  int // lines written so far
	closedAt int // lines translated when stdin was closed; -1 while open
}

func (r *liveReplay) Translate(line []byte) ([]drover.Event, error) {
	if r.lines == 0 {
		open, err := r.conv.Open()
		if err != nil {
			r.t.Fatal(err)
		}
		r.wrote(open)
	}
	evs := r.pass()
	out, err := r.conv.Translate(line)
	r.lines++
	r.outbox()
	return append(evs, out...), err
}

func (r *liveReplay) Finished() bool { return r.conv.Finished() }

func (r *liveReplay) Finish(exit runner.Exit) ([]drover.Event, bool) {
	evs := r.pass()
	if r.passed != len(r.meta.Inputs) || r.written != len(r.meta.Stdin) {
		r.t.Errorf("%s: passed %d of %d inputs, wrote %d of %d lines", r.name, r.passed, len(r.meta.Inputs), r.written, len(r.meta.Stdin))
	}
	if r.closedAt != r.meta.ClosedAfter {
		r.t.Errorf("%s: stdin closed after line %d, captured after %d", r.name, r.closedAt, r.meta.ClosedAfter)
	}
	final, rejected := r.conv.Finish(exit)
	return append(evs, final...), rejected
}

// pass passes on the inputs written before claude's next line.
func (r *liveReplay) pass() []drover.Event {
	var evs []drover.Event
	for ; r.passed < len(r.meta.Inputs) && r.meta.Inputs[r.passed].AfterLine <= r.lines; r.passed++ {
		c := r.meta.Inputs[r.passed]
		in := drover.LiveInput{Answer: c.Answer, Steer: c.Steer, Interrupt: c.Interrupt}
		out, err := r.conv.Pass(in)
		if err != nil {
			r.t.Errorf("%s: input %d refused: %v", r.name, r.passed, err)
			continue
		}
		r.wrote(out)
		ev := in.Event()
		ev.Agent, ev.SessionID, ev.Timestamp = r.stamp.Agent, r.stamp.SessionID, r.stamp.Now().UnixMilli()
		evs = append(evs, ev)
		r.outbox()
	}
	return evs
}

func (r *liveReplay) outbox() {
	out, closeInput := r.conv.Outbox()
	r.wrote(out)
	if closeInput && r.closedAt < 0 {
		r.closedAt = r.lines
	}
}

// wrote checks that out, what the conversation writes now, is the next of
// the lines written to the real claude (as JSON, whatever the key order).
func (r *liveReplay) wrote(out []byte) {
	for _, l := range strings.SplitAfter(string(out), "\n") {
		if l == "" {
			continue
		}
		if r.written >= len(r.meta.Stdin) {
			r.t.Errorf("%s: writes %q, more than was written", r.name, l)
			return
		}
		var got, want any
		if json.Unmarshal([]byte(l), &got) != nil || json.Unmarshal([]byte(r.meta.Stdin[r.written]), &want) != nil || !reflect.DeepEqual(got, want) {
			r.t.Errorf("%s: writes %q, captured %q", r.name, l, r.meta.Stdin[r.written])
		}
		r.written++
	}
}

var _ runner.Translator = (*liveReplay)(nil)

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
