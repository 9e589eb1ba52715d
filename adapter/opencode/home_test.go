package opencode

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/adaptertest"
)

func TestADP3_EnvFromOptions(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "user-key")
	t.Setenv("AWS_PROFILE", "user")
	t.Setenv("KEEP_ME", "1")
	env := Env(drover.Options{Cwd: "/work/ws", Endpoint: &drover.Endpoint{BaseURL: "http://127.0.0.1:9"}}, "/h")
	adaptertest.HasEnv(t, env, "OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_SHARE=1", "OPENCODE_DISABLE_MODELS_FETCH=1",
		"OPENCODE_DISABLE_LSP_DOWNLOAD=1", "OPENCODE_DISABLE_PROJECT_CONFIG=1", "XDG_CONFIG_HOME=/h/config", "XDG_DATA_HOME=/h/data",
		"XDG_CACHE_HOME=/h/cache", "XDG_STATE_HOME=/h/state", "KEEP_ME=1", "PWD=/work/ws")
	for _, kv := range env {
		if strings.HasPrefix(kv, "OPENAI_API_KEY=") || strings.HasPrefix(kv, "AWS_PROFILE=") {
			t.Errorf("provider credential %s reached an endpoint run", kv)
		}
	}
	// Without an endpoint the user's providers and config stay.
	env = Env(drover.Options{Tier: drover.TierAutonomous}, "")
	adaptertest.HasEnv(t, env, "OPENAI_API_KEY=user-key")
	for _, s := range env {
		if strings.HasPrefix(s, "XDG_") && !strings.HasPrefix(s, "XDG_RUNTIME") && os.Getenv(strings.SplitN(s, "=", 2)[0]) == "" ||
			s == "OPENCODE_DISABLE_PROJECT_CONFIG=1" || s == "OPENCODE_DISABLE_MODELS_FETCH=1" {
			t.Errorf("autonomous run without endpoint: %s in %v", s, env)
		}
	}
}

// TestADP7_ConfigDirSeeded: a config home gets the XDG dirs, the npm stub
// that keeps OpenCode from installing @opencode-ai/plugin at startup, and a
// copy of the user's auth.json and config files (SEC-4) when no endpoint
// key is given.
func TestADP7_ConfigDirSeeded(t *testing.T) {
	user := t.TempDir()
	t.Setenv("XDG_DATA_HOME", user)
	t.Setenv("XDG_CONFIG_HOME", user)

	auth := adaptertest.Seed{User: filepath.Join("opencode", "auth.json"), Home: filepath.Join("data", "opencode", "auth.json")}
	config := adaptertest.Seed{User: filepath.Join("opencode", "opencode.json"), Home: filepath.Join("config", "opencode", "opencode.json")}
	dir := adaptertest.Seeding(t, user, []adaptertest.Seed{auth, config}, func(dir string, login bool) error {
		o := drover.Options{ConfigDir: dir}
		if !login {
			o.Endpoint = &drover.Endpoint{BaseURL: "x", APIKey: "k"}
		}
		home, isolated, cleanup, err := configHome(o)
		if err != nil || home != dir || !isolated {
			t.Fatalf("configHome = %q %v %v", home, isolated, err)
		}
		defer cleanup()
		return seedHome(home, true, "")
	})
	for _, f := range []string{"config/opencode/node_modules", "config/opencode/package.json", "config/opencode/package-lock.json", "cache", "state"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
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

func TestADP4_Locate(t *testing.T) { adaptertest.Locate(t, New(), BinaryEnv) }

func TestADP4_Available(t *testing.T) {
	adaptertest.Pinned(t, New(), BinaryEnv, "opencode", TestedVersions)
}
