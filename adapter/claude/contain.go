package claude

import (
	"path/filepath"

	"github.com/drover-run/drover/internal/runner"
)

// writable returns Claude's own state, which a contained run may write
// (docs/adapters/claude-code.md): its config home, $CLAUDE_CONFIG_DIR as
// env has it (sessions, settings, .claude.json inside it), else ~/.claude
// and the file ~/.claude.json.
func writable(env []string) (dirs, files []string) {
	if d := runner.Getenv(env, "CLAUDE_CONFIG_DIR"); d != "" {
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, nil
		}
		return []string{abs}, nil
	}
	home := runner.Getenv(env, "HOME")
	if !filepath.IsAbs(home) {
		return nil, nil
	}
	return []string{filepath.Join(home, ".claude")}, []string{filepath.Join(home, ".claude.json")}
}
