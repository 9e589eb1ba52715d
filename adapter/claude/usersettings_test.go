package claude

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/drover-run/drover"
)

// SEC-4: below autonomous, the provider part of the user's own
// settings.json (env, apiKeyHelper, model) reaches claude through
// --settings, and nothing else of it (permissions, hooks: they could widen
// the tier); a run with an endpoint names its own provider; autonomous
// reads the user's settings itself.
func TestSEC4_ClaudeUserProviderSettingsKept(t *testing.T) {
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".claude"), 0o700); err != nil {
		t.Fatal(err)
	}
	settings := `{"env":{"ANTHROPIC_BASE_URL":"https://gateway.example","ANTHROPIC_AUTH_TOKEN":"tok"},"apiKeyHelper":"/bin/key",
		"model":"opus","permissions":{"allow":["Bash(*)"]},"hooks":{"PreToolUse":[]}}`
	if err := os.WriteFile(filepath.Join(home, ".claude", "settings.json"), []byte(settings), 0o600); err != nil {
		t.Fatal(err)
	}
	settingsOf := func(o drover.Options) map[string]any {
		t.Helper()
		o.Env = map[string]string{"HOME": home}
		l, err := New().Prepare(drover.Request{Prompt: "p", Options: o})
		if err != nil {
			t.Fatal(err)
		}
		if l.Cleanup != nil {
			defer l.Cleanup()
		}
		i := slices.Index(l.Args, "--settings")
		if i < 0 {
			return nil
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l.Args[i+1]), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := settingsOf(drover.Options{Tier: drover.TierSupervised})
	env, _ := m["env"].(map[string]any)
	if env["ANTHROPIC_BASE_URL"] != "https://gateway.example" || m["apiKeyHelper"] != "/bin/key" || m["model"] != "opus" {
		t.Fatalf("--settings %v: want the user's provider settings", m)
	}
	if _, ok := m["permissions"]; ok {
		t.Fatalf("--settings %v: the user's permissions would widen the tier", m)
	}
	if _, ok := m["hooks"]; ok {
		t.Fatalf("--settings %v: the user's hooks", m)
	}
	if m := settingsOf(drover.Options{Tier: drover.TierDryRun, Endpoint: &drover.Endpoint{BaseURL: "http://127.0.0.1:1"}}); m != nil {
		t.Fatalf("with an endpoint: --settings %v", m)
	}
	if m := settingsOf(drover.Options{Tier: drover.TierAutonomous}); m != nil {
		t.Fatalf("autonomous reads the user's settings itself: --settings %v", m)
	}
	if err := os.WriteFile(filepath.Join(home, ".claude", "settings.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := New().Prepare(drover.Request{Prompt: "p", Options: drover.Options{Env: map[string]string{"HOME": home}}})
	var de *drover.Error
	if !errors.As(err, &de) || de.Code != drover.CodeAdapterError {
		t.Fatalf("malformed user settings: %v", err)
	}
}
