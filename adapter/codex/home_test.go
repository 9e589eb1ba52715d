package codex

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/adaptertest"
)

func TestADP3_EnvFromOptions(t *testing.T) {
	home := filepath.Join(t.TempDir(), "codex-home") // under the test TMPDIR
	t.Setenv("TMPDIR", filepath.Dir(filepath.Dir(home)))
	a := New()
	env, got, err := a.env(drover.Options{Endpoint: &drover.Endpoint{BaseURL: "http://127.0.0.1:9", APIKey: "k"},
		Env: map[string]string{"X_TEST": "1"}, ConfigDir: home})
	if err != nil {
		t.Fatal(err)
	}
	if got != home {
		t.Errorf("codex home %q, want %q", got, home)
	}
	adaptertest.HasEnv(t, env, APIKeyEnv+"=k", "X_TEST=1", "CODEX_HOME="+home, "TMPDIR="+filepath.Join(home, ".tmp"))
	if fi, err := os.Stat(filepath.Join(home, ".tmp")); err != nil || !fi.IsDir() {
		t.Errorf("TMPDIR inside CODEX_HOME not created: %v", err)
	}
	// A CODEX_HOME outside TMPDIR keeps the caller's TMPDIR.
	t.Setenv("TMPDIR", t.TempDir())
	env, _, err = a.env(drover.Options{ConfigDir: home})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(env, "TMPDIR="+filepath.Join(home, ".tmp")) {
		t.Error("TMPDIR moved although it is not a parent of CODEX_HOME")
	}
}

func TestADP7_ConfigDirSeeded(t *testing.T) {
	user := t.TempDir()
	t.Setenv("CODEX_HOME", user)
	a := New()
	adaptertest.Seeding(t, user, []adaptertest.Seed{{User: "auth.json", Home: "auth.json"}, {User: "config.toml", Home: "config.toml"}},
		func(home string, login bool) error {
			opts := drover.Options{ConfigDir: home}
			if !login {
				opts.Endpoint = &drover.Endpoint{BaseURL: "http://x", APIKey: "k"}
			}
			_, _, err := a.env(opts)
			return err
		})
}

func TestADP4_Locate(t *testing.T) { adaptertest.Locate(t, New(), BinaryEnv) }

func TestADP4_Available(t *testing.T) {
	adaptertest.Pinned(t, New(), BinaryEnv, "codex", TestedVersions)
}
