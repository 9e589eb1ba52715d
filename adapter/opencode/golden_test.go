package opencode

import (
	"flag"
	"regexp"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/runner"
	"github.com/drover-run/drover/internal/testkit/uestest"
)

var update = flag.Bool("update", false, "rewrite .golden files from the captured native streams")

// captureOptions is OpenCode's own part of a capture's .meta.json: the
// options it ran with.
type captureOptions struct {
	Options struct {
		Tier            drover.Tier `json:"tier"`
		Resume          string      `json:"resume"`
		DisallowedTools []string    `json:"disallowedTools"`
	} `json:"options"`
}

// replayer drives the translator over a capture configured with the options
// it ran with, against an endpoint, as every capture was.
var replayer = uestest.Replayer{Agent: ID, New: func(t testing.TB, c uestest.Capture, s runner.Stamp) runner.Translator {
	var m captureOptions
	if err := c.Meta.Decode(&m); err != nil {
		t.Fatalf("%s: %v", c.Path, err)
	}
	o := drover.Options{Tier: m.Options.Tier, Resume: m.Options.Resume, DisallowedTools: m.Options.DisallowedTools,
		Cwd: "/ws", Endpoint: &drover.Endpoint{BaseURL: "http://127.0.0.1:PORT"}}
	return newTranslator(s, o, initModel(o))
}}

// TestADP2_Golden checks every captured OpenCode stream against its golden
// UES file, and every golden event against the UES JSON Schema (UES-4).
func TestADP2_Golden(t *testing.T) { replayer.Golden(t, *update) }

// TestADP2_GoldenSemantics pins what each captured case must mean, so a
// golden regenerated from a broken translator cannot pass unnoticed.
func TestADP2_GoldenSemantics(t *testing.T) {
	tool := []drover.EventType{"init", "opencode:step_start", "tool_use", "tool_result", "opencode:step_finish", "text", "done"}
	cases := map[string]uestest.Expect{
		"text":                            {Types: []drover.EventType{"init", "opencode:step_start", "text", "opencode:step_finish", "done"}, Status: drover.StatusSuccess},
		"thinking":                        {Types: []drover.EventType{"init", "thinking", "text", "done"}, Status: drover.StatusSuccess},
		"bash":                            {Types: tool, Status: drover.StatusSuccess, ToolState: drover.ToolSuccess, ToolName: "bash"},
		"bash_error":                      {Types: tool, Status: drover.StatusSuccess, ToolState: drover.ToolError, ToolName: "bash"},
		"autonomous_touch":                {Types: tool, Status: drover.StatusSuccess, ToolState: drover.ToolSuccess, ToolName: "bash"},
		"supervised_write":                {Types: tool, Status: drover.StatusSuccess, ToolState: drover.ToolSuccess, ToolName: "write"},
		"supervised_bash_denied":          {Types: tool, Status: drover.StatusSuccess, ToolState: drover.ToolDenied, ToolName: "bash"},
		"supervised_read_outside_denied":  {Types: tool, Status: drover.StatusSuccess, ToolState: drover.ToolDenied, ToolName: "read"},
		"supervised_write_outside_denied": {Types: tool, Status: drover.StatusSuccess, ToolState: drover.ToolDenied, ToolName: "write"},
		"supervised_write_adddir":         {Types: tool, Status: drover.StatusSuccess, ToolState: drover.ToolSuccess, ToolName: "write"},
		"supervised_widen_attempt":        {Types: tool, Status: drover.StatusSuccess, ToolState: drover.ToolDenied, ToolName: "bash"},
		"dryrun_write_denied":             {Types: tool, Status: drover.StatusSuccess, ToolState: drover.ToolDenied, ToolName: "write"},
		"dryrun_bash_denied":              {Types: tool, Status: drover.StatusSuccess, ToolState: drover.ToolDenied, ToolName: "bash"},
		"dryrun_read":                     {Types: tool, Status: drover.StatusSuccess, ToolState: drover.ToolSuccess, ToolName: "read"},
		"sandbox_bash":                    {Types: tool, Status: drover.StatusSuccess, ToolState: drover.ToolDenied, ToolName: "bash"},
		"disallowed_tool":                 {Types: tool, Status: drover.StatusSuccess, ToolState: drover.ToolDenied, ToolName: "bash"},
		"todowrite":                       {Types: tool, Status: drover.StatusSuccess, ToolState: drover.ToolSuccess, ToolName: "todowrite"},
		"err_429":                         {Types: []drover.EventType{"init", "error", "done"}, Status: drover.StatusError, ErrCode: drover.CodeRateLimited},
		"err_429_retries1":                {Types: []drover.EventType{"init", "error", "done"}, Status: drover.StatusError, ErrCode: drover.CodeRateLimited},
		"err_500":                         {Types: []drover.EventType{"init", "error", "done"}, Status: drover.StatusError, ErrCode: drover.CodeServerError},
		"err_400":                         {Types: []drover.EventType{"init", "error", "done"}, Status: drover.StatusError, ErrCode: drover.CodeBadRequest},
		"resume_first":                    {Types: []drover.EventType{"init", "text", "done"}, Status: drover.StatusSuccess},
		"resume_ok":                       {Types: []drover.EventType{"init", "text", "done"}, Status: drover.StatusSuccess},
		"resume_unknown":                  {Rejected: true},
		"cancel":                          {},
		"system_prompt":                   {Types: []drover.EventType{"init", "text", "done"}, Status: drover.StatusSuccess},
	}
	replayer.Semantics(t, uestest.Semantics{Version: TestedVersions, Cases: cases, InitFirst: true,
		ResumeToken: regexp.MustCompile(`^ses_`), Check: checkCase})
}

