package codex

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/runner"
	"github.com/drover-run/drover/internal/testkit/uestest"
)

var update = flag.Bool("update", false, "rewrite .golden files from the captured native streams")

// captureMeta is Codex's own part of a capture's .meta.json; the live
// (app-server) fields are liveMeta's (capture_test.go).
type captureMeta struct {
	Tier            string     `json:"tier"`
	DisallowedTools []string   `json:"disallowedTools"`
	Mode            string     `json:"mode"`
	Prompt          string     `json:"prompt"`
	PartialText     bool       `json:"partialText"`
	Resume          string     `json:"resume"`
	Contained       bool       `json:"contained"`
	Live            []liveStep `json:"live"`
}

// replayer drives the translator over a capture configured as it was run:
// its tier and tool filter, resume and model from its arguments, and its
// trimmed rollout file, if captured, where Finish looks for it. A live
// capture is replayed through a conversation (replayConv).
var replayer = uestest.Replayer{Agent: ID, New: func(t testing.TB, c uestest.Capture, s runner.Stamp) runner.Translator {
	var m captureMeta
	if err := c.Meta.Decode(&m); err != nil {
		t.Fatalf("%s: %v", c.Path, err)
	}
	if m.Mode == "app-server" {
		return replayConv(t, c, s, m)
	}
	opts := drover.Options{Tier: drover.Tier(m.Tier), DisallowedTools: m.DisallowedTools}
	info := runInfo{
		resume:    slices.Contains(c.Meta.Args, "resume"),
		cwd:       "/ws",
		tier:      opts.EffectiveTier(),
		tools:     offeredTools(opts),
		removed:   removedTools(opts),
		codexHome: rolloutHome(t, c),
	}
	if i := slices.Index(c.Meta.Args, "-m"); i >= 0 {
		info.model = c.Meta.Args[i+1]
	}
	return newTranslator(s, info)
}}

var goldenThreadRe = regexp.MustCompile(`"thread(?:_id|Id)":"([0-9a-f-]{36})"`)

// replayConv replays a live capture through a conversation configured as
// it was run, with uestest.ConversationReplay: the inputs of m.Live, and
// what was written compared byte for byte with <name>.sent.jsonl.
func replayConv(t testing.TB, c uestest.Capture, s runner.Stamp, m captureMeta) runner.Translator {
	opts := drover.Options{Tier: drover.Tier(m.Tier), PartialText: m.PartialText, Resume: m.Resume, Contain: &m.Contained}
	info := runInfo{resume: m.Resume != "", cwd: "/ws", tier: opts.EffectiveTier(), tools: offeredTools(opts),
		removed: removedTools(opts), codexHome: rolloutHome(t, c)}
	sent, err := os.ReadFile(c.Path + ".sent.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	r := uestest.ConversationReplay{Written: uestest.SplitLines(sent), Exact: true}
	for _, step := range m.Live {
		r.Inputs = append(r.Inputs, uestest.Input{After: step.After, LiveInput: step.Input})
	}
	return r.Translator(t, c, newConversation(s, info, m.Prompt, opts), s)
}

// rolloutHome returns a CODEX_HOME holding c's <name>.rollout.jsonl as its
// thread's rollout, or "" when none was captured.
func rolloutHome(t testing.TB, c uestest.Capture) string {
	ro, err := os.ReadFile(c.Path + ".rollout.jsonl")
	if err != nil {
		return ""
	}
	stream, err := os.ReadFile(c.Path + ".jsonl")
	if err != nil {
		t.Fatal(err)
	}
	th := goldenThreadRe.FindSubmatch(stream)
	if th == nil {
		t.Fatalf("%s: rollout without a thread id in the stream", c.Path)
	}
	home := t.TempDir()
	dir := filepath.Join(home, "sessions", "2026", "11", "22")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rollout-2026-11-22T00-00-00-"+string(th[1])+".jsonl"), ro, 0o644); err != nil {
		t.Fatal(err)
	}
	return home
}

// TestADP2_Golden checks every captured Codex stream against its golden UES
// file, and every golden event against the UES JSON Schema (UES-4).
func TestADP2_Golden(t *testing.T) { replayer.Golden(t, *update) }

