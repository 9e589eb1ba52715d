package acp_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/acp"
	"github.com/drover-run/drover/adapter/acp/acptest"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/testkit/uestest"
)

func answer(d drover.PermissionDecision) drover.PermissionFunc {
	return func(context.Context, drover.PermissionRequestPayload) (drover.PermissionDecision, error) {
		return d, nil
	}
}

// TestACP1_TextThinkingAndExtensions: message chunks become text_delta and
// one text per message (a new messageId starts one), thought chunks one
// thinking, a plan an extension event; init comes first with the model
// the session named, done last with the prompt's usage and stop reason and
// the session id as resume token.
func TestACP1_TextThinkingAndExtensions(t *testing.T) {
	evs := fake{}.run(t, "hello", drover.Options{Tier: drover.TierAutonomous, PartialText: true})
	in, ok := evs[0].Payload.(drover.InitPayload)
	if !ok || in.Model != "fake-model" || evs[0].Metadata["vendorSessionId"] != acptest.SessionID {
		t.Fatalf("first event %+v %v, want init with the session's model and id", evs[0].Payload, evs[0].Metadata)
	}
	if got, want := texts(evs), []string{"Hello there.", "Second message."}; !slices.Equal(got, want) {
		t.Fatalf("texts %q, want %q", got, want)
	}
	var deltas []string
	for _, p := range payloads[drover.TextDeltaPayload](evs) {
		deltas = append(deltas, p.Delta)
	}
	if want := []string{"Hello ", "there.", "Second message."}; !slices.Equal(deltas, want) {
		t.Fatalf("deltas %q, want %q", deltas, want)
	}
	th := payloads[drover.ThinkingPayload](evs)
	if len(th) != 1 || th[0].Summary != "thinking hard" {
		t.Fatalf("thinking %+v", th)
	}
	if !hasType(evs, "fake-acp:plan") {
		t.Fatalf("no fake-acp:plan event: %v", uestest.Types(evs))
	}
	d, meta := doneOf(evs)
	if d.Status != drover.StatusSuccess || d.Result != "Second message." || d.ResumeToken != acptest.SessionID ||
		d.Usage.InputTokens != 11 || d.Usage.OutputTokens != 7 || d.Usage.ReasoningTokens == nil || *d.Usage.ReasoningTokens != 3 ||
		d.Usage.CacheReadTokens != nil || meta["stopReason"] != "end_turn" {
		t.Fatalf("done %+v %v", d, meta)
	}
}

// TestACP1_UnknownUpdate: an update type drover does not know is an
// extension event, and the run goes on; a prompt result without usage
// reports none (zero, nothing invented).
func TestACP1_UnknownUpdate(t *testing.T) {
	evs := fake{}.run(t, "mystery", drover.Options{Tier: drover.TierAutonomous})
	i := slices.IndexFunc(evs, func(ev drover.Event) bool { return ev.Type == "fake-acp:mystery_update" })
	if i < 0 {
		t.Fatalf("no fake-acp:mystery_update: %v", uestest.Types(evs))
	}
	var p map[string]any
	if b, _ := json.Marshal(evs[i].Payload); json.Unmarshal(b, &p) != nil || p["data"] != float64(1) {
		t.Fatalf("extension payload %v, want the update", evs[i].Payload)
	}
	if d, _ := doneOf(evs); d.Status != drover.StatusSuccess || d.Result != "after mystery" || d.Usage.InputTokens != 0 {
		t.Fatalf("done %+v", d)
	}
}

// TestACP1_ToolCall: a call is reported once its input is known (not at
// its pending tool_call without input), with a description, and its result
// with its output and duration.
func TestACP1_ToolCall(t *testing.T) {
	evs := fake{}.run(t, "tool", drover.Options{Tier: drover.TierAutonomous})
	uses := payloads[drover.ToolUsePayload](evs)
	if len(uses) != 1 || uses[0].ToolName != "execute" || uses[0].ToolUseID != "call-ls" ||
		uses[0].Input["command"] != "ls -la" || uses[0].Description != "Running `ls -la`" {
		t.Fatalf("tool_use %+v", uses)
	}
	res := payloads[drover.ToolResultPayload](evs)
	if len(res) != 1 || res[0].Status != drover.ToolSuccess || res[0].Output != "a.txt\nb.txt" || res[0].ToolName != "execute" || res[0].DurationMs == nil {
		t.Fatalf("tool_result %+v", res)
	}
	if d, _ := doneOf(evs); d.Usage.ToolUses != 1 {
		t.Fatalf("done %+v", d)
	}
}

