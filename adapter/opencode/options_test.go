package opencode

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/adaptertest"
)

func TestADP3_Args(t *testing.T) {
	base := "run --format json --agent drover --thinking"
	args := func(o drover.Options, prompt string) ([]string, error) { return Args(o, prompt), nil }
	adaptertest.Flags(t, args, []adaptertest.FlagCase{
		{Name: "defaults", Options: drover.Options{}, Arg: "fix the bug\nplease", Want: base + " --title fix the bug"},
		{Name: "model as given", Options: drover.Options{Model: "anthropic/claude-sonnet-4"}, Arg: "x", Want: base + " --model anthropic/claude-sonnet-4 --title x"},
		{Name: "endpoint default model", Options: drover.Options{Endpoint: &drover.Endpoint{BaseURL: "http://127.0.0.1:9"}}, Arg: "x", Want: base + " --model drover/default --title x"},
		{Name: "endpoint model", Options: drover.Options{Model: "gpt-x", Endpoint: &drover.Endpoint{BaseURL: "http://127.0.0.1:9"}}, Arg: "x", Want: base + " --model drover/gpt-x --title x"},
		{Name: "resume has no title", Options: drover.Options{Resume: "ses_abc"}, Arg: "x", Want: base + " --session ses_abc"},
		{Name: "empty prompt title", Options: drover.Options{}, Arg: "  ", Want: base + " --title drover run"},
	})
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

func TestADP3_RetryPlugin(t *testing.T) {
	two := 2
	src := retryPlugin(drover.Options{APIRetries: &two, Endpoint: &drover.Endpoint{BaseURL: "http://127.0.0.1:9/"}}, "")
	for _, want := range []string{"const RETRIES = 2;", `const PREFIX = "http://127.0.0.1:9/";`, "export const DroverRetries"} {
		if !strings.Contains(src, want) {
			t.Errorf("plugin lacks %s", want)
		}
	}
	if src := retryPlugin(drover.Options{APIRetries: &two}, ""); !strings.Contains(src, "const PREFIX = null;") {
		t.Error("plugin without endpoint should match model API paths")
	}
}

// TestADP3_Unsupported: every refused option fails before the CLI starts.
func TestADP3_Unsupported(t *testing.T) {
	adaptertest.Refused(t, New(), map[string]drover.Options{
		"maxTurns":        {MaxTurns: 3},
		"maxBudgetUsd":    {MaxBudgetUSD: 1},
		"partialText":     {PartialText: true},
		"edit family cut": {AllowedTools: []string{"write", "read"}},
		"unknown tier":    {Tier: "yolo"},
	})
}
