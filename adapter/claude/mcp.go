package claude

import (
	"encoding/json"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/drover-run/drover"
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

// writeMCPConfig writes MCPConfig(opts) to a new file only its owner can
// read and returns the arguments that name it, and the cleanup that
// removes it; none of them without servers. A file rather than the JSON
// on the command line: a server's headers and environment often hold
// tokens, and a command line is visible to every user of the machine.
func writeMCPConfig(opts drover.Options) (args []string, cleanup func(), err error) {
	doc, err := MCPConfig(opts)
	if err != nil || doc == nil {
		return nil, nil, err
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
