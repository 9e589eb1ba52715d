package claude

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/runner"
	"github.com/drover-run/drover/internal/testkit/uestest"
)

var update = flag.Bool("update", false, "rewrite .golden files from the captured native streams")

// replayer drives the translator over the captures without a resume
// token (resume_ok and compact were resumed runs: cost_test.go replays
// them with one). A live capture (one with what drover wrote) is replayed as
// the conversation it was (liveMeta.replay).
var replayer = uestest.Replayer{Agent: ID, New: func(t testing.TB, c uestest.Capture, s runner.Stamp) runner.Translator {
	var m liveMeta
	if c.Meta.Decode(&m) == nil && len(m.Stdin) > 0 {
		return m.replay().Translator(t, c, newConversation(newTranslator(s, false), m.prompt(t)), s)
	}
	return newTranslator(s, false)
}}

// TestADP2_Golden checks every captured Claude stream against its golden UES
// file, and every golden event against the UES JSON Schema (UES-4).
func TestADP2_Golden(t *testing.T) { replayer.Golden(t, *update) }

// TestADP2_GoldenSemantics pins what each captured case must mean, so a
// golden regenerated from a broken translator cannot pass unnoticed.
func TestADP2_GoldenSemantics(t *testing.T) {
	cases := map[string]uestest.Expect{
		"text":                 {Types: []drover.EventType{"init", "text", "done"}, Status: drover.StatusSuccess},
		"text_partial":         {Types: []drover.EventType{"init", "text_delta", "text", "done"}, Status: drover.StatusSuccess},
		"thinking":             {Types: []drover.EventType{"init", "thinking", "text", "done"}, Status: drover.StatusSuccess},
		"bash":                 {Types: []drover.EventType{"init", "tool_use", "tool_result", "text", "done"}, Status: drover.StatusSuccess, ToolState: drover.ToolSuccess},
		"bash_error":           {Types: []drover.EventType{"tool_use", "tool_result", "done"}, Status: drover.StatusSuccess, ToolState: drover.ToolError},
		"write_denied_default": {Types: []drover.EventType{"tool_use", "tool_result", "done"}, Status: drover.StatusSuccess, ToolState: drover.ToolDenied},
		"write_denied_dontask": {Types: []drover.EventType{"tool_use", "tool_result", "done"}, Status: drover.StatusSuccess, ToolState: drover.ToolDenied},
		"dryrun_write_denied":  {Types: []drover.EventType{"tool_use", "tool_result", "done"}, Status: drover.StatusSuccess, ToolState: drover.ToolDenied},
		"write_acceptedits":    {Types: []drover.EventType{"tool_use", "tool_result", "done"}, Status: drover.StatusSuccess, ToolState: drover.ToolSuccess},
		"disallowed_tool":      {Types: []drover.EventType{"tool_use", "tool_result", "done"}, Status: drover.StatusSuccess, ToolState: drover.ToolDenied},
		"max_turns":            {Types: []drover.EventType{"tool_use", "tool_result", "done"}, Status: drover.StatusMaxTurns},
		"max_budget":           {Types: []drover.EventType{"tool_use", "done"}, Status: drover.StatusMaxBudget},
		"err_429":              {Types: []drover.EventType{"init", "error", "done"}, Status: drover.StatusError, ErrCode: drover.CodeRateLimited},
		"err_401":              {Types: []drover.EventType{"error", "done"}, Status: drover.StatusError, ErrCode: drover.CodeAuthFailed},
		"err_500":              {Types: []drover.EventType{"error", "done"}, Status: drover.StatusError, ErrCode: drover.CodeServerError},
		"err_529":              {Types: []drover.EventType{"error", "done"}, Status: drover.StatusError, ErrCode: drover.CodeOverloaded},
		"err_400":              {Types: []drover.EventType{"error", "done"}, Status: drover.StatusError, ErrCode: drover.CodeBadRequest},
		"resume_ok":            {Types: []drover.EventType{"init", "text", "done"}, Status: drover.StatusSuccess},
		"resume_unknown":       {Types: []drover.EventType{"error", "done"}, Status: drover.StatusError, ErrCode: drover.CodeExecutionError},
		"cut_partial":          {Types: []drover.EventType{"init", "text_delta", "text", "done"}, Status: drover.StatusSuccess},
		// cut_partial with the result's usage all zero, as Claude reports it after a
		// non-streaming fallback: the tokens come from modelUsage.
		"usage_in_model_usage": {Types: []drover.EventType{"init", "text_delta", "text", "done"}, Status: drover.StatusSuccess,
			Usage: &drover.Usage{InputTokens: 20, OutputTokens: 8}},
		// A resumed /compact: the tokens of its own calls, not the session's (ACC-1).
		"compact": {Types: []drover.EventType{"init", "claude-code:compact", "done"}, Status: drover.StatusSuccess,
			Usage: &drover.Usage{InputTokens: 20, OutputTokens: 10}},
		"sigint":                   {Types: []drover.EventType{"init"}},
		"sigterm":                  {Types: []drover.EventType{"init"}},
		"long_bash":                {Types: []drover.EventType{"tool_use", "tool_result", "done"}, Status: drover.StatusSuccess, ToolState: drover.ToolSuccess},
		"sandbox_bash":             {Types: []drover.EventType{"init", "tool_use", "tool_result", "done"}, Status: drover.StatusSuccess, ToolState: drover.ToolDenied},
		"dryrun_write_denied_mode": {Types: []drover.EventType{"tool_use", "tool_result", "done"}, Status: drover.StatusSuccess, ToolState: drover.ToolDenied},
		"supervised_touch_denied":  {Types: []drover.EventType{"tool_use", "tool_result", "done"}, Status: drover.StatusSuccess, ToolState: drover.ToolDenied},
		"autonomous_bash":          {Types: []drover.EventType{"tool_use", "tool_result", "done"}, Status: drover.StatusSuccess, ToolState: drover.ToolSuccess},
		"agent_background":         {Types: []drover.EventType{"init", "tool_use", "tool_result", "claude-code:init", "text", "done"}, Status: drover.StatusSuccess},
		// MCP tools (MCP-2): named mcp__SERVER__TOOL; allowed by the
		// sandbox's rule, denied by dontAsk in headless supervised.
		"mcp_allowed": {Types: []drover.EventType{"init", "tool_use", "tool_result", "text", "done"}, Status: drover.StatusSuccess,
			ToolState: drover.ToolSuccess, ToolName: "mcp__echo__echo"},
		"mcp_denied": {Types: []drover.EventType{"init", "tool_use", "claude-code:permission_denied", "tool_result", "text", "done"}, Status: drover.StatusSuccess,
			ToolState: drover.ToolDenied, ToolName: "mcp__echo__echo"},

		// Interactive runs (captured by e2e/interactive_claude_test.go).
		"live_allow": {Types: []drover.EventType{"init", "tool_use", "permission_request", "drover:permission_answer", "tool_result", "text", "done"},
			Status: drover.StatusSuccess, ToolState: drover.ToolSuccess, ToolName: "Bash"},
		"live_deny": {Types: []drover.EventType{"tool_use", "permission_request", "drover:permission_answer", "tool_result", "text", "done"},
			Status: drover.StatusSuccess, ToolState: drover.ToolDenied, ToolName: "Bash"},
		"live_deadline": {Types: []drover.EventType{"permission_request", "drover:permission_answer", "tool_result", "done"},
			Status: drover.StatusSuccess, ToolState: drover.ToolDenied, ToolName: "Bash"},
		"live_always": {Types: []drover.EventType{"permission_request", "drover:permission_answer", "tool_result", "tool_use", "tool_result", "done"},
			Status: drover.StatusSuccess, ToolState: drover.ToolSuccess, ToolName: "Bash"},
		"live_steer_tool": {Types: []drover.EventType{"init", "tool_use", "drover:steer", "tool_result", "text", "done"},
			Status: drover.StatusSuccess, ToolState: drover.ToolSuccess},
		"live_steer_queued": {Types: []drover.EventType{"init", "drover:steer", "text", "claude-code:init", "permission_request", "drover:permission_answer", "tool_result", "text", "done"},
			Status: drover.StatusSuccess, ToolState: drover.ToolSuccess},
		"live_interrupt":       {Types: []drover.EventType{"init", "drover:interrupt", "done"}, Status: drover.StatusInterrupted},
		"live_interrupt_asked": {Types: []drover.EventType{"permission_request", "drover:interrupt", "claude-code:control_cancel_request", "tool_result", "done"}, Status: drover.StatusInterrupted, ToolState: drover.ToolDenied},
		"live_steer_interrupt_autonomous": {Types: []drover.EventType{"init", "drover:steer", "drover:interrupt", "claude-code:init", "text", "done"},
			Status: drover.StatusSuccess, Result: "heard: are you there?"},
		"live_steer_interrupt_dry_run": {Types: []drover.EventType{"init", "drover:steer", "drover:interrupt", "claude-code:init", "text", "done"},
			Status: drover.StatusSuccess, Result: "heard: are you there?"},
		"live_steer_interrupt_sandbox": {Types: []drover.EventType{"init", "drover:steer", "drover:interrupt", "claude-code:init", "text", "done"},
			Status: drover.StatusSuccess, Result: "heard: are you there?"},
	}
	replayer.Semantics(t, uestest.Semantics{Version: TestedVersions, Cases: cases, Check: func(t testing.TB, name string, _ uestest.Expect, evs []drover.Event) {
		if !strings.HasPrefix(name, "live_") {
			return
		}
		asked := 0
		described := map[string]string{} // tool_use id → its description
		for _, ev := range evs {
			switch p := ev.Payload.(type) {
			case drover.ErrorPayload:
				t.Errorf("%s: an interactive run's control is not an error: %+v", name, p)
			case drover.ToolUsePayload:
				described[p.ToolUseID] = p.Description
			case drover.PermissionRequestPayload:
				asked++
				if p.RequestID == "" || p.Reason == "" || ev.Metadata["permissionSuggestions"] == nil {
					t.Errorf("%s: permission request %+v %v", name, p, ev.Metadata)
				}
				// Described as the call it asks about.
				if d, ok := described[p.ToolUseID]; p.Description == "" || ok && p.Description != d {
					t.Errorf("%s: permission request described %q, its call %q", name, p.Description, d)
				}
			}
		}
		if name == "live_always" && asked != 1 {
			t.Errorf("%s: %d permission requests, want the repeated call not asked", name, asked)
		}
	}})
}

