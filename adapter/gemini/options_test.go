package gemini

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/adaptertest"
	"github.com/google/go-cmp/cmp"
)

func TestADP3_OptionsToFlags(t *testing.T) {
	base := "--output-format stream-json --skip-trust"
	adaptertest.Flags(t, Args, []adaptertest.FlagCase{
		{Name: "defaults are supervised, model auto", Options: drover.Options{}, Want: base + " --approval-mode auto_edit"},
		{Name: "sandbox", Options: drover.Options{Tier: drover.TierSandbox}, Arg: "/p", Want: base + " --approval-mode default --admin-policy /p"},
		{Name: "dry-run", Options: drover.Options{Tier: drover.TierDryRun}, Arg: "/p", Want: base + " --approval-mode default --admin-policy /p"},
		{Name: "autonomous", Options: drover.Options{Tier: drover.TierAutonomous}, Want: base + " --approval-mode yolo"},
		{Name: "endpoint defaults the model", Options: drover.Options{Endpoint: &drover.Endpoint{BaseURL: "http://127.0.0.1:1"}}, Want: base + " -m " + DefaultEndpointModel + " --approval-mode auto_edit"},
		{Name: "everything", Options: drover.Options{Tier: drover.TierAutonomous, Model: "gemini-2.5-pro", AddDirs: []string{"/a", "/b"}, Resume: "abc"}, Arg: "/p", Want: base + " -m gemini-2.5-pro --approval-mode yolo --admin-policy /p --include-directories /a --include-directories /b --resume abc"},
	})
	if _, err := ApprovalMode("yolo"); drover.CodeOf(err, "") != drover.CodeUnsupportedOption {
		t.Errorf("unknown tier: %v", err)
	}
}

// rules reads a policy back as "decision tool" pairs.
func rules(pol string) []string {
	var out []string
	var tool string
	for _, l := range strings.Split(pol, "\n") {
		if v, ok := strings.CutPrefix(l, "toolName = "); ok {
			tool = strings.Trim(v, `"`)
		}
		if v, ok := strings.CutPrefix(l, "decision = "); ok {
			out = append(out, strings.Trim(v, `"`)+" "+tool)
		}
	}
	return out
}

// TestPERM1_TierPolicy: each tier below autonomous is an allowlist behind a
// deny-all admin rule; the tool filter narrows it (ENG-013).
func TestPERM1_TierPolicy(t *testing.T) {
	cases := []struct {
		name  string
		o     drover.Options
		rules []string
		tools []string
	}{
		{"sandbox", drover.Options{Tier: drover.TierSandbox}, []string{"deny *"}, []string{}},
		{"dry-run", drover.Options{Tier: drover.TierDryRun}, []string{"deny *", "allow list_directory", "allow read_file", "allow grep_search", "allow glob"}, readTools},
		{"supervised", drover.Options{}, []string{"deny *", "allow list_directory", "allow read_file", "allow grep_search", "allow glob", "allow replace", "allow write_file"}, slices.Concat(readTools, editTools)},
		{"autonomous", drover.Options{Tier: drover.TierAutonomous}, nil, yoloTools},
		{"dry-run narrowed", drover.Options{Tier: drover.TierDryRun, AllowedTools: []string{"read_file", "write_file"}}, []string{"deny *", "allow read_file"}, []string{"read_file"}},
		{"supervised minus write", drover.Options{DisallowedTools: []string{"write_file"}},
			[]string{"deny *", "allow list_directory", "allow read_file", "allow grep_search", "allow glob", "allow replace", "deny write_file"},
			[]string{"list_directory", "read_file", "grep_search", "glob", "replace"}},
		{"autonomous allowlist", drover.Options{Tier: drover.TierAutonomous, AllowedTools: []string{"run_shell_command"}}, []string{"deny *", "allow run_shell_command"}, []string{"run_shell_command"}},
		{"autonomous denylist", drover.Options{Tier: drover.TierAutonomous, DisallowedTools: []string{"run_shell_command"}}, []string{"deny run_shell_command"},
			slices.DeleteFunc(slices.Clone(yoloTools), func(s string) bool { return s == "run_shell_command" })},
	}
	for _, c := range cases {
		if diff := cmp.Diff(c.rules, rules(Policy(c.o))); diff != "" {
			t.Errorf("%s: rules (-want +got):\n%s", c.name, diff)
		}
		if diff := cmp.Diff(c.tools, OfferedTools(c.o)); diff != "" {
			t.Errorf("%s: tools (-want +got):\n%s", c.name, diff)
		}
		for _, tool := range OfferedTools(c.o) {
			if !c.o.ToolAllowed(tool) {
				t.Errorf("%s: offers filtered-out %s", c.name, tool)
			}
		}
	}
}

func TestADP3_UnsupportedOptions(t *testing.T) {
	errs := adaptertest.Refused(t, New(), map[string]drover.Options{
		"maxBudgetUsd": {MaxBudgetUSD: 1},
		"systemPrompt": {SystemPrompt: "be brief"},
		"resume":       {Resume: "x", Endpoint: &drover.Endpoint{BaseURL: "http://127.0.0.1:1"}}, // no configDir: temp home has no sessions
	})
	for name, err := range errs {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v does not name the option", name, err)
		}
	}
}

func readSettings(t *testing.T, home string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(settingsFile(home))
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestADP3_EndpointRetriesTurnsToSettingsAndEnv(t *testing.T) {
	t.Setenv("GEMINI_CLI_HOME", t.TempDir()) // the "user's" gemini dir: empty
	zero := 0
	o := drover.Options{Endpoint: &drover.Endpoint{BaseURL: "http://127.0.0.1:9/", APIKey: "k"}, APIRetries: &zero, MaxTurns: 3,
		Env: map[string]string{"X_TEST": "1"}}
	l, err := New().Prepare(drover.Request{Prompt: "hi", Options: o})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Cleanup()
	var home, tmp string
	for _, e := range l.Env {
		if v, ok := strings.CutPrefix(e, "GEMINI_CLI_HOME="); ok {
			home = v
		}
		if v, ok := strings.CutPrefix(e, "TMPDIR="); ok {
			tmp = v
		}
	}
	if home == "" || !strings.HasPrefix(home, tmp) {
		t.Fatalf("endpoint without configDir must get a temporary home under the run dir: home %q tmp %q", home, tmp)
	}
	adaptertest.HasEnv(t, l.Env, "GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:9", "GEMINI_API_KEY=k", "X_TEST=1")
	s := readSettings(t, home)
	want := map[string]any{
		"security":  map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
		"privacy":   map[string]any{"usageStatisticsEnabled": false},
		"telemetry": map[string]any{"enabled": false},
		"general":   map[string]any{"enableAutoUpdate": false, "enableAutoUpdateNotification": false, "maxAttempts": float64(1)},
		"model":     map[string]any{"maxSessionTurns": float64(3)},
	}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("settings (-want +got):\n%s", diff)
	}
	if !slices.Contains(l.Args, DefaultEndpointModel) {
		t.Errorf("args %v lack the default endpoint model", l.Args)
	}
	l.Cleanup()
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("cleanup left %s", tmp)
	}
}
