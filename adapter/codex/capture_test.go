package codex

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/fakemodel"
	"github.com/drover-run/drover/internal/runner"
	"github.com/drover-run/drover/internal/testkit/mcptest"
)

// TestCaptureAppServer re-captures the live (app-server) cases in
// testdata/<TestedVersions>/live_*: each case runs the real codex through
// the engine and the runner's conversation loop, against fakemodel, and a
// recorder around the conversation writes what crossed stdin and stdout,
// in order. It only runs with DROVER_CODEX_CAPTURE=1 (it rewrites
// testdata; review the diff), with the pinned codex from e2e/node_modules
// or $DROVER_CODEX_BIN.
func TestCaptureAppServer(t *testing.T) {
	if os.Getenv("DROVER_CODEX_CAPTURE") != "1" {
		t.Skip("rewrites testdata: set DROVER_CODEX_CAPTURE=1")
	}
	bin := os.Getenv(BinaryEnv)
	if bin == "" {
		bin, _ = filepath.Abs("../../e2e/node_modules/.bin/codex")
	}
	script, err := fakemodel.ParseScript([]byte(captureScript))
	if err != nil {
		t.Fatal(err)
	}
	fm := fakemodel.New(script)
	srv := httptest.NewServer(fm.Handler()) // on 127.0.0.1
	defer srv.Close()
	defer fm.Close() // first: ends the scripted delays still running
	url := srv.URL
	// The repository's own MCP server (its stdio program), built here;
	// the captures name it "mcpprobe".
	probe := mcptest.Build(t)
	mcp := []string{"-c", fmt.Sprintf(`mcp_servers.mcptest={command=%q}`, probe)}
	allow := &drover.PermissionDecision{Behavior: drover.Allow}
	homes := map[string]string{}
	threads := map[string]string{}
	for _, c := range []liveCapture{
		{name: "live_text", prompt: "SAY hello from the app-server"},
		{name: "live_text_partial", prompt: "SAY streamed in a few words", partial: true},
		{name: "live_thinking", prompt: "THINK"},
		{name: "live_shell_allowed", prompt: "SHELL touch allowed.txt && echo made-it", answer: allow},
		{name: "live_shell_denied", prompt: "SHELL touch denied.txt", answer: &drover.PermissionDecision{Behavior: drover.Deny, Message: "use the staging database"}},
		{name: "live_shell_outside", prompt: "SHELL touch HOME/outside.txt", answer: allow},
		{name: "live_shell_always", prompt: "TWICE echo again >> twice.txt", answer: &drover.PermissionDecision{Behavior: drover.Allow, Always: true}},
		{name: "live_escalation", prompt: "ESC touch escalated.txt", answer: allow},
		{name: "live_edit_inside", prompt: "WRITE inside.txt"},
		{name: "live_edit_outside", prompt: "WRITE HOME/outside.txt", answer: allow},
		{name: "live_mcp_allowed", prompt: "MCP", answer: allow, args: mcp},
		{name: "live_dryrun_patch_denied", prompt: "WRITE inside.txt", tier: drover.TierDryRun},
		{name: "live_steer", prompt: "SLOW please", steer: "STEERED: look at the tests first"},
		{name: "live_interrupt", prompt: "STALL for two minutes", interrupt: true},
		{name: "live_resume", prompt: "SAY continued", resumeOf: "live_interrupt"},
		{name: "live_resume_unknown", prompt: "SAY x", resume: "01a21051-0000-7000-8000-000000000000"},
		{name: "live_err_429", prompt: "ERR429"},
		{name: "live_err_500", prompt: "ERR500"},
	} {
		home := homes[c.resumeOf]
		if home == "" {
			home = t.TempDir() // the whole test's: a later case may resume its thread
		}
		t.Run(c.name, func(t *testing.T) {
			homes[c.name] = home
			if c.resumeOf != "" {
				c.resume = threads[c.resumeOf]
			}
			threads[c.name] = c.capture(t, bin, url, home, probe)
		})
	}
}

