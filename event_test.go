package drover_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/testkit/uestest"
	"github.com/google/go-cmp/cmp"
)

func i64(v int64) *int64     { return &v }
func f64(v float64) *float64 { return &v }

// sampleEvents has one event of every core type plus an extension.
func sampleEvents() []drover.Event {
	mk := func(t drover.EventType, p any) drover.Event {
		return drover.Event{Type: t, Agent: "claude-code", Timestamp: 1700000000000, SessionID: "s-1", Payload: p}
	}
	ext := mk("claude-code:compact", json.RawMessage(`{"trigger":"auto","preTokens":12345}`))
	ext.Metadata = map[string]any{"parentToolUseId": "toolu_1"}
	return []drover.Event{
		mk(drover.TypeInit, drover.InitPayload{Model: "m", Cwd: "/ws", Tools: []string{"Bash"}}),
		mk(drover.TypeText, drover.TextPayload{Content: "hi"}),
		mk(drover.TypeTextDelta, drover.TextDeltaPayload{Delta: "h"}),
		mk(drover.TypeThinking, drover.ThinkingPayload{Summary: "hmm"}),
		mk(drover.TypeToolUse, drover.ToolUsePayload{ToolName: "Bash", ToolUseID: "t1", Input: map[string]any{"command": "ls"}, Description: "Running `ls`"}),
		mk(drover.TypeToolResult, drover.ToolResultPayload{ToolUseID: "t1", ToolName: "Bash", Status: drover.ToolDenied, Output: "no", DurationMs: i64(3)}),
		mk(drover.TypePermissionRequest, drover.PermissionRequestPayload{ToolName: "Write", ToolUseID: "t2", Input: map[string]any{"file_path": "a"}, Reason: "write"}),
		mk(drover.TypeError, drover.ErrorPayload{Code: drover.CodeRateLimited, Message: "slow down", Recoverable: false}),
		mk(drover.TypeDone, drover.DonePayload{Status: drover.StatusSuccess, Result: "hi", ResumeToken: "r1", DurationMs: 9,
			Usage: drover.Usage{InputTokens: 10, OutputTokens: 5, ToolUses: 1, TotalCostUSD: f64(0.01), CacheReadTokens: i64(0), Turns: i64(2)}}),
		ext,
	}
}

