package claude

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/drover-run/drover"
)

// providerKeys are the keys of a user's Claude settings.json that say how
// Claude reaches its model: the provider, its credentials, the model. They
// are kept when drover keeps the rest of the user's settings out (SEC-4).
var providerKeys = []string{"env", "apiKeyHelper", "model", "awsAuthRefresh", "awsCredentialExport", "forceLoginMethod"}

// userSettingsArgs returns `--settings JSON` carrying the provider part of
// the user's own settings.json, or nothing. Below autonomous drover passes
// --setting-sources "" so that no settings file can widen the tier (a
// user's or a workspace's permissions, hooks); that would also drop the
// user's provider configuration (an ANTHROPIC_BASE_URL in its env, an
// apiKeyHelper), and a run would reach another provider than the user's
// own claude does. A run with an Endpoint names its provider itself, and
// the user's is not added. The file is the one the user's claude reads:
// $CLAUDE_CONFIG_DIR/settings.json, else ~/.claude/settings.json (both as
// the run's Env says, then drover's environment).
func userSettingsArgs(opts drover.Options) ([]string, error) {
	if opts.Endpoint != nil || opts.EffectiveTier() == drover.TierAutonomous {
		return nil, nil
	}
	path := userSettingsPath(opts)
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, &drover.Error{Code: drover.CodeAdapterError, Message: "read your claude settings", Err: err}
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(data, &all); err != nil {
		return nil, &drover.Error{Code: drover.CodeAdapterError, Message: fmt.Sprintf("your claude settings %s are not a JSON object", path), Err: err}
	}
	kept := map[string]json.RawMessage{}
	for _, k := range providerKeys {
		if v, ok := all[k]; ok {
			kept[k] = v
		}
	}
	if len(kept) == 0 {
		return nil, nil
	}
	js, err := json.Marshal(kept)
	if err != nil {
		return nil, err
	}
	return []string{"--settings", string(js)}, nil
}

// userSettingsPath is where the user's claude keeps its settings.
func userSettingsPath(opts drover.Options) string {
	lookup := func(k string) string {
		if v, ok := opts.Env[k]; ok {
			return v
		}
		return os.Getenv(k)
	}
	if dir := lookup("CLAUDE_CONFIG_DIR"); dir != "" {
		return filepath.Join(dir, "settings.json")
	}
	home := lookup("HOME")
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		home = h
	}
	return filepath.Join(home, ".claude", "settings.json")
}