// captureScript answers the captured cases (prompts name what the model does).
const captureScript = `{"rules":[
 {"name":"shell","match":"^SHELL (.*)$","steps":[{"tools":[{"shell":"$1"}]},{"text":"shell done"}]},
 {"name":"twice","match":"^TWICE (.*)$","steps":[{"tools":[{"shell":"$1"}]},{"tools":[{"shell":"$1"}]},{"text":"twice done"}]},
 {"name":"esc","match":"^ESC (.*)$","steps":[{"tools":[{"name":"exec_command","input":{"cmd":"$1","sandbox_permissions":"require_escalated","justification":"it must run outside the sandbox"}}]},{"text":"escalation done"}]},
 {"name":"write","match":"^WRITE (\\S+)$","steps":[{"tools":[{"write":"$1","content":"written by the model\n"}]},{"text":"write done"}]},
 {"name":"mcp","match":"^MCP","steps":[{"tools":[{"name":"mcp__mcptest.lookup","input":{"key":"ping"}}]},{"text":"mcp done"}]},
 {"name":"think","match":"^THINK","steps":[{"thinking":"weighing the options","text":"thought it through"}]},
 {"name":"slow","match":"^SLOW","steps":[{"text":"slow answer","delayMs":4000}]},
 {"name":"stall","match":"^STALL","steps":[{"text":"never seen","delayMs":120000}]},
 {"name":"steered","match":"STEERED","steps":[{"text":"the steer arrived"}]},
 {"name":"denied","match":"was denied: ","steps":[{"text":"understood the denial"}]},
 {"name":"e429","match":"^ERR429","steps":[{"error":{"status":429}}]},
 {"name":"e500","match":"^ERR500","steps":[{"error":{"status":500}}]},
 {"name":"say","match":"^SAY (.*)$","steps":[{"text":"$1"}]}
]}`

// liveCapture is one captured live case.
type liveCapture struct {
	name, prompt string
	tier         drover.Tier
	partial      bool
	answer       *drover.PermissionDecision // every permission request's answer
	steer        string                     // steered in at turn start
	interrupt    bool                       // interrupted at turn start
	resume       string
	resumeOf     string   // the case whose thread is resumed (its home is reused)
	args         []string // extra CLI arguments (MCP servers are no drover option)
}

// liveMeta is a live capture's .meta.json beyond uestest.Meta's fields.
type liveMeta struct {
	Mode        string            `json:"mode"` // "app-server"
	Args        []string          `json:"args"`
	Env         map[string]string `json:"env"`
	Prompt      string            `json:"prompt"`
	Tier        string            `json:"tier"`
	PartialText bool              `json:"partialText,omitempty"`
	Resume      string            `json:"resume,omitempty"`
	// Contained says whether the adapter kit ran codex contained (the
	// Options.Contain its Prepare saw).
	Contained bool `json:"contained"`
	// Live are the inputs passed on, each after the number of lines of the
	// stream translated before it.
	Live   []liveStep `json:"live,omitempty"`
	RC     int        `json:"rc"`
	Signal string     `json:"signal,omitempty"`
	Stderr string     `json:"stderr"`
}

type liveStep struct {
	After int              `json:"after"`
	Input drover.LiveInput `json:"input"`
}