// FuzzTranslate feeds arbitrary lines to the decoder: agent output is
// untrusted, so nothing may panic and every event must be well-formed.
func FuzzTranslate(f *testing.F) {
	uestest.Fuzz(f, func() runner.Translator { return newTranslator(uestest.Stamp(ID), false) },
		uestest.FuzzSeed{Line: []byte(`{"type":"result","permission_denials":[{"tool_use_id":"x"}]}`)},
		uestest.FuzzSeed{Line: []byte(`{"type":"assistant","message":{"content":"str"}}`)})
}

// TestADP5_ResumeRejectionDetected: with a resume token, the captured
// "No conversation found" result yields nothing and Finish reports the
// rejection; without one it is an ordinary failed run.
func TestADP5_ResumeRejectionDetected(t *testing.T) {
	data, err := os.ReadFile("testdata/2.1.330/resume_unknown.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	tr := newTranslator(uestest.Stamp(ID), true)
	for _, l := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		if evs, _ := tr.Translate(l); len(evs) != 0 {
			t.Fatalf("rejection yielded %v", uestest.Types(evs))
		}
	}
	if evs, rejected := tr.Finish(runner.Exit{Code: 1}); !rejected || len(evs) != 0 {
		t.Fatalf("Finish = %v, %v; want rejected", uestest.Types(evs), rejected)
	}
	// A run that started (init seen) and then failed is not a rejected resume.
	tr = newTranslator(uestest.Stamp(ID), true)
	tr.Translate([]byte(`{"type":"system","subtype":"init","session_id":"x","tools":[]}`))
	if _, rejected := tr.Finish(runner.Exit{Code: 1, StderrTail: "No conversation found"}); rejected {
		t.Fatal("a started run was taken for a rejected resume")
	}
}
