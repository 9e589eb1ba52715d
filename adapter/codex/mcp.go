package codex

import (
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/drover-run/drover"
)

// mcpTransports are the MCP transports Codex 0.169.0 takes: a stdio
// program, or streamable HTTP at a url. It has no legacy SSE client (a
// /sse endpoint given as url is spoken to as streamable HTTP and fails).
var mcpTransports = []string{"stdio", "http"}

// mcpNameRe is what a server name may be: Codex's -c splits its key at
// every '.', and a quoted key is not understood there.
var mcpNameRe = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// MCPHeaderEnv is the prefix of the variables drover puts an HTTP MCP
// server's header values in (DROVER_MCP_TOKEN_1, …), which the server's
// env_http_headers name.
const MCPHeaderEnv = "DROVER_MCP_TOKEN_"

// envNameRe is what a variable drover blanks in Codex's commands may be
// called: a bare key of the -c path shell_environment_policy.set.NAME.
var envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// MCPOverrides returns the -c overrides that give Codex opts.MCPServers
// (MCP-2), one `mcp_servers.NAME={…}` each, in name order, and the
// variables they need in Codex's environment. No secret is on the command
// line, which every user of the machine can read: a stdio server's Env
// goes into Codex's environment and is forwarded by name (env_vars; Codex
// passes a stdio server only a few variables of its own otherwise), and a
// header's value into a DROVER_MCP_TOKEN_n variable that env_http_headers
// names. In sandbox and dry-run the servers' tools are approved: those
// tiers ask nothing, and their MCP tools are the run's to use (PERM-1);
// supervised leaves Codex asking (app-server) or refusing (exec) as for
// any tool that needs approval.
//
// Codex's commands inherit its environment (measured: Codex 0.169.0's
// default shell_environment_policy excludes nothing), so each variable
// drover adds for a server is blanked in them with
// `shell_environment_policy.set.NAME=""` (one key of the user's set
// table, the rest of their policy untouched): a header or a server's
// secret is not in the environment of the model's commands (a process of
// the same user can still read Codex's own, under /proc). A variable the run's environment
// already holds with the same value is left alone (nothing new to hide).
//
// Two servers that need one variable with different values are refused,
// as is a server or variable name Codex's -c cannot carry.
func MCPOverrides(opts drover.Options) (args []string, env map[string]string, err error) {
	if len(opts.MCPServers) == 0 {
		return nil, nil, nil
	}
	env = map[string]string{}
	refuse := func(msg string) ([]string, map[string]string, error) {
		return nil, nil, &drover.Error{Code: drover.CodeUnsupportedOption, Message: msg}
	}
	headers := 0
	for _, name := range slices.Sorted(maps.Keys(opts.MCPServers)) {
		m := opts.MCPServers[name]
		if !mcpNameRe.MatchString(name) {
			return refuse(fmt.Sprintf("mcp server %q: codex takes only names of letters, digits, '_' and '-'", name))
		}
		var fields []string
		switch t := m.Transport(); t {
		case "stdio":
			fields = append(fields, "command="+tomlString(m.Command))
			if len(m.Args) > 0 {
				fields = append(fields, "args="+tomlArray(m.Args))
			}
			if len(m.Env) > 0 {
				keys := slices.Sorted(maps.Keys(m.Env))
				for _, k := range keys {
					if !envNameRe.MatchString(k) {
						return refuse(fmt.Sprintf("mcp server %q: codex cannot forward the variable %q (letters, digits and '_' only)", name, k))
					}
					if v, ok := env[k]; ok && v != m.Env[k] {
						return refuse(fmt.Sprintf("mcp server %q: codex gives its stdio servers variables from its own environment, and %s is set differently for another server", name, k))
					}
					env[k] = m.Env[k]
				}
				fields = append(fields, "env_vars="+tomlArray(keys))
			}
		case "http":
			fields = append(fields, "url="+tomlString(m.URL))
			if len(m.Headers) > 0 {
				var hs []string
				for _, h := range slices.Sorted(maps.Keys(m.Headers)) {
					headers++
					v := MCPHeaderEnv + strconv.Itoa(headers)
					env[v] = m.Headers[h]
					hs = append(hs, tomlString(h)+"="+tomlString(v))
				}
				fields = append(fields, "env_http_headers={"+strings.Join(hs, ",")+"}")
			}
		default:
			return refuse(fmt.Sprintf("mcp server %q: codex cannot use %s MCP servers", name, t))
		}
		if t := opts.EffectiveTier(); t == drover.TierSandbox || t == drover.TierDryRun {
			// Sandbox is "MCP tools only" (PERM-1) and dry-run adds to it;
			// both ask nothing. Under a read-only sandbox Codex wants an
			// approval for every MCP tool call (refused outright in exec,
			// measured) unless the server's tools are approved.
			fields = append(fields, `default_tools_approval_mode="approve"`)
		}
		args = append(args, "-c", "mcp_servers."+name+"={"+strings.Join(fields, ",")+"}")
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		inherited, ok := opts.Env[k]
		if !ok {
			inherited, ok = os.LookupEnv(k)
		}
		if !ok || inherited != env[k] {
			args = append(args, "-c", "shell_environment_policy.set."+k+`=""`)
		}
	}
	return args, env, nil
}

// tomlArray quotes ss as a TOML array of basic strings.
func tomlArray(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = tomlString(s)
	}
	return "[" + strings.Join(q, ",") + "]"
}
