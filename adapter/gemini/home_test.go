package gemini

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/adaptertest"
)

// TestADP7_ConfigDirSeeded: a ConfigDir gets the user's login (OAuth files)
// unless the run brings its own API key, and the user's settings whole
// (SEC-4) with drover's keys on top; it keeps its own settings, and sheds
// the options of an earlier run.
func TestADP7_ConfigDirSeeded(t *testing.T) {
	user := t.TempDir()
	os.MkdirAll(filepath.Join(user, ".gemini"), 0o700)
	os.WriteFile(filepath.Join(user, ".gemini", "settings.json"), []byte(`{"security":{"auth":{"selectedType":"oauth-personal"}}, // how I log in
"mcpServers":{"x":{}}}`), 0o600)
	t.Setenv("GEMINI_CLI_HOME", user)

	creds := filepath.Join(".gemini", "oauth_creds.json")
	dir := adaptertest.Seeding(t, user, []adaptertest.Seed{{User: creds, Home: creds}}, func(home string, login bool) error {
		opts := drover.Options{MaxTurns: 2}
		if !login {
			opts.Endpoint = &drover.Endpoint{BaseURL: "http://x", APIKey: "k"}
		}
		return prepareHome(home, opts)
	})
	s := readSettings(t, dir)
	if s["security"].(map[string]any)["auth"].(map[string]any)["selectedType"] != "oauth-personal" || s["mcpServers"].(map[string]any)["x"] == nil {
		t.Errorf("seeded settings %v: want the user's auth type and MCP server kept", s)
	}
	if err := prepareHome(dir, drover.Options{}); err != nil {
		t.Fatal(err)
	}
	if got := readSettings(t, dir)["model"].(map[string]any)["maxSessionTurns"]; got != float64(-1) {
		t.Errorf("maxSessionTurns of an earlier run stuck: %v", got)
	}
}

// TestADP7_UserHomeUntouched: without ConfigDir and without options that need
// settings, gemini runs with the user's own home and nothing is written.
func TestADP7_UserHomeUntouched(t *testing.T) {
	l, err := New().Prepare(drover.Request{Prompt: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Cleanup()
	for _, e := range l.Env {
		if strings.HasPrefix(e, "GEMINI_CLI_HOME=") && !slices.Contains(os.Environ(), e) {
			t.Fatalf("set %s", e)
		}
	}
}

func TestADP4_Locate(t *testing.T) { adaptertest.Locate(t, New(), BinaryEnv) }

func TestADP4_Available(t *testing.T) {
	adaptertest.Pinned(t, New(), BinaryEnv, "gemini", TestedVersions)
}
