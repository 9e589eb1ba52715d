package gemini

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/drover-run/drover"
)

// mcpTransports are the MCP transports Gemini CLI 0.61.0 takes (its
// settings' mcpServers: a command, or a url of type "http" or "sse").
var mcpTransports = []string{"stdio", "http", "sse"}

// MCPSettings returns Gemini's settings entries for opts.MCPServers
// (MCP-2), by name: {command, args, env} for stdio, {type, url, headers}
// for http and sse; nil when opts names none.
func MCPSettings(opts drover.Options) map[string]any {
	if len(opts.MCPServers) == 0 {
		return nil
	}
	out := map[string]any{}
	for name, m := range opts.MCPServers {
		e := map[string]any{}
		switch t := m.Transport(); t {
		case "stdio":
			e["command"] = m.Command
			if len(m.Args) > 0 {
				e["args"] = m.Args
			}
			if len(m.Env) > 0 {
				e["env"] = m.Env
			}
		default:
			e["type"] = t
			e["url"] = m.URL
			if len(m.Headers) > 0 {
				e["headers"] = m.Headers
			}
		}
		out[name] = e
	}
	return out
}

// checkMCP refuses a server name Gemini would not keep apart: it names a
// server's tools mcp_SERVER_TOOL and reads SERVER back up to the first
// '_', so a name with '_' (or a character outside [A-Za-z0-9-], which it
// replaces) would not be the server its policy rules and the stream name.
func checkMCP(opts drover.Options) error {
	for _, name := range slices.Sorted(maps.Keys(opts.MCPServers)) {
		if name == "" || strings.IndexFunc(name, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-')
		}) >= 0 {
			return &drover.Error{Code: drover.CodeUnsupportedOption, Message: fmt.Sprintf(
				"mcp server %q: gemini takes only names of letters, digits and '-'", name)}
		}
	}
	return nil
}

// mcpAddedFile lists, in a config home, the MCP servers drover added to
// its settings for the last run, so that the next run takes them out
// again and only the user's own stay.
func mcpAddedFile(home string) string {
	return filepath.Join(home, ".gemini", "drover-mcp-servers.json")
}

// applyMCP sets the run's MCP servers in settings s of config home: the
// servers an earlier run added go, the run's are added (a name the user's
// settings also use is the run's for this run and the user's again after
// it only if the user's entry is seeded anew), and the names are recorded
// for the next run.
func applyMCP(home string, s map[string]any, opts drover.Options) error {
	servers, _ := s["mcpServers"].(map[string]any)
	if data, err := os.ReadFile(mcpAddedFile(home)); err == nil && servers != nil {
		var names []string
		if json.Unmarshal(data, &names) == nil {
			for _, n := range names {
				delete(servers, n)
			}
		}
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	add := MCPSettings(opts)
	if len(add) > 0 {
		if servers == nil {
			servers = map[string]any{}
		}
		maps.Copy(servers, add)
	}
	if servers != nil {
		s["mcpServers"] = servers
	}
	if len(add) == 0 {
		if err := os.Remove(mcpAddedFile(home)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	names, _ := json.Marshal(slices.Sorted(maps.Keys(add)))
	return os.WriteFile(mcpAddedFile(home), names, 0o600)
}

// mcpRules are the admin policy rules that let the run's MCP servers'
// tools run unasked in sandbox ("MCP tools only", PERM-1) and dry-run,
// which adds to it; above them such a tool is asked (live) or not offered
// (headless, as every tool that needs approval), as any tool the tier
// does not list.
func mcpRules(opts drover.Options) string {
	if t := opts.EffectiveTier(); t != drover.TierSandbox && t != drover.TierDryRun {
		return ""
	}
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(opts.MCPServers)) {
		fmt.Fprintf(&b, "[[rule]]\nmcpName = %q\ntoolName = \"*\"\ndecision = \"allow\"\npriority = 200\n\n", name)
	}
	return b.String()
}
