package gemini

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/drover-run/drover"
	"github.com/google/go-cmp/cmp"
)

func TestADP3_OptionsToFlags(t *testing.T) {
	base := "--output-format stream-json --skip-trust"
	cases := []struct {
		name   string
		o      drover.Options
		policy string
		want   string
	}{
		{"defaults are supervised, model auto", drover.Options{}, "", base + " --approval-mode auto_edit"},
		{"sandbox", drover.Options{Tier: drover.TierSandbox}, "/p", base + " --approval-mode default --admin-policy /p"},
		{"dry-run", drover.Options{Tier: drover.TierDryRun}, "/p", base + " --approval-mode default --admin-policy /p"},
		{"autonomous", drover.Options{Tier: drover.TierAutonomous}, "", base + " --approval-mode yolo"},
		{"endpoint defaults the model", drover.Options{Endpoint: &drover.Endpoint{BaseURL: "http://127.0.0.1:1"}}, "",
			base + " -m " + DefaultEndpointModel + " --approval-mode auto_edit"},
		{"everything", drover.Options{Tier: drover.TierAutonomous, Model: "gemini-2.5-pro", AddDirs: []string{"/a", "/b"}, Resume: "abc"}, "/p",
			base + " -m gemini-2.5-pro --approval-mode yolo --admin-policy /p --include-directories /a --include-directories /b --resume abc"},
	}
	for _, c := range cases {
		args, err := Args(c.o, c.policy)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(args, " "); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
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
	l, err := New().Prepare("/bin/gemini", drover.Request{Prompt: "hi", Options: o})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Cleanup()
	var home, tmp string
	for _, e := range l.Spec.Env {
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
	for _, want := range []string{"GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:9", "GEMINI_API_KEY=k", "X_TEST=1"} {
		if !slices.Contains(l.Spec.Env, want) {
			t.Errorf("env lacks %s", want)
		}
	}
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
	if !slices.Contains(l.Spec.Args, DefaultEndpointModel) {
		t.Errorf("args %v lack the default endpoint model", l.Spec.Args)
	}
	l.Cleanup()
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("cleanup left %s", tmp)
	}
}

// TestADP7_ConfigDirSeeded: a ConfigDir gets the user's login (OAuth files and
// auth type) unless the run brings its own API key, keeps its own settings,
// and sheds the options of an earlier run.
func TestADP7_ConfigDirSeeded(t *testing.T) {
	user := t.TempDir()
	os.MkdirAll(filepath.Join(user, ".gemini"), 0o700)
	os.WriteFile(filepath.Join(user, ".gemini", "oauth_creds.json"), []byte(`{"token":"user"}`), 0o600)
	os.WriteFile(filepath.Join(user, ".gemini", "settings.json"), []byte(`{"security":{"auth":{"selectedType":"oauth-personal"}},"mcpServers":{"x":{}}}`), 0o600)
	t.Setenv("GEMINI_CLI_HOME", user)

	dir := filepath.Join(t.TempDir(), "run-home")
	if err := prepareHome(dir, drover.Options{MaxTurns: 2}); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, ".gemini", "oauth_creds.json")); string(data) != `{"token":"user"}` {
		t.Fatalf("credentials not seeded: %q", data)
	}
	s := readSettings(t, dir)
	if s["security"].(map[string]any)["auth"].(map[string]any)["selectedType"] != "oauth-personal" || s["mcpServers"] != nil {
		t.Errorf("seeded settings %v: want the auth type only", s)
	}
	if err := prepareHome(dir, drover.Options{}); err != nil {
		t.Fatal(err)
	}
	if got := readSettings(t, dir)["model"].(map[string]any)["maxSessionTurns"]; got != float64(-1) {
		t.Errorf("maxSessionTurns of an earlier run stuck: %v", got)
	}
	other := filepath.Join(t.TempDir(), "offline")
	if err := prepareHome(other, drover.Options{Endpoint: &drover.Endpoint{BaseURL: "http://x", APIKey: "k"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(other, ".gemini", "oauth_creds.json")); err == nil {
		t.Fatal("credentials copied although the run has its own key")
	}
}

// TestADP7_UserHomeUntouched: without ConfigDir and without options that need
// settings, gemini runs with the user's own home and nothing is written.
func TestADP7_UserHomeUntouched(t *testing.T) {
	l, err := New().Prepare("/bin/gemini", drover.Request{Prompt: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Cleanup()
	for _, e := range l.Spec.Env {
		if strings.HasPrefix(e, "GEMINI_CLI_HOME=") && !slices.Contains(os.Environ(), e) {
			t.Fatalf("set %s", e)
		}
	}
}

func TestADP3_UnsupportedOptions(t *testing.T) {
	cases := map[string]drover.Options{
		"maxBudgetUsd": {MaxBudgetUSD: 1},
		"systemPrompt": {SystemPrompt: "be brief"},
		"resume":       {Resume: "x", Endpoint: &drover.Endpoint{BaseURL: "http://127.0.0.1:1"}}, // no configDir: temp home has no sessions
	}
	for name, o := range cases {
		o.Binary = "/bin/false" // never started: every case is refused before
		var got error
		for _, err := range New().Run(context.Background(), drover.Request{Prompt: "x", Options: o}) {
			if err != nil {
				got = err
			}
		}
		if drover.CodeOf(got, "") != drover.CodeUnsupportedOption || !strings.Contains(got.Error(), strings.Split(name, " ")[0]) {
			t.Errorf("%s: err %v, want UNSUPPORTED_OPTION", name, got)
		}
	}
}

func TestADP4_NotInstalled(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv(BinaryEnv, "")
	a := New()
	if av := a.Available(context.Background()); av.Installed || !strings.Contains(av.Error, BinaryEnv) {
		t.Fatalf("availability %+v", av)
	}
	for _, err := range a.Run(context.Background(), drover.Request{Prompt: "x"}) {
		if drover.CodeOf(err, "") != drover.CodeNotInstalled {
			t.Fatalf("err %v, want AGENT_NOT_INSTALLED", err)
		}
	}
}

func TestADP4_Available(t *testing.T) {
	bin, err := filepath.Abs("../../e2e/node_modules/.bin/gemini")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skip("pinned gemini not installed")
	}
	t.Setenv(BinaryEnv, bin)
	if av := New().Available(context.Background()); !av.Installed || !av.Tested || av.Version != TestedVersions {
		t.Fatalf("availability %+v", av)
	}
}
