package opencode

import (
	"path/filepath"

	"github.com/drover-run/drover/internal/runner"
)

// xdgDefaults are where OpenCode's XDG directories are, under $HOME, when
// the environment does not name them.
var xdgDefaults = map[string]string{
	"XDG_CONFIG_HOME": ".config", "XDG_DATA_HOME": ".local/share", "XDG_CACHE_HOME": ".cache", "XDG_STATE_HOME": ".local/state",
}

// writable returns OpenCode's own state, which a contained run may write
// (docs/adapters/opencode.md): the opencode directory of each XDG
// directory (config, data with its session database, cache with its
// packages, state) as env has them; npm's cache ($npm_config_cache, else
// ~/.npm), where OpenCode's package installs (plugins, providers) cache
// what they fetch; and drover's config home for the run (its files: the
// retry plugin records its status there), if any.
func writable(env []string, home string) []string {
	var dirs []string
	if home != "" {
		dirs = append(dirs, home)
	}
	h := runner.Getenv(env, "HOME")
	if c := runner.Getenv(env, "npm_config_cache"); filepath.IsAbs(c) {
		dirs = append(dirs, c)
	} else if filepath.IsAbs(h) {
		dirs = append(dirs, filepath.Join(h, ".npm"))
	}
	for _, d := range xdgDirs {
		base := runner.Getenv(env, d.env)
		if base == "" && filepath.IsAbs(h) {
			base = filepath.Join(h, xdgDefaults[d.env])
		}
		if filepath.IsAbs(base) {
			dirs = append(dirs, filepath.Join(base, "opencode"))
		}
	}
	return dirs
}