func TestUES1_WireForm(t *testing.T) {
	e := drover.Event{Type: drover.TypeDone, Agent: "claude-code", Timestamp: 1700000000000, SessionID: "s",
		Payload: drover.DonePayload{Status: drover.StatusMaxTurns, DurationMs: 5, Usage: drover.Usage{InputTokens: 1, OutputTokens: 2}}}
	got, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"done","agent":"claude-code","timestamp":1700000000000,"sessionId":"s","payload":{"status":"max_turns","usage":{"inputTokens":1,"outputTokens":2,"toolUses":0},"durationMs":5}}`
	if string(got) != want {
		t.Fatalf("wire form\n got %s\nwant %s", got, want)
	}
	e.RunID, e.Seq = "run_1", 3
	got, _ = json.Marshal(e)
	if !strings.HasSuffix(string(got), `,"runId":"run_1","seq":3}`) {
		t.Fatalf("supervised wire form: %s", got)
	}
	// Optional usage fields absent when not reported, never invented zeros.
	if strings.Contains(want, "totalCostUsd") || strings.Contains(want, "cacheReadTokens") {
		t.Fatal("unreported usage fields must be absent")
	}
}

func TestUES2_CoreTypesRoundTrip(t *testing.T) {
	for _, e := range sampleEvents() {
		data, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		var back drover.Event
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		if diff := cmp.Diff(e, back); diff != "" {
			t.Errorf("%s round trip (-want +got):\n%s", e.Type, diff)
		}
	}
}

func TestUES3_ExtensionRoundTripsUnchanged(t *testing.T) {
	in := `{"type":"codex:plan_update","agent":"codex","timestamp":5,"sessionId":"x","payload":{"steps":[{"s":"a","done":true}],"z":null},"metadata":{"k":"v"}}`
	var e drover.Event
	if err := json.Unmarshal([]byte(in), &e); err != nil {
		t.Fatal(err)
	}
	if !e.Type.IsExtension() || e.Type.IsCore() {
		t.Fatal("extension type misclassified")
	}
	out, _ := json.Marshal(e)
	if string(out) != in {
		t.Fatalf("extension changed:\n in %s\nout %s", in, out)
	}
	for _, bad := range []drover.EventType{"nocolon", ":x", "x:"} {
		if bad.IsExtension() {
			t.Errorf("%q accepted as extension", bad)
		}
	}
}

func TestUES4_SchemaValidatesEvents(t *testing.T) {
	for _, e := range sampleEvents() {
		if err := uestest.ValidateEvent(e); err != nil {
			t.Errorf("valid %s rejected: %v", e.Type, err)
		}
	}
	bad := []string{
		`{"type":"text","agent":"a","timestamp":1,"sessionId":"s"}`,
		`{"type":"text","agent":"a","timestamp":1,"sessionId":"s","payload":{"text":"x"}}`,
		`{"type":"bogus","agent":"a","timestamp":1,"sessionId":"s"}`,
		`{"type":"done","agent":"a","timestamp":1,"sessionId":"s","payload":{"status":"ok","usage":{"inputTokens":0,"outputTokens":0,"toolUses":0},"durationMs":0}}`,
		`{"type":"tool_result","agent":"a","timestamp":1,"sessionId":"s","payload":{"toolUseId":"t","toolName":"x","status":"maybe","output":""}}`,
		`{"type":"text","agent":"","timestamp":1,"sessionId":"s","payload":{"content":"x"}}`,
		`{"type":"text","agent":"a","timestamp":1,"sessionId":"s","payload":{"content":"x"},"extra":1}`,
	}
	for _, b := range bad {
		if uestest.ValidateJSON([]byte(b)) == nil {
			t.Errorf("schema accepted %s", b)
		}
	}
	if !json.Valid(drover.JSONSchema()) {
		t.Fatal("shipped schema is not JSON")
	}
}

// UES-5: a call reads by its kind, from its subject, in one short line;
// a kind drover does not know reads "Using NAME". The vendors map their
// own tools to kinds (adapter/<vendor>/tools.go).
func TestUES5_ToolDescriptions(t *testing.T) {
	cases := []struct {
		kind          drover.ToolKind
		name, subject string
		want          string
	}{
		{drover.ToolShell, "Bash", "go test ./...", "Running `go test ./...`"},
		{drover.ToolShell, "exec_command", "ls\n  -la", "Running `ls -la`"},
		{drover.ToolWrite, "Write", "main.go", "Writing main.go"},
		{drover.ToolEdit, "Edit", "a.go", "Editing a.go"},
		{drover.ToolPatch, "apply_patch", "hello.txt", "Patching hello.txt"},
		{drover.ToolRead, "Read", "README.md", "Reading README.md"},
		{drover.ToolSearch, "Grep", "TODO", "Searching for `TODO`"},
		{drover.ToolList, "Glob", "**/*.go", "Listing **/*.go"},
		{drover.ToolFetch, "WebFetch", "https://go.dev", "Fetching https://go.dev"},
		{drover.ToolWebSearch, "WebSearch", "go 1.26", "Searching the web for `go 1.26`"},
		{drover.ToolDelegate, "Task", "review", "Delegating review"},
		{drover.ToolPlan, "TodoWrite", "", "Updating the plan"},
		{drover.ToolOther, "mcp__echo__echo", "x", "Using mcp__echo__echo"},
		{"unheard-of", "weird", "x", "Using weird"},
		{drover.ToolShell, "Bash", "", "Running"},
	}
	for _, c := range cases {
		if got := drover.DescribeCall(c.kind, c.name, c.subject); got != c.want {
			t.Errorf("DescribeCall(%s, %s, %q) = %q, want %q", c.kind, c.name, c.subject, got, c.want)
		}
	}
	long := drover.DescribeCall(drover.ToolShell, "Bash", strings.Repeat("x", 500))
	if n := len([]rune(long)); n > 100 || strings.Contains(long, "\n") {
		t.Errorf("description not one short line: %d runes", n)
	}
}

func TestUES6_Collect(t *testing.T) {
	mk := func(ts int64, t drover.EventType, p any) drover.Event {
		return drover.Event{Type: t, Agent: "claude-code", Timestamp: ts, SessionID: "s", Payload: p}
	}
	evs := []drover.Event{
		mk(1000, drover.TypeInit, drover.InitPayload{Model: "m"}),
		mk(1001, drover.TypeText, drover.TextPayload{Content: "Let me look."}),
		mk(1002, drover.TypeToolUse, drover.ToolUsePayload{ToolName: "Bash", ToolUseID: "t1", Input: map[string]any{"command": "ls"}}),
		mk(1050, drover.TypeToolResult, drover.ToolResultPayload{ToolUseID: "t1", ToolName: "Bash", Status: drover.ToolSuccess, Output: "a.go"}),
		mk(1060, drover.TypeToolUse, drover.ToolUsePayload{ToolName: "Write", ToolUseID: "t2"}),
		mk(1061, drover.TypeToolResult, drover.ToolResultPayload{ToolUseID: "t2", ToolName: "Write", Status: drover.ToolDenied, Output: "no"}),
		mk(1070, drover.TypeError, drover.ErrorPayload{Code: drover.CodeResumeFailed, Message: "fresh", Recoverable: true}),
		mk(1080, drover.TypeText, drover.TextPayload{Content: "Done."}),
		mk(1090, drover.TypeDone, drover.DonePayload{Status: drover.StatusSuccess, ResumeToken: "r", DurationMs: 90, Usage: drover.Usage{InputTokens: 3}}),
	}
	r := engine.Collect(slices.Values(evs))
	if r.Text != "Done." || r.ResumeToken != "r" || r.StopReason != engine.StopEndTurn || r.Error != nil || r.DurationMs != 90 || r.Usage.InputTokens != 3 {
		t.Fatalf("result %+v", r)
	}
	if len(r.ToolCalls) != 2 || r.ToolCalls[0].DurationMs != 48 || r.ToolCalls[0].Output != "a.go" || r.ToolCalls[1].Status != drover.ToolDenied {
		t.Fatalf("tool calls %+v", r.ToolCalls)
	}
	if len(r.Messages) != 4 || r.Messages[1].Role != "tool" || len(r.Errors) != 1 || r.Events != len(evs) {
		t.Fatalf("messages %+v errors %+v", r.Messages, r.Errors)
	}

	fail := func(code drover.ErrorCode) *engine.Result {
		return engine.Collect(slices.Values([]drover.Event{
			mk(1, drover.TypeError, drover.ErrorPayload{Code: code, Message: "m"}),
			mk(2, drover.TypeDone, drover.DonePayload{Status: drover.StatusError}),
		}))
	}
	for code, want := range map[drover.ErrorCode]struct {
		kind      engine.ErrorKind
		retryable bool
		stop      engine.StopReason
	}{
		drover.CodeRateLimited:     {engine.KindRateLimit, true, engine.StopError},
		drover.CodeAuthFailed:      {engine.KindAuthFailure, false, engine.StopError},
		drover.CodeContextOverflow: {engine.KindContextOverflow, false, engine.StopError},
		drover.CodeServerError:     {engine.KindModelError, true, engine.StopError},
		drover.CodeTimeout:         {engine.KindTimeout, true, engine.StopTimeout},
		drover.CodeMissingDone:     {engine.KindUnknown, false, engine.StopError},
	} {
		r := fail(code)
		if r.Error == nil || r.Error.Kind != want.kind || r.Error.Retryable != want.retryable || r.StopReason != want.stop {
			t.Errorf("%s: error %+v stop %s", code, r.Error, r.StopReason)
		}
	}
	for st, stop := range map[drover.DoneStatus]engine.StopReason{drover.StatusMaxTurns: engine.StopMaxTurns,
		drover.StatusMaxBudget: engine.StopMaxBudget, drover.StatusInterrupted: engine.StopAborted} {
		r := engine.Collect(slices.Values([]drover.Event{mk(1, drover.TypeDone, drover.DonePayload{Status: st})}))
		if r.StopReason != stop || r.Error == nil {
			t.Errorf("%s: stop %s", st, r.StopReason)
		}
	}
}
