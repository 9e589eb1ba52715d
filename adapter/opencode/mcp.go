package opencode

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/runner"
)

// mcpTransports are the MCP transports OpenCode 1.18.33 takes: a "local"
// server (a command) and a "remote" one (a url), which it speaks to over
// streamable HTTP and, when that fails, SSE (measured with both).
var mcpTransports = []string{"stdio", "http", "sse"}

// MCPConfig returns OpenCode's config `mcp` entries for opts.MCPServers
// (MCP-2): {type: "local", command: [COMMAND, ARGS…], environment} or
// {type: "remote", url, headers}, each enabled; nil when opts names none.
func MCPConfig(opts drover.Options) map[string]any {
	if len(opts.MCPServers) == 0 {
		return nil
	}
	out := map[string]any{}
	for name, m := range opts.MCPServers {
		e := map[string]any{"enabled": true}
		if m.Transport() == "stdio" {
			e["type"] = "local"
			e["command"] = append([]string{m.Command}, m.Args...)
			if len(m.Env) > 0 {
				e["environment"] = m.Env
			}
		} else {
			e["type"] = "remote"
			e["url"] = m.URL
			if len(m.Headers) > 0 {
				e["headers"] = m.Headers
			}
		}
		out[name] = e
	}
	return out
}

// MCPToolPattern is the permission pattern that matches every tool of
// MCP server name: OpenCode names a server's tools SERVER_TOOL, with each
// character of either other than a letter, a digit, '_' or '-' made '_'.
func MCPToolPattern(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			return r
		}
		return '_'
	}, name) + "_*"
}

// mcpPermission are the permission rules that let the run's MCP servers'
// tools run in sandbox ("MCP tools only", PERM-1) and dry-run, which adds
// to it; in supervised they are asked, in autonomous allowed, as every
// tool the tier does not name.
func mcpPermission(opts drover.Options) rules {
	if t := opts.EffectiveTier(); t != drover.TierSandbox && t != drover.TierDryRun {
		return nil
	}
	var rs rules
	for _, name := range slices.Sorted(maps.Keys(opts.MCPServers)) {
		rs = append(rs, rule{MCPToolPattern(name), "allow"})
	}
	return rs
}

// ConfigContentEnv is the variable OpenCode reads a whole configuration
// from, above its config files.
const ConfigContentEnv = "OPENCODE_CONFIG_CONTENT"

// userConfigContent is the OPENCODE_CONFIG_CONTENT the caller gave the run
// (Options.Env, else drover's own environment), "" when none.
func userConfigContent(opts drover.Options) string {
	if v, ok := opts.Env[ConfigContentEnv]; ok {
		return v
	}
	return os.Getenv(ConfigContentEnv)
}

// mergeUserConfig merges drover's configuration into the user's
// OPENCODE_CONFIG_CONTENT (SEC-4: it replaces the variable, so what the
// user put there would otherwise be lost, and OpenCode would fall back to
// its default provider): objects merge key by key and drover's value wins
// where both set one, except that drover's permission rules and its agent
// replace the user's whole, so no user rule can widen the tier, a run's
// MCP server replaces a user's of the same name whole, and the plugin and
// instructions lists are joined, the user's first.
func mergeUserConfig(user string, drover map[string]any) (map[string]any, error) {
	if strings.TrimSpace(user) == "" {
		return drover, nil
	}
	var u map[string]any
	// OpenCode reads it as JSON with comments.
	if err := json.Unmarshal(runner.StripJSONComments([]byte(user)), &u); err != nil || u == nil {
		if err == nil {
			err = fmt.Errorf("not a JSON object")
		}
		return nil, fmt.Errorf("%s from the environment: %w", ConfigContentEnv, err)
	}
	out := deepMerge(u, drover)
	out["permission"] = drover["permission"]
	if agents, ok := out["agent"].(map[string]any); ok {
		agents[AgentName] = drover["agent"].(map[string]any)[AgentName]
	}
	if servers, ok := out["mcp"].(map[string]any); ok {
		if run, ok := drover["mcp"].(map[string]any); ok {
			maps.Copy(servers, run)
		}
	}
	for _, k := range []string{"plugin", "instructions"} {
		ul, uok := u[k].([]any)
		dl, dok := drover[k].([]string)
		if uok && dok {
			joined := slices.Clone(ul)
			for _, v := range dl {
				joined = append(joined, v)
			}
			out[k] = joined
		}
	}
	return out, nil
}

// deepMerge returns a with b merged in: objects key by key, anything else
// b's.
func deepMerge(a, b map[string]any) map[string]any {
	out := maps.Clone(a)
	for k, bv := range b {
		am, aok := out[k].(map[string]any)
		bm, bok := bv.(map[string]any)
		if aok && bok {
			out[k] = deepMerge(am, bm)
		} else {
			out[k] = bv
		}
	}
	return out
}
