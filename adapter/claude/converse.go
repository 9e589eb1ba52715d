package claude

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/runner"
)

// conversation is the translator of a run that can be answered or steered
// (claude with LiveArgs): the prompt and everything drover passes in are
// stream-json messages on Claude's stdin. The mapping is in
// docs/adapters/claude-code.md ("Interactive runs").
type conversation struct {
	*translator
	prompt string
}

var _ runner.Conversation = (*conversation)(nil)

// newConversation returns the translator of a conversation starting with
// prompt.
func newConversation(tr *translator, prompt string) *conversation {
	tr.live = true
	tr.asked, tr.cancelled = map[string]askedCall{}, map[string]bool{}
	return &conversation{translator: tr, prompt: prompt}
}

// askedCall is a can_use_tool request Claude is waiting on.
type askedCall struct {
	tool, toolUseID string
	input           map[string]any
	suggestions     json.RawMessage
}

// errInputClosed refuses an input that arrives once Claude's stdin is
// closed; the runner takes none then, so this is a safeguard.
var errInputClosed = errors.New("claude's input is closed")

// Open implements runner.Conversation: the prompt as Claude's first user
// message.
func (c *conversation) Open() ([]byte, error) { return userMessage(c.prompt) }

// Pass implements runner.Conversation: an answer becomes the
// control_response to its can_use_tool request, a steering message a user
// message, an interrupt Claude's interrupt control_request. An answer to a
// request Claude has withdrawn (an interrupt came first) is recorded but
// not sent; an answer to a request Claude never asked is refused.
func (c *conversation) Pass(in drover.LiveInput) ([]byte, error) {
	if c.inputClosed {
		return nil, errInputClosed
	}
	switch {
	case in.Answer != nil:
		return c.answer(*in.Answer)
	case in.Steer != nil:
		c.steers = append(c.steers, strings.TrimSpace(in.Steer.Message))
		return userMessage(in.Steer.Message)
	case in.Interrupt != nil:
		c.interrupts++
		c.interrupting = true
		return jsonLine(map[string]any{"type": "control_request", "request_id": fmt.Sprintf("drover-interrupt-%d", c.interrupts),
			"request": map[string]any{"subtype": "interrupt"}})
	}
	return nil, errors.New("empty live input")
}

// Outbox implements runner.Conversation: replies to control requests
// drover does not serve, and whether Claude's stdin is to be closed (its
// turn is over and nothing of drover's is still queued in it).
func (c *conversation) Outbox() ([]byte, bool) {
	out := c.outbox
	c.outbox = nil
	return out, c.inputClosed
}

func (c *conversation) answer(a drover.PermissionAnswerPayload) ([]byte, error) {
	if c.cancelled[a.RequestID] {
		delete(c.cancelled, a.RequestID)
		return nil, nil
	}
	call, ok := c.asked[a.RequestID]
	if !ok {
		return nil, fmt.Errorf("answer to request %q, which claude did not ask", a.RequestID)
	}
	delete(c.asked, a.RequestID)
	decision := map[string]any{"behavior": string(a.Behavior)}
	if a.Behavior == drover.Allow {
		// Claude runs the call with updatedInput: the input as asked,
		// unless the answer changed it.
		input := a.UpdatedInput
		if input == nil {
			input = call.input
		}
		decision["updatedInput"] = input
		if a.Always {
			if rules := sessionRules(call); len(rules) > 0 {
				decision["updatedPermissions"] = rules
			}
		}
	} else {
		// Authoritative: the tool_result that follows is this denial.
		c.denied[call.toolUseID] = true
		msg := a.Message
		if msg == "" {
			msg = "denied"
		}
		decision["message"] = msg
	}
	return jsonLine(map[string]any{"type": "control_response", "response": map[string]any{
		"subtype": "success", "request_id": a.RequestID, "response": decision}})
}

// sessionRules returns the permission updates that make Claude allow an
// "always" answered call by itself for the rest of its session: those of
// Claude's own suggestions that add allow rules for exactly this call (the
// tool, and as rule content the call's subject, such as a shell command,
// without wildcards), scoped to the session. A broader suggestion (a
// command prefix, a whole domain, a mode) would let Claude run calls drover
// never allowed; then no rule is sent, and drover answers the same call
// again from its own grant when Claude asks.
func sessionRules(call askedCall) []map[string]any {
	var suggestions []map[string]any
	if json.Unmarshal(call.suggestions, &suggestions) != nil {
		return nil
	}
	subject := drover.CallSubject(call.input)
	var out []map[string]any
	for _, s := range suggestions {
		if s["type"] != "addRules" || s["behavior"] != "allow" || !exactRules(s["rules"], call.tool, subject) {
			continue
		}
		s["destination"] = "session"
		out = append(out, s)
	}
	return out
}

