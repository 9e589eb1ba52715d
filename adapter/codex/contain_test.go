package codex

import (
	"path/filepath"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/adaptertest"
)

// TestSEC2_CodexWritable: a contained Codex may write its home, CODEX_HOME
// or ~/.codex, nothing else of the home.
func TestSEC2_CodexWritable(t *testing.T) {
	home, cfg := t.TempDir(), filepath.Join(t.TempDir(), "cfg")
	t.Setenv("CODEX_HOME", "")
	adaptertest.Writable(t, New(), []adaptertest.WritableCase{
		{Name: "user's home", Options: drover.Options{Env: map[string]string{"HOME": home}}, Dirs: []string{filepath.Join(home, ".codex")}},
		{Name: "configDir", Options: drover.Options{ConfigDir: cfg}, Dirs: []string{cfg}},
		{Name: "CODEX_HOME", Options: drover.Options{Env: map[string]string{"CODEX_HOME": cfg}}, Dirs: []string{cfg}},
	})
}