func i64(n int64) *int64 { return &n }

// TestADP2_GoldenSemantics pins what each captured case must mean, so a
// golden regenerated from a broken translator cannot pass unnoticed.
func TestADP2_GoldenSemantics(t *testing.T) {
	tu := []drover.EventType{"init", "tool_use", "tool_result", "text", "done"}
	te := []drover.EventType{"init", "codex:turn_started", "error", "done"}
	asked := []drover.EventType{"init", "tool_use", "permission_request", "drover:permission_answer", "tool_result", "text", "done"}
	cases := map[string]uestest.Expect{
		"text":     {Types: []drover.EventType{"init", "codex:turn_started", "text", "done"}, Status: drover.StatusSuccess, Usage: &drover.Usage{InputTokens: 10, OutputTokens: 5, Turns: i64(1)}},
		"thinking": {Types: []drover.EventType{"init", "thinking", "text", "done"}, Status: drover.StatusSuccess},
		"shell":    {Types: tu, Status: drover.StatusSuccess, ToolState: drover.ToolSuccess, ToolName: "exec_command", Usage: &drover.Usage{InputTokens: 20, OutputTokens: 10, ToolUses: 1, Turns: i64(2)}},
		// shell's capture with Codex repeating the item's item.completed: still one tool_result.
		"repeated_item":                   {Types: tu, Status: drover.StatusSuccess, ToolState: drover.ToolSuccess, ToolName: "exec_command", Usage: &drover.Usage{InputTokens: 20, OutputTokens: 10, ToolUses: 1, Turns: i64(2)}},
		"shell_fail":                      {Types: tu, Status: drover.StatusSuccess, ToolState: drover.ToolError, ToolName: "exec_command"},
		"write_allowed":                   {Types: []drover.EventType{"init", "tool_use", "tool_result", "codex:file_change", "text", "done"}, Status: drover.StatusSuccess, ToolState: drover.ToolSuccess, ToolName: "apply_patch"},
		"dryrun_patch_denied":             {Types: []drover.EventType{"init", "text", "tool_use", "tool_result", "done"}, Status: drover.StatusSuccess, ToolState: drover.ToolDenied, ToolName: "apply_patch"},
		"dryrun_shell_write_denied":       {Types: []drover.EventType{"init", "text", "tool_use", "tool_result", "done"}, Status: drover.StatusSuccess, ToolState: drover.ToolDenied, ToolName: "exec_command"},
		"dryrun_shell_read":               {Types: tu, Status: drover.StatusSuccess, ToolState: drover.ToolSuccess, ToolName: "exec_command"},
		"supervised_outside_denied":       {Types: []drover.EventType{"init", "text", "tool_use", "tool_result", "done"}, Status: drover.StatusSuccess, ToolState: drover.ToolDenied, ToolName: "apply_patch"},
		"supervised_shell_outside_denied": {Types: []drover.EventType{"init", "text", "tool_use", "tool_result", "done"}, Status: drover.StatusSuccess, ToolState: drover.ToolDenied, ToolName: "exec_command"},
		"supervised_network":              {Types: tu, Status: drover.StatusSuccess, ToolState: drover.ToolError, ToolName: "exec_command"},
		"autonomous_shell":                {Types: tu, Status: drover.StatusSuccess, ToolState: drover.ToolSuccess, ToolName: "exec_command"},
		"sandbox_shell_denied":            {Types: []drover.EventType{"init", "text", "tool_use", "tool_result", "done"}, Status: drover.StatusSuccess, ToolState: drover.ToolDenied, ToolName: "shell"},
		"sandbox_patch_denied":            {Types: []drover.EventType{"init", "text", "tool_use", "tool_result", "done"}, Status: drover.StatusSuccess, ToolState: drover.ToolDenied, ToolName: "apply_patch"},
		"disallowed_tool":                 {Types: []drover.EventType{"init", "text", "tool_use", "tool_result", "done"}, Status: drover.StatusSuccess, ToolState: drover.ToolDenied, ToolName: "view_image"},
		"escalation_denied":               {Types: []drover.EventType{"init", "text", "tool_use", "tool_result", "done"}, Status: drover.StatusSuccess, ToolState: drover.ToolDenied, ToolName: "exec_command"},
		"unknown_tool":                    {Types: []drover.EventType{"init", "text", "tool_use", "tool_result", "done"}, Status: drover.StatusSuccess, ToolState: drover.ToolError, ToolName: "no_such_tool"},
		"err_429":                         {Types: te, Status: drover.StatusError, ErrCode: drover.CodeRateLimited},
		"err_429_retry1":                  {Types: []drover.EventType{"init", "codex:error", "codex:error", "error", "done"}, Status: drover.StatusError, ErrCode: drover.CodeRateLimited},
		"err_500":                         {Types: te, Status: drover.StatusError, ErrCode: drover.CodeServerError},
		"err_503":                         {Types: te, Status: drover.StatusError, ErrCode: drover.CodeOverloaded},
		"err_401":                         {Types: te, Status: drover.StatusError, ErrCode: drover.CodeAuthFailed},
		"err_400":                         {Types: te, Status: drover.StatusError, ErrCode: drover.CodeBadRequest},
		"midstream_failure":               {Types: te, Status: drover.StatusError, ErrCode: drover.CodeServerError},
		// Resumed: turn.completed says 30/15 for the thread; the first run used 10/5.
		"resume_ok":          {Types: tu, Status: drover.StatusSuccess, ToolState: drover.ToolSuccess, Usage: &drover.Usage{InputTokens: 20, OutputTokens: 10, ToolUses: 1, Turns: i64(2)}},
		"resume_unknown":     {Rejected: true},
		"cancel":             {Types: []drover.EventType{"init", "codex:turn_started"}},
		"mcp_tool":           {Types: tu, Status: drover.StatusSuccess, ToolState: drover.ToolSuccess, ToolName: "mcp__mcptest__lookup"},
		"mcp_needs_approval": {Types: tu, Status: drover.StatusSuccess, ToolState: drover.ToolDenied, ToolName: "mcp__mcptest__lookup"},
		"unknown_model":      {Types: []drover.EventType{"init", "codex:error", "codex:turn_started", "text", "done"}, Status: drover.StatusSuccess},

		// Live runs (codex app-server); asked calls: tool_use, then the
		// request, its answer (the runner's event once passed on), the result.
		"live_text":                {Types: []drover.EventType{"init", "codex:turn_started", "text", "done"}, Status: drover.StatusSuccess, Result: "hello from the app-server", Usage: &drover.Usage{InputTokens: 10, OutputTokens: 5, Turns: i64(1)}},
		"live_text_partial":        {Types: []drover.EventType{"init", "text_delta", "text_delta", "text_delta", "text", "done"}, Status: drover.StatusSuccess, Result: "streamed in a few words"},
		"live_thinking":            {Types: []drover.EventType{"init", "thinking", "text", "done"}, Status: drover.StatusSuccess},
		"live_shell_allowed":       {Types: asked, Status: drover.StatusSuccess, ToolState: drover.ToolSuccess, ToolName: "exec_command", Usage: &drover.Usage{InputTokens: 20, OutputTokens: 10, ToolUses: 1, Turns: i64(2)}},
		"live_shell_denied":        {Types: asked, Status: drover.StatusSuccess, ToolState: drover.ToolDenied, ToolName: "exec_command", Result: "understood the denial"},
		"live_shell_outside":       {Types: asked, Status: drover.StatusSuccess, ToolState: drover.ToolError, ToolName: "exec_command"},
		"live_shell_always":        {Types: append(slices.Clone(asked[:5]), "tool_use", "tool_result", "text", "done"), Status: drover.StatusSuccess, ToolState: drover.ToolSuccess, ToolName: "exec_command", Usage: &drover.Usage{InputTokens: 30, OutputTokens: 15, ToolUses: 2, Turns: i64(3)}},
		"live_escalation":          {Types: asked, Status: drover.StatusSuccess, ToolState: drover.ToolSuccess, ToolName: "exec_command"},
		"live_edit_inside":         {Types: []drover.EventType{"init", "tool_use", "codex:auto_approved", "tool_result", "codex:file_change", "text", "done"}, Status: drover.StatusSuccess, ToolState: drover.ToolSuccess, ToolName: "apply_patch"},
		"live_edit_outside":        {Types: asked, Status: drover.StatusSuccess, ToolState: drover.ToolError, ToolName: "apply_patch"},
		"live_mcp_allowed":         {Types: asked, Status: drover.StatusSuccess, ToolState: drover.ToolSuccess, ToolName: "mcp__mcptest__lookup"},
		"live_dryrun_patch_denied": {Types: []drover.EventType{"init", "text", "tool_use", "tool_result", "done"}, Status: drover.StatusSuccess, ToolState: drover.ToolDenied, ToolName: "apply_patch"},
		"live_steer":               {Types: []drover.EventType{"init", "codex:turn_started", "drover:steer", "text", "done"}, Status: drover.StatusSuccess, Result: "the steer arrived"},
		"live_interrupt":           {Types: []drover.EventType{"init", "codex:turn_started", "drover:interrupt", "done"}, Status: drover.StatusInterrupted},
		"live_resume":              {Types: []drover.EventType{"init", "text", "done"}, Status: drover.StatusSuccess, Result: "continued", Usage: &drover.Usage{InputTokens: 10, OutputTokens: 5, Turns: i64(1)}},
		"live_resume_unknown":      {Rejected: true},
		"live_err_429":             {Types: []drover.EventType{"init", "codex:error", "error", "done"}, Status: drover.StatusError, ErrCode: drover.CodeRateLimited, HTTP: 429},
		"live_err_500":             {Types: []drover.EventType{"init", "codex:error", "error", "done"}, Status: drover.StatusError, ErrCode: drover.CodeServerError},
	}
	replayer.Semantics(t, uestest.Semantics{Version: TestedVersions, Cases: cases, Complete: true, InitFirst: true,
		ResumeToken: uuidRe, Check: checkCase})
}

