package claude

import (
	"path/filepath"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/adaptertest"
)

func TestADP3_EnvFromOptions(t *testing.T) {
	retries := 0
	a := New()
	env, err := a.env(drover.Options{Endpoint: &drover.Endpoint{BaseURL: "http://127.0.0.1:9/", APIKey: "k"},
		APIRetries: &retries, Env: map[string]string{"X_TEST": "1"}, ConfigDir: filepath.Join(t.TempDir(), "c")})
	if err != nil {
		t.Fatal(err)
	}
	adaptertest.HasEnv(t, env, "ANTHROPIC_BASE_URL=http://127.0.0.1:9", "ANTHROPIC_API_KEY=k", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"CLAUDE_CODE_MAX_RETRIES=0", "X_TEST=1", "DISABLE_AUTOUPDATER=1", "CLAUDE_CONFIG_DIR=")
}

func TestADP7_ConfigDirSeeded(t *testing.T) {
	user := t.TempDir()
	t.Setenv("CLAUDE_CONFIG_DIR", user)
	adaptertest.Seeding(t, user, []adaptertest.Seed{{User: ".credentials.json", Home: ".credentials.json"}}, seedConfigDir)
}

func TestADP4_Locate(t *testing.T) { adaptertest.Locate(t, New(), BinaryEnv) }

func TestADP4_Available(t *testing.T) {
	adaptertest.Pinned(t, New(), BinaryEnv, "claude", TestedVersions)
}
