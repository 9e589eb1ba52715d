package codex

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/adaptertest"
	"github.com/drover-run/drover/internal/contain"
	"github.com/drover-run/drover/internal/runner"
	"github.com/drover-run/drover/internal/testkit/uestest"
)

const supLive = "-c sandbox_workspace_write.network_access=true -c sandbox_workspace_write.exclude_slash_tmp=true -c sandbox_workspace_write.exclude_tmpdir_env_var=true"

// TestADP3_AppServerArgs: a live run gets exec's configuration as -c
// overrides (the app-server has no -s, -m or --add-dir); uncontained,
// AddDirs become the supervised sandbox's writable roots, absolute;
// contained, supervised has no Codex sandbox to configure.
func TestADP3_AppServerArgs(t *testing.T) {
	no := false
	adaptertest.Flags(t, func(o drover.Options, _ string) ([]string, error) { return AppServerArgs(o) }, []adaptertest.FlagCase{
		{Name: "defaults are supervised, contained", Options: drover.Options{}, Want: "app-server"},
		{Name: "model, add dirs, system prompt", Options: drover.Options{Model: "gpt-5.6-sol", Cwd: "/ws", AddDirs: []string{"/data", "more"}, SystemPrompt: "be brief"},
			Want: `app-server -c model="gpt-5.6-sol" -c developer_instructions="be brief"`},
		{Name: "uncontained supervised", Options: drover.Options{Contain: &no}, Want: "app-server " + supLive + " -c sandbox_workspace_write.writable_roots=[]"},
		{Name: "uncontained add dirs", Options: drover.Options{Contain: &no, Cwd: "/ws", AddDirs: []string{"/data", "more"}},
			Want: "app-server " + supLive + ` -c sandbox_workspace_write.writable_roots=["/data","/ws/more"]`},
		{Name: "sandbox removes what it can", Options: drover.Options{Tier: drover.TierSandbox},
			Want: `app-server -c features.shell_tool=false -c features.view_image=false -c features.goals=false -c web_search="disabled"`},
		{Name: "dry-run and autonomous are thread settings only", Options: drover.Options{Tier: drover.TierAutonomous, DisallowedTools: []string{"view_image"}},
			Want: "app-server -c features.view_image=false"},
		{Name: "endpoint", Options: drover.Options{Tier: drover.TierDryRun, Endpoint: &drover.Endpoint{BaseURL: "http://h"}},
			Want: `app-server -c model="gpt-5.5" -c model_provider="drover" -c model_providers.drover={name="drover",base_url="http://h/v1",wire_api="responses"} -c analytics.enabled=false -c features.plugins=false`},
	})
	for tier, want := range map[drover.Tier][2]string{
		drover.TierSandbox: {"never", "read-only"}, drover.TierDryRun: {"never", "read-only"},
		drover.TierSupervised: {"untrusted", "danger-full-access"}, drover.TierAutonomous: {"on-request", "danger-full-access"},
	} {
		lt, err := LiveTier(drover.Options{Tier: tier})
		if err != nil || lt.ApprovalPolicy != want[0] || lt.Sandbox != want[1] {
			t.Errorf("%s: %+v %v, want %v", tier, lt, err, want)
		}
	}
	if lt, err := LiveTier(drover.Options{Contain: &no}); err != nil || lt.ApprovalPolicy != "untrusted" || lt.Sandbox != "workspace-write" {
		t.Errorf("uncontained supervised: %+v %v", lt, err)
	}
	if _, err := AppServerArgs(drover.Options{Resume: "by-name"}); drover.CodeOf(err, "") != drover.CodeUnsupportedOption {
		t.Errorf("a resume token that is no UUID: %v", err)
	}
}

// liveStub is a Live that never has inputs: Prepare only looks at whether
// there is one.
type liveStub struct{}

func (liveStub) Ready() <-chan struct{}   { return nil }
func (liveStub) Take() []drover.LiveInput { return nil }