// checkCase asserts what only OpenCode promises: a finished run's usage is
// summed from its steps, with turns and cost; and its one tool call is the
// expected one exactly, so a case that expects none has none.
func checkCase(t testing.TB, name string, want uestest.Expect, evs []drover.Event) {
	for _, ev := range evs {
		switch p := ev.Payload.(type) {
		case drover.DonePayload:
			if p.Status == drover.StatusSuccess && (p.Usage.InputTokens == 0 || p.Usage.OutputTokens == 0 || p.Usage.Turns == nil || p.Usage.TotalCostUSD == nil) {
				t.Errorf("%s: usage not summed: %+v", name, p.Usage)
			}
			if want.ToolName != "" && p.Usage.ToolUses != 1 {
				t.Errorf("%s: toolUses %d", name, p.Usage.ToolUses)
			}
		case drover.ToolUsePayload:
			if p.ToolName != want.ToolName {
				t.Errorf("%s: tool_use %+v, want %s", name, p, want.ToolName)
			}
		case drover.ToolResultPayload:
			if p.Status != want.ToolState || p.ToolName != want.ToolName {
				t.Errorf("%s: tool_result %s/%s, want %s/%s (%q)", name, p.ToolName, p.Status, want.ToolName, want.ToolState, p.Output)
			}
		}
	}
}

// TestADP2_UsageSummedOverSteps: a tool run has two model calls; done sums
// both steps' tokens and counts them as turns.
func TestADP2_UsageSummedOverSteps(t *testing.T) {
	evs, _ := replayer.Replay(t, uestest.Load(t, "testdata/"+TestedVersions+"/bash"))
	d, _ := evs[len(evs)-1].Done()
	if d.Usage.InputTokens != 20 || d.Usage.OutputTokens != 10 || *d.Usage.Turns != 2 || *d.Usage.CacheReadTokens != 0 || d.Usage.ReasoningTokens == nil {
		t.Fatalf("usage %+v", d.Usage)
	}
	if d.Result == "" {
		t.Fatal("done without the final text as result")
	}
}

// FuzzTranslate feeds arbitrary lines to the translator: agent output is
// untrusted, so nothing may panic and every event must be well-formed.
func FuzzTranslate(f *testing.F) {
	uestest.Fuzz(f, func() runner.Translator { return newTranslator(uestest.Stamp(ID), drover.Options{}, "m") },
		uestest.FuzzSeed{Line: []byte(`{"type":"tool_use","part":{"tool":"invalid","state":{"input":{"tool":3}}}}`)},
		uestest.FuzzSeed{Line: []byte(`{"type":"error","error":null}`), Code: 1},
		uestest.FuzzSeed{Line: []byte(`{"type":"step_finish","part":{"tokens":{"cache":null},"cost":-1}}`)})
}

// TestADP5_ResumeRejectionDetected: with a resume token, the captured
// "Session not found" exit is a rejection; without one, or once the run has
// printed anything, it is not.
func TestADP5_ResumeRejectionDetected(t *testing.T) {
	exit := runner.Exit{Code: 1, StderrTail: "\x1b[91m\x1b[1mError: \x1b[0mSession not found\n"}
	tr := newTranslator(uestest.Stamp(ID), drover.Options{Resume: "ses_x"}, "m")
	if evs, rejected := tr.Finish(exit); !rejected || len(evs) != 0 {
		t.Fatalf("Finish = %v, %v; want rejected", uestest.Types(evs), rejected)
	}
	tr = newTranslator(uestest.Stamp(ID), drover.Options{}, "m")
	if _, rejected := tr.Finish(exit); rejected {
		t.Fatal("a run without a resume token was taken for a rejected resume")
	}
	tr = newTranslator(uestest.Stamp(ID), drover.Options{Resume: "ses_x"}, "m")
	tr.Translate([]byte(`{"type":"step_start","sessionID":"ses_x","part":{}}`))
	if _, rejected := tr.Finish(exit); rejected {
		t.Fatal("a started run was taken for a rejected resume")
	}
}
