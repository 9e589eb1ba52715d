package acpagent_test

import (
	"context"
	"os/exec"
	"slices"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/drover-run/drover"
	"github.com/drover-run/drover/acpagent"
	"github.com/drover-run/drover/acpagent/editortest"
	"github.com/drover-run/drover/adapter/adaptertest"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
	"github.com/google/go-cmp/cmp"
)

// TestACP2_Initialize: drover says what it can do — load, list, resume and
// close sessions, text and embedded context — and needs nothing of the
// editor's file system.
func TestACP2_Initialize(t *testing.T) {
	f := newFixture(t)
	c := f.connect(acpagent.Config{Version: "1.2.3"})
	r, err := c.conn.Initialize(c.ctx(), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber,
		ClientCapabilities: acp.ClientCapabilities{Fs: acp.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true}}})
	if err != nil {
		t.Fatal(err)
	}
	caps := r.AgentCapabilities
	switch {
	case r.ProtocolVersion != acp.ProtocolVersionNumber, r.AgentInfo == nil, r.AgentInfo.Name != "drover", r.AgentInfo.Version != "1.2.3":
		t.Fatalf("initialize %+v", r)
	case !caps.LoadSession, !caps.PromptCapabilities.EmbeddedContext, caps.PromptCapabilities.Image, caps.PromptCapabilities.Audio:
		t.Fatalf("capabilities %+v", caps)
	case caps.SessionCapabilities.List == nil, caps.SessionCapabilities.Resume == nil, caps.SessionCapabilities.Close == nil:
		t.Fatalf("session capabilities %+v", caps.SessionCapabilities)
	case caps.McpCapabilities.Http || caps.McpCapabilities.Sse:
		t.Fatalf("mcp capabilities %+v: no fake agent takes http or sse", caps.McpCapabilities)
	}
}

// TestACP2_PromptStreamsARun: a prompt is one run of the session's drover
// session (same id), recorded in the ledger; its events reach the editor
// as session updates (deltas, not the text again; thoughts; a tool call
// and its result) and the prompt answers end_turn with the run's usage.
// The next prompt continues the session's conversation, and the session's
// agent is fixed once it has one.
func TestACP2_PromptStreamsARun(t *testing.T) {
	f := newFixture(t)
	c := f.connect(acpagent.Config{})
	cwd := t.TempDir()
	ns := c.newSession(cwd)
	sid := string(ns.SessionId)
	if a := option(t, ns.ConfigOptions, "agent"); a.CurrentValue != "echo" || !slices.Equal(values(a), []string{"asker", "echo", "hang"}) {
		t.Fatalf("agent option %+v %v", a, values(a))
	}
	if tier := option(t, ns.ConfigOptions, "tier"); tier.CurrentValue != "supervised" || ns.Modes == nil || ns.Modes.CurrentModeId != "supervised" || len(ns.Modes.AvailableModes) != 4 {
		t.Fatalf("tier option %+v, modes %+v", tier, ns.Modes)
	}
	if _, err := f.st.GetSession(context.Background(), sid); err == nil {
		t.Fatal("a session without a prompt is in the ledger")
	}

	r, run := c.mustPrompt(ns.SessionId, "hello")
	if r.StopReason != acp.StopReasonEndTurn || r.Usage == nil || r.Usage.InputTokens != 7 || r.Usage.OutputTokens != 3 || r.Usage.TotalTokens != 10 {
		t.Fatalf("response %+v usage %+v", r, r.Usage)
	}
	us := c.ed.Take()
	want := []string{"config_option_update", "thought pondering", "agent heard:", "agent  hello",
		`tool_call tr1 read pending "Reading /w/main.go"`, "tool_call_update tr1 completed"}
	if diff := cmp.Diff(want, editortest.Describe(us)); diff != "" {
		t.Fatalf("updates (-want +got):\n%s", diff)
	}
	if a := option(t, us[0].ConfigOptionUpdate.ConfigOptions, "agent"); !slices.Equal(values(a), []string{"echo"}) {
		t.Fatalf("after the first prompt the agent option offers %v, want only echo", values(a))
	}
	tc := us[4].ToolCall
	if len(tc.Locations) != 1 || tc.Locations[0].Path != "/w/main.go" || tc.RawInput == nil {
		t.Fatalf("tool call %+v", tc)
	}
	res := us[5].ToolCallUpdate
	if len(res.Content) != 1 || res.Content[0].Content.Content.Text.Text != "package main" {
		t.Fatalf("tool result %+v", res)
	}
	rec := f.run(run)
	if rec.SessionID != sid || rec.Agent != "echo" || rec.Prompt != "hello" || rec.Status != store.StatusCompleted {
		t.Fatalf("ledger run %+v", rec)
	}
	if o := f.options(run); o.Cwd != cwd || o.Tier != drover.TierSupervised || !o.PartialText {
		t.Fatalf("run options %+v", o)
	}

	if _, err := c.conn.SetSessionConfigOption(c.ctx(), acp.SetSessionConfigOptionRequest{ValueId: &acp.SetSessionConfigOptionValueId{
		SessionId: ns.SessionId, ConfigId: "agent", Value: "hang"}}); rpcCode(err) != -32602 {
		t.Fatalf("another agent for a session with a conversation: %v, want INVALID_PARAMS", err)
	}
	_, run2 := c.mustPrompt(ns.SessionId, "again")
	if got := editortest.AgentText(c.ed.Take()); got != "heard: again (resumed tok-hello)" {
		t.Fatalf("second answer %q: the session's conversation did not go on", got)
	}
	if rec := f.run(run2); rec.SessionID != sid {
		t.Fatalf("second run in session %s, want %s", rec.SessionID, sid)
	}
}

