package codex

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/proc"
	"github.com/drover-run/drover/internal/uestest"
)

var update = flag.Bool("update", false, "rewrite .golden files from the captured native streams")

// meta is a capture's <case>.meta.json.
type meta struct {
	Args            []string `json:"args"`
	RC              int      `json:"rc"`
	Signal          string   `json:"signal"`
	Stderr          string   `json:"stderr"`
	Tier            string   `json:"tier"`
	DisallowedTools []string `json:"disallowedTools"`
}

var goldenThreadRe = regexp.MustCompile(`"thread_id":"([0-9a-f-]{36})"`)

// replay runs the translator over one captured case the way the runner
// does: every line through Translate, then Finish with the recorded exit
// code and stderr, with a fixed clock. The case's trimmed rollout file, if
// captured, is put where Finish looks for it. rejected reports a resume
// rejection.
func replay(t *testing.T, name string) (evs []drover.Event, rejected bool) {
	t.Helper()
	var m meta
	data, err := os.ReadFile(name + ".meta.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	stream, err := os.ReadFile(name + ".jsonl")
	if err != nil {
		t.Fatal(err)
	}
	opts := drover.Options{Tier: drover.Tier(m.Tier), DisallowedTools: m.DisallowedTools}
	info := runInfo{
		resume:  slices.Contains(m.Args, "resume"),
		cwd:     "/ws",
		tier:    opts.EffectiveTier(),
		tools:   offeredTools(opts),
		removed: removedTools(opts),
	}
	if i := slices.Index(m.Args, "-m"); i >= 0 {
		info.model = m.Args[i+1]
	}
	if ro, err := os.ReadFile(name + ".rollout.jsonl"); err == nil {
		th := goldenThreadRe.FindSubmatch(stream)
		if th == nil {
			t.Fatalf("%s: rollout without a thread id in the stream", name)
		}
		home := t.TempDir()
		dir := filepath.Join(home, "sessions", "2026", "11", "22")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "rollout-2026-11-22T00-00-00-"+string(th[1])+".jsonl"), ro, 0o644); err != nil {
			t.Fatal(err)
		}
		info.codexHome = home
	}
	tr := newTranslator("golden-session", func() time.Time { return time.UnixMilli(1700000000000) }, info)
	sc := bufio.NewScanner(bytes.NewReader(stream))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		out, err := tr.Translate(sc.Bytes())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		evs = append(evs, out...)
	}
	exit := proc.Exit{Code: m.RC, Signal: m.Signal, StderrTail: m.Stderr}
	if m.Signal != "" {
		exit.Code = -1
	}
	final, rejected := tr.Finish(exit)
	return append(evs, final...), rejected
}

func captured(t testing.TB) []string {
	files, _ := filepath.Glob("testdata/*/*.meta.json")
	if len(files) == 0 {
		t.Fatal("no captured streams in testdata")
	}
	for i, f := range files {
		files[i] = strings.TrimSuffix(f, ".meta.json")
	}
	return files
}

// TestADP2_Golden checks every captured Codex stream against its golden UES
// file, and every golden event against the UES JSON Schema (UES-4).
func TestADP2_Golden(t *testing.T) {
	for _, name := range captured(t) {
		t.Run(name, func(t *testing.T) {
			evs, _ := replay(t, name)
			uestest.CheckGolden(t, name+".golden", evs, *update)
			for _, ev := range evs {
				if err := drover.ValidateEvent(ev); err != nil {
					t.Errorf("invalid event %+v: %v", ev, err)
				}
			}
		})
	}
}

type expect struct {
	types     []drover.EventType // subsequence that must appear, in order
	status    drover.DoneStatus  // "" = no done expected
	errCode   drover.ErrorCode
	toolState drover.ToolStatus // every tool_result must have it
	toolName  string            // every tool_use must name it
	rejected  bool              // Finish must report a rejected resume
	usage     *drover.Usage     // tokens and turns this run must report
}

func i64(n int64) *int64 { return &n }

