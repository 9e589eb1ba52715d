package claude

import (
	"bufio"
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/proc"
	"github.com/drover-run/drover/internal/uestest"
)

var update = flag.Bool("update", false, "rewrite .golden files from the captured native streams")

// translateFile runs the translator over one captured native stream with a
// fixed clock, the way the adapter does line by line.
func translateFile(t *testing.T, path string) []drover.Event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := newTranslator("golden-session", func() time.Time { return time.UnixMilli(1700000000000) }, false)
	var evs []drover.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		out, err := tr.translate(sc.Bytes())
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		evs = append(evs, out...)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return append(evs, tr.finish()...)
}

// TestADP2_Golden checks every captured Claude stream against its golden UES
// file, and every golden event against the UES JSON Schema (UES-4).
func TestADP2_Golden(t *testing.T) {
	files, _ := filepath.Glob("testdata/*/*.jsonl")
	if len(files) == 0 {
		t.Fatal("no captured streams in testdata")
	}
	for _, in := range files {
		name := strings.TrimSuffix(in, ".jsonl")
		t.Run(name, func(t *testing.T) {
			evs := translateFile(t, in)
			uestest.CheckGolden(t, name+".golden", evs, *update)
		})
	}
}

type expect struct {
	types     []drover.EventType // subsequence that must appear, in order
	status    drover.DoneStatus  // "" = no done expected
	errCode   drover.ErrorCode
	toolState drover.ToolStatus
}

// TestADP2_GoldenSemantics pins what each captured case must mean, so a
// golden regenerated from a broken translator cannot pass unnoticed.
func TestADP2_GoldenSemantics(t *testing.T) {
	cases := map[string]expect{
		"text":                     {types: []drover.EventType{"init", "text", "done"}, status: drover.StatusSuccess},
		"text_partial":             {types: []drover.EventType{"init", "text_delta", "text", "done"}, status: drover.StatusSuccess},
		"thinking":                 {types: []drover.EventType{"init", "thinking", "text", "done"}, status: drover.StatusSuccess},
		"bash":                     {types: []drover.EventType{"init", "tool_use", "tool_result", "text", "done"}, status: drover.StatusSuccess, toolState: drover.ToolSuccess},
		"bash_error":               {types: []drover.EventType{"tool_use", "tool_result", "done"}, status: drover.StatusSuccess, toolState: drover.ToolError},
		"write_denied_default":     {types: []drover.EventType{"tool_use", "tool_result", "done"}, status: drover.StatusSuccess, toolState: drover.ToolDenied},
		"write_denied_dontask":     {types: []drover.EventType{"tool_use", "tool_result", "done"}, status: drover.StatusSuccess, toolState: drover.ToolDenied},
		"dryrun_write_denied":      {types: []drover.EventType{"tool_use", "tool_result", "done"}, status: drover.StatusSuccess, toolState: drover.ToolDenied},
		"write_acceptedits":        {types: []drover.EventType{"tool_use", "tool_result", "done"}, status: drover.StatusSuccess, toolState: drover.ToolSuccess},
		"disallowed_tool":          {types: []drover.EventType{"tool_use", "tool_result", "done"}, status: drover.StatusSuccess, toolState: drover.ToolDenied},
		"max_turns":                {types: []drover.EventType{"tool_use", "tool_result", "done"}, status: drover.StatusMaxTurns},
		"max_budget":               {types: []drover.EventType{"tool_use", "done"}, status: drover.StatusMaxBudget},
		"err_429":                  {types: []drover.EventType{"init", "error", "done"}, status: drover.StatusError, errCode: drover.CodeRateLimited},
		"err_401":                  {types: []drover.EventType{"error", "done"}, status: drover.StatusError, errCode: drover.CodeAuthFailed},
		"err_500":                  {types: []drover.EventType{"error", "done"}, status: drover.StatusError, errCode: drover.CodeServerError},
		"err_529":                  {types: []drover.EventType{"error", "done"}, status: drover.StatusError, errCode: drover.CodeOverloaded},
		"err_400":                  {types: []drover.EventType{"error", "done"}, status: drover.StatusError, errCode: drover.CodeBadRequest},
		"resume_ok":                {types: []drover.EventType{"init", "text", "done"}, status: drover.StatusSuccess},
		"resume_unknown":           {types: []drover.EventType{"error", "done"}, status: drover.StatusError, errCode: drover.CodeExecutionError},
		"cut_partial":              {types: []drover.EventType{"init", "text_delta", "text", "done"}, status: drover.StatusSuccess},
		"compact":                  {types: []drover.EventType{"init", "claude-code:compact", "done"}, status: drover.StatusSuccess},
		"sigint":                   {types: []drover.EventType{"init"}},
		"sigterm":                  {types: []drover.EventType{"init"}},
		"long_bash":                {types: []drover.EventType{"tool_use", "tool_result", "done"}, status: drover.StatusSuccess, toolState: drover.ToolSuccess},
		"sandbox_bash":             {types: []drover.EventType{"init", "tool_use", "tool_result", "done"}, status: drover.StatusSuccess, toolState: drover.ToolDenied},
		"dryrun_write_denied_mode": {types: []drover.EventType{"tool_use", "tool_result", "done"}, status: drover.StatusSuccess, toolState: drover.ToolDenied},
		"supervised_touch_denied":  {types: []drover.EventType{"tool_use", "tool_result", "done"}, status: drover.StatusSuccess, toolState: drover.ToolDenied},
		"autonomous_bash":          {types: []drover.EventType{"tool_use", "tool_result", "done"}, status: drover.StatusSuccess, toolState: drover.ToolSuccess},
		"agent_background":         {types: []drover.EventType{"init", "tool_use", "tool_result", "claude-code:init", "text", "done"}, status: drover.StatusSuccess},
	}
	for name, want := range cases {
		path := filepath.Join("testdata", TestedVersions, name+".jsonl")
		if _, err := os.Stat(path); err != nil {
			t.Errorf("%s: capture missing: %v", name, err)
			continue
		}
		evs := translateFile(t, path)
		i := 0
		for _, ev := range evs {
			if i < len(want.types) && ev.Type == want.types[i] {
				i++
			}
		}
		if i < len(want.types) {
			t.Errorf("%s: want subsequence %v in %v", name, want.types, typesOf(evs))
		}
		var dones int
		for _, ev := range evs {
			switch p := ev.Payload.(type) {
			case drover.DonePayload:
				dones++
				if p.Status != want.status {
					t.Errorf("%s: done status %s, want %s", name, p.Status, want.status)
				}
				if p.ResumeToken == "" {
					t.Errorf("%s: done without resume token", name)
				}
			case drover.ErrorPayload:
				if want.errCode != "" && p.Code != want.errCode {
					t.Errorf("%s: error code %s, want %s", name, p.Code, want.errCode)
				}
			case drover.ToolResultPayload:
				if want.toolState != "" && p.Status != want.toolState {
					t.Errorf("%s: tool status %s, want %s (%q)", name, p.Status, want.toolState, p.Output)
				}
				if p.ToolName == "" {
					t.Errorf("%s: tool_result without tool name", name)
				}
			}
		}
		if (want.status != "") != (dones == 1) || dones > 1 {
			t.Errorf("%s: %d done events", name, dones)
		}
	}
}