// setOption sets a config option and fails the test if it is refused.
func (c *client) setOption(session acp.SessionId, id, value string) acp.SetSessionConfigOptionResponse {
	c.t.Helper()
	r, err := c.setOptionErr(session, id, value)
	if err != nil {
		c.t.Fatalf("set %s=%s: %v", id, value, err)
	}
	return r
}

func (c *client) setOptionErr(session acp.SessionId, id, value string) (acp.SetSessionConfigOptionResponse, error) {
	return c.conn.SetSessionConfigOption(c.ctx(), acp.SetSessionConfigOptionRequest{ValueId: &acp.SetSessionConfigOptionValueId{
		SessionId: session, ConfigId: acp.SessionConfigId(id), Value: acp.SessionConfigValueId(value)}})
}

// TestACP2_PermissionAnsweredByTheEditor: a run's permission request
// reaches the editor as session/request_permission (allow once, allow
// always, reject once; the call as the editor shows it), and the editor's
// choice answers it, recorded as answered by the client "acp": allow runs
// the call, reject denies it.
func TestACP2_PermissionAnsweredByTheEditor(t *testing.T) {
	for _, tc := range []struct {
		kind     acp.PermissionOptionKind
		behavior drover.Behavior
		result   drover.ToolStatus
		updates  []string
	}{
		{acp.PermissionOptionKindAllowOnce, drover.Allow, drover.ToolSuccess,
			[]string{"tool_call_update tu1 in_progress", "tool_call_update tu1 completed"}},
		{acp.PermissionOptionKindRejectOnce, drover.Deny, drover.ToolDenied,
			[]string{"tool_call_update tu1 failed", "tool_call_update tu1 failed"}},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			f := newFixture(t)
			c := f.connect(acpagent.Config{Agent: "asker"})
			c.ed.Answer(tc.kind)
			ns := c.newSession(t.TempDir())
			r, run := c.promptAsker(f, ns.SessionId)
			if r.StopReason != acp.StopReasonEndTurn {
				t.Fatalf("stop reason %s", r.StopReason)
			}
			asked := c.ed.Asked()
			if len(asked) != 1 {
				t.Fatalf("%d questions", len(asked))
			}
			q := asked[0]
			var kinds []acp.PermissionOptionKind
			for _, o := range q.Options {
				kinds = append(kinds, o.Kind)
			}
			if q.SessionId != ns.SessionId || q.ToolCall.ToolCallId != "tu1" || *q.ToolCall.Kind != acp.ToolKindExecute ||
				*q.ToolCall.Title != "Running `make`" || !slices.Equal(kinds, []acp.PermissionOptionKind{
				acp.PermissionOptionKindAllowOnce, acp.PermissionOptionKindAllowAlways, acp.PermissionOptionKindRejectOnce}) {
				t.Fatalf("question %+v options %v", q, kinds)
			}
			want := append([]string{"config_option_update", `tool_call tu1 execute pending "Running ` + "`make`" + `"`}, tc.updates...)
			want = append(want, "user stop")
			if diff := cmp.Diff(want, editortest.Describe(c.ed.Take())); diff != "" {
				t.Fatalf("updates (-want +got):\n%s", diff)
			}
			evs := f.events(run)
			answers := adaptertest.Payloads[drover.PermissionAnswerPayload](evs)
			if len(answers) != 1 || answers[0].Behavior != tc.behavior || answers[0].By != drover.ByClient || answers[0].Detail != "acp" {
				t.Fatalf("answers %+v", answers)
			}
			if rs := adaptertest.Payloads[drover.ToolResultPayload](evs); len(rs) != 1 || rs[0].Status != tc.result {
				t.Fatalf("tool results %+v", rs)
			}
			if o := f.options(run); o.ApprovalTimeout != 10*time.Minute {
				t.Fatalf("approval timeout %s, want the default 10m", o.ApprovalTimeout)
			}
		})
	}
}

