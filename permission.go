package drover

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// Behavior is what a permission decision says: allow or deny.
type Behavior string

// The two behaviors of a permission decision.
const (
	Allow Behavior = "allow"
	Deny  Behavior = "deny"
)

// PermissionDecision answers a permission request (CTL-1).
type PermissionDecision struct {
	// Behavior allows or denies the call.
	Behavior Behavior `json:"behavior"`
	// Message is what the model is told: the reason of a denial, or a note
	// with an allowed call.
	Message string `json:"message,omitempty"`
	// UpdatedInput, with allow, replaces the call's input (a corrected
	// command, a narrower path). nil keeps the input as asked.
	UpdatedInput map[string]any `json:"updatedInput,omitempty"`
	// Always, with allow, allows the same call (tool and subject, see
	// PermissionRule) for the rest of the run without asking again.
	Always bool `json:"always,omitempty"`
}

// PermissionFunc decides a permission request: the shape of the Claude
// Agent SDK's canUseTool (PERM-2). ctx ends at the request's deadline, when
// another answer came first, or when the run ends; an answer after that is
// ignored. An error denies the call with the error's text.
type PermissionFunc func(ctx context.Context, req PermissionRequestPayload) (PermissionDecision, error)

// AnswerSource says who answered a permission request.
type AnswerSource string

// Who answers permission requests (CTL-1).
const (
	// ByRule: a PermissionRule, or an earlier "always" answer, matched.
	ByRule AnswerSource = "rule"
	// ByCallback: Options.CanUseTool answered.
	ByCallback AnswerSource = "callback"
	// ByClient: an answer through Control.Respond (a protocol or HTTP
	// client, the dashboard, a person at the terminal, drover approve).
	ByClient AnswerSource = "client"
	// ByDeadline: nobody answered before the deadline; the call is denied.
	ByDeadline AnswerSource = "deadline"
	// ByDefault: nobody could answer (no callback, no approval timeout); the
	// call is denied at once, as a supervised run always did.
	ByDefault AnswerSource = "default"
	// ByRunEnd: the run ended with the request open; the call is denied.
	ByRunEnd AnswerSource = "run_end"
	// ByAgent: the agent withdrew its question (its turn ended first);
	// the call never ran.
	ByAgent AnswerSource = "agent"
)

// TypePermissionWithdrawn is what an adapter yields when its vendor
// withdraws a permission request it asked (the turn ended before an
// answer): the engine then answers it deny, by the agent, and does not
// pass the event on. Its payload is a PermissionWithdrawnPayload.
const TypePermissionWithdrawn EventType = "drover:permission_withdrawn"

// PermissionWithdrawnPayload is the payload of "drover:permission_withdrawn".
type PermissionWithdrawnPayload struct {
	RequestID string `json:"requestId"`
	Reason    string `json:"reason,omitempty"`
}

// TypePermissionAnswer is the event recording the answer to a permission
// request: its payload is a PermissionAnswerPayload. drover's own
// extension events are namespaced "drover:" (UES-3).
const TypePermissionAnswer EventType = "drover:permission_answer"

// PermissionAnswerPayload is the payload of "drover:permission_answer": a
// request's one answer, who gave it and when.
type PermissionAnswerPayload struct {
	RequestID string `json:"requestId"`
	ToolName  string `json:"toolName,omitempty"`
	ToolUseID string `json:"toolUseId,omitempty"`
	PermissionDecision
	// By is who answered; Detail names the rule, or the client
	// ("protocol", "http", "dashboard", "terminal", "drover approve").
	By     AnswerSource `json:"by"`
	Detail string       `json:"detail,omitempty"`
	// AskedAt and AnsweredAt are Unix milliseconds.
	AskedAt    int64 `json:"askedAt"`
	AnsweredAt int64 `json:"answeredAt"`
}

// TypeSteer is the event recording a user message sent into a live run
// (CTL-3); its payload is a SteerPayload.
const TypeSteer EventType = "drover:steer"

// SteerPayload is the payload of "drover:steer".
type SteerPayload struct {
	Message string `json:"message"`
	// By names who sent it, as PermissionAnswerPayload.Detail does.
	By string `json:"by,omitempty"`
}

// TypeInterrupt is the event recording that the current turn was
// interrupted (CTL-3); its payload is an InterruptPayload.
const TypeInterrupt EventType = "drover:interrupt"

// InterruptPayload is the payload of "drover:interrupt".
type InterruptPayload struct {
	By string `json:"by,omitempty"`
}

// PermissionRule answers matching permission requests without asking
// (CTL-2). Its text form is BEHAVIOR:TOOL or BEHAVIOR:TOOL(PATTERN):
// "allow:Read", "allow:Bash(git status*)", "deny:Bash(rm *)", "deny:*".
type PermissionRule struct {
	Behavior Behavior
	// Tool is the tool's exact name as the vendor asks for it, or "*" for
	// every tool.
	Tool string
	// Pattern, when set, must match the call's subject: its command (shell
	// tools), file path, URL or search pattern, else its input as JSON. "*"
	// matches any run of characters (including "/" and spaces), "?" one
	// character; everything else matches itself. Empty matches any call.
	Pattern string
}

// ParsePermissionRule parses the text form of a rule.
func ParsePermissionRule(s string) (PermissionRule, error) {
	b, rest, ok := strings.Cut(strings.TrimSpace(s), ":")
	r := PermissionRule{Behavior: Behavior(strings.ToLower(strings.TrimSpace(b)))}
	if !ok || (r.Behavior != Allow && r.Behavior != Deny) {
		return r, fmt.Errorf("permission rule %q: want allow:TOOL, deny:TOOL or BEHAVIOR:TOOL(PATTERN)", s)
	}
	rest = strings.TrimSpace(rest)
	if i := strings.IndexByte(rest, '('); i >= 0 {
		if !strings.HasSuffix(rest, ")") {
			return r, fmt.Errorf("permission rule %q: the pattern must end with ')'", s)
		}
		r.Tool, r.Pattern = strings.TrimSpace(rest[:i]), rest[i+1:len(rest)-1]
	} else {
		r.Tool = rest
	}
	if r.Tool == "" {
		return r, fmt.Errorf("permission rule %q: no tool name", s)
	}
	return r, nil
}

// String returns the rule's text form.
func (r PermissionRule) String() string {
	s := string(r.Behavior) + ":" + r.Tool
	if r.Pattern != "" {
		s += "(" + r.Pattern + ")"
	}
	return s
}

// MarshalText writes the rule's text form (its JSON is a string).
func (r PermissionRule) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText parses the rule's text form.
func (r *PermissionRule) UnmarshalText(b []byte) error {
	v, err := ParsePermissionRule(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// CallSubject is what a rule's pattern is matched against: the input's
// command, file path, URL or search pattern (the first of those keys that
// holds a string, or a list of strings joined by spaces), else the input
// as JSON.
func CallSubject(input map[string]any) string {
	for _, k := range []string{"command", "cmd", "file_path", "path", "filePath", "notebook_path", "url", "pattern", "query"} {
		switch v := input[k].(type) {
		case string:
			if v != "" {
				return v
			}
		case []any:
			parts := make([]string, 0, len(v))
			for _, p := range v {
				parts = append(parts, fmt.Sprint(p))
			}
			if len(parts) > 0 {
				return strings.Join(parts, " ")
			}
		}
	}
	return compactJSON(input)
}

// compactJSON is v as JSON, or "" when it cannot be encoded.
func compactJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}
