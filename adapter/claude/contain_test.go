package claude

import (
	"path/filepath"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/adaptertest"
)

// TestSEC2_ClaudeWritable: a contained Claude may write its config home
// ($CLAUDE_CONFIG_DIR, else ~/.claude and ~/.claude.json), nothing else of
// the home.
func TestSEC2_ClaudeWritable(t *testing.T) {
	home, cfg := t.TempDir(), filepath.Join(t.TempDir(), "cfg")
	t.Setenv("CLAUDE_CONFIG_DIR", "")
	adaptertest.Writable(t, New(), []adaptertest.WritableCase{
		{Name: "user's home", Options: drover.Options{Env: map[string]string{"HOME": home}},
			Dirs: []string{filepath.Join(home, ".claude")}, Files: []string{filepath.Join(home, ".claude.json")}},
		{Name: "configDir", Options: drover.Options{ConfigDir: cfg, Env: map[string]string{"HOME": home}}, Dirs: []string{cfg}},
		{Name: "CLAUDE_CONFIG_DIR", Options: drover.Options{Env: map[string]string{"HOME": home, "CLAUDE_CONFIG_DIR": cfg}}, Dirs: []string{cfg}},
	})
}