// TestPERM2_ACPPermission: in supervised, the agent's permission request
// is a permission_request answered through the run's Live: the agent's
// option of the answer's kind is chosen (its ids are its own), the call's
// result follows (denied when rejected, synthesized when the agent
// reports nothing on a rejected call, as Gemini does).
func TestPERM2_ACPPermission(t *testing.T) {
	for _, c := range []struct {
		name, prompt string
		d            drover.PermissionDecision
		said         string
		status       drover.ToolStatus
	}{
		{"allow", "ask", drover.PermissionDecision{Behavior: drover.Allow}, "allowed yes-once", drover.ToolSuccess},
		{"always", "ask", drover.PermissionDecision{Behavior: drover.Allow, Always: true}, "allowed yes-always", drover.ToolSuccess},
		{"deny", "ask", drover.PermissionDecision{Behavior: drover.Deny, Message: "no"}, "rejected no", drover.ToolDenied},
		{"deny-silent", "ask silent", drover.PermissionDecision{Behavior: drover.Deny}, "rejected no", drover.ToolDenied},
		{"changed-input", "ask", drover.PermissionDecision{Behavior: drover.Allow, UpdatedInput: map[string]any{"command": "ls"}}, "rejected no", drover.ToolDenied},
	} {
		t.Run(c.name, func(t *testing.T) {
			evs := fake{}.run(t, c.prompt, drover.Options{Tier: drover.TierSupervised}, engine.Hooks{CanUseTool: answer(c.d)})
			reqs := payloads[drover.PermissionRequestPayload](evs)
			if len(reqs) != 1 || reqs[0].RequestID != "call-rm" || reqs[0].ToolName != "execute" || reqs[0].ToolUseID != "call-rm" ||
				reqs[0].Input["command"] != "rm -rf build" || reqs[0].Description != "Running `rm -rf build`" {
				t.Fatalf("permission_request %+v", reqs)
			}
			if ans := payloads[drover.PermissionAnswerPayload](evs); len(ans) != 1 || ans[0].By != drover.ByCallback {
				t.Fatalf("answers %+v", ans)
			}
			if got := texts(evs); !slices.Contains(got, c.said) {
				t.Fatalf("the agent said %q, want %q", got, c.said)
			}
			res := payloads[drover.ToolResultPayload](evs)
			if len(res) != 1 || res[0].Status != c.status || res[0].ToolUseID != "call-rm" {
				t.Fatalf("tool_result %+v, want one %s", res, c.status)
			}
			if d, _ := doneOf(evs); d.Status != drover.StatusSuccess {
				t.Fatalf("done %+v", d)
			}
		})
	}
}

// TestPERM2_ACPNoLiveDeniesAtOnce: a run nobody can answer (no Live)
// rejects what the tier does not allow at once: no permission_request, the
// call denied.
func TestPERM2_ACPNoLiveDeniesAtOnce(t *testing.T) {
	evs := fake{}.run(t, "ask", drover.Options{Tier: drover.TierSupervised})
	if hasType(evs, drover.TypePermissionRequest) || !hasType(evs, "fake-acp:auto_declined") {
		t.Fatalf("events %v: want the request declined at once", uestest.Types(evs))
	}
	if got := texts(evs); !slices.Contains(got, "rejected no") {
		t.Fatalf("the agent said %q", got)
	}
	if res := payloads[drover.ToolResultPayload](evs); len(res) != 1 || res[0].Status != drover.ToolDenied {
		t.Fatalf("tool_result %+v", res)
	}
}

// TestPERM1_ACPTierAnswers: what each tier decides is answered without
// asking: autonomous allows, dry-run rejects, supervised allows edits
// inside the run's directories and asks (here: nobody can answer, so
// rejects) for edits outside.
func TestPERM1_ACPTierAnswers(t *testing.T) {
	cwd := t.TempDir()
	outside := filepath.Join(t.TempDir(), "outside.txt")
	for _, c := range []struct {
		name, prompt string
		tier         drover.Tier
		said         string
	}{
		{"autonomous", "ask", drover.TierAutonomous, "allowed yes-once"},
		{"dry-run", "ask", drover.TierDryRun, "rejected no"},
		{"supervised-edit-inside", "ask-edit " + filepath.Join(cwd, "sub", "inside.txt"), drover.TierSupervised, "allowed yes-once"},
		{"supervised-edit-outside", "ask-edit " + outside, drover.TierSupervised, "rejected no"},
	} {
		t.Run(c.name, func(t *testing.T) {
			evs := fake{}.run(t, c.prompt, drover.Options{Tier: c.tier, Cwd: cwd})
			if got := texts(evs); !slices.Contains(got, c.said) {
				t.Fatalf("the agent said %q, want %q", got, c.said)
			}
			if hasType(evs, drover.TypePermissionRequest) {
				t.Fatalf("asked: %v", uestest.Types(evs))
			}
		})
	}
}

