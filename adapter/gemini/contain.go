package gemini

import (
	"path/filepath"

	"github.com/drover-run/drover/internal/runner"
)

// writable returns Gemini's own state, which a contained run may write
// (docs/adapters/gemini.md): the run's temporary directory (policy, a
// temporary config home) and the .gemini directory of the config home,
// $GEMINI_CLI_HOME as env has it, else $HOME.
func writable(env []string, tmp string) []string {
	dirs := []string{tmp}
	home := runner.Getenv(env, "GEMINI_CLI_HOME")
	if home == "" {
		home = runner.Getenv(env, "HOME")
	}
	if filepath.IsAbs(home) {
		dirs = append(dirs, filepath.Join(home, ".gemini"))
	}
	return dirs
}
