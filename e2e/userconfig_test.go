package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/gemini"
	"github.com/drover-run/drover/adapter/opencode"
	"github.com/drover-run/drover/builtin"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/testkit/mcptest"
)

// SEC-4: a supervised run (drover keeps every settings file out, so none
// can widen the tier) still reaches the provider the user configured in
// their own Claude settings.json — here the world's fakemodel, named only
// there: the run has no endpoint of drover's.
func TestSEC4_ClaudeUserProviderKept(t *testing.T) {
	w := newWorld(t, `{"rules":[{"match":"","steps":[{"text":"answered by the user's provider"}]}]}`)
	settings := `{"env":{"ANTHROPIC_BASE_URL":"` + w.url + `","ANTHROPIC_API_KEY":"sk-user","CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC":"1"},
		"permissions":{"allow":["Bash(*)"]}}`
	if err := os.MkdirAll(filepath.Join(w.home, ".claude"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w.home, ".claude", "settings.json"), []byte(settings), 0o600); err != nil {
		t.Fatal(err)
	}
	zero := 0
	evs := w.run(context.Background(), "who answers?", runOpts{Options: drover.Options{Binary: w.bin, Cwd: w.cwd, Tier: drover.TierSupervised,
		APIRetries: &zero, Timeout: 2 * time.Minute,
		// The user's own home: no CLAUDE_CONFIG_DIR, no endpoint.
		Env: map[string]string{"HOME": w.home, "ANTHROPIC_BASE_URL": "", "ANTHROPIC_API_KEY": ""}}})
	d := doneOf(t, evs)
	if d.Status != drover.StatusSuccess || d.Result != "answered by the user's provider" {
		t.Fatalf("done %+v: the run did not reach the user's provider", d)
	}
	if n := len(w.fake.Requests()); n == 0 {
		t.Fatal("the user's provider got no request")
	}
}