func typesOf(evs []drover.Event) []drover.EventType {
	out := make([]drover.EventType, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// FuzzTranslate feeds arbitrary lines to the decoder: agent output is
// untrusted, so nothing may panic and every event must be well-formed.
func FuzzTranslate(f *testing.F) {
	files, _ := filepath.Glob("testdata/*/*.jsonl")
	for _, in := range files {
		data, _ := os.ReadFile(in)
		for _, l := range bytes.Split(data, []byte("\n")) {
			f.Add(l)
		}
	}
	f.Add([]byte(`{"type":"result","permission_denials":[{"tool_use_id":"x"}]}`))
	f.Add([]byte(`{"type":"assistant","message":{"content":"str"}}`))
	f.Fuzz(func(t *testing.T, l []byte) {
		tr := newTranslator("s", time.Now, false)
		evs, _ := tr.translate(l)
		evs = append(evs, tr.finish()...)
		for _, ev := range evs {
			if err := drover.ValidateEvent(ev); err != nil {
				t.Fatalf("invalid event from %q: %v", l, err)
			}
		}
	})
}

// TestADP5_ResumeRejectionDetected: with a resume token, the captured
// "No conversation found" result yields nothing and Finish reports the
// rejection; without one it is an ordinary failed run.
func TestADP5_ResumeRejectionDetected(t *testing.T) {
	data, err := os.ReadFile("testdata/2.1.330/resume_unknown.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	tr := newTranslator("s", time.Now, true)
	for _, l := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		if evs, _ := tr.Translate(l); len(evs) != 0 {
			t.Fatalf("rejection yielded %v", typesOf(evs))
		}
	}
	if evs, rejected := tr.Finish(proc.Exit{Code: 1}); !rejected || len(evs) != 0 {
		t.Fatalf("Finish = %v, %v; want rejected", typesOf(evs), rejected)
	}
	// A run that started (init seen) and then failed is not a rejected resume.
	tr = newTranslator("s", time.Now, true)
	tr.Translate([]byte(`{"type":"system","subtype":"init","session_id":"x","tools":[]}`))
	if _, rejected := tr.Finish(proc.Exit{Code: 1, StderrTail: "No conversation found"}); rejected {
		t.Fatal("a started run was taken for a rejected resume")
	}
}
