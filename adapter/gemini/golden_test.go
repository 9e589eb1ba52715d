package gemini

import (
	"flag"
	"strings"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/adaptertest"
	"github.com/drover-run/drover/internal/runner"
	"github.com/drover-run/drover/internal/testkit/uestest"
	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite .golden files from the captured native streams")

// captureMeta is Gemini's own part of a capture's .meta.json: the admin
// policy it ran with.
type captureMeta struct {
	Policy string `json:"policy"`
}

// configOf rebuilds the translator configuration of a capture from the
// flags and policy it ran with: the tier decides the offered tools.
func configOf(t testing.TB, c uestest.Capture) translatorConfig {
	var m captureMeta
	if err := c.Meta.Decode(&m); err != nil {
		t.Fatalf("%s: %v", c.Path, err)
	}
	var o drover.Options
	for i, a := range c.Meta.Args {
		if a != "--approval-mode" || i+1 >= len(c.Meta.Args) {
			continue
		}
		switch c.Meta.Args[i+1] {
		case "yolo":
			o.Tier = drover.TierAutonomous
		case "auto_edit":
			o.Tier = drover.TierSupervised
		default:
			o.Tier = drover.TierSandbox
			if strings.Contains(m.Policy, `"read_file"`) {
				o.Tier = drover.TierDryRun
			}
		}
	}
	if o.Tier == drover.TierAutonomous && strings.Contains(m.Policy, `"run_shell_command"`) {
		o.DisallowedTools = []string{"run_shell_command"}
	}
	// Same rules; the capture driver laid the TOML out with other blank lines.
	if strings.Join(strings.Fields(Policy(o)), " ") != strings.Join(strings.Fields(m.Policy), " ") {
		t.Fatalf("%s: the capture's policy is not what the adapter writes for %+v:\n%s", c.Path, o, Policy(o))
	}
	return translatorConfig{cwd: "/ws", model: DefaultEndpointModel, tools: OfferedTools(o)}
}

// replayer drives the translator over a capture configured as it was run.
var replayer = uestest.Replayer{Agent: ID, New: func(t testing.TB, c uestest.Capture, s runner.Stamp) runner.Translator {
	return newTranslator(s, configOf(t, c))
}}

// TestADP2_Golden checks every captured gemini stream against its golden UES
// file, and every golden event against the UES JSON Schema (UES-4).
func TestADP2_Golden(t *testing.T) { replayer.Golden(t, *update) }

// TestADP2_GoldenSemantics pins what each captured case must mean, so a
// golden regenerated from a broken translator cannot pass unnoticed.
func TestADP2_GoldenSemantics(t *testing.T) {
	tu, tr := drover.TypeToolUse, drover.TypeToolResult
	cases := map[string]uestest.Expect{
		"text":                    {Types: []drover.EventType{"init", "gemini:user_message", "text", "done"}, Status: drover.StatusSuccess, Result: "hi from fake gemini"},
		"thinking":                {Types: []drover.EventType{"init", "text", "done"}, Status: drover.StatusSuccess, Result: "answer after thinking"},
		"shell":                   {Types: []drover.EventType{"init", tu, tr, "text", "done"}, Status: drover.StatusSuccess, ToolState: drover.ToolSuccess},
		"shell_error":             {Types: []drover.EventType{tu, tr, "text", "done"}, Status: drover.StatusSuccess, ToolState: drover.ToolSuccess},
		"parallel":                {Types: []drover.EventType{tu, tu, tr, tr, "text", "done"}, Status: drover.StatusSuccess, ToolState: drover.ToolSuccess},
		"write_supervised":        {Types: []drover.EventType{tu, tr, "text", "done"}, Status: drover.StatusSuccess, ToolState: drover.ToolSuccess},
		"write_dryrun_denied":     {Types: []drover.EventType{tu, tr, "text", "done"}, Status: drover.StatusSuccess, ToolState: drover.ToolDenied},
		"shell_supervised_denied": {Types: []drover.EventType{tu, tr, "done"}, Status: drover.StatusSuccess, ToolState: drover.ToolDenied},
		"sandbox_read_denied":     {Types: []drover.EventType{tu, tr, "done"}, Status: drover.StatusSuccess, ToolState: drover.ToolDenied},
		"write_outside_denied":    {Types: []drover.EventType{tu, tr, "done"}, Status: drover.StatusSuccess, ToolState: drover.ToolDenied},
		"disallowed_tool":         {Types: []drover.EventType{tu, tr, "done"}, Status: drover.StatusSuccess, ToolState: drover.ToolDenied},
		"todos":                   {Types: []drover.EventType{tu, tr, "text", "done"}, Status: drover.StatusSuccess, ToolState: drover.ToolSuccess},
		"max_turns":               {Types: []drover.EventType{tu, tr, "done"}, Status: drover.StatusMaxTurns},
		// max_turns's capture without its result line: exit 53 alone says it.
		"max_turns_no_result": {Types: []drover.EventType{tu, tr, "done"}, Status: drover.StatusMaxTurns},
		"err_429":             {Types: []drover.EventType{"init", "error", "done"}, Status: drover.StatusError, ErrCode: drover.CodeRateLimited, HTTP: 429},
		"err_500":             {Types: []drover.EventType{"init", "error", "done"}, Status: drover.StatusError, ErrCode: drover.CodeServerError, HTTP: 500},
		"err_400":             {Types: []drover.EventType{"init", "error", "done"}, Status: drover.StatusError, ErrCode: drover.CodeBadRequest, HTTP: 400},
		"err_401":             {Types: []drover.EventType{"init", "error", "done"}, Status: drover.StatusError, ErrCode: drover.CodeAuthFailed, HTTP: 401},
		"resume_first":        {Types: []drover.EventType{"init", "text", "done"}, Status: drover.StatusSuccess},
		"resume_ok":           {Types: []drover.EventType{"init", "text", "done"}, Status: drover.StatusSuccess},
		// Without a resume token in the options, exit 42 is an ordinary failure.
		"resume_unknown": {Types: []drover.EventType{"init", "error", "done"}, Status: drover.StatusError, ErrCode: drover.CodeProcessExit, NoResumeToken: true},
		"cancel":         {Types: []drover.EventType{"init", "gemini:user_message"}},
	}
	replayer.Semantics(t, uestest.Semantics{Version: TestedVersions, Cases: cases, Complete: true, InitFirst: true, Check: noCost})
}

// noCost asserts that no done reports a cost: Gemini reports none.
func noCost(t testing.TB, name string, _ uestest.Expect, evs []drover.Event) {
	for _, p := range adaptertest.Payloads[drover.DonePayload](evs) {
		if p.Usage.TotalCostUSD != nil {
			t.Errorf("%s: gemini reports no cost, done has one", name)
		}
	}
}

// TestUES2_TextAssembledFromDeltas: with PartialText the chunks become
// text_delta and the complete message still follows as text, before the
// next tool_use and before done.
func TestUES2_TextAssembledFromDeltas(t *testing.T) {
	partial := uestest.Replayer{Agent: ID, New: func(t testing.TB, c uestest.Capture, s runner.Stamp) runner.Translator {
		cfg := configOf(t, c)
		cfg.partial = true
		return newTranslator(s, cfg)
	}}
	evs, _ := partial.Replay(t, uestest.Load(t, "testdata/"+TestedVersions+"/text"))
	want := []drover.EventType{"init", "gemini:user_message", "text_delta", "text_delta", "text", "done"}
	if diff := cmp.Diff(want, uestest.Types(evs)); diff != "" {
		t.Fatalf("types (-want +got):\n%s", diff)
	}
	if p := evs[4].Payload.(drover.TextPayload); p.Content != "hi from fake gemini" {
		t.Fatalf("text %q", p.Content)
	}
}

// FuzzTranslate feeds arbitrary lines to the decoder: agent output is
// untrusted, so nothing may panic and every event must be well-formed.
func FuzzTranslate(f *testing.F) {
	uestest.Fuzz(f, func() runner.Translator { return newTranslator(uestest.Stamp(ID), translatorConfig{partial: true}) },
		uestest.FuzzSeed{Line: []byte(`{"type":"result","status":"error","error":{"type":"unknown","message":"\"code\": 999"}}`), Code: 173},
		uestest.FuzzSeed{Line: []byte(`{"type":"tool_result","tool_id":"x","status":"error"}`)},
		uestest.FuzzSeed{Line: []byte(`{"type":"error","severity":"warning"}`)})
}

// TestADP5_ResumeRejectionDetected: with a resume token, exit 42 and no init
// (the captured resume_unknown) is a rejection; a run that started and then
// failed is not.
func TestADP5_ResumeRejectionDetected(t *testing.T) {
	tr := newTranslator(uestest.Stamp(ID), translatorConfig{resume: true})
	if evs, rejected := tr.Finish(runner.Exit{Code: 42, StderrTail: "Error resuming session: Invalid session identifier \"x\"."}); !rejected || len(evs) != 0 {
		t.Fatalf("Finish = %v, %v; want rejected", uestest.Types(evs), rejected)
	}
	tr = newTranslator(uestest.Stamp(ID), translatorConfig{resume: true})
	tr.Translate([]byte(`{"type":"init","session_id":"x","model":"m"}`))
	if _, rejected := tr.Finish(runner.Exit{Code: 42}); rejected {
		t.Fatal("a started run was taken for a rejected resume")
	}
}
