package codex

import (
	"path/filepath"

	"github.com/drover-run/drover/internal/runner"
)

// writable returns Codex's own state, which a contained run may write
// (docs/adapters/codex.md): Codex keeps all of it (sessions, its SQLite
// databases, logs, skills, shell snapshots, its helper links under tmp)
// in its home, $CODEX_HOME as env has it, else ~/.codex.
func writable(env []string) []string {
	home := runner.Getenv(env, "CODEX_HOME")
	if home == "" {
		if h := runner.Getenv(env, "HOME"); filepath.IsAbs(h) {
			home = filepath.Join(h, ".codex")
		}
	}
	if abs, err := filepath.Abs(home); err == nil && home != "" {
		return []string{abs}
	}
	return nil
}