// checkCase asserts what only Codex promises: no cost (it reports none),
// and a shell command described by the script inside Codex's shell
// wrapper; in live runs, a permission request is about a tool call already
// in the stream, described as that call, has a request id of its own, and
// each answer is to an earlier request.
func checkCase(t testing.TB, name string, _ uestest.Expect, evs []drover.Event) {
	uses, asked := map[string]drover.ToolUsePayload{}, map[string]bool{}
	for _, ev := range evs {
		switch p := ev.Payload.(type) {
		case drover.PermissionRequestPayload:
			use, ok := uses[p.ToolUseID]
			if !ok || p.RequestID == "" || asked[p.RequestID] {
				t.Errorf("%s: permission request %+v: not about an earlier tool_use, or its id is not its own", name, p)
			}
			if p.Description == "" || use.ToolName == p.ToolName && p.Description != use.Description {
				t.Errorf("%s: permission request described %q, its call %q", name, p.Description, use.Description)
			}
			asked[p.RequestID] = true
		case drover.PermissionAnswerPayload:
			if !asked[p.RequestID] {
				t.Errorf("%s: answer to %q, which was not asked", name, p.RequestID)
			}
		case drover.DonePayload:
			if p.Usage.TotalCostUSD != nil {
				t.Errorf("%s: codex reports no cost, got %v", name, *p.Usage.TotalCostUSD)
			}
		case drover.ToolUsePayload:
			uses[p.ToolUseID] = p
			if cmd, _ := p.Input["command"].(string); p.ToolName == "exec_command" && strings.Contains(p.Description, "/bin/bash -lc") {
				t.Errorf("%s: %q described with its shell wrapper: %q", name, cmd, p.Description)
			}
		}
	}
}