// capture runs c and writes its files; it returns the thread id. probe,
// the MCP server's binary, is written as "mcpprobe".
func (c liveCapture) capture(t *testing.T, bin, url, home, probe string) string {
	ws := filepath.Join(home, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	zero := 0
	opts := drover.Options{Binary: bin, Cwd: ws, Tier: c.tier, PartialText: c.partial, Resume: c.resume,
		Endpoint: &drover.Endpoint{BaseURL: url, APIKey: "sk-fake"}, APIRetries: &zero,
		ConfigDir: filepath.Join(home, ".codex"), Env: map[string]string{"HOME": home},
		ApprovalTimeout: time.Minute, Timeout: time.Minute}
	hooks := engine.Hooks{Control: engine.NewControl()}
	if c.answer != nil {
		d := *c.answer
		hooks.CanUseTool = func(context.Context, drover.PermissionRequestPayload) (drover.PermissionDecision, error) {
			return d, nil
		}
	}
	prompt := strings.ReplaceAll(c.prompt, "HOME", home)
	ra := &recordingAdapter{inner: New(), args: c.args}
	reg := drover.NewRegistry()
	if err := reg.Register(runner.New(ra, runner.Spec{ID: ID, Command: "codex"})); err != nil {
		t.Fatal(err)
	}
	events, err := engine.New(reg).Start(context.Background(), engine.Request{Agent: ID, Prompt: prompt, Options: opts, Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	for ev := range events {
		t.Logf("%s %v", ev.Type, ev.Payload)
		if ev.Type == "codex:turn_started" && (c.steer != "" || c.interrupt) {
			once.Do(func() {
				if c.steer != "" {
					hooks.Control.Steer(c.steer, "capture")
				} else {
					hooks.Control.Interrupt("capture")
				}
			})
		}
	}

	// The first attempt: a rejected resume is followed by a fresh one.
	rec := ra.attempts[0]
	scrub := strings.NewReplacer(probe, "mcpprobe", filepath.Join(home, ".codex"), "/home/.codex", ws, "/ws", home, "/home",
		url, "http://127.0.0.1:PORT").Replace
	base := filepath.Join("testdata", TestedVersions, c.name)
	var stream []byte
	for _, l := range rec.recv {
		stream = append(append(stream, scrub(string(l))...), '\n')
	}
	write(t, base+".jsonl", stream)
	write(t, base+".sent.jsonl", []byte(scrub(string(rec.sent))))
	args := slices.Clone(rec.args)
	for i := range args {
		args[i] = scrub(args[i])
	}
	tmp := "/home/.codex/.tmp"
	if rec.contained {
		tmp = "/tmp/drover-run-…" // the run's own
	}
	meta := liveMeta{Mode: "app-server", Args: args, Env: map[string]string{"HOME": "/home", "CODEX_HOME": "/home/.codex",
		"TMPDIR": tmp, APIKeyEnv: "sk-fake"}, Prompt: scrub(prompt), Tier: string(opts.EffectiveTier()),
		PartialText: c.partial, Resume: c.resume, Contained: rec.contained, Live: rec.live, RC: rec.exit.Code, Signal: rec.exit.Signal,
		Stderr: scrub(rec.exit.StderrTail)}
	for i, s := range meta.Live {
		if a := s.Input.Answer; a != nil {
			a.AskedAt, a.AnsweredAt = 1700000000000, 1700000000000
		}
		meta.Live[i] = s
	}
	b, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	write(t, base+".meta.json", append(b, '\n'))
	if rec.thread == "" {
		os.Remove(base + ".rollout.jsonl")
		return ""
	}
	write(t, base+".rollout.jsonl", []byte(scrub(string(trimRollout(t, filepath.Join(home, ".codex"), rec.thread)))))
	return rec.thread
}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// trimRollout returns the lines of thread's rollout that Finish reads.
func trimRollout(t *testing.T, home, thread string) []byte {
	f, err := os.Open(rolloutPath(home, thread))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []byte
	r := bufio.NewReader(f)
	for {
		raw, err := r.ReadBytes('\n')
		var l rolloutLine
		if json.Unmarshal(raw, &l) == nil {
			p := l.Payload.Type
			if l.Type == "event_msg" && (p == "task_started" || p == "token_count") || l.Type == "token_usage_record" ||
				l.Type == "response_item" && (strings.HasSuffix(p, "_call") || strings.HasSuffix(p, "_call_output")) {
				out = append(out, raw...)
			}
		}
		if err != nil {
			return out
		}
	}
}

// recordingAdapter is the Codex adapter with each attempt's conversation
// recorded.
type recordingAdapter struct {
	runner.Base
	inner    *Adapter
	args     []string
	attempts []*recorder
}

func (a *recordingAdapter) Capabilities() drover.Capabilities { return a.inner.Capabilities() }

func (a *recordingAdapter) Prepare(req drover.Request) (*runner.Launch, error) {
	l, err := a.inner.Prepare(req)
	if err != nil {
		return nil, err
	}
	conv, ok := l.Translator.(*conversation)
	if !ok {
		return nil, fmt.Errorf("not a live run")
	}
	l.Args = append(l.Args, a.args...)
	contained, _ := req.Options.Containment()
	rec := &recorder{args: l.Args, contained: contained}
	a.attempts = append(a.attempts, rec)
	l.Translator = &recordingConv{conversation: conv, rec: rec}
	return l, nil
}

// recorder is what crossed a conversation's stdin and stdout, in order.
type recorder struct {
	args      []string
	contained bool
	recv      [][]byte
	sent      []byte
	live      []liveStep
	exit      runner.Exit
	thread    string
}

type recordingConv struct {
	*conversation
	rec *recorder
}

func (r *recordingConv) Open() ([]byte, error) {
	b, err := r.conversation.Open()
	r.rec.sent = append(r.rec.sent, b...)
	return b, err
}

func (r *recordingConv) Translate(l []byte) ([]drover.Event, error) {
	r.rec.recv = append(r.rec.recv, slices.Clone(l))
	return r.conversation.Translate(l)
}

func (r *recordingConv) Pass(in drover.LiveInput) ([]byte, error) {
	b, err := r.conversation.Pass(in)
	if err == nil {
		r.rec.live = append(r.rec.live, liveStep{After: len(r.rec.recv), Input: in})
		r.rec.sent = append(r.rec.sent, b...)
	}
	return b, err
}

func (r *recordingConv) Outbox() ([]byte, bool) {
	b, closeIn := r.conversation.Outbox()
	r.rec.sent = append(r.rec.sent, b...)
	return b, closeIn
}

func (r *recordingConv) Finish(exit runner.Exit) ([]drover.Event, bool) {
	r.rec.exit, r.rec.thread = exit, r.threadID
	return r.conversation.Finish(exit)
}
