package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/builtin"
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
	evs := w.run(context.Background(), "who answers?", drover.Options{Binary: w.bin, Cwd: w.cwd, Tier: drover.TierSupervised,
		APIRetries: &zero, Timeout: 2 * time.Minute,
		// The user's own home: no CLAUDE_CONFIG_DIR, no endpoint.
		Env: map[string]string{"HOME": w.home, "ANTHROPIC_BASE_URL": "", "ANTHROPIC_API_KEY": ""}})
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
		o := drover.Options{Binary: bin, Cwd: w.cwd, Tier: drover.TierSupervised, Timeout: 2 * time.Minute,
			Env: map[string]string{"HOME": w.home, "CODEX_HOME": codexHome, "MY_PROVIDER_KEY": "sk-user",
				"OPENAI_API_KEY": "", "OPENAI_BASE_URL": ""}}
		if live {
			o.Control = drover.NewControl()
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
func runAgent(t *testing.T, agent string, o drover.Options, prompt string) []drover.Event {
	t.Helper()
	events, err := drover.NewEngine(builtin.Registry()).Run(context.Background(), agent, prompt, o)
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
