package claude

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/runner"
)

// MCPConfig returns the document Claude's --mcp-config takes for
// opts.MCPServers (MCP-2), {"mcpServers": {NAME: SERVER}} with each server
// in the .mcp.json shape and its "type" always set ("stdio", "http",
// "sse"); nil when opts names no server.
func MCPConfig(opts drover.Options) ([]byte, error) {
	if len(opts.MCPServers) == 0 {
		return nil, nil
	}
	servers := make(map[string]drover.MCPServer, len(opts.MCPServers))
	for name, m := range opts.MCPServers {
		m.Type = m.Transport()
		servers[name] = m
	}
	return json.Marshal(map[string]any{"mcpServers": servers})
}

// userMCPServers returns the MCP servers the user configured for Claude
// Code themselves, as they are in the .claude.json of the config home env
// names ($CLAUDE_CONFIG_DIR, else $HOME): user scope, and local scope for
// the project cwd. Below autonomous Claude runs with no setting sources
// (TierArgs), which drops them too (measured on 2.1.x: a call of their
// tools fails "No such tool available"), so drover passes them back
// (SEC-4). A workspace's .mcp.json stays unread there, like its settings.
// nil in autonomous, or when there is no such file.
func userMCPServers(opts drover.Options, env []string) (map[string]json.RawMessage, error) {
	if opts.EffectiveTier() == drover.TierAutonomous {
		return nil, nil
	}
	path := filepath.Join(runner.Getenv(env, "HOME"), ".claude.json")
	if d := runner.Getenv(env, "CLAUDE_CONFIG_DIR"); d != "" {
		path = filepath.Join(d, ".claude.json")
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var doc struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
		Projects   map[string]struct {
			MCPServers map[string]json.RawMessage `json:"mcpServers"`
		} `json:"projects"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	servers := doc.MCPServers
	if cwd, err := filepath.Abs(opts.Cwd); err == nil {
		if servers == nil {
			servers = map[string]json.RawMessage{}
		}
		maps.Copy(servers, doc.Projects[cwd].MCPServers)
	}
	return servers, nil
}

// writeMCPConfig writes MCPConfig(opts), with the user's own servers
// (userMCPServers) under it, to a new file only its owner can read and
// returns the arguments that name it, and the cleanup that removes it;
// none of them without servers. A file rather than the JSON on the
// command line: a server's headers and environment often hold tokens, and
// a command line is visible to every user of the machine.
func writeMCPConfig(opts drover.Options, env []string) (args []string, cleanup func(), err error) {
	user, err := userMCPServers(opts, env)
	if err != nil {
		return nil, nil, &drover.Error{Code: drover.CodeAdapterError, Message: "read the user's claude MCP servers", Err: err}
	}
	doc, err := MCPConfig(opts)
	if err != nil {
		return nil, nil, err
	}
	if len(user) > 0 {
		// The run's own servers win over the user's of the same name.
		var run struct {
			MCPServers map[string]json.RawMessage `json:"mcpServers"`
		}
		if doc != nil {
			if err := json.Unmarshal(doc, &run); err != nil {
				return nil, nil, err
			}
		}
		maps.Copy(user, run.MCPServers)
		if doc, err = json.Marshal(map[string]any{"mcpServers": user}); err != nil {
			return nil, nil, err
		}
	}
	if doc == nil {
		return nil, nil, nil
	}
	fail := func(err error) ([]string, func(), error) {
		return nil, nil, &drover.Error{Code: drover.CodeAdapterError, Message: "write claude MCP configuration", Err: err}
	}
	f, err := os.CreateTemp("", "drover-claude-mcp-*.json") // mode 0600
	if err != nil {
		return fail(err)
	}
	_, err = f.Write(doc)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return fail(err)
	}
	return []string{"--mcp-config", f.Name()}, func() { os.Remove(f.Name()) }, nil
}

// mcpTierArgs lets the tools of the run's own MCP servers run unasked in
// the tiers that ask nothing below autonomous: sandbox is "MCP tools
// only" (PERM-1) and dry-run adds to it. Claude offers MCP tools whatever
// --tools says, and its dontAsk mode denies them unless a rule allows
// them (measured, docs/adapters/claude-code.md). Supervised asks for them
// like for any tool it does not allow; autonomous allows everything.
func mcpTierArgs(opts drover.Options) []string {
	if t := opts.EffectiveTier(); t != drover.TierSandbox && t != drover.TierDryRun {
		return nil
	}
	var args []string
	for _, name := range slices.Sorted(maps.Keys(opts.MCPServers)) {
		args = append(args, "--allowedTools", MCPToolPrefix(name))
	}
	return args
}

// MCPToolPrefix is what the names of the tools of MCP server name start
// with in Claude, mcp__NAME, NAME with every character other than a
// letter, a digit, '_' or '-' made '_' (as Claude 2.1.330 does): a tool
// call in UES is named MCPToolPrefix(server) + "__" + tool. As a
// permission rule, the prefix alone matches every tool of the server.
func MCPToolPrefix(name string) string {
	return "mcp__" + strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			return r
		}
		return '_'
	}, name)
}
