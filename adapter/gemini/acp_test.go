package gemini

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/acp"
	"github.com/drover-run/drover/adapter/acp/acptest"
	"github.com/drover-run/drover/adapter/adaptertest"
	"github.com/google/go-cmp/cmp"
)

func TestADP3_LiveArgs(t *testing.T) {
	base := "--acp --skip-trust --debug"
	adaptertest.Flags(t, LiveArgs, []adaptertest.FlagCase{
		{Name: "supervised", Options: drover.Options{}, Arg: "/p", Want: base + " --approval-mode auto_edit --admin-policy /p"},
		{Name: "autonomous", Options: drover.Options{Tier: drover.TierAutonomous}, Want: base + " --approval-mode yolo"},
		{Name: "everything", Options: drover.Options{Tier: drover.TierDryRun, Model: "gemini-2.5-pro", AddDirs: []string{"/a"}}, Arg: "/p",
			Want: base + " -m gemini-2.5-pro --approval-mode default --admin-policy /p --include-directories /a"},
	})
}

// TestPERM1_LivePolicy: below autonomous a live run's policy allows the
// tier's tools and asks (ask_user) for the rest, so that the question
// reaches drover; an allow-list denies what it leaves out; autonomous
// keeps the headless filter rules.
func TestPERM1_LivePolicy(t *testing.T) {
	cases := []struct {
		name  string
		o     drover.Options
		rules []string
		tools []string
	}{
		{"sandbox", drover.Options{Tier: drover.TierSandbox}, []string{"ask_user *"}, yoloTools},
		{"dry-run", drover.Options{Tier: drover.TierDryRun}, []string{"ask_user *", "allow list_directory", "allow read_file", "allow grep_search", "allow glob"}, yoloTools},
		{"supervised", drover.Options{}, []string{"ask_user *", "allow list_directory", "allow read_file", "allow grep_search", "allow glob", "allow replace", "allow write_file"}, yoloTools},
		{"supervised allow-list", drover.Options{AllowedTools: []string{"write_file", "run_shell_command"}},
			[]string{"deny *", "allow write_file", "ask_user run_shell_command"}, []string{"write_file", "run_shell_command"}},
		{"supervised deny", drover.Options{DisallowedTools: []string{"web_fetch"}},
			[]string{"ask_user *", "allow list_directory", "allow read_file", "allow grep_search", "allow glob", "allow replace", "allow write_file", "deny web_fetch"},
			slices.DeleteFunc(slices.Clone(yoloTools), func(s string) bool { return s == "web_fetch" })},
		{"autonomous", drover.Options{Tier: drover.TierAutonomous}, nil, yoloTools},
	}
	type policy struct{ Rules, Tools []string }
	for _, c := range cases {
		got := policy{rules(LivePolicy(c.o)), LiveTools(c.o)}
		if diff := cmp.Diff(policy{c.rules, c.tools}, got); diff != "" {
			t.Errorf("%s: (-want +got):\n%s", c.name, diff)
		}
	}
}

// TestACP1_GeminiLivePrepare: a live run is `gemini --acp` with an ACP
// conversation; a live run that resumes runs headless with --resume
// (Gemini's session/load fails).
func TestACP1_GeminiLivePrepare(t *testing.T) {
	t.Setenv("GEMINI_CLI_HOME", t.TempDir())
	l, err := New().Prepare(drover.Request{Prompt: "hi", Live: acptest.NoInputs{}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Cleanup()
	if _, ok := l.Translator.(*acp.Conversation); !ok || !l.Converse || l.OpenTimeout == 0 || l.Args[0] != "--acp" || l.Stdin != "" {
		t.Fatalf("live launch %v %T converse=%v", l.Args, l.Translator, l.Converse)
	}
	r, err := New().Prepare(drover.Request{Prompt: "hi", Live: acptest.NoInputs{}, Options: drover.Options{Resume: "abc"}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Cleanup()
	if _, ok := r.Translator.(*acp.Conversation); ok || slices.Contains(r.Args, "--acp") || !slices.Contains(r.Args, "--resume") || r.Stdin != "hi" {
		t.Fatalf("resumed live launch %v %T: want headless with --resume", r.Args, r.Translator)
	}
}

// TestACP1_GeminiDialect: Gemini's ACP ways: a call named by its id's
// prefix and described by Gemini's tools, "Path not in workspace" denied,
// usage from _meta.quota.
func TestACP1_GeminiDialect(t *testing.T) {
	d := acpDialect()
	if d.ReadTextFile || !d.WriteTextFile {
		t.Fatalf("fs read %v write %v: want writes only (reads make new-file writes fail)", d.ReadTextFile, d.WriteTextFile)
	}
	if n := d.ToolName(acp.Call{ID: "run_shell_command__run_shell_command_1795572826830_0"}); n != "run_shell_command" {
		t.Fatalf("name %q", n)
	}
	if n := d.ToolName(acp.Call{ID: "plain"}); n != "" {
		t.Fatalf("name %q, want none (the ACP kind then)", n)
	}
	if got := d.Tools.Describe("write_file", map[string]any{"path": "/ws/a.txt"}); got != "Writing /ws/a.txt" {
		t.Fatalf("a write over ACP described %q", got)
	}
	if !d.Denied(`Path not in workspace: Attempted path "/x" resolves outside`) || d.Denied("boom") {
		t.Fatal("denial texts misread")
	}
	u, ok := d.Usage(json.RawMessage(`{"stopReason":"end_turn","_meta":{"quota":{"token_count":{"input_tokens":20,"output_tokens":10}}}}`))
	if !ok || u.InputTokens != 20 || u.OutputTokens != 10 {
		t.Fatalf("usage %+v %v", u, ok)
	}
	if _, ok := d.Usage(json.RawMessage(`{"stopReason":"end_turn"}`)); ok {
		t.Fatal("usage invented")
	}
	if code := d.StatusRules.Code(429, "slow down"); code != drover.CodeRateLimited {
		t.Fatalf("429: %s", code)
	}
}

// TestADP3_LiveCapabilities: a live run can be answered and interrupted,
// never steered (ACP v1 has no message into a running turn).
func TestADP3_LiveCapabilities(t *testing.T) {
	c := New().Capabilities()
	if !c.Permissions || !c.Interrupt || c.Steer {
		t.Fatalf("capabilities %+v", c)
	}
}
