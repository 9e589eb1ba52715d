package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/acp/acptest"
	"github.com/drover-run/drover/api"
)

// acpCLI runs drover in-process with a config directory and a ledger of
// the test's own.
func acpCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// TestACP1_AgentsAddRunListRemove: an ACP agent added by configuration
// (the scripted agent of acptest) is listed by drover agents, runs with
// drover run -a NAME like a built-in (answering its permission request by
// the supervisor's default: denied), runs in parallel with a built-in, is
// recorded in the ledger (drover show), and is gone once removed.
func TestACP1_AgentsAddRunListRemove(t *testing.T) {
	cfg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	t.Setenv("DROVER_DB", filepath.Join(t.TempDir(), "drover.db"))
	bin := acptest.Build(t)
	file := filepath.Join(cfg, "drover", "agents.json")

	code, _, stderr := acpCLI(t, "agents", "add", "fake-acp", "--tier", "supervised", "--tier", "autonomous",
		"--tested", acptest.Version, "--env", acptest.ModeEnv+"=", "--", bin)
	if code != ExitOK || !strings.Contains(stderr, file) {
		t.Fatalf("add: exit %d: %s", code, stderr)
	}
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("agents file: %v %v", st, err)
	}

	code, stdout, stderr := acpCLI(t, "agents", "--json")
	if code != ExitOK {
		t.Fatalf("agents: exit %d: %s", code, stderr)
	}
	var row api.AgentInfo
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var r api.AgentInfo
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		if r.ID == "fake-acp" {
			row = r
		}
	}
	if !row.Installed || row.Path != bin || row.Version != acptest.Version || !row.Tested || !row.Configured || !row.Capabilities.Permissions {
		t.Fatalf("drover agents row %+v", row)
	}

	code, stdout, stderr = acpCLI(t, "run", "--json", "-a", "fake-acp", "hello")
	if code != ExitOK {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	evs := decodeEvents(t, stdout)
	if d := lastDone(t, evs); d.Status != drover.StatusSuccess || d.Result != "Second message." || d.ResumeToken != acptest.SessionID {
		t.Fatalf("done %+v", d)
	}
	if evs[0].Type != drover.TypeInit || evs[0].Agent != "fake-acp" {
		t.Fatalf("first event %+v", evs[0])
	}
	m := runIDRe.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no run id on stderr: %q", stderr)
	}
	code, show, _ := acpCLI(t, "show", m[1])
	for _, want := range []string{"agent     fake-acp", "status    completed", "11 in / 7 out tokens", "[user] hello", "[assistant] Second message."} {
		if code != ExitOK || !strings.Contains(show, want) {
			t.Errorf("show lacks %q:\n%s", want, show)
		}
	}

	// Supervised, nobody to answer: the agent's question is denied.
	code, stdout, stderr = acpCLI(t, "run", "--json", "-a", "fake-acp", "ask")
	if code != ExitOK {
		t.Fatalf("run ask: exit %d: %s", code, stderr)
	}
	evs = decodeEvents(t, stdout)
	var answers []drover.PermissionAnswerPayload
	var results []drover.ToolResultPayload
	for _, ev := range evs {
		switch p := ev.Payload.(type) {
		case drover.PermissionAnswerPayload:
			answers = append(answers, p)
		case drover.ToolResultPayload:
			results = append(results, p)
		}
	}
	if len(answers) != 1 || answers[0].Behavior != drover.Deny || len(results) != 1 || results[0].Status != drover.ToolDenied {
		t.Fatalf("answers %+v, results %+v", answers, results)
	}

	// In parallel with a built-in (the fake claude of cli_test.go).
	code, stdout, stderr, _ = runCLI(t, context.Background(), "ok", "run", "--json", "-a", "fake-acp", "-a", "claude", "hello")
	if code != ExitOK {
		t.Fatalf("parallel run: exit %d: %s", code, stderr)
	}
	per := map[string][]drover.Event{}
	for _, ev := range decodeEvents(t, stdout) {
		per[ev.Agent] = append(per[ev.Agent], ev)
	}
	if len(per) != 2 || len(per["fake-acp"]) == 0 || len(per["claude-code"]) == 0 {
		t.Fatalf("runs by agent: %v", per)
	}
	for agent, evs := range per {
		if d := lastDone(t, evs); d.Status != drover.StatusSuccess {
			t.Fatalf("%s: done %+v", agent, d)
		}
	}

	if code, _, stderr := acpCLI(t, "agents", "remove", "fake-acp"); code != ExitOK {
		t.Fatalf("remove: exit %d: %s", code, stderr)
	}
	if code, _, stderr := acpCLI(t, "run", "--json", "-a", "fake-acp", "hello"); code != ExitUsage || !strings.Contains(stderr, `unknown agent "fake-acp"`) {
		t.Fatalf("run after remove: exit %d: %s", code, stderr)
	}
}