// TestACP2_AllowAlwaysHoldsForTheSession: "allow always" is not asked
// again in the session's later runs: drover answers by rule.
func TestACP2_AllowAlwaysHoldsForTheSession(t *testing.T) {
	f := newFixture(t)
	c := f.connect(acpagent.Config{Agent: "asker"})
	c.ed.Answer(acp.PermissionOptionKindAllowAlways)
	ns := c.newSession(t.TempDir())
	c.promptAsker(f, ns.SessionId)
	c.ed.Take()
	_, run := c.promptAsker(f, ns.SessionId)
	if n := len(c.ed.Asked()); n != 1 {
		t.Fatalf("%d questions, want the second run not asked", n)
	}
	evs := f.events(run)
	if a := adaptertest.Payloads[drover.PermissionAnswerPayload](evs); len(a) != 1 || a[0].Behavior != drover.Allow || a[0].By != drover.ByRule {
		t.Fatalf("second run's answers %+v, want allowed by rule", a)
	}
	if o := f.options(run); len(o.PermissionRules) != 1 || o.PermissionRules[0].String() != "allow:Bash(make)" {
		t.Fatalf("second run's rules %v", o.PermissionRules)
	}
}

// TestACP2_CancelInterruptsTheRun: session/cancel while a question is
// open interrupts the run (its session kept), drover withdraws the
// question, and the prompt answers cancelled.
func TestACP2_CancelInterruptsTheRun(t *testing.T) {
	f := newFixture(t)
	c := f.connect(acpagent.Config{Agent: "asker"})
	ns := c.newSession(t.TempDir())
	answer := c.promptAsync(ns.SessionId, "build it")
	if err := c.ed.WaitAsked(c.ctx(), 1); err != nil {
		t.Fatal(err)
	}
	if err := c.conn.Cancel(c.ctx(), acp.CancelNotification{SessionId: ns.SessionId}); err != nil {
		t.Fatal(err)
	}
	r, err := answer()
	if err != nil || r.StopReason != acp.StopReasonCancelled {
		t.Fatalf("prompt: %+v, %v; want cancelled", r, err)
	}
	run := runOf(t, r)
	if ids, err := c.ed.WaitWithdrawn(c.ctx(), 1); err != nil || len(ids) != 1 || ids[0] != "tu1" {
		t.Fatalf("withdrawn questions %v, %v", ids, err)
	}
	rec := f.run(run)
	if rec.Status != store.StatusFailed || rec.DoneStatus != drover.StatusInterrupted || rec.SessionID != string(ns.SessionId) {
		t.Fatalf("ledger run %+v, want interrupted", rec)
	}
	if in := adaptertest.Payloads[drover.InterruptPayload](f.events(run)); len(in) != 1 || in[0].By != "acp" {
		t.Fatalf("interrupts %+v", in)
	}
}