// TestACP1_FileSystem: drover serves file reads and writes only inside the
// run's directories (a symbolic link or a ".." out of them counts as
// outside); a missing file is "not found"; dry-run refuses writes, sandbox
// every access.
func TestACP1_FileSystem(t *testing.T) {
	setup := func(t *testing.T) (cwd, outside string) {
		cwd, outside = t.TempDir(), t.TempDir()
		if err := os.WriteFile(filepath.Join(cwd, "in.txt"), []byte("line1\nline2\nline3\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, filepath.Join(cwd, "link")); err != nil {
			t.Fatal(err)
		}
		return cwd, outside
	}
	report := func(t *testing.T, evs []drover.Event) map[string]string {
		got := texts(evs)
		if len(got) != 1 {
			t.Fatalf("texts %q", got)
		}
		r := map[string]string{}
		for _, part := range strings.Split(got[0], ";") {
			k, v, _ := strings.Cut(part, "=")
			r[k] = v
		}
		return r
	}
	t.Run("supervised", func(t *testing.T) {
		cwd, outside := setup(t)
		evs := fake{}.run(t, "fs "+outside, drover.Options{Tier: drover.TierSupervised, Cwd: cwd})
		want := map[string]string{"read-in": "ok:line1\nline2\nline3\n", "read-line": "ok:line2\n", "read-missing": "err:-32002",
			"read-out": "err:-32602", "read-rel": "err:-32602", "read-up": "err:-32602", "write-in": "ok:", "write-out": "err:-32602", "write-link": "err:-32602"}
		if got := report(t, evs); !mapsEqual(got, want) {
			t.Fatalf("outcomes %q, want %q", got, want)
		}
		if data, err := os.ReadFile(filepath.Join(cwd, "sub", "out.txt")); string(data) != "written\n" {
			t.Fatalf("the write inside: %q, %v", data, err)
		}
		for _, f := range []string{"outside.txt", "via-link.txt"} {
			if _, err := os.Stat(filepath.Join(outside, f)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a write outside the run's directories happened: %s (%v)", f, err)
			}
		}
		if n := len(slices.DeleteFunc(slices.Clone(evs), func(ev drover.Event) bool { return ev.Type != "fake-acp:fs_refused" })); n != 6 {
			t.Fatalf("%d fs_refused events, want 6: %v", n, uestest.Types(evs))
		}
	})
	t.Run("dry-run", func(t *testing.T) {
		cwd, outside := setup(t)
		r := report(t, fake{}.run(t, "fs "+outside, drover.Options{Tier: drover.TierDryRun, Cwd: cwd}))
		if r["read-in"] != "ok:line1\nline2\nline3\n" || r["write-in"] != "err:-32602" {
			t.Fatalf("outcomes %q", r)
		}
		if _, err := os.Stat(filepath.Join(cwd, "sub")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("dry-run wrote: %v", err)
		}
	})
	t.Run("sandbox", func(t *testing.T) {
		cwd, outside := setup(t)
		if r := report(t, fake{}.run(t, "fs "+outside, drover.Options{Tier: drover.TierSandbox, Cwd: cwd})); r["read-in"] != "err:-32602" {
			t.Fatalf("outcomes %q", r)
		}
	})
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestCTL3_ACPInterrupt: an interrupt is session/cancel: the turn ends
// done{interrupted} with the session as resume token. Interrupted while a
// permission request is open, the request is answered "cancelled" (as ACP
// asks) and recorded as withdrawn by the agent.
func TestCTL3_ACPInterrupt(t *testing.T) {
	t.Run("mid-turn", func(t *testing.T) {
		ctl := engine.NewControl()
		evs := fake{on: func(ev drover.Event) {
			if p, ok := ev.Payload.(drover.TextDeltaPayload); ok && p.Delta == "working" {
				if err := ctl.Interrupt("test"); err != nil {
					t.Error(err)
				}
			}
		}}.run(t, "slow", drover.Options{Tier: drover.TierAutonomous, PartialText: true}, engine.Hooks{Control: ctl})
		if d, _ := doneOf(evs); d.Status != drover.StatusInterrupted || d.ResumeToken != acptest.SessionID {
			t.Fatalf("done %+v", d)
		}
		if !hasType(evs, drover.TypeInterrupt) {
			t.Fatalf("no drover:interrupt: %v", uestest.Types(evs))
		}
	})
	t.Run("while-asked", func(t *testing.T) {
		ctl := engine.NewControl()
		evs := fake{on: func(ev drover.Event) {
			if ev.Type == drover.TypePermissionRequest {
				if err := ctl.Interrupt("test"); err != nil {
					t.Error(err)
				}
			}
		}}.run(t, "ask", drover.Options{Tier: drover.TierSupervised, ApprovalTimeout: time.Hour}, engine.Hooks{Control: ctl})
		if d, _ := doneOf(evs); d.Status != drover.StatusInterrupted {
			t.Fatalf("done %+v", d)
		}
		if ans := payloads[drover.PermissionAnswerPayload](evs); len(ans) != 1 || ans[0].By != drover.ByAgent || ans[0].Behavior != drover.Deny {
			t.Fatalf("answers %+v, want the request withdrawn by the agent", ans)
		}
		if got := texts(evs); !slices.Contains(got, "cancelled") {
			t.Fatalf("the agent said %q", got)
		}
		if res := payloads[drover.ToolResultPayload](evs); len(res) != 1 || res[0].Status != drover.ToolDenied {
			t.Fatalf("tool_result %+v", res)
		}
	})
}

// TestENG005_ACPCancelAsksFirst: cancelling the run sends session/cancel
// before the agent is stopped (the agent saw it), and the run ends
// interrupted with no process left.
func TestENG005_ACPCancelAsksFirst(t *testing.T) {
	mark := filepath.Join(t.TempDir(), "mark")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	evs := fake{ctx: ctx, agent: func(a *acp.Agent) { a.Env[acptest.MarkEnv] = mark }, on: func(ev drover.Event) {
		if p, ok := ev.Payload.(drover.TextDeltaPayload); ok && p.Delta == "working" {
			cancel()
		}
	}}.run(t, "slow", drover.Options{Tier: drover.TierAutonomous, PartialText: true})
	if d, _ := doneOf(evs); d.Status != drover.StatusInterrupted {
		t.Fatalf("done %+v", d)
	}
	if data, err := os.ReadFile(mark); string(data) != "cancel" {
		t.Fatalf("the agent never got session/cancel: %q, %v", data, err)
	}
}

// TestADP5_ACPResume: Options.Resume loads the session (session/load):
// the history it replays is not this run's and is not reported, and done
// carries the session. An unknown session is a rejected resume: a
// recoverable RESUME_FAILED and a fresh session. An agent without
// session/load refuses resume.
func TestADP5_ACPResume(t *testing.T) {
	t.Run("known", func(t *testing.T) {
		evs := fake{}.run(t, "again", drover.Options{Tier: drover.TierAutonomous, Resume: acptest.KnownSession})
		if got := texts(evs); !slices.Equal(got, []string{"echo: again"}) {
			t.Fatalf("texts %q: the replayed history was reported", got)
		}
		if hasType(evs, drover.TypeToolUse) || hasType(evs, "fake-acp:user_message_chunk") || len(errorsOf(evs)) > 0 {
			t.Fatalf("events %v", uestest.Types(evs))
		}
		if d, _ := doneOf(evs); d.Status != drover.StatusSuccess || d.ResumeToken != acptest.KnownSession {
			t.Fatalf("done %+v", d)
		}
	})
	t.Run("unknown", func(t *testing.T) {
		evs := fake{}.run(t, "again", drover.Options{Tier: drover.TierAutonomous, Resume: "no-such-session"})
		if p, ok := evs[1].Payload.(drover.ErrorPayload); evs[0].Type != drover.TypeInit || !ok || p.Code != drover.CodeResumeFailed || !p.Recoverable {
			t.Fatalf("events %v, want init then a recoverable RESUME_FAILED", uestest.Types(evs))
		}
		if d, _ := doneOf(evs); d.Status != drover.StatusSuccess || d.ResumeToken != acptest.SessionID {
			t.Fatalf("done %+v", d)
		}
	})
	t.Run("no-load", func(t *testing.T) {
		evs := fake{mode: "noload"}.run(t, "again", drover.Options{Tier: drover.TierAutonomous, Resume: acptest.KnownSession})
		if e := errorsOf(evs); len(e) != 1 || e[0].Code != drover.CodeUnsupportedOption {
			t.Fatalf("errors %+v", e)
		}
		if d, _ := doneOf(evs); d.Status != drover.StatusError {
			t.Fatalf("done %+v", d)
		}
	})
}

// TestADP1_ACPMisbehaving: an agent that crashes mid-turn, asks and exits,
// sends a line past the cap, or never answers initialize: every run ends
// with one done, last, no process left (checked by run), and says why.
func TestADP1_ACPMisbehaving(t *testing.T) {
	t.Run("crash", func(t *testing.T) {
		evs := fake{}.run(t, "crash", drover.Options{Tier: drover.TierAutonomous})
		if got := texts(evs); !slices.Equal(got, []string{"partial answer"}) {
			t.Fatalf("texts %q: the message so far is lost", got)
		}
		e := errorsOf(evs)
		if len(e) != 1 || e[0].Code != drover.CodeProcessExit || !strings.Contains(e[0].Message, "crashed on purpose") {
			t.Fatalf("errors %+v", e)
		}
		if d, _ := doneOf(evs); d.Status != drover.StatusError || d.ResumeToken != acptest.SessionID {
			t.Fatalf("done %+v", d)
		}
	})
	t.Run("ask-and-exit", func(t *testing.T) {
		evs := fake{}.run(t, "ask-exit", drover.Options{Tier: drover.TierSupervised, ApprovalTimeout: time.Hour}, engine.Hooks{Control: engine.NewControl()})
		if !hasType(evs, drover.TypePermissionRequest) {
			t.Fatalf("events %v", uestest.Types(evs))
		}
		if e := errorsOf(evs); len(e) != 1 || e[0].Code != drover.CodeProcessExit {
			t.Fatalf("errors %+v", e)
		}
		if ans := payloads[drover.PermissionAnswerPayload](evs); len(ans) != 1 || ans[0].By != drover.ByRunEnd {
			t.Fatalf("answers %+v, want the open request denied at the run's end", ans)
		}
	})
	t.Run("huge-update", func(t *testing.T) {
		evs := fake{}.run(t, "huge", drover.Options{Tier: drover.TierAutonomous})
		e := errorsOf(evs)
		if len(e) != 1 || e[0].Code != drover.CodeLineTooLong || !e[0].Recoverable {
			t.Fatalf("errors %+v", e)
		}
		if d, _ := doneOf(evs); d.Status != drover.StatusSuccess || d.Result != "after huge" {
			t.Fatalf("done %+v", d)
		}
	})
	t.Run("never-initializes", func(t *testing.T) {
		evs := fake{mode: "mute", agent: func(a *acp.Agent) { a.OpenTimeout = 500 * time.Millisecond }}.run(t, "hello", drover.Options{Tier: drover.TierAutonomous})
		e := errorsOf(evs)
		if len(e) != 1 || e[0].Code != drover.CodeTimeout || !strings.Contains(e[0].Message, "did not answer initialize") {
			t.Fatalf("errors %+v", e)
		}
		if d, _ := doneOf(evs); d.Status != drover.StatusError {
			t.Fatalf("done %+v", d)
		}
	})
}

// TestACP1_StopReasons: refusal is an error, max_turn_requests max_turns,
// max_tokens success with its stop reason, and a failed prompt an error
// classified by its code (an HTTP status).
func TestACP1_StopReasons(t *testing.T) {
	type want struct {
		status drover.DoneStatus
		code   drover.ErrorCode
		reason string
	}
	for prompt, c := range map[string]want{
		"refuse":    {drover.StatusError, drover.CodeModelError, "refusal"},
		"maxturns":  {drover.StatusMaxTurns, "", "max_turn_requests"},
		"maxtokens": {drover.StatusSuccess, "", "max_tokens"},
		"fail":      {drover.StatusError, drover.CodeRateLimited, ""},
	} {
		t.Run(prompt, func(t *testing.T) {
			evs := fake{}.run(t, prompt, drover.Options{Tier: drover.TierAutonomous})
			d, meta := doneOf(evs)
			if d.Status != c.status || c.reason != "" && meta["stopReason"] != c.reason {
				t.Fatalf("done %+v %v", d, meta)
			}
			e := errorsOf(evs)
			if c.code == "" && len(e) != 0 || c.code != "" && (len(e) != 1 || e[0].Code != c.code || e[0].Recoverable) {
				t.Fatalf("errors %+v, want %q", e, c.code)
			}
			if r := engine.Collect(slices.Values(evs)); prompt == "maxtokens" && (r.StopReason != engine.StopMaxTokens || r.Text != "cut sho") {
				t.Fatalf("collected %+v", r)
			}
		})
	}
}

// TestMCP2_ACPServers: the run's MCP servers reach session/new in ACP's
// shape; a transport the agent does not advertise is refused.
func TestMCP2_ACPServers(t *testing.T) {
	servers := map[string]drover.MCPServer{
		"files": {Command: "mcp-files", Args: []string{"--root", "/w"}, Env: map[string]string{"B": "2", "A": "1"}},
		"web":   {URL: "http://127.0.0.1:9/mcp", Headers: map[string]string{"Authorization": "Bearer x"}},
	}
	evs := fake{}.run(t, "mcp", drover.Options{Tier: drover.TierAutonomous, MCPServers: servers})
	var got []map[string]any
	if err := json.Unmarshal([]byte(texts(evs)[0]), &got); err != nil {
		t.Fatal(err)
	}
	want := []map[string]any{
		{"name": "files", "command": "mcp-files", "args": []any{"--root", "/w"},
			"env": []any{map[string]any{"name": "A", "value": "1"}, map[string]any{"name": "B", "value": "2"}}},
		{"type": "http", "name": "web", "url": "http://127.0.0.1:9/mcp",
			"headers": []any{map[string]any{"name": "Authorization", "value": "Bearer x"}}},
	}
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if string(gb) != string(wb) {
		t.Fatalf("mcpServers\n got %s\nwant %s", gb, wb)
	}
	evs = fake{}.run(t, "mcp", drover.Options{Tier: drover.TierAutonomous, MCPServers: map[string]drover.MCPServer{"s": {Type: "sse", URL: "http://127.0.0.1:9/sse"}}})
	if e := errorsOf(evs); len(e) != 1 || e[0].Code != drover.CodeUnsupportedOption || !strings.Contains(e[0].Message, "sse") {
		t.Fatalf("errors %+v", e)
	}
}

// TestADP3_ACPRefused: options an ACP agent cannot honour fail before it
// starts: a model, a tier the configuration does not trust it with;
// steering is not supported.
func TestADP3_ACPRefused(t *testing.T) {
	a := acp.New(acp.Agent{Name: "fake-acp", Command: fakeBin})
	for name, o := range map[string]drover.Options{
		"model":      {Tier: drover.TierAutonomous, Model: "x"},
		"supervised": {},
		"maxTurns":   {Tier: drover.TierAutonomous, MaxTurns: 2},
	} {
		var errs []error
		for _, err := range a.Run(context.Background(), drover.Request{Prompt: "x", Options: o}) {
			errs = append(errs, err)
		}
		if len(errs) != 1 || drover.CodeOf(errs[0], "") != drover.CodeUnsupportedOption {
			t.Errorf("%s: %v, want UNSUPPORTED_OPTION", name, errs)
		}
	}
	ctl := engine.NewControl()
	fake{on: func(ev drover.Event) {
		if ev.Type == drover.TypeInit {
			if err := ctl.Steer("hi", "test"); !errors.Is(err, engine.ErrNotSupported) {
				t.Errorf("steer: %v, want ErrNotSupported", err)
			}
		}
	}}.run(t, "hello", drover.Options{Tier: drover.TierAutonomous}, engine.Hooks{Control: ctl})
}

// TestADP4_ACPAvailable: a configured agent is found (its command, or
// DROVER_<NAME>_BIN), its version read and marked tested when the
// configuration names it.
func TestADP4_ACPAvailable(t *testing.T) {
	av := acp.New(acp.Agent{Name: "fake-acp", Command: fakeBin, TestedVersions: []string{acptest.Version}}).Available(context.Background())
	if !av.Installed || av.Path != fakeBin || av.Version != acptest.Version || !av.Tested {
		t.Fatalf("availability %+v", av)
	}
	t.Setenv(acp.BinaryEnv("my.agent-2"), fakeBin)
	if acp.BinaryEnv("my.agent-2") != "DROVER_MY_AGENT_2_BIN" {
		t.Fatalf("BinaryEnv %q", acp.BinaryEnv("my.agent-2"))
	}
	av = acp.New(acp.Agent{Name: "my.agent-2", Command: "no-such-acp-agent"}).Available(context.Background())
	if !av.Installed || av.Path != fakeBin || av.Tested {
		t.Fatalf("availability %+v", av)
	}
}
