package opencode

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
)

var update = flag.Bool("update", false, "rewrite .golden files from the captured native streams")

// meta is a capture's <case>.meta.json.
type meta struct {
	RC      any    `json:"rc"`
	Signal  string `json:"signal"`
	Stderr  string `json:"stderr"`
	Options struct {
		Tier            drover.Tier `json:"tier"`
		Resume          string      `json:"resume"`
		DisallowedTools []string    `json:"disallowedTools"`
	} `json:"options"`
}

func readMeta(t testing.TB, stream string) meta {
	t.Helper()
	var m meta
	data, err := os.ReadFile(strings.TrimSuffix(stream, ".jsonl") + ".meta.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// exit is the recorded end of the captured process.
func (m meta) exit() proc.Exit {
	if m.Signal != "" {
		return proc.Exit{Code: -1, Signal: m.Signal, StderrTail: m.Stderr}
	}
	rc, _ := m.RC.(float64)
	return proc.Exit{Code: int(rc), StderrTail: m.Stderr}
}

func (m meta) options() drover.Options {
	return drover.Options{Tier: m.Options.Tier, Resume: m.Options.Resume, DisallowedTools: m.Options.DisallowedTools,
		Cwd: "/ws", Endpoint: &drover.Endpoint{BaseURL: "http://127.0.0.1:PORT"}}
}

var fixedClock = func() time.Time { return time.UnixMilli(1700000000000) }

// translateFile runs the translator over one captured native stream with a
// fixed clock, the way the runner does line by line, then Finish with the
// recorded exit status. rejected reports a resume rejection.
func translateFile(t testing.TB, path string) (evs []drover.Event, rejected bool) {
	t.Helper()
	m := readMeta(t, path)
	o := m.options()
	tr := newTranslator("golden-session", fixedClock, o, initModel(o))
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
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
	final, rejected := tr.Finish(m.exit())
	return append(evs, final...), rejected
}

// TestADP2_Golden checks every captured OpenCode stream against its golden
// UES file, and every golden event against the UES JSON Schema (UES-4).
func TestADP2_Golden(t *testing.T) {
	files, _ := filepath.Glob("testdata/*/*.jsonl")
	if len(files) == 0 {
		t.Fatal("no captured streams in testdata")
	}
	for _, in := range files {
		name := strings.TrimSuffix(in, ".jsonl")
		t.Run(name, func(t *testing.T) {
			evs, _ := translateFile(t, in)
			uestest.CheckGolden(t, name+".golden", evs, *update)
		})
	}
}

type expect struct {
	types     []drover.EventType // subsequence that must appear, in order
	status    drover.DoneStatus  // "" = no done expected
	errCode   drover.ErrorCode
	toolState drover.ToolStatus
	toolName  string
	rejected  bool
}

// TestADP2_GoldenSemantics pins what each captured case must mean, so a
// golden regenerated from a broken translator cannot pass unnoticed.
func TestADP2_GoldenSemantics(t *testing.T) {
	tool := []drover.EventType{"init", "opencode:step_start", "tool_use", "tool_result", "opencode:step_finish", "text", "done"}
	cases := map[string]expect{
		"text":                            {types: []drover.EventType{"init", "opencode:step_start", "text", "opencode:step_finish", "done"}, status: drover.StatusSuccess},
		"thinking":                        {types: []drover.EventType{"init", "thinking", "text", "done"}, status: drover.StatusSuccess},
		"bash":                            {types: tool, status: drover.StatusSuccess, toolState: drover.ToolSuccess, toolName: "bash"},
		"bash_error":                      {types: tool, status: drover.StatusSuccess, toolState: drover.ToolError, toolName: "bash"},
		"autonomous_touch":                {types: tool, status: drover.StatusSuccess, toolState: drover.ToolSuccess, toolName: "bash"},
		"supervised_write":                {types: tool, status: drover.StatusSuccess, toolState: drover.ToolSuccess, toolName: "write"},
		"supervised_bash_denied":          {types: tool, status: drover.StatusSuccess, toolState: drover.ToolDenied, toolName: "bash"},
		"supervised_read_outside_denied":  {types: tool, status: drover.StatusSuccess, toolState: drover.ToolDenied, toolName: "read"},
		"supervised_write_outside_denied": {types: tool, status: drover.StatusSuccess, toolState: drover.ToolDenied, toolName: "write"},
		"supervised_write_adddir":         {types: tool, status: drover.StatusSuccess, toolState: drover.ToolSuccess, toolName: "write"},
		"supervised_widen_attempt":        {types: tool, status: drover.StatusSuccess, toolState: drover.ToolDenied, toolName: "bash"},
		"dryrun_write_denied":             {types: tool, status: drover.StatusSuccess, toolState: drover.ToolDenied, toolName: "write"},
		"dryrun_bash_denied":              {types: tool, status: drover.StatusSuccess, toolState: drover.ToolDenied, toolName: "bash"},
		"dryrun_read":                     {types: tool, status: drover.StatusSuccess, toolState: drover.ToolSuccess, toolName: "read"},
		"sandbox_bash":                    {types: tool, status: drover.StatusSuccess, toolState: drover.ToolDenied, toolName: "bash"},
		"disallowed_tool":                 {types: tool, status: drover.StatusSuccess, toolState: drover.ToolDenied, toolName: "bash"},
		"todowrite":                       {types: tool, status: drover.StatusSuccess, toolState: drover.ToolSuccess, toolName: "todowrite"},
		"err_429":                         {types: []drover.EventType{"init", "error", "done"}, status: drover.StatusError, errCode: drover.CodeRateLimited},
		"err_429_retries1":                {types: []drover.EventType{"init", "error", "done"}, status: drover.StatusError, errCode: drover.CodeRateLimited},
		"err_500":                         {types: []drover.EventType{"init", "error", "done"}, status: drover.StatusError, errCode: drover.CodeServerError},
		"err_400":                         {types: []drover.EventType{"init", "error", "done"}, status: drover.StatusError, errCode: drover.CodeBadRequest},
		"resume_first":                    {types: []drover.EventType{"init", "text", "done"}, status: drover.StatusSuccess},
		"resume_ok":                       {types: []drover.EventType{"init", "text", "done"}, status: drover.StatusSuccess},
		"resume_unknown":                  {rejected: true},
		"cancel":                          {},
		"system_prompt":                   {types: []drover.EventType{"init", "text", "done"}, status: drover.StatusSuccess},
	}
	for name, want := range cases {
		path := filepath.Join("testdata", TestedVersions, name+".jsonl")
		if _, err := os.Stat(path); err != nil {
			t.Errorf("%s: capture missing: %v", name, err)
			continue
		}
		evs, rejected := translateFile(t, path)
		if rejected != want.rejected {
			t.Errorf("%s: resume rejected = %v, want %v", name, rejected, want.rejected)
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
		if len(evs) > 0 && evs[0].Type != drover.TypeInit {
			t.Errorf("%s: first event %s, want init", name, evs[0].Type)
		}
		var dones int
		for _, ev := range evs {
			switch p := ev.Payload.(type) {
			case drover.DonePayload:
				dones++
				if p.Status != want.status {
					t.Errorf("%s: done status %s, want %s", name, p.Status, want.status)
				}
				if !strings.HasPrefix(p.ResumeToken, "ses_") {
					t.Errorf("%s: done resume token %q", name, p.ResumeToken)
				}
				if p.Status == drover.StatusSuccess && (p.Usage.InputTokens == 0 || p.Usage.OutputTokens == 0 || p.Usage.Turns == nil || p.Usage.TotalCostUSD == nil) {
					t.Errorf("%s: usage not summed: %+v", name, p.Usage)
				}
				if want.toolName != "" && p.Usage.ToolUses != 1 {
					t.Errorf("%s: toolUses %d", name, p.Usage.ToolUses)
				}
			case drover.ErrorPayload:
				if want.errCode != "" && p.Code != want.errCode {
					t.Errorf("%s: error code %s, want %s", name, p.Code, want.errCode)
				}
				if p.Recoverable {
					t.Errorf("%s: API error marked recoverable", name)
				}
			case drover.ToolUsePayload:
				if p.ToolName != want.toolName || p.Description == "" {
					t.Errorf("%s: tool_use %+v, want %s", name, p, want.toolName)
				}
			case drover.ToolResultPayload:
				if p.Status != want.toolState || p.ToolName != want.toolName {
					t.Errorf("%s: tool_result %s/%s, want %s/%s (%q)", name, p.ToolName, p.Status, want.toolName, want.toolState, p.Output)
				}
			}
		}
		if (want.status != "") != (dones == 1) || dones > 1 {
			t.Errorf("%s: %d done events", name, dones)
		}
	}
}

// TestADP2_UsageSummedOverSteps: a tool run has two model calls; done sums
// both steps' tokens and counts them as turns.
func TestADP2_UsageSummedOverSteps(t *testing.T) {
	evs, _ := translateFile(t, filepath.Join("testdata", TestedVersions, "bash.jsonl"))
	d, _ := evs[len(evs)-1].Done()
	if d.Usage.InputTokens != 20 || d.Usage.OutputTokens != 10 || *d.Usage.Turns != 2 || *d.Usage.CacheReadTokens != 0 || d.Usage.ReasoningTokens == nil {
		t.Fatalf("usage %+v", d.Usage)
	}
	if d.Result == "" {
		t.Fatal("done without the final text as result")
	}
}

func typesOf(evs []drover.Event) []drover.EventType {
	out := make([]drover.EventType, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// FuzzTranslate feeds arbitrary lines to the translator: agent output is
// untrusted, so nothing may panic and every event must be well-formed.
func FuzzTranslate(f *testing.F) {
	files, _ := filepath.Glob("testdata/*/*.jsonl")
	for _, in := range files {
		data, _ := os.ReadFile(in)
		for _, l := range bytes.Split(data, []byte("\n")) {
			f.Add(l)
		}
	}
	f.Add([]byte(`{"type":"tool_use","part":{"tool":"invalid","state":{"input":{"tool":3}}}}`))
	f.Add([]byte(`{"type":"error","error":null}`))
	f.Add([]byte(`{"type":"step_finish","part":{"tokens":{"cache":null},"cost":-1}}`))
	f.Fuzz(func(t *testing.T, l []byte) {
		tr := newTranslator("s", time.Now, drover.Options{}, "m")
		evs, _ := tr.Translate(l)
		for _, code := range []int{0, 1} {
			final, _ := tr.Finish(proc.Exit{Code: code})
			evs = append(evs, final...)
		}
		for _, ev := range evs {
			if err := drover.ValidateEvent(ev); err != nil {
				t.Fatalf("invalid event from %q: %v", l, err)
			}
		}
	})
}

// TestADP5_ResumeRejectionDetected: with a resume token, the captured
// "Session not found" exit is a rejection; without one, or once the run has
// printed anything, it is not.
func TestADP5_ResumeRejectionDetected(t *testing.T) {
	exit := proc.Exit{Code: 1, StderrTail: "\x1b[91m\x1b[1mError: \x1b[0mSession not found\n"}
	tr := newTranslator("s", time.Now, drover.Options{Resume: "ses_x"}, "m")
	if evs, rejected := tr.Finish(exit); !rejected || len(evs) != 0 {
		t.Fatalf("Finish = %v, %v; want rejected", typesOf(evs), rejected)
	}
	tr = newTranslator("s", time.Now, drover.Options{}, "m")
	if _, rejected := tr.Finish(exit); rejected {
		t.Fatal("a run without a resume token was taken for a rejected resume")
	}
	tr = newTranslator("s", time.Now, drover.Options{Resume: "ses_x"}, "m")
	tr.Translate([]byte(`{"type":"step_start","sessionID":"ses_x","part":{}}`))
	if _, rejected := tr.Finish(exit); rejected {
		t.Fatal("a started run was taken for a rejected resume")
	}
}