// TestADP3_PrepareChoosesMode: with a Live, Prepare launches app-server
// with a conversation and no stdin text; without, exec with the prompt on
// stdin, as before.
func TestADP3_PrepareChoosesMode(t *testing.T) {
	a := New()
	opts := drover.Options{Cwd: t.TempDir(), ConfigDir: filepath.Join(t.TempDir(), "home")}
	l, err := a.Prepare(drover.Request{Prompt: "hi", Options: opts, Live: liveStub{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := l.Translator.(runner.Conversation); !ok || l.Args[0] != "app-server" || l.Stdin != "" {
		t.Fatalf("live: %T %v %q", l.Translator, l.Args, l.Stdin)
	}
	l, err = a.Prepare(drover.Request{Prompt: "hi", Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := l.Translator.(runner.Conversation); ok || l.Args[0] != "exec" || l.Stdin != "hi" {
		t.Fatalf("headless: %T %v %q", l.Translator, l.Args, l.Stdin)
	}
	opts.PartialText = true
	if _, err := a.Prepare(drover.Request{Prompt: "hi", Options: opts}); drover.CodeOf(err, "") != drover.CodeUnsupportedOption {
		t.Fatalf("partialText without a Live: %v", err)
	}
}

// started returns a supervised conversation whose session and turn have
// started (thread "th", turn "tu"), with what it wrote so far drained.
func started(t *testing.T, tier drover.Tier) *conversation {
	t.Helper()
	c := newConversation(uestest.Stamp(ID), runInfo{cwd: "/ws", tier: tier}, "go", drover.Options{Tier: tier})
	if _, err := c.Open(); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{
		`{"id":1,"result":{}}`,
		`{"id":2,"result":{"thread":{"id":"th"},"model":"m"}}`,
		`{"id":3,"result":{"turn":{"id":"tu"}}}`,
		`{"method":"item/completed","params":{"item":{"type":"userMessage","id":"u1","content":[]}}}`,
	} {
		translate(t, c, l)
	}
	c.Outbox()
	return c
}

func translate(t *testing.T, c *conversation, line string) []drover.Event {
	t.Helper()
	evs, err := c.Translate([]byte(line))
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	return evs
}

// sent decodes what the conversation wrote, one JSON-RPC message a line.
func sent(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for l := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func answer(id string, d drover.PermissionDecision) drover.LiveInput {
	return drover.LiveInput{Answer: &drover.PermissionAnswerPayload{RequestID: id, PermissionDecision: d}}
}

// TestPERM2_AnswersBecomeCodexDecisions: each kind of approval becomes a
// permission_request whose answer is Codex's own decision; a denial's
// message, and an allow with another input (which Codex cannot apply:
// declined), follow as a steering message; an answer to nothing open is
// refused.
func TestPERM2_AnswersBecomeCodexDecisions(t *testing.T) {
	requests := map[string]string{
		"command": `{"method":"item/commandExecution/requestApproval","id":7,"params":{"itemId":"call_1","command":"/bin/bash -lc 'rm -rf x'","cwd":"/ws","reason":"why"}}`,
		"file":    `{"method":"item/fileChange/requestApproval","id":"s8","params":{"itemId":"call_2"}}`,
		"mcp":     `{"method":"mcpServer/elicitation/request","id":9,"params":{"serverName":"echo","message":"Allow?","_meta":{"codex_approval_kind":"mcp_tool_call","tool_name":"echo","tool_params":{"text":"hi"}}}}`,
		"perms":   `{"method":"item/permissions/requestApproval","id":10,"params":{"itemId":"call_4","cwd":"/ws","permissions":{"network":{"enabled":true}}}}`,
	}
	cases := []struct {
		kind   string
		d      drover.PermissionDecision
		result string // the response's result, as JSON
		steer  string // the steering message that follows, if any
	}{
		{"command", drover.PermissionDecision{Behavior: drover.Allow}, `{"decision":"accept"}`, ""},
		{"command", drover.PermissionDecision{Behavior: drover.Allow, Always: true}, `{"decision":"acceptForSession"}`, ""},
		{"command", drover.PermissionDecision{Behavior: drover.Deny, Message: "no"}, `{"decision":"decline"}`, "exec_command was denied: no"},
		{"command", drover.PermissionDecision{Behavior: drover.Allow, UpdatedInput: map[string]any{"command": "ls"}}, `{"decision":"decline"}`,
			`exec_command was allowed only with another input, which Codex cannot apply to the call: {"command":"ls"}`},
		{"file", drover.PermissionDecision{Behavior: drover.Deny}, `{"decision":"decline"}`, ""},
		{"mcp", drover.PermissionDecision{Behavior: drover.Allow, Always: true}, `{"_meta":{"persist":"session"},"action":"accept","content":{}}`, ""},
		{"mcp", drover.PermissionDecision{Behavior: drover.Deny}, `{"action":"decline"}`, ""},
		{"perms", drover.PermissionDecision{Behavior: drover.Allow}, `{"permissions":{"network":{"enabled":true}},"scope":"turn"}`, ""},
		{"perms", drover.PermissionDecision{Behavior: drover.Deny}, `{"permissions":{}}`, ""},
	}
	for _, tc := range cases {
		c := started(t, drover.TierSupervised)
		translate(t, c, `{"method":"item/started","params":{"item":{"type":"mcpToolCall","id":"call_3","server":"echo","tool":"echo","status":"inProgress"}}}`)
		evs := translate(t, c, requests[tc.kind])
		if len(evs) != 1 || evs[0].Type != drover.TypePermissionRequest {
			t.Fatalf("%s: %v", tc.kind, uestest.Types(evs))
		}
		req := evs[0].Payload.(drover.PermissionRequestPayload)
		if tc.kind == "command" && (req.ToolName != "exec_command" || req.Input["command"] != "rm -rf x" || req.Reason != "why" || req.RequestID != "call_1") {
			t.Errorf("command request %+v", req)
		}
		if tc.kind == "mcp" && (req.ToolName != "mcp__echo__echo" || req.ToolUseID != "call_3") {
			t.Errorf("mcp request %+v", req)
		}
		out, err := c.Pass(answer(req.RequestID, tc.d))
		if err != nil {
			t.Fatal(err)
		}
		msgs := sent(t, out)
		res, _ := json.Marshal(msgs[0]["result"])
		if string(res) != tc.result {
			t.Errorf("%s %+v: result %s, want %s", tc.kind, tc.d, res, tc.result)
		}
		var steer string
		if len(msgs) > 1 {
			p := msgs[1]["params"].(map[string]any)
			steer = p["input"].([]any)[0].(map[string]any)["text"].(string)
			if msgs[1]["method"] != "turn/steer" || p["expectedTurnId"] != "tu" {
				t.Errorf("%s: %v", tc.kind, msgs[1])
			}
		}
		if steer != tc.steer {
			t.Errorf("%s %+v: steered %q, want %q", tc.kind, tc.d, steer, tc.steer)
		}
		if _, err := c.Pass(answer(req.RequestID, tc.d)); err == nil {
			t.Errorf("%s: a second answer was passed on", tc.kind)
		}
	}
}

// TestPERM1_LiveTierAnswersItself: supervised approves edits inside the
// workspace without asking and asks for the rest; autonomous approves and
// dry-run declines whatever Codex asks; requests nobody can answer are
// answered at once so that Codex does not wait.
func TestPERM1_LiveTierAnswersItself(t *testing.T) {
	edit := func(path string) string {
		return `{"method":"item/started","params":{"item":{"type":"fileChange","id":"call_e","status":"inProgress","changes":[{"path":"` + path + `","kind":{"type":"add"},"diff":""}]}}}`
	}
	const ask = `{"method":"item/fileChange/requestApproval","id":5,"params":{"itemId":"call_e"}}`
	for _, tc := range []struct {
		tier drover.Tier
		path string
		want string // the event type, and what was answered ("" = nothing yet)
	}{
		{drover.TierSupervised, "/ws/a.txt", `codex:auto_approved {"decision":"accept"}`},
		{drover.TierSupervised, "/ws/.git/config", "permission_request "},
		{drover.TierSupervised, "/elsewhere/a.txt", "permission_request "},
		{drover.TierAutonomous, "/elsewhere/a.txt", `codex:auto_approved {"decision":"accept"}`},
		{drover.TierDryRun, "/ws/a.txt", `codex:auto_declined {"decision":"decline"}`},
	} {
		c := started(t, tc.tier)
		translate(t, c, edit(tc.path))
		evs := translate(t, c, ask)
		out, _ := c.Outbox()
		got := string(evs[0].Type) + " "
		if msgs := sent(t, out); len(msgs) > 0 {
			res, _ := json.Marshal(msgs[0]["result"])
			got += string(res)
		}
		if got != tc.want {
			t.Errorf("%s %s: %s, want %s", tc.tier, tc.path, got, tc.want)
		}
	}
	c := started(t, drover.TierSupervised)
	for _, l := range []string{
		`{"method":"item/tool/requestUserInput","id":1,"params":{"itemId":"x","questions":[]}}`,
		`{"method":"mcpServer/elicitation/request","id":2,"params":{"serverName":"s","message":"name?"}}`,
		`{"method":"item/tool/call","id":3,"params":{}}`,
	} {
		if evs := translate(t, c, l); len(evs) != 1 || evs[0].Type == drover.TypePermissionRequest {
			t.Errorf("%s: %v", l, uestest.Types(evs))
		}
	}
	out, _ := c.Outbox()
	if msgs := sent(t, out); len(msgs) != 3 || msgs[0]["result"] == nil || msgs[1]["result"] == nil || msgs[2]["error"] == nil {
		t.Errorf("answers %v", msgs)
	}
}

// TestPERM1_InsideRootsResolvesLinks: an edit through a link or a ".." out
// of the workspace, of the workspace itself, in a protected directory, or
// of a relative path is asked for.
func TestPERM1_InsideRootsResolvesLinks(t *testing.T) {
	ws, out := t.TempDir(), t.TempDir()
	if err := os.Symlink(out, filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	roots := []string{contain.Resolve(ws)}
	change := func(p string) []appChange {
		var c appChange
		c.Path = p
		return []appChange{c}
	}
	up, err := filepath.Rel(ws, filepath.Join(out, "f"))
	if err != nil {
		t.Fatal(err)
	}
	moved := change(filepath.Join(ws, "a"))
	target := filepath.Join(out, "b")
	moved[0].Kind.MovePath = &target
	for name, tc := range map[string]struct {
		changes []appChange
		want    bool
	}{
		"new file in a new dir":   {change(filepath.Join(ws, "new", "dir", "f.go")), true},
		"through a link":          {change(filepath.Join(ws, "link", "f")), false},
		"in .git":                 {change(filepath.Join(ws, ".git", "hooks", "pre-commit")), false},
		"moved out":               {moved, false},
		"relative":                {change("f.go"), false},
		"no change":               {nil, false},
		"the root's parent":       {change(filepath.Dir(ws)), false},
		"a sibling with a prefix": {change(ws + "x/f"), false},
		"climbing out":            {change(ws + string(filepath.Separator) + up), false},
		"the root itself":         {change(ws), false},
	} {
		if got := insideRoots(tc.changes, roots); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
	if !insideRoots(change(filepath.Join(out, "f")), []string{"/"}) || insideRoots(change("/.git/config"), []string{"/"}) {
		t.Error(`the root "/": a file outside .git not inside, or .git not protected`)
	}
}

// TestCTL3_SteerAndInterruptWaitForTheTurn: steering and interrupts that
// come before the turn has an id and Codex has recorded its prompt are
// sent then; after the turn ended they are refused.
func TestCTL3_SteerAndInterruptWaitForTheTurn(t *testing.T) {
	c := newConversation(uestest.Stamp(ID), runInfo{cwd: "/ws", tier: drover.TierSupervised}, "go", drover.Options{})
	c.Open()
	for _, in := range []drover.LiveInput{{Steer: &drover.SteerPayload{Message: "also this"}}, {Interrupt: &drover.InterruptPayload{}}} {
		if out, err := c.Pass(in); err != nil || len(out) != 0 {
			t.Fatalf("before the turn: %q %v", out, err)
		}
	}
	translate(t, c, `{"id":1,"result":{}}`)
	translate(t, c, `{"id":2,"result":{"thread":{"id":"th"}}}`)
	c.Outbox()
	translate(t, c, `{"id":3,"result":{"turn":{"id":"tu"}}}`)
	translate(t, c, `{"method":"item/started","params":{"item":{"type":"userMessage","id":"u1","content":[]}}}`)
	if out, _ := c.Outbox(); len(out) != 0 {
		t.Fatalf("sent before the prompt was recorded: %s", out)
	}
	translate(t, c, `{"method":"item/completed","params":{"item":{"type":"userMessage","id":"u1","content":[]}}}`)
	out, _ := c.Outbox()
	msgs := sent(t, out)
	if len(msgs) != 2 || msgs[0]["method"] != "turn/steer" || msgs[1]["method"] != "turn/interrupt" {
		t.Fatalf("sent %v", msgs)
	}
	translate(t, c, `{"method":"turn/completed","params":{"turn":{"id":"tu","status":"interrupted"}}}`)
	if _, closeIn := c.Outbox(); !closeIn || !c.Finished() {
		t.Fatal("stdin stays open after the turn")
	}
	if _, err := c.Pass(drover.LiveInput{Steer: &drover.SteerPayload{Message: "late"}}); err == nil {
		t.Fatal("steering after the turn was passed on")
	}
	evs, _ := c.Finish(runner.Exit{})
	if d, ok := evs[len(evs)-1].Done(); !ok || d.Status != drover.StatusInterrupted || d.ResumeToken != "th" {
		t.Fatalf("done %+v", evs[len(evs)-1])
	}
}

// TestADP5_LiveResumeRejected: a thread/resume the server refuses yields
// nothing, closes stdin and is reported as a rejected resume; another
// failure to start ends the run in error.
func TestADP5_LiveResumeRejected(t *testing.T) {
	c := newConversation(uestest.Stamp(ID), runInfo{cwd: "/ws", resume: true}, "go", drover.Options{Resume: "01a21051-0000-7000-8000-000000000000"})
	c.Open()
	translate(t, c, `{"id":1,"result":{}}`)
	for _, l := range []string{`{"method":"configWarning","params":{}}`, `{"error":{"code":-32600,"message":"no rollout found for thread id x"},"id":2}`} {
		if evs := translate(t, c, l); len(evs) != 0 {
			t.Fatalf("%s: %v", l, uestest.Types(evs))
		}
	}
	if _, closeIn := c.Outbox(); !closeIn {
		t.Fatal("stdin stays open")
	}
	if evs, rejected := c.Finish(runner.Exit{}); !rejected || len(evs) != 0 {
		t.Fatalf("Finish = %v %v", uestest.Types(evs), rejected)
	}

	c = newConversation(uestest.Stamp(ID), runInfo{cwd: "/ws"}, "go", drover.Options{})
	c.Open()
	translate(t, c, `{"id":1,"error":{"code":-32600,"message":"bad config"}}`)
	evs, rejected := c.Finish(runner.Exit{})
	if rejected || len(evs) != 2 || evs[1].Type != drover.TypeDone {
		t.Fatalf("Finish = %v %v", uestest.Types(evs), rejected)
	}
	if d, _ := evs[1].Done(); d.Status != drover.StatusError {
		t.Fatalf("done %+v", d)
	}
}