// TestADP2_GoldenSemantics pins what each captured case must mean, so a
// golden regenerated from a broken translator cannot pass unnoticed.
func TestADP2_GoldenSemantics(t *testing.T) {
	tu := []drover.EventType{"init", "tool_use", "tool_result", "text", "done"}
	te := []drover.EventType{"init", "codex:turn_started", "error", "done"}
	cases := map[string]expect{
		"text":                            {types: []drover.EventType{"init", "codex:turn_started", "text", "done"}, status: drover.StatusSuccess, usage: &drover.Usage{InputTokens: 10, OutputTokens: 5, Turns: i64(1)}},
		"thinking":                        {types: []drover.EventType{"init", "thinking", "text", "done"}, status: drover.StatusSuccess},
		"shell":                           {types: tu, status: drover.StatusSuccess, toolState: drover.ToolSuccess, toolName: "exec_command", usage: &drover.Usage{InputTokens: 20, OutputTokens: 10, ToolUses: 1, Turns: i64(2)}},
		"shell_fail":                      {types: tu, status: drover.StatusSuccess, toolState: drover.ToolError, toolName: "exec_command"},
		"write_allowed":                   {types: []drover.EventType{"init", "tool_use", "tool_result", "codex:file_change", "text", "done"}, status: drover.StatusSuccess, toolState: drover.ToolSuccess, toolName: "apply_patch"},
		"dryrun_patch_denied":             {types: []drover.EventType{"init", "text", "tool_use", "tool_result", "done"}, status: drover.StatusSuccess, toolState: drover.ToolDenied, toolName: "apply_patch"},
		"dryrun_shell_write_denied":       {types: []drover.EventType{"init", "text", "tool_use", "tool_result", "done"}, status: drover.StatusSuccess, toolState: drover.ToolDenied, toolName: "exec_command"},
		"dryrun_shell_read":               {types: tu, status: drover.StatusSuccess, toolState: drover.ToolSuccess, toolName: "exec_command"},
		"supervised_outside_denied":       {types: []drover.EventType{"init", "text", "tool_use", "tool_result", "done"}, status: drover.StatusSuccess, toolState: drover.ToolDenied, toolName: "apply_patch"},
		"supervised_shell_outside_denied": {types: []drover.EventType{"init", "text", "tool_use", "tool_result", "done"}, status: drover.StatusSuccess, toolState: drover.ToolDenied, toolName: "exec_command"},
		"supervised_network":              {types: tu, status: drover.StatusSuccess, toolState: drover.ToolError, toolName: "exec_command"},
		"autonomous_shell":                {types: tu, status: drover.StatusSuccess, toolState: drover.ToolSuccess, toolName: "exec_command"},
		"sandbox_shell_denied":            {types: []drover.EventType{"init", "text", "tool_use", "tool_result", "done"}, status: drover.StatusSuccess, toolState: drover.ToolDenied, toolName: "shell"},
		"sandbox_patch_denied":            {types: []drover.EventType{"init", "text", "tool_use", "tool_result", "done"}, status: drover.StatusSuccess, toolState: drover.ToolDenied, toolName: "apply_patch"},
		"disallowed_tool":                 {types: []drover.EventType{"init", "text", "tool_use", "tool_result", "done"}, status: drover.StatusSuccess, toolState: drover.ToolDenied, toolName: "view_image"},
		"escalation_denied":               {types: []drover.EventType{"init", "text", "tool_use", "tool_result", "done"}, status: drover.StatusSuccess, toolState: drover.ToolDenied, toolName: "exec_command"},
		"unknown_tool":                    {types: []drover.EventType{"init", "text", "tool_use", "tool_result", "done"}, status: drover.StatusSuccess, toolState: drover.ToolError, toolName: "no_such_tool"},
		"err_429":                         {types: te, status: drover.StatusError, errCode: drover.CodeRateLimited},
		"err_429_retry1":                  {types: []drover.EventType{"init", "codex:error", "codex:error", "error", "done"}, status: drover.StatusError, errCode: drover.CodeRateLimited},
		"err_500":                         {types: te, status: drover.StatusError, errCode: drover.CodeServerError},
		"err_503":                         {types: te, status: drover.StatusError, errCode: drover.CodeOverloaded},
		"err_401":                         {types: te, status: drover.StatusError, errCode: drover.CodeAuthFailed},
		"err_400":                         {types: te, status: drover.StatusError, errCode: drover.CodeBadRequest},
		"midstream_failure":               {types: te, status: drover.StatusError, errCode: drover.CodeServerError},
		// Resumed: turn.completed says 30/15 for the thread; the first run used 10/5.
		"resume_ok":          {types: tu, status: drover.StatusSuccess, toolState: drover.ToolSuccess, usage: &drover.Usage{InputTokens: 20, OutputTokens: 10, ToolUses: 1, Turns: i64(2)}},
		"resume_unknown":     {rejected: true},
		"cancel":             {types: []drover.EventType{"init", "codex:turn_started"}},
		"mcp_tool":           {types: tu, status: drover.StatusSuccess, toolState: drover.ToolSuccess, toolName: "mcp__echo__echo"},
		"mcp_needs_approval": {types: tu, status: drover.StatusSuccess, toolState: drover.ToolDenied, toolName: "mcp__echo__echo"},
		"unknown_model":      {types: []drover.EventType{"init", "codex:error", "codex:turn_started", "text", "done"}, status: drover.StatusSuccess},
	}
	for _, name := range captured(t) {
		if _, ok := cases[filepath.Base(name)]; !ok {
			t.Errorf("%s: captured but has no semantic expectation", name)
		}
	}
	for name, want := range cases {
		path := filepath.Join("testdata", TestedVersions, name)
		if _, err := os.Stat(path + ".jsonl"); err != nil {
			t.Errorf("%s: capture missing: %v", name, err)
			continue
		}
		evs, rejected := replay(t, path)
		if rejected != want.rejected {
			t.Errorf("%s: rejected=%v, want %v", name, rejected, want.rejected)
		}
		if len(evs) > 0 && evs[0].Type != drover.TypeInit {
			t.Errorf("%s: first event %s, want init", name, evs[0].Type)
		}
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
				if p.ResumeToken == "" || !uuidRe.MatchString(p.ResumeToken) {
					t.Errorf("%s: done resume token %q is not a thread UUID", name, p.ResumeToken)
				}
				if u := want.usage; u != nil {
					if p.Usage.InputTokens != u.InputTokens || p.Usage.OutputTokens != u.OutputTokens || p.Usage.ToolUses != u.ToolUses ||
						(u.Turns != nil && (p.Usage.Turns == nil || *p.Usage.Turns != *u.Turns)) {
						t.Errorf("%s: usage %+v, want %+v", name, p.Usage, *u)
					}
				}
				if p.Usage.TotalCostUSD != nil {
					t.Errorf("%s: codex reports no cost, got %v", name, *p.Usage.TotalCostUSD)
				}
			case drover.ErrorPayload:
				if want.errCode != "" && p.Code != want.errCode {
					t.Errorf("%s: error code %s, want %s", name, p.Code, want.errCode)
				}
			case drover.ToolUsePayload:
				if want.toolName != "" && p.ToolName != want.toolName {
					t.Errorf("%s: tool %s, want %s", name, p.ToolName, want.toolName)
				}
				if p.Description == "" || (p.ToolName != "exec_command" && p.Description != drover.DescribeTool(p.ToolName, p.Input)) {
					t.Errorf("%s: description %q", name, p.Description)
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
			f.Add(l, "")
		}
	}
	f.Add([]byte(`{"type":"item.completed","item":{"type":"todo_list","items":[]}}`), "")
	f.Add([]byte(`{"type":"turn.failed","error":null}`), "ERROR codex_core::tools::router: error=unsupported call: x")
	f.Add([]byte(`{"type":"turn.completed"}`), "ERROR codex_core::tools::router: error=patch rejected: y")
	f.Fuzz(func(t *testing.T, l []byte, stderr string) {
		tr := newTranslator("s", time.Now, runInfo{tier: drover.TierDryRun})
		evs, _ := tr.Translate(l)
		final, _ := tr.Finish(proc.Exit{Code: 1, StderrTail: stderr})
		for _, ev := range append(evs, final...) {
			if err := drover.ValidateEvent(ev); err != nil {
				t.Fatalf("invalid event from %q: %v", l, err)
			}
		}
	})
}