func exactRules(v any, tool, subject string) bool {
	rules, ok := v.([]any)
	if !ok || len(rules) == 0 {
		return false
	}
	for _, r := range rules {
		m, _ := r.(map[string]any)
		content, _ := m["ruleContent"].(string)
		if m["toolName"] != tool || content != subject || strings.Contains(content, "*") {
			return false
		}
	}
	return true
}

// controlRequest maps a control_request of Claude's: can_use_tool becomes
// permission_request, unless Claude's stdin is closed (nobody could send
// the answer; Claude denies the call itself). Anything else is answered
// with an error, so that Claude never waits for drover.
func (t *translator) controlRequest(l line, raw []byte) []drover.Event {
	r := l.Request
	if r == nil || r.Subtype != "can_use_tool" || !t.live || t.inputClosed || l.RequestID == "" {
		if t.live && !t.inputClosed && l.RequestID != "" {
			subtype := ""
			if r != nil {
				subtype = r.Subtype
			}
			out, _ := jsonLine(map[string]any{"type": "control_response", "response": map[string]any{
				"subtype": "error", "request_id": l.RequestID, "error": "drover does not serve control requests of subtype " + subtype}})
			t.outbox = append(t.outbox, out...)
		}
		return []drover.Event{t.Extension(l.Type, raw)}
	}
	input := r.Input
	if input == nil {
		input = map[string]any{}
	}
	t.asked[l.RequestID] = askedCall{tool: r.ToolName, toolUseID: r.ToolUseID, input: input, suggestions: r.PermissionSuggestions}
	ev := t.Event(drover.TypePermissionRequest, drover.PermissionRequestPayload{RequestID: l.RequestID,
		ToolName: r.ToolName, ToolUseID: r.ToolUseID, Input: input, Description: tools.Describe(r.ToolName, input), Reason: r.Description})
	var suggestions []any
	if json.Unmarshal(r.PermissionSuggestions, &suggestions) == nil && len(suggestions) > 0 {
		ev.Metadata = map[string]any{"permissionSuggestions": suggestions}
	}
	if r.DecisionReason != "" {
		if ev.Metadata == nil {
			ev.Metadata = map[string]any{}
		}
		ev.Metadata["decisionReason"] = r.DecisionReason
	}
	return []drover.Event{ev}
}

// controlCancel records that Claude withdrew a question (an interrupt
// ended the turn first): its answer is not sent, and the call, which never
// ran, is denied. The engine is told (drover:permission_withdrawn), so the
// request is answered at once instead of waiting for its deadline.
func (t *translator) controlCancel(l line, raw []byte) []drover.Event {
	evs := []drover.Event{t.Extension(l.Type, raw)}
	if call, ok := t.asked[l.RequestID]; ok {
		delete(t.asked, l.RequestID)
		t.cancelled[l.RequestID] = true
		t.denied[call.toolUseID] = true
		evs = append(evs, t.Event(drover.TypePermissionWithdrawn, drover.PermissionWithdrawnPayload{RequestID: l.RequestID,
			Reason: "claude cancelled the question"}))
	}
	return evs
}

// echoed takes the steering messages Claude echoes back (it echoes each
// user message of drover's when it takes it; messages queued together come
// back as one, a text block each) off the list of those still to come.
func (t *translator) echoed(l line) {
	if len(t.steers) == 0 {
		return
	}
	for _, b := range t.blocks(l) {
		for i, s := range t.steers {
			if b.Type == "text" && strings.TrimSpace(b.Text) == s {
				t.steers = append(t.steers[:i], t.steers[i+1:]...)
				break
			}
		}
	}
}

// userMessage is a stream-json user message with text.
func userMessage(text string) ([]byte, error) {
	return jsonLine(map[string]any{"type": "user", "message": map[string]any{"role": "user",
		"content": []map[string]any{{"type": "text", "text": text}}}})
}

// jsonLine is v as one JSON line.
func jsonLine(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
