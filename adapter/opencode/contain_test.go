package opencode

import (
	"path/filepath"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/adaptertest"
)

// TestSEC2_OpenCodeWritable: a contained OpenCode may write the opencode
// directory of each XDG directory (as set, else under $HOME), npm's cache,
// and a config home of the run's own; nothing else of the home.
func TestSEC2_OpenCodeWritable(t *testing.T) {
	home, cfg, data := t.TempDir(), filepath.Join(t.TempDir(), "cfg"), filepath.Join(t.TempDir(), "data")
	for _, k := range []string{"XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME", "npm_config_cache"} {
		t.Setenv(k, "")
	}
	under := func(base string) []string {
		return []string{filepath.Join(base, "config", "opencode"), filepath.Join(base, "data", "opencode"),
			filepath.Join(base, "cache", "opencode"), filepath.Join(base, "state", "opencode")}
	}
	adaptertest.Writable(t, New(), []adaptertest.WritableCase{
		{Name: "user's home", Options: drover.Options{Env: map[string]string{"HOME": home}}, Dirs: []string{
			filepath.Join(home, ".npm"), filepath.Join(home, ".config", "opencode"), filepath.Join(home, ".local", "share", "opencode"),
			filepath.Join(home, ".cache", "opencode"), filepath.Join(home, ".local", "state", "opencode")}},
		{Name: "XDG_DATA_HOME and npm's cache set", Options: drover.Options{Env: map[string]string{"HOME": home, "XDG_DATA_HOME": data, "npm_config_cache": "/npm"}},
			Dirs: []string{"/npm", filepath.Join(home, ".config", "opencode"), filepath.Join(data, "opencode"),
				filepath.Join(home, ".cache", "opencode"), filepath.Join(home, ".local", "state", "opencode")}},
		{Name: "configDir", Options: drover.Options{ConfigDir: cfg, Env: map[string]string{"HOME": home}},
			Dirs: append([]string{cfg, filepath.Join(home, ".npm")}, under(cfg)...)},
	})
}