// TestACP1_AgentsAddRefused: a built-in's name, a bad name, a name taken
// (without --force), no command, a bad tier are refused; removing a
// built-in or an unknown agent too.
func TestACP1_AgentsAddRefused(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"agents", "add", "gemini", "--", "x"}, ExitUsage, "built-in"},
		{[]string{"agents", "add", "claude", "--", "x"}, ExitUsage, "built-in"},
		{[]string{"agents", "add", "Bad Name", "--", "x"}, ExitUsage, "agent name"},
		{[]string{"agents", "add", "only-name"}, ExitUsage, "requires at least 2"},
		{[]string{"agents", "add", "a", "--tier", "lenient", "--", "x"}, ExitUsage, "unknown tier"},
		{[]string{"agents", "add", "a", "--env", "NOEQUALS", "--", "x"}, ExitUsage, "KEY=VALUE"},
		{[]string{"agents", "add", "mine", "--", "x"}, ExitOK, ""},
		{[]string{"agents", "add", "mine", "--", "y"}, ExitFailure, "--force"},
		{[]string{"agents", "add", "mine", "--force", "--", "y"}, ExitOK, ""},
		{[]string{"agents", "remove", "codex"}, ExitUsage, "built-in"},
		{[]string{"agents", "remove", "nope"}, ExitFailure, "configured: mine"},
	} {
		code, _, stderr := acpCLI(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%q: exit %d, %q; want %d and %q", c.args, code, stderr, c.code, c.want)
		}
	}
}

// TestACP1_BadAgentsFileSaysSo: an agents file drover cannot use is an
// error naming it: drover agents lists the built-ins and fails with it, and
// agents add refuses to write over it.
func TestACP1_BadAgentsFileSaysSo(t *testing.T) {
	cfg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	file := filepath.Join(cfg, "drover", "agents.json")
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(`{"agents": {"x": {"args": []}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := acpCLI(t, "agents")
	if code != ExitFailure || !strings.Contains(stderr, file) || !strings.Contains(stdout, "claude-code") {
		t.Fatalf("agents: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	if code, _, stderr := acpCLI(t, "agents", "add", "y", "--", "z"); code != ExitFailure || !strings.Contains(stderr, file) {
		t.Fatalf("add over a bad file: exit %d: %s", code, stderr)
	}
	if data, _ := os.ReadFile(file); !strings.Contains(string(data), `"x"`) {
		t.Fatalf("the bad file was overwritten: %s", data)
	}
}

// TestACP1_AutonomousOnlyAgentNamesTheTier: an agent added without --tier
// runs in autonomous only; drover run without --tier is refused before
// anything starts with a message naming the way out, and --tier autonomous
// runs it.
func TestACP1_AutonomousOnlyAgentNamesTheTier(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	db := filepath.Join(t.TempDir(), "drover.db")
	t.Setenv("DROVER_DB", db)
	bin := acptest.Build(t)
	if code, _, stderr := acpCLI(t, "agents", "add", "lone", "--env", acptest.ModeEnv+"=", "--", bin); code != ExitOK {
		t.Fatalf("add: exit %d: %s", code, stderr)
	}
	code, _, stderr := acpCLI(t, "run", "-a", "lone", "hello")
	if code != ExitUsage || !strings.Contains(stderr, "runs only in tier autonomous") || !strings.Contains(stderr, "--tier autonomous") {
		t.Fatalf("run without --tier: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused run created the ledger: %v", err)
	}
	if code, _, stderr := acpCLI(t, "run", "-a", "lone", "--tier", "autonomous", "hello"); code != ExitOK {
		t.Fatalf("run --tier autonomous: exit %d: %s", code, stderr)
	}
}