// TestADP5_ResumeRejectionDetected: with a resume token, the captured
// unknown-thread failure yields nothing and Finish reports the rejection;
// without one, or once a thread started, it is an ordinary failure.
func TestADP5_ResumeRejectionDetected(t *testing.T) {
	data, err := os.ReadFile("testdata/" + TestedVersions + "/resume_unknown.meta.json")
	if err != nil {
		t.Fatal(err)
	}
	var m meta
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	exit := proc.Exit{Code: m.RC, StderrTail: m.Stderr}
	if evs, rejected := newTranslator("s", time.Now, runInfo{resume: true}).Finish(exit); !rejected || len(evs) != 0 {
		t.Fatalf("Finish = %v, %v; want rejected", typesOf(evs), rejected)
	}
	if _, rejected := newTranslator("s", time.Now, runInfo{}).Finish(exit); rejected {
		t.Fatal("a run without resume was taken for a rejected resume")
	}
	tr := newTranslator("s", time.Now, runInfo{resume: true})
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
	tr := newTranslator("s", time.Now, runInfo{tier: drover.TierDryRun})
	for _, l := range []string{`{"type":"thread.started","thread_id":"01a20101-0000-7000-8000-000000000001"}`, `{"type":"turn.completed","usage":{"input_tokens":20,"output_tokens":10}}`} {
		if _, err := tr.Translate([]byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	evs, _ := tr.Finish(proc.Exit{StderrTail: stderr})
	var got []string
	for _, ev := range evs {
		if p, ok := ev.Payload.(drover.ToolResultPayload); ok {
			got = append(got, p.ToolName+":"+string(p.Status))
		}
	}
	if want := []string{"apply_patch:denied", "made_up:error"}; !slices.Equal(got, want) {
		t.Fatalf("results %v, want %v (%v)", got, want, typesOf(evs))
	}
	if d, ok := evs[len(evs)-1].Done(); !ok || d.Usage.ToolUses != 2 {
		t.Fatalf("last event %+v", evs[len(evs)-1])
	}
}
