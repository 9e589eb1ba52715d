package acpagent

import (
	"encoding/json"
	"testing"

	acp "github.com/coder/acp-go-sdk"
	"github.com/drover-run/drover"
	"github.com/google/go-cmp/cmp"
)

// TestTranslatePlans: a to-do tool's call is the session's plan (its
// result not shown), and so is Codex's plan event in both its forms.
func TestTranslatePlans(t *testing.T) {
	tr := newTranslator()
	us := tr.updates(drover.Event{Type: drover.TypeToolUse, Payload: drover.ToolUsePayload{ToolName: "TodoWrite", ToolUseID: "t1",
		Input: map[string]any{"todos": []any{
			map[string]any{"content": "read", "status": "completed"},
			map[string]any{"content": "write", "status": "in_progress"},
			map[string]any{"content": "test", "status": "pending"},
		}}}})
	want := []acp.PlanEntry{
		{Content: "read", Status: acp.PlanEntryStatusCompleted, Priority: acp.PlanEntryPriorityMedium},
		{Content: "write", Status: acp.PlanEntryStatusInProgress, Priority: acp.PlanEntryPriorityMedium},
		{Content: "test", Status: acp.PlanEntryStatusPending, Priority: acp.PlanEntryPriorityMedium},
	}
	if len(us) != 1 || us[0].Plan == nil {
		t.Fatalf("TodoWrite: %+v, want a plan", us)
	}
	if diff := cmp.Diff(want, us[0].Plan.Entries); diff != "" {
		t.Fatalf("plan (-want +got):\n%s", diff)
	}
	if us := tr.updates(drover.Event{Type: drover.TypeToolResult, Payload: drover.ToolResultPayload{ToolUseID: "t1", ToolName: "TodoWrite",
		Status: drover.ToolSuccess}}); us != nil {
		t.Fatalf("the plan's tool result was shown: %+v", us)
	}

	for name, raw := range map[string]string{
		"exec":       `{"type":"item.completed","item":{"type":"todo_list","items":[{"text":"read","completed":true},{"text":"write","completed":false}]}}`,
		"app-server": `{"method":"turn/plan/updated","params":{"plan":[{"step":"read","status":"completed"},{"step":"write","status":"inProgress"}]}}`,
	} {
		us := tr.updates(drover.Event{Type: "codex:plan_update", Payload: json.RawMessage(raw)})
		if len(us) != 1 || us[0].Plan == nil || len(us[0].Plan.Entries) != 2 || us[0].Plan.Entries[0].Content != "read" ||
			us[0].Plan.Entries[0].Status != acp.PlanEntryStatusCompleted || us[0].Plan.Entries[1].Status == acp.PlanEntryStatusCompleted {
			t.Errorf("codex %s plan: %+v", name, us)
		}
	}
	if us := tr.updates(drover.Event{Type: "codex:turn_started", Payload: json.RawMessage(`{}`)}); us != nil {
		t.Errorf("another extension event was shown: %+v", us)
	}
}

// TestTranslateToolCalls: an edit shows its diff; a call asked about
// before it was shown is shown by the question; a result of a call never
// shown shows it ended.
func TestTranslateToolCalls(t *testing.T) {
	tr := newTranslator()
	us := tr.updates(drover.Event{Type: drover.TypeToolUse, Payload: drover.ToolUsePayload{ToolName: "Edit", ToolUseID: "e1",
		Input: map[string]any{"file_path": "/w/a.go", "old_string": "x := 1", "new_string": "x := 2"}}})
	if len(us) != 1 || us[0].ToolCall == nil || us[0].ToolCall.Kind != acp.ToolKindEdit || len(us[0].ToolCall.Content) != 1 {
		t.Fatalf("edit: %+v", us)
	}
	d := us[0].ToolCall.Content[0].Diff
	if d == nil || d.Path != "/w/a.go" || d.NewText != "x := 2" || d.OldText == nil || *d.OldText != "x := 1" {
		t.Fatalf("edit diff %+v", d)
	}

	req := drover.PermissionRequestPayload{RequestID: "q9", ToolName: "run_shell_command", Input: map[string]any{"command": "ls"}}
	us = tr.updates(drover.Event{Type: drover.TypePermissionRequest, Payload: req})
	if len(us) != 1 || us[0].ToolCall == nil || us[0].ToolCall.ToolCallId != "q9" || us[0].ToolCall.Kind != acp.ToolKindExecute {
		t.Fatalf("a question about a call not shown: %+v", us)
	}
	if us := tr.updates(drover.Event{Type: drover.TypePermissionRequest, Payload: req}); us != nil {
		t.Fatalf("the call was shown twice: %+v", us)
	}

	us = tr.updates(drover.Event{Type: drover.TypeToolResult, Payload: drover.ToolResultPayload{ToolUseID: "z1", ToolName: "mcp__x__y",
		Status: drover.ToolError, Output: "boom"}})
	if len(us) != 1 || us[0].ToolCall == nil || us[0].ToolCall.Status != acp.ToolCallStatusFailed || us[0].ToolCall.Kind != acp.ToolKindOther {
		t.Fatalf("result of a call never shown: %+v", us)
	}
}