// FuzzTranslate feeds arbitrary lines to the decoder: agent output is
// untrusted, so nothing may panic and every event must be well-formed.
func FuzzTranslate(f *testing.F) {
	uestest.Fuzz(f, func() runner.Translator { return newTranslator(uestest.Stamp(ID), runInfo{tier: drover.TierDryRun}) },
		uestest.FuzzSeed{Line: []byte(`{"type":"item.completed","item":{"type":"todo_list","items":[]}}`)},
		uestest.FuzzSeed{Line: []byte(`{"type":"turn.failed","error":null}`), Code: 1,
			Stderr: "ERROR codex_core::tools::router: error=unsupported call: x"},
		uestest.FuzzSeed{Line: []byte(`{"type":"turn.completed"}`), Code: 1,
			Stderr: "ERROR codex_core::tools::router: error=patch rejected: y"})
}

// FuzzTranslateAppServer feeds arbitrary JSON-RPC lines to a live run's
// conversation (supervised, with text deltas), then Finish.
func FuzzTranslateAppServer(f *testing.F) {
	uestest.Fuzz(f, func() runner.Translator {
		opts := drover.Options{Tier: drover.TierSupervised, PartialText: true}
		return newConversation(uestest.Stamp(ID), runInfo{tier: drover.TierSupervised}, "p", opts)
	},
		uestest.FuzzSeed{Line: []byte(`{"method":"item/fileChange/requestApproval","id":7,"params":{"itemId":"x"}}`)},
		uestest.FuzzSeed{Line: []byte(`{"method":"turn/completed","params":{"turn":{"status":"failed","error":{"message":"m","codexErrorInfo":{"a":{"httpStatusCode":503}}}}}}`)},
		uestest.FuzzSeed{Line: []byte(`{"id":1,"error":{"code":-32600,"message":"no rollout found for thread id x"}}`)})
}