// TestACP2_CancelEndsARunThatCannotBeInterrupted: an agent that cannot be
// interrupted is cancelled; the prompt still answers cancelled.
func TestACP2_CancelEndsARunThatCannotBeInterrupted(t *testing.T) {
	f := newFixture(t)
	c := f.connect(acpagent.Config{Agent: "hang"})
	ns := c.newSession(t.TempDir())
	answer := c.working(ns.SessionId)
	if err := c.conn.Cancel(c.ctx(), acp.CancelNotification{SessionId: ns.SessionId}); err != nil {
		t.Fatal(err)
	}
	r, err := answer()
	if err != nil || r.StopReason != acp.StopReasonCancelled {
		t.Fatalf("prompt: %+v, %v; want cancelled", r, err)
	}
	if rec := f.run(runOf(t, r)); rec.Status != store.StatusFailed || rec.Error != store.ReasonCancelled {
		t.Fatalf("ledger run %+v, want cancelled", rec)
	}
}

// TestACP2_StopReasons: how a run ends is the prompt's stop reason, and a
// failed run is a JSON-RPC error with the run's error message.
func TestACP2_StopReasons(t *testing.T) {
	f := newFixture(t)
	c := f.connect(acpagent.Config{})
	ns := c.newSession(t.TempDir())
	for prompt, want := range map[string]acp.StopReason{
		"status:success":     acp.StopReasonEndTurn,
		"status:max_turns":   acp.StopReasonMaxTurnRequests,
		"status:max_budget":  acp.StopReasonMaxTokens,
		"status:interrupted": acp.StopReasonCancelled,
	} {
		if r, _ := c.mustPrompt(ns.SessionId, prompt); r.StopReason != want {
			t.Errorf("%s: stop reason %s, want %s", prompt, r.StopReason, want)
		}
	}
	_, err := c.prompt(ns.SessionId, "fail")
	var re *acp.RequestError
	if !asRequestError(err, &re) || re.Code != -32603 || re.Message != "the model fell over" {
		t.Fatalf("failed run: %v, want INTERNAL_ERROR with the run's message", err)
	}
	if d, _ := re.Data.(map[string]any); d["runId"] == "" || d["runId"] == nil {
		t.Fatalf("error data %+v: no run id", re.Data)
	}
}

