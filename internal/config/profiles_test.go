package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// FAIL-1, SEC-3: profiles are saved 0600 in a 0700 directory, loaded
// back as saved, resolved in the order named; an unknown name, a bad
// profile or a file others may read is a clear error.
func TestFAIL1_ProfilesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "drover", "profiles.json")
	if got, err := LoadProfiles(path); err != nil || len(got) != 0 {
		t.Fatalf("missing file: %v %v", got, err)
	}
	want := map[string]Profile{
		"work":     {Agent: "claude", Env: map[string]string{"ANTHROPIC_API_KEY": "sk-work"}},
		"personal": {Agent: "claude", Env: map[string]string{"ANTHROPIC_API_KEY": "sk-personal"}},
		"login":    {Agent: "codex", ConfigDir: "/home/me/.codex-other"},
	}
	if err := SaveProfiles(path, want); err != nil {
		t.Fatal(err)
	}
	for p, mode := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700} {
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != mode {
			t.Errorf("%s: mode %v (%v), want %v", p, st.Mode().Perm(), err, mode)
		}
	}
	got, err := LoadProfiles(path)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("loaded %+v (%v), want %+v", got, err, want)
	}
	res, err := ResolveProfiles(path, []string{"personal", "work"})
	if err != nil || len(res) != 2 || res[0].Name != "personal" || res[1].Env["ANTHROPIC_API_KEY"] != "sk-work" || res[0].Agent != "claude" {
		t.Errorf("resolved %+v (%v)", res, err)
	}
	if _, err := ResolveProfiles(path, []string{"nope"}); err == nil || !strings.Contains(err.Error(), "login, personal, work") {
		t.Errorf("unknown profile: %v", err)
	}

	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadProfiles(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("world-readable file: %v", err)
	}
	for name, body := range map[string]string{
		"not json":    `{`,
		"unknown key": `{"profiles":{"a":{"agent":"claude","env":{"K":"v"},"secret":1}}}`,
		"bad name":    `{"profiles":{"A B":{"agent":"claude","env":{"K":"v"}}}}`,
		"no agent":    `{"profiles":{"a":{"env":{"K":"v"}}}}`,
		"no creds":    `{"profiles":{"a":{"agent":"claude"}}}`,
		"rel home":    `{"profiles":{"a":{"agent":"claude","configDir":"rel"}}}`,
	} {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadProfiles(path); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
