package gemini

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/proc"
	"github.com/drover-run/drover/internal/uestest"
	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite .golden files from the captured native streams")

var fixedClock = func() time.Time { return time.UnixMilli(1700000000000) }

type meta struct {
	Args   []string `json:"args"`
	RC     int      `json:"rc"`
	Signal string   `json:"signal"`
	Stderr string   `json:"stderr"`
	Policy string   `json:"policy"`
}

func readMeta(t *testing.T, jsonl string) meta {
	t.Helper()
	data, err := os.ReadFile(strings.TrimSuffix(jsonl, ".jsonl") + ".meta.json")
	if err != nil {
		t.Fatal(err)
	}
	var m meta
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// configOf rebuilds the translator configuration of a capture from the
// flags and policy it ran with: the tier decides the offered tools.
func configOf(t *testing.T, jsonl string) translatorConfig {
	m := readMeta(t, jsonl)
	var o drover.Options
	for i, a := range m.Args {
		if a != "--approval-mode" || i+1 >= len(m.Args) {
			continue
		}
		switch m.Args[i+1] {
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
		t.Fatalf("%s: the capture's policy is not what the adapter writes for %+v:\n%s", jsonl, o, Policy(o))
	}
	return translatorConfig{cwd: "/ws", model: DefaultEndpointModel, tools: OfferedTools(o)}
}

// exitOf rebuilds the recorded process end of a capture.
func exitOf(t *testing.T, jsonl string) proc.Exit {
	t.Helper()
	m := readMeta(t, jsonl)
	return proc.Exit{Code: m.RC, Stopped: m.Signal != "", StderrTail: m.Stderr}
}

// translateFile runs the translator over one captured native stream with a
// fixed clock, then Finish with the recorded exit, the way the runner does.
func translateFile(t *testing.T, path string, cfg translatorConfig) []drover.Event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := newTranslator("golden-session", fixedClock, cfg)
	var evs []drover.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		out, err := tr.Translate(sc.Bytes())
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		evs = append(evs, out...)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	final, rejected := tr.Finish(exitOf(t, path))
	if rejected {
		t.Fatalf("%s: taken for a rejected resume", path)
	}
	return append(evs, final...)
}

// TestADP2_Golden checks every captured gemini stream against its golden UES
// file, and every golden event against the UES JSON Schema (UES-4).
func TestADP2_Golden(t *testing.T) {
	files, _ := filepath.Glob("testdata/*/*.jsonl")
	if len(files) == 0 {
		t.Fatal("no captured streams in testdata")
	}
	for _, in := range files {
		name := strings.TrimSuffix(in, ".jsonl")
		t.Run(name, func(t *testing.T) {
			uestest.CheckGolden(t, name+".golden", translateFile(t, in, configOf(t, in)), *update)
		})
	}
}

type expect struct {
	types     []drover.EventType // subsequence that must appear, in order
	status    drover.DoneStatus  // "" = no done expected
	errCode   drover.ErrorCode
	http      int
	toolState drover.ToolStatus
	result    string
}

// TestADP2_GoldenSemantics pins what each captured case must mean, so a
// golden regenerated from a broken translator cannot pass unnoticed.
func TestADP2_GoldenSemantics(t *testing.T) {
	tu, tr := drover.TypeToolUse, drover.TypeToolResult
	cases := map[string]expect{
		"text":                    {types: []drover.EventType{"init", "gemini:user_message", "text", "done"}, status: drover.StatusSuccess, result: "hi from fake gemini"},
		"thinking":                {types: []drover.EventType{"init", "text", "done"}, status: drover.StatusSuccess, result: "answer after thinking"},
		"shell":                   {types: []drover.EventType{"init", tu, tr, "text", "done"}, status: drover.StatusSuccess, toolState: drover.ToolSuccess},
		"shell_error":             {types: []drover.EventType{tu, tr, "text", "done"}, status: drover.StatusSuccess, toolState: drover.ToolSuccess},
		"parallel":                {types: []drover.EventType{tu, tu, tr, tr, "text", "done"}, status: drover.StatusSuccess, toolState: drover.ToolSuccess},
		"write_supervised":        {types: []drover.EventType{tu, tr, "text", "done"}, status: drover.StatusSuccess, toolState: drover.ToolSuccess},
		"write_dryrun_denied":     {types: []drover.EventType{tu, tr, "text", "done"}, status: drover.StatusSuccess, toolState: drover.ToolDenied},
		"shell_supervised_denied": {types: []drover.EventType{tu, tr, "done"}, status: drover.StatusSuccess, toolState: drover.ToolDenied},
		"sandbox_read_denied":     {types: []drover.EventType{tu, tr, "done"}, status: drover.StatusSuccess, toolState: drover.ToolDenied},
		"write_outside_denied":    {types: []drover.EventType{tu, tr, "done"}, status: drover.StatusSuccess, toolState: drover.ToolDenied},
		"disallowed_tool":         {types: []drover.EventType{tu, tr, "done"}, status: drover.StatusSuccess, toolState: drover.ToolDenied},
		"todos":                   {types: []drover.EventType{tu, tr, "text", "done"}, status: drover.StatusSuccess, toolState: drover.ToolSuccess},
		"max_turns":               {types: []drover.EventType{tu, tr, "done"}, status: drover.StatusMaxTurns},
		"err_429":                 {types: []drover.EventType{"init", "error", "done"}, status: drover.StatusError, errCode: drover.CodeRateLimited, http: 429},
		"err_500":                 {types: []drover.EventType{"init", "error", "done"}, status: drover.StatusError, errCode: drover.CodeServerError, http: 500},
		"err_400":                 {types: []drover.EventType{"init", "error", "done"}, status: drover.StatusError, errCode: drover.CodeBadRequest, http: 400},
		"err_401":                 {types: []drover.EventType{"init", "error", "done"}, status: drover.StatusError, errCode: drover.CodeAuthFailed, http: 401},
		"resume_first":            {types: []drover.EventType{"init", "text", "done"}, status: drover.StatusSuccess},
		"resume_ok":               {types: []drover.EventType{"init", "text", "done"}, status: drover.StatusSuccess},
		// Without a resume token in the options, exit 42 is an ordinary failure.
		"resume_unknown": {types: []drover.EventType{"init", "error", "done"}, status: drover.StatusError, errCode: drover.CodeProcessExit},
		"cancel":         {types: []drover.EventType{"init", "gemini:user_message"}},
	}
	files, _ := filepath.Glob(filepath.Join("testdata", TestedVersions, "*.jsonl"))
	for _, f := range files {
		if _, ok := cases[strings.TrimSuffix(filepath.Base(f), ".jsonl")]; !ok {
			t.Errorf("%s has no semantic expectation", f)
		}
	}
	for name, want := range cases {
		path := filepath.Join("testdata", TestedVersions, name+".jsonl")
		if _, err := os.Stat(path); err != nil {
			t.Errorf("%s: capture missing: %v", name, err)
			continue
		}
		evs := translateFile(t, path, configOf(t, path))
		if len(evs) == 0 || evs[0].Type != drover.TypeInit {
			t.Errorf("%s: first event is not init: %v", name, typesOf(evs))
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
		var dones, toolUses int
		for _, ev := range evs {
			switch p := ev.Payload.(type) {
			case drover.DonePayload:
				dones++
				if p.Status != want.status {
					t.Errorf("%s: done status %s, want %s", name, p.Status, want.status)
				}
				if p.ResumeToken == "" && name != "resume_unknown" {
					t.Errorf("%s: done without resume token", name)
				}
				if want.result != "" && p.Result != want.result {
					t.Errorf("%s: result %q, want %q", name, p.Result, want.result)
				}
				if p.Usage.ToolUses != int64(toolUses) {
					t.Errorf("%s: usage.toolUses %d, saw %d tool_use", name, p.Usage.ToolUses, toolUses)
				}
				if p.Usage.TotalCostUSD != nil {
					t.Errorf("%s: gemini reports no cost, done has one", name)
				}
			case drover.ErrorPayload:
				if want.errCode != "" && p.Code != want.errCode {
					t.Errorf("%s: error code %s, want %s", name, p.Code, want.errCode)
				}
				if want.http != 0 && ev.Metadata["httpStatus"] != want.http {
					t.Errorf("%s: httpStatus %v, want %d", name, ev.Metadata["httpStatus"], want.http)
				}
				if p.Recoverable {
					t.Errorf("%s: run-ending error is recoverable", name)
				}
			case drover.ToolUsePayload:
				toolUses++
				if p.Description == "" {
					t.Errorf("%s: tool_use without description", name)
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

// TestUES2_TextAssembledFromDeltas: with PartialText the chunks become
// text_delta and the complete message still follows as text, before the
// next tool_use and before done.
func TestUES2_TextAssembledFromDeltas(t *testing.T) {
	cfg := configOf(t, "testdata/0.61.0/text.jsonl")
	cfg.partial = true
	evs := translateFile(t, "testdata/0.61.0/text.jsonl", cfg)
	want := []drover.EventType{"init", "gemini:user_message", "text_delta", "text_delta", "text", "done"}
	if diff := cmp.Diff(want, typesOf(evs)); diff != "" {
		t.Fatalf("types (-want +got):\n%s", diff)
	}
	if p := evs[4].Payload.(drover.TextPayload); p.Content != "hi from fake gemini" {
		t.Fatalf("text %q", p.Content)
	}
}

// FuzzTranslate feeds arbitrary lines to the decoder: agent output is
// untrusted, so nothing may panic and every event must be well-formed.
func FuzzTranslate(f *testing.F) {
	files, _ := filepath.Glob("testdata/*/*.jsonl")
	for _, in := range files {
		data, _ := os.ReadFile(in)
		for _, l := range bytes.Split(data, []byte("\n")) {
			f.Add(l, 0)
		}
	}
	f.Add([]byte(`{"type":"result","status":"error","error":{"type":"unknown","message":"\"code\": 999"}}`), 173)
	f.Add([]byte(`{"type":"tool_result","tool_id":"x","status":"error"}`), 0)
	f.Add([]byte(`{"type":"error","severity":"warning"}`), 0)
	f.Fuzz(func(t *testing.T, l []byte, rc int) {
		tr := newTranslator("s", time.Now, translatorConfig{partial: true})
		evs, _ := tr.Translate(l)
		final, _ := tr.Finish(proc.Exit{Code: rc})
		for _, ev := range append(evs, final...) {
			if err := drover.ValidateEvent(ev); err != nil {
				t.Fatalf("invalid event from %q: %v", l, err)
			}
		}
	})
}

// TestADP5_ResumeRejectionDetected: with a resume token, exit 42 and no init
// (the captured resume_unknown) is a rejection; a run that started and then
// failed is not.
func TestADP5_ResumeRejectionDetected(t *testing.T) {
	tr := newTranslator("s", time.Now, translatorConfig{resume: true})
	if evs, rejected := tr.Finish(proc.Exit{Code: 42, StderrTail: "Error resuming session: Invalid session identifier \"x\"."}); !rejected || len(evs) != 0 {
		t.Fatalf("Finish = %v, %v; want rejected", typesOf(evs), rejected)
	}
	tr = newTranslator("s", time.Now, translatorConfig{resume: true})
	tr.Translate([]byte(`{"type":"init","session_id":"x","model":"m"}`))
	if _, rejected := tr.Finish(proc.Exit{Code: 42}); rejected {
		t.Fatal("a started run was taken for a rejected resume")
	}
}
