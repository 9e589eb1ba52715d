package opencode

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/drover-run/drover"
)

func TestADP3_Args(t *testing.T) {
	base := "run --format json --agent drover --thinking"
	cases := []struct {
		name   string
		o      drover.Options
		prompt string
		want   string
	}{
		{"defaults", drover.Options{}, "fix the bug\nplease", base + " --title fix the bug"},
		{"model as given", drover.Options{Model: "anthropic/claude-sonnet-4"}, "x", base + " --model anthropic/claude-sonnet-4 --title x"},
		{"endpoint default model", drover.Options{Endpoint: &drover.Endpoint{BaseURL: "http://127.0.0.1:9"}}, "x", base + " --model drover/default --title x"},
		{"endpoint model", drover.Options{Model: "gpt-x", Endpoint: &drover.Endpoint{BaseURL: "http://127.0.0.1:9"}}, "x", base + " --model drover/gpt-x --title x"},
		{"resume has no title", drover.Options{Resume: "ses_abc"}, "x", base + " --session ses_abc"},
		{"empty prompt title", drover.Options{}, "  ", base + " --title drover run"},
	}
	for _, c := range cases {
		if got := strings.Join(Args(c.o, c.prompt), " "); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

// TestPERM1_TierPermissions pins the permission rules of each tier (ordered:
// the last matching rule wins) and the tools they leave offered, which were
// measured from the model request's tools list (docs/adapters/opencode.md).
func TestPERM1_TierPermissions(t *testing.T) {
	cases := []struct {
		o     drover.Options
		rules string
		tools []string
	}{
		{drover.Options{Tier: drover.TierSandbox}, `{"*":"deny"}`, []string{}},
		{drover.Options{Tier: drover.TierDryRun},
			`{"*":"deny","read":"allow","glob":"allow","grep":"allow","list":"allow","todowrite":"allow","external_directory":"deny"}`,
			[]string{"glob", "grep", "read", "todowrite"}},
		{drover.Options{},
			`{"*":"ask","read":"allow","glob":"allow","grep":"allow","list":"allow","todowrite":"allow","edit":"allow","external_directory":"ask"}`,
			builtinTools},
		{drover.Options{Tier: drover.TierAutonomous}, `{"*":"allow"}`, builtinTools},
		{drover.Options{Tier: drover.TierAutonomous, DisallowedTools: []string{"bash", "write"}}, `{"*":"allow","bash":"deny","edit":"deny"}`,
			[]string{"glob", "grep", "read", "skill", "task", "todowrite", "webfetch"}},
		{drover.Options{Tier: drover.TierAutonomous, AllowedTools: []string{"read", "bash"}},
			`{"*":"allow","edit":"deny","glob":"deny","grep":"deny","skill":"deny","task":"deny","todowrite":"deny","webfetch":"deny"}`,
			[]string{"bash", "read"}},
		{drover.Options{Tier: drover.TierDryRun, AllowedTools: []string{"read", "bash"}},
			`{"*":"deny","read":"allow","glob":"allow","grep":"allow","list":"allow","todowrite":"allow","external_directory":"deny","edit":"deny","glob":"deny","grep":"deny","skill":"deny","task":"deny","todowrite":"deny","webfetch":"deny"}`,
			[]string{"read"}},
		{drover.Options{AddDirs: []string{"/data/x/"}},
			`{"*":"ask","read":"allow","glob":"allow","grep":"allow","list":"allow","todowrite":"allow","edit":"allow","external_directory":{"*":"ask","/data/x/*":"allow"}}`,
			builtinTools},
	}
	for _, c := range cases {
		got := string(mustJSON(Permission(c.o)))
		if got != c.rules {
			t.Errorf("%s %+v:\n got %s\nwant %s", c.o.EffectiveTier(), c.o, got, c.rules)
		}
		if tools := Tools(c.o); !slices.Equal(tools, c.tools) {
			t.Errorf("%s: tools %v, want %v", c.o.EffectiveTier(), tools, c.tools)
		}
	}
}

func TestADP3_Config(t *testing.T) {
	zero := 0
	o := drover.Options{Tier: drover.TierDryRun, Endpoint: &drover.Endpoint{BaseURL: "http://127.0.0.1:9/", APIKey: "k"},
		APIRetries: &zero, SystemPrompt: "be brief"}
	data, err := Config(o, map[string]string{"plugin": "/h/drover/retries.js", "prompt": "/h/drover/system-prompt.md"})
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Model      string
		SmallModel string `json:"small_model"`
		Provider   map[string]struct {
			Npm     string
			Options map[string]string
		}
		Agent map[string]struct {
			Mode       string
			Permission json.RawMessage
		}
		Plugin       []string
		Instructions []string
		Experimental map[string]bool
		Enabled      []string `json:"enabled_providers"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	p := cfg.Provider["drover"]
	if cfg.Model != "drover/default" || cfg.SmallModel != "drover/default" || p.Npm != "@ai-sdk/openai-compatible" ||
		p.Options["baseURL"] != "http://127.0.0.1:9/v1" || p.Options["apiKey"] != "k" || !slices.Equal(cfg.Enabled, []string{"drover"}) {
		t.Errorf("provider config %s", data)
	}
	if a := cfg.Agent[AgentName]; a.Mode != "primary" || string(a.Permission) != string(mustJSON(Permission(o))) {
		t.Errorf("agent config %s", data)
	}
	if !slices.Equal(cfg.Plugin, []string{"file:///h/drover/retries.js"}) || !slices.Equal(cfg.Instructions, []string{"/h/drover/system-prompt.md"}) ||
		!cfg.Experimental["continue_loop_on_deny"] {
		t.Errorf("config %s", data)
	}
}

func TestADP3_EnvFromOptions(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "user-key")
	t.Setenv("AWS_PROFILE", "user")
	t.Setenv("KEEP_ME", "1")
	env := Env(drover.Options{Cwd: "/work/ws", Endpoint: &drover.Endpoint{BaseURL: "http://127.0.0.1:9"}}, "/h")
	has := func(env []string, kv string) bool { return slices.Contains(env, kv) }
	for _, want := range []string{"OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_SHARE=1", "OPENCODE_DISABLE_MODELS_FETCH=1",
		"OPENCODE_DISABLE_LSP_DOWNLOAD=1", "OPENCODE_DISABLE_PROJECT_CONFIG=1", "XDG_CONFIG_HOME=/h/config", "XDG_DATA_HOME=/h/data",
		"XDG_CACHE_HOME=/h/cache", "XDG_STATE_HOME=/h/state", "KEEP_ME=1", "PWD=/work/ws"} {
		if !has(env, want) {
			t.Errorf("env lacks %s", want)
		}
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "OPENAI_API_KEY=") || strings.HasPrefix(kv, "AWS_PROFILE=") {
			t.Errorf("provider credential %s reached an endpoint run", kv)
		}
	}
	// Without an endpoint the user's providers and config stay.
	env = Env(drover.Options{Tier: drover.TierAutonomous}, "")
	if !has(env, "OPENAI_API_KEY=user-key") || slices.ContainsFunc(env, func(s string) bool {
		return strings.HasPrefix(s, "XDG_") && !strings.HasPrefix(s, "XDG_RUNTIME") && os.Getenv(strings.SplitN(s, "=", 2)[0]) == "" ||
			s == "OPENCODE_DISABLE_PROJECT_CONFIG=1" || s == "OPENCODE_DISABLE_MODELS_FETCH=1"
	}) {
		t.Errorf("autonomous run without endpoint: %v", env)
	}
}

// TestADP7_ConfigDirSeeded: a config home gets the XDG dirs, the npm stub
// that keeps OpenCode from installing @opencode-ai/plugin at startup, and a
// copy of the user's auth.json when no endpoint key is given.
func TestADP7_ConfigDirSeeded(t *testing.T) {
	user := t.TempDir()
	os.MkdirAll(filepath.Join(user, "opencode"), 0o700)
	os.WriteFile(filepath.Join(user, "opencode", "auth.json"), []byte(`{"openai":{"type":"api","key":"u"}}`), 0o600)
	t.Setenv("XDG_DATA_HOME", user)

	dir := filepath.Join(t.TempDir(), "run-home")
	o := drover.Options{ConfigDir: dir}
	home, isolated, cleanup, err := configHome(o)
	if err != nil || home != dir || !isolated {
		t.Fatalf("configHome = %q %v %v", home, isolated, err)
	}
	defer cleanup()
	if err := seedHome(home, true, ""); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "data", "opencode", "auth.json")); !strings.Contains(string(data), `"u"`) {
		t.Fatalf("auth not seeded: %q", data)
	}
	for _, f := range []string{"config/opencode/node_modules", "config/opencode/package.json", "config/opencode/package-lock.json", "cache", "state"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	// An endpoint with its own key does not need the user's login.
	other := filepath.Join(t.TempDir(), "offline")
	if _, _, _, err := configHome(drover.Options{ConfigDir: other, Endpoint: &drover.Endpoint{BaseURL: "x", APIKey: "k"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(other, "data", "opencode", "auth.json")); err == nil {
		t.Fatal("auth copied although not wanted")
	}
	// An endpoint without ConfigDir gets a temporary home, removed by cleanup.
	tmp, isolated, cleanup2, err := configHome(drover.Options{Endpoint: &drover.Endpoint{BaseURL: "x"}})
	if err != nil || !isolated || tmp == "" {
		t.Fatalf("temp home %q %v %v", tmp, isolated, err)
	}
	cleanup2()
	if _, err := os.Stat(tmp); err == nil {
		t.Fatal("temporary home left behind")
	}
	// Nothing to write, no endpoint: the user's own config, untouched.
	if h, _, _, _ := configHome(drover.Options{}); h != "" {
		t.Fatalf("home %q for a plain run", h)
	}
}

func TestADP3_RetryPlugin(t *testing.T) {
	two := 2
	src := retryPlugin(drover.Options{APIRetries: &two, Endpoint: &drover.Endpoint{BaseURL: "http://127.0.0.1:9/"}})
	for _, want := range []string{"const RETRIES = 2;", `const PREFIX = "http://127.0.0.1:9/";`, "export const DroverRetries"} {
		if !strings.Contains(src, want) {
			t.Errorf("plugin lacks %s", want)
		}
	}
	if src := retryPlugin(drover.Options{APIRetries: &two}); !strings.Contains(src, "const PREFIX = null;") {
		t.Error("plugin without endpoint should match model API paths")
	}
}

// TestADP3_Unsupported: every refused option fails before the CLI starts.
func TestADP3_Unsupported(t *testing.T) {
	a := New()
	for name, o := range map[string]drover.Options{
		"maxTurns":        {MaxTurns: 3},
		"maxBudgetUsd":    {MaxBudgetUSD: 1},
		"partialText":     {PartialText: true},
		"edit family cut": {AllowedTools: []string{"write", "read"}},
		"unknown tier":    {Tier: "yolo"},
	} {
		o.Binary = "/nonexistent/opencode"
		var got error
		for _, err := range a.Run(context.Background(), drover.Request{Prompt: "x", Options: o}) {
			got = err
		}
		if drover.CodeOf(got, "") != drover.CodeUnsupportedOption {
			t.Errorf("%s: %v, want UNSUPPORTED_OPTION", name, got)
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
	bin := "../../e2e/node_modules/.bin/opencode"
	if _, err := os.Stat(bin); err != nil {
		t.Skip("pinned opencode not installed")
	}
	t.Setenv(BinaryEnv, bin)
	av := New().Available(context.Background())
	if !av.Installed || av.Version != TestedVersions || !av.Tested {
		t.Fatalf("availability %+v", av)
	}
}