// TestACP2_LoadReplaysTheSession: another connection loads a session from
// the ledger: it is replayed (each run's prompt, then what the editor was
// shown) before the answer, its agent is fixed, and a prompt continues
// its conversation. A session 'drover run' started loads too; an unknown
// one is RESOURCE_NOT_FOUND.
func TestACP2_LoadReplaysTheSession(t *testing.T) {
	f := newFixture(t)
	c := f.connect(acpagent.Config{})
	ns := c.newSession(t.TempDir())
	c.mustPrompt(ns.SessionId, "one")
	c.mustPrompt(ns.SessionId, "two")
	live := editortest.Describe(c.ed.Take())[1:] // without the config_option_update

	c2 := f.connect(acpagent.Config{Agent: "hang"})
	lr, err := c2.conn.LoadSession(c2.ctx(), acp.LoadSessionRequest{SessionId: ns.SessionId, Cwd: t.TempDir(), McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	replayed := editortest.Describe(c2.ed.Take())
	var want []string
	for i, prompt := range []string{"one", "two"} {
		want = append(want, "user "+prompt)
		want = append(want, live[i*5:i*5+5]...)
	}
	if diff := cmp.Diff(want, replayed); diff != "" {
		t.Fatalf("replay (-want +got):\n%s", diff)
	}
	if a := option(t, lr.ConfigOptions, "agent"); a.CurrentValue != "echo" || !slices.Equal(values(a), []string{"echo"}) {
		t.Fatalf("loaded agent option %+v", a)
	}
	if _, run := c2.mustPrompt(ns.SessionId, "three"); f.run(run).SessionID != string(ns.SessionId) {
		t.Fatal("a prompt of the loaded session is in another session")
	}
	if got := editortest.AgentText(c2.ed.Take()); got != "heard: three (resumed tok-two)" {
		t.Fatalf("answer %q: the loaded session's conversation did not go on", got)
	}

	started, err := f.sup.Start(context.Background(), runs.StartRequest{Agent: "echo", Prompt: "from the terminal"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.sup.Await(context.Background(), started.RunID); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.conn.LoadSession(c2.ctx(), acp.LoadSessionRequest{SessionId: acp.SessionId(started.SessionID), Cwd: t.TempDir(),
		McpServers: []acp.McpServer{}}); err != nil {
		t.Fatal(err)
	}
	if got := editortest.Describe(c2.ed.Take()); len(got) == 0 || got[0] != "user from the terminal" {
		t.Fatalf("replay of a terminal session %v", got)
	}
	if _, err := c2.conn.LoadSession(c2.ctx(), acp.LoadSessionRequest{SessionId: "nosuch", Cwd: t.TempDir(),
		McpServers: []acp.McpServer{}}); rpcCode(err) != -32002 {
		t.Fatalf("load of an unknown session: %v, want RESOURCE_NOT_FOUND", err)
	}
}

// TestACP2_ErrorsKeepTheConnection: what drover refuses is a JSON-RPC
// error and the connection stays up: an unknown session, a second prompt
// while one runs (the first goes on), a bad config value, a prompt drover
// cannot take, a relative cwd.
func TestACP2_ErrorsKeepTheConnection(t *testing.T) {
	f := newFixture(t)
	c := f.connect(acpagent.Config{})
	if _, err := c.prompt("nosuch", "hi"); rpcCode(err) != -32002 {
		t.Errorf("prompt to an unknown session: %v, want RESOURCE_NOT_FOUND", err)
	}
	if _, err := c.conn.NewSession(c.ctx(), acp.NewSessionRequest{Cwd: "relative/dir", McpServers: []acp.McpServer{}}); rpcCode(err) != -32602 {
		t.Errorf("relative cwd: %v, want INVALID_PARAMS", err)
	}
	ns := c.newSession(t.TempDir())
	for _, bad := range [][2]string{{"agent", "nosuch"}, {"tier", "reckless"}, {"model", "gpt-42"}, {"colour", "blue"}} {
		if _, err := c.setOptionErr(ns.SessionId, bad[0], bad[1]); rpcCode(err) != -32602 {
			t.Errorf("set %s=%s: %v, want INVALID_PARAMS", bad[0], bad[1], err)
		}
	}
	if _, err := c.conn.Prompt(c.ctx(), acp.PromptRequest{SessionId: ns.SessionId,
		Prompt: []acp.ContentBlock{acp.ImageBlock("aGk=", "image/png")}}); rpcCode(err) != -32602 {
		t.Errorf("an image: %v, want INVALID_PARAMS", err)
	}
	if _, err := f.st.GetSession(context.Background(), string(ns.SessionId)); err == nil {
		t.Error("a refused prompt recorded the session")
	}

	c.setOption(ns.SessionId, "agent", "hang")
	first := c.working(ns.SessionId)
	if _, err := c.prompt(ns.SessionId, "more"); rpcCode(err) != -32600 {
		t.Errorf("a second prompt while one runs: %v, want INVALID_REQUEST", err)
	}
	rs, err := f.st.ListRuns(context.Background(), store.RunFilter{SessionID: string(ns.SessionId)})
	if err != nil || len(rs) != 1 || rs[0].Status != store.StatusRunning {
		t.Fatalf("runs %+v, %v: want the first one still running", rs, err)
	}
	if err := c.conn.Cancel(c.ctx(), acp.CancelNotification{SessionId: ns.SessionId}); err != nil {
		t.Fatal(err)
	}
	if r, err := first(); err != nil || r.StopReason != acp.StopReasonCancelled {
		t.Fatalf("first prompt: %+v, %v", r, err)
	}

	ns2 := c.newSession(t.TempDir())
	if r, _ := c.mustPrompt(ns2.SessionId, "still there?"); r.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("after the errors: %+v", r)
	}
}

// TestACP2_ConfigOptionsReachTheRun: the session's model, tier (as a
// config option or a mode) and the editor's MCP servers are the next
// run's options; an MCP server of a transport the agent does not take is
// left out.
func TestACP2_ConfigOptionsReachTheRun(t *testing.T) {
	f := newFixture(t)
	c := f.connect(acpagent.Config{Models: []string{"m1", "m2"}, Tier: drover.TierDryRun})
	ns := c.newSession(t.TempDir(),
		acp.McpServer{Stdio: &acp.McpServerStdio{Name: "fs", Command: "mcp-fs", Args: []string{"--root", "/w"}, Env: []acp.EnvVariable{{Name: "K", Value: "v"}}}},
		acp.McpServer{Http: &acp.McpServerHttpInline{Type: "http", Name: "web", Url: "http://127.0.0.1:1/mcp", Headers: []acp.HttpHeader{}}})
	if m := option(t, ns.ConfigOptions, "model"); m.CurrentValue != "m1" || !slices.Equal(values(m), []string{"default", "m1", "m2"}) {
		t.Fatalf("model option %+v %v", m, values(m))
	}
	if tier := option(t, ns.ConfigOptions, "tier"); tier.CurrentValue != "dry-run" {
		t.Fatalf("tier option %+v", tier)
	}
	res := c.setOption(ns.SessionId, "model", "m2")
	if m := option(t, res.ConfigOptions, "model"); m.CurrentValue != "m2" {
		t.Fatalf("after set: %+v", m)
	}
	if _, err := c.conn.SetSessionMode(c.ctx(), acp.SetSessionModeRequest{SessionId: ns.SessionId, ModeId: "sandbox"}); err != nil {
		t.Fatal(err)
	}
	_, run := c.mustPrompt(ns.SessionId, "hi")
	o := f.options(run)
	if o.Model != "m2" || o.Tier != drover.TierSandbox {
		t.Fatalf("run options model %q tier %q", o.Model, o.Tier)
	}
	want := map[string]drover.MCPServer{"fs": {Type: "stdio", Command: "mcp-fs", Args: []string{"--root", "/w"}, Env: map[string]string{"K": "v"}}}
	if diff := cmp.Diff(want, o.MCPServers); diff != "" {
		t.Fatalf("mcp servers (-want +got):\n%s", diff)
	}

	res = c.setOption(ns.SessionId, "tier", "supervised")
	if tier := option(t, res.ConfigOptions, "tier"); tier.CurrentValue != "supervised" {
		t.Fatalf("tier after set %+v", tier)
	}
	c.waitFor("current_mode_update", func(u acp.SessionUpdate) bool {
		return u.CurrentModeUpdate != nil && u.CurrentModeUpdate.CurrentModeId == "supervised"
	})
	c.setOption(ns.SessionId, "model", "default")
	_, run = c.mustPrompt(ns.SessionId, "hi")
	if o := f.options(run); o.Model != "" || o.Tier != drover.TierSupervised {
		t.Fatalf("run options model %q tier %q, want the agent's model, supervised", o.Model, o.Tier)
	}
}

// TestACP2_PromptContent: links and embedded context become the prompt's
// text.
func TestACP2_PromptContent(t *testing.T) {
	f := newFixture(t)
	c := f.connect(acpagent.Config{})
	ns := c.newSession(t.TempDir())
	r, err := c.conn.Prompt(c.ctx(), acp.PromptRequest{SessionId: ns.SessionId, Prompt: []acp.ContentBlock{
		acp.TextBlock("explain "),
		acp.ResourceLinkBlock("main.go", "file:///w/main.go"),
		acp.TextBlock(" and "),
		acp.ResourceBlock(acp.EmbeddedResourceResource{TextResourceContents: &acp.TextResourceContents{Uri: "file:///w/go.mod", Text: "module x"}}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := "explain /w/main.go and /w/go.mod\n\n<context ref=\"file:///w/go.mod\">\nmodule x\n</context>"
	if got := f.run(runOf(t, r)).Prompt; got != want {
		t.Fatalf("prompt %q, want %q", got, want)
	}
}

// TestACP2_ListAndCloseSessions: session/list shows the ledger's sessions
// with their directory and latest prompt (filtered by cwd); a closed
// session is forgotten by the connection, not by the ledger.
func TestACP2_ListAndCloseSessions(t *testing.T) {
	f := newFixture(t)
	c := f.connect(acpagent.Config{})
	dirA, dirB := t.TempDir(), t.TempDir()
	a, b := c.newSession(dirA), c.newSession(dirB)
	c.mustPrompt(a.SessionId, "in a")
	c.mustPrompt(b.SessionId, "in b")
	l, err := c.conn.ListSessions(c.ctx(), acp.ListSessionsRequest{Cwd: &dirB})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Sessions) != 1 || l.Sessions[0].SessionId != b.SessionId || l.Sessions[0].Cwd != dirB || l.Sessions[0].Title == nil || *l.Sessions[0].Title != "in b" {
		t.Fatalf("sessions in %s: %+v", dirB, l.Sessions)
	}
	if l, err = c.conn.ListSessions(c.ctx(), acp.ListSessionsRequest{}); err != nil || len(l.Sessions) != 2 {
		t.Fatalf("all sessions: %+v, %v", l, err)
	}
	if _, err := c.conn.CloseSession(c.ctx(), acp.CloseSessionRequest{SessionId: a.SessionId}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.prompt(a.SessionId, "after close"); rpcCode(err) != -32002 {
		t.Fatalf("prompt to a closed session: %v", err)
	}
	if _, err := c.conn.ResumeSession(c.ctx(), acp.ResumeSessionRequest{SessionId: a.SessionId, Cwd: dirA}); err != nil {
		t.Fatal(err)
	}
	if r, _ := c.mustPrompt(a.SessionId, "resumed"); r.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("after resume: %+v", r)
	}
	if got := editortest.Describe(c.ed.Take()); slices.Contains(got, "user in a") {
		t.Fatalf("resume replayed the session: %v", got)
	}
}

// TestACP2_InputEndCancelsRuns: when the editor goes away (its end of the
// connection closes), Serve cancels the connection's runs and returns nil
// once they are recorded.
func TestACP2_InputEndCancelsRuns(t *testing.T) {
	f := newFixture(t)
	c := f.connect(acpagent.Config{Agent: "hang"})
	ns := c.newSession(t.TempDir())
	answer := c.working(ns.SessionId)
	if err := c.close(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	rs, err := f.st.ListRuns(context.Background(), store.RunFilter{SessionID: string(ns.SessionId)})
	if err != nil || len(rs) != 1 || rs[0].Status != store.StatusFailed || rs[0].Error != store.ReasonCancelled {
		t.Fatalf("runs when Serve returned: %+v, %v; want the run cancelled and recorded", rs, err)
	}
	answer() // the editor is gone: no answer to look at
}

// TestWS1_ACPSessionInAWorktree: with the worktree option on, a session's
// first prompt runs in a workspace of its own on a branch of the user's
// repository, and its next prompt continues in that workspace (a revise:
// the first run's change is revised by the second); the user's tree is
// untouched. Off, a prompt runs in the editor's directory.
func TestWS1_ACPSessionInAWorktree(t *testing.T) {
	f := newFixture(t)
	c := f.connect(acpagent.Config{})
	repo := t.TempDir()
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "--allow-empty", "-m", "base"}} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	ns := c.newSession(repo)
	if w := option(t, ns.ConfigOptions, "worktree"); w.CurrentValue != "off" || !slices.Equal(values(w), []string{"off", "on"}) {
		t.Fatalf("worktree option %+v", w)
	}
	c.setOption(ns.SessionId, "worktree", "on")
	_, first := c.mustPrompt(ns.SessionId, "hi")
	_, second := c.mustPrompt(ns.SessionId, "again")
	ctx := context.Background()
	c1, err := f.st.GetChange(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := f.st.GetChange(ctx, second)
	if err != nil {
		t.Fatal(err)
	}
	if c1.Branch != "drover/"+first || c2.Branch != c1.Branch || c2.Workspace != c1.Workspace || c1.State != store.ChangeRevised {
		t.Fatalf("changes:\nfirst  %+v\nsecond %+v", c1, c2)
	}
	if o := f.options(second); o.Cwd != c1.Workspace {
		t.Errorf("the second prompt ran in %s, not the session's workspace %s", o.Cwd, c1.Workspace)
	}
	if out, _ := exec.Command("git", "-C", repo, "status", "--porcelain").Output(); len(out) != 0 {
		t.Errorf("the user's tree changed: %s", out)
	}
	c.setOption(ns.SessionId, "worktree", "off")
	_, third := c.mustPrompt(ns.SessionId, "in place")
	if o := f.options(third); o.Worktree != nil || o.Cwd != repo {
		t.Errorf("off: the run's cwd %s, worktree %+v", o.Cwd, o.Worktree)
	}
}