// TestADP5_ResumeRejectionDetected: with a resume token, the captured
// unknown-thread failure yields nothing and Finish reports the rejection;
// without one, or once a thread started, it is an ordinary failure.
func TestADP5_ResumeRejectionDetected(t *testing.T) {
	exit := uestest.Load(t, "testdata/"+TestedVersions+"/resume_unknown").Meta.Exit()
	if evs, rejected := newTranslator(uestest.Stamp(ID), runInfo{resume: true}).Finish(exit); !rejected || len(evs) != 0 {
		t.Fatalf("Finish = %v, %v; want rejected", uestest.Types(evs), rejected)
	}
	if _, rejected := newTranslator(uestest.Stamp(ID), runInfo{}).Finish(exit); rejected {
		t.Fatal("a run without resume was taken for a rejected resume")
	}
	tr := newTranslator(uestest.Stamp(ID), runInfo{resume: true})
	tr.Translate([]byte(`{"type":"thread.started","thread_id":"01a20101-0000-7000-8000-000000000001"}`))
	if _, rejected := tr.Finish(exit); rejected {
		t.Fatal("a started thread was taken for a rejected resume")
	}
}

// TestPERM3_HiddenDenialsFromStderr: without a rollout file, the router's
// stderr lines still surface as denied tool calls, once per logged line.
func TestPERM3_HiddenDenialsFromStderr(t *testing.T) {
	stderr := "2026-11-22T02:10:56.426550Z ERROR codex_core::tools::router: error=patch rejected: writing is blocked by read-only sandbox; rejected by user approval settings\n" +
		"2026-11-22T02:10:56.426550Z ERROR codex_core::tools::router: error=patch rejected: writing is blocked by read-only sandbox; rejected by user approval settings\n" +
		"2026-11-22T02:10:57.000000Z ERROR codex_core::tools::router: error=unsupported call: made_up\n"
	tr := newTranslator(uestest.Stamp(ID), runInfo{tier: drover.TierDryRun})
	for _, l := range []string{`{"type":"thread.started","thread_id":"01a20101-0000-7000-8000-000000000001"}`, `{"type":"turn.completed","usage":{"input_tokens":20,"output_tokens":10}}`} {
		if _, err := tr.Translate([]byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	evs, _ := tr.Finish(runner.Exit{StderrTail: stderr})
	var got []string
	for _, ev := range evs {
		if p, ok := ev.Payload.(drover.ToolResultPayload); ok {
			got = append(got, p.ToolName+":"+string(p.Status))
		}
	}
	if want := []string{"apply_patch:denied", "made_up:error"}; !slices.Equal(got, want) {
		t.Fatalf("results %v, want %v (%v)", got, want, uestest.Types(evs))
	}
	if d, ok := evs[len(evs)-1].Done(); !ok || d.Usage.ToolUses != 2 {
		t.Fatalf("last event %+v", evs[len(evs)-1])
	}
}