// SEC-4: Codex reaches the provider the user configured in their own
// CODEX_HOME/config.toml (the world's fakemodel, named only there), in a
// headless run and in a live (app-server) run; drover's tier overrides
// leave the provider alone.
func TestSEC4_CodexUserProviderKept(t *testing.T) {
	w := newWorld(t, `{"rules":[{"match":"","steps":[{"text":"answered by the user's provider"}]}]}`)
	bin := vendorBin(t, "codex", "DROVER_CODEX_BIN")
	codexHome := filepath.Join(w.home, ".codex")
	config := `model = "gpt-5.5"
model_provider = "mine"
[analytics]
enabled = false
[features]
plugins = false
[model_providers.mine]
name = "mine"
base_url = "` + w.url + `/v1"
env_key = "MY_PROVIDER_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
`
	if err := os.MkdirAll(codexHome, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, live := range []bool{false, true} {
		before := len(w.fake.Requests())
		o := runOpts{Options: drover.Options{Binary: bin, Cwd: w.cwd, Tier: drover.TierSupervised, Timeout: 2 * time.Minute,
			Env: map[string]string{"HOME": w.home, "CODEX_HOME": codexHome, "MY_PROVIDER_KEY": "sk-user",
				"OPENAI_API_KEY": "", "OPENAI_BASE_URL": ""}}}
		if live {
			o.Control = engine.NewControl()
		}
		evs := runAgent(t, "codex", o, "who answers?")
		d := doneOf(t, evs)
		if d.Status != drover.StatusSuccess || d.Result != "answered by the user's provider" {
			t.Fatalf("live %v: done %+v: the run did not reach the user's provider", live, d)
		}
		if len(w.fake.Requests()) == before {
			t.Fatalf("live %v: the user's provider got no request", live)
		}
	}
}

// runAgent runs agent (builtin) with o and returns its events.
func runAgent(t *testing.T, agent string, o runOpts, prompt string) []drover.Event {
	t.Helper()
	events, err := o.start(context.Background(), builtin.Registry(), agent, prompt)
	if err != nil {
		t.Fatal(err)
	}
	var evs []drover.Event
	for ev := range events {
		evs = append(evs, ev)
	}
	t.Logf("events: %v", typesOf(evs))
	return evs
}

// SEC-4: Gemini reaches the provider the user configured in their own
// ~/.gemini (.env with the base URL and key, settings.json with the auth
// type) — here the world's fakemodel, named only there — in a run that
// needs a config home of its own (no API retries, an MCP server): drover
// seeds that home with the user's configuration and adds its settings.
func TestSEC4_GeminiUserProviderKept(t *testing.T) {
	w := newWorld(t, `{"rules":[{"match":"","steps":[{"text":"answered by the user's provider"}]}]}`)
	bin := vendorBin(t, "gemini", gemini.BinaryEnv)
	user := filepath.Join(w.home, ".gemini")
	if err := os.MkdirAll(user, 0o700); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		".env": "GOOGLE_GEMINI_BASE_URL=" + w.url + "\nGEMINI_API_KEY=sk-user\n",
		"settings.json": `{"security":{"auth":{"selectedType":"gemini-api-key"}},"privacy":{"usageStatisticsEnabled":false},
			"telemetry":{"enabled":false},"model":{"name":"gemini-2.5-flash"}}`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(user, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// drover finds the user's Gemini home as the CLI does.
	t.Setenv("GEMINI_CLI_HOME", w.home)
	for _, k := range []string{"GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GOOGLE_API_KEY"} {
		if os.Getenv(k) != "" {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	zero := 0
	evs := runAgent(t, gemini.ID, runOpts{Options: drover.Options{Binary: bin, Cwd: w.cwd, Tier: drover.TierSupervised, Timeout: 2 * time.Minute,
		APIRetries: &zero, MCPServers: map[string]drover.MCPServer{"probe": {Command: mcptest.Build(t)}},
		// Nothing in the environment: the provider is in the user's .env.
		Env: map[string]string{"HOME": w.home}}}, "who answers?")
	d := doneOf(t, evs)
	if d.Status != drover.StatusSuccess || d.Result != "answered by the user's provider" {
		t.Fatalf("done %+v: the run did not reach the user's provider", d)
	}
	if n := len(w.fake.Requests()); n == 0 {
		t.Fatal("the user's provider got no request")
	}
}

// SEC-4: OpenCode reaches the provider the user configured — the world's
// fakemodel, named only in the user's configuration — given as
// OPENCODE_CONFIG_CONTENT in Options.Env, in drover's own environment, or
// in the user's opencode.json: drover merges its configuration (tier
// rules, agent) into the user's instead of replacing it.
func TestSEC4_OpenCodeUserProviderKept(t *testing.T) {
	w := newWorld(t, `{"rules":[{"match":"","steps":[{"text":"answered by the user's provider"}]}]}`)
	bin := vendorBin(t, "opencode", opencode.BinaryEnv)
	config := `{"provider":{"mine":{"npm":"@ai-sdk/openai-compatible","name":"Mine","options":{"baseURL":"` + w.url + `/v1","apiKey":"sk-user"},
		"models":{"m":{"name":"M","tool_call":true}}}},"model":"mine/m","small_model":"mine/m","enabled_providers":["mine"]}`
	for _, where := range []string{"options", "environment", "file"} {
		t.Run(where, func(t *testing.T) {
			before := len(w.fake.Requests())
			home := t.TempDir()
			env := map[string]string{"HOME": home, "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1"}
			for _, d := range []struct{ env, sub string }{{"XDG_CONFIG_HOME", ".config"}, {"XDG_DATA_HOME", ".local/share"},
				{"XDG_CACHE_HOME", ".cache"}, {"XDG_STATE_HOME", ".local/state"}} {
				env[d.env] = filepath.Join(home, d.sub)
			}
			switch where {
			case "options":
				env[opencode.ConfigContentEnv] = config
			case "environment":
				t.Setenv(opencode.ConfigContentEnv, config)
			case "file":
				dir := filepath.Join(env["XDG_CONFIG_HOME"], "opencode")
				if err := os.MkdirAll(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "opencode.json"), []byte(config), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			evs := runAgent(t, opencode.ID, runOpts{Options: drover.Options{Binary: bin, Cwd: w.cwd, Tier: drover.TierSupervised, Timeout: 2 * time.Minute,
				MCPServers: map[string]drover.MCPServer{"probe": {Command: mcptest.Build(t)}}, Env: env}}, "who answers?")
			d := doneOf(t, evs)
			if d.Status != drover.StatusSuccess || d.Result != "answered by the user's provider" {
				t.Fatalf("done %+v: the run did not reach the user's provider", d)
			}
			if len(w.fake.Requests()) == before {
				t.Fatal("the user's provider got no request")
			}
		})
	}
}
