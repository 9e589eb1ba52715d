package codex

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/drover-run/drover"
	"github.com/google/go-cmp/cmp"
)

// TestMCP2_CodexOverrides pins the -c form of each transport, the
// variables that carry env and header values off the command line, and
// the tiers whose MCP tools are approved.
func TestMCP2_CodexOverrides(t *testing.T) {
	t.Setenv("LOG", "/l") // inherited with the same value: not blanked
	o := drover.Options{Tier: drover.TierSandbox, MCPServers: map[string]drover.MCPServer{
		"local":  {Command: "/bin/probe", Args: []string{"-v", `a "b"`}, Env: map[string]string{"TOKEN": "s3cret", "LOG": "/l"}},
		"remote": {URL: "http://127.0.0.1:9/mcp", Headers: map[string]string{"Authorization": "Bearer t0k", "X-A": "1"}},
	}}
	args, env, err := MCPOverrides(o)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"-c", `mcp_servers.local={command="/bin/probe",args=["-v","a \"b\""],env_vars=["LOG","TOKEN"],default_tools_approval_mode="approve"}`,
		"-c", `mcp_servers.remote={url="http://127.0.0.1:9/mcp",env_http_headers={"Authorization"="DROVER_MCP_TOKEN_1","X-A"="DROVER_MCP_TOKEN_2"},default_tools_approval_mode="approve"}`,
		"-c", `shell_environment_policy.set.DROVER_MCP_TOKEN_1=""`,
		"-c", `shell_environment_policy.set.DROVER_MCP_TOKEN_2=""`,
		"-c", `shell_environment_policy.set.TOKEN=""`,
	}
	if d := cmp.Diff(want, args); d != "" {
		t.Errorf("args (-want +got):\n%s", d)
	}
	wantEnv := map[string]string{"TOKEN": "s3cret", "LOG": "/l", "DROVER_MCP_TOKEN_1": "Bearer t0k", "DROVER_MCP_TOKEN_2": "1"}
	if d := cmp.Diff(wantEnv, env); d != "" {
		t.Errorf("env (-want +got):\n%s", d)
	}
	for _, secret := range []string{"s3cret", "t0k"} {
		if strings.Contains(strings.Join(args, " "), secret) {
			t.Errorf("%s on the command line", secret)
		}
	}

	o.Tier = drover.TierSupervised
	args, _, _ = MCPOverrides(o)
	if slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, "approval") }) {
		t.Errorf("supervised approves MCP tools: %v", args)
	}
	full, err := Args(o)
	if err != nil || !slices.Contains(full, want[1][:strings.Index(want[1], ",default")]+"}") {
		t.Errorf("Args lacks the server: %v %v", full, err)
	}
	launch, err := New().Prepare(drover.Request{Prompt: "p", Options: drover.Options{Binary: "/bin/true", MCPServers: o.MCPServers, ConfigDir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range wantEnv {
		if !slices.Contains(launch.Env, k+"="+v) {
			t.Errorf("codex environment lacks %s", k)
		}
	}
}

// TestMCP2_CodexRefuses: what Codex cannot take is refused before start.
func TestMCP2_CodexRefuses(t *testing.T) {
	for name, servers := range map[string]map[string]drover.MCPServer{
		"sse":             {"s": {Type: "sse", URL: "http://127.0.0.1:9/sse"}},
		"dotted name":     {"a.b": {Command: "x"}},
		"env name":        {"a": {Command: "x", Env: map[string]string{"A-B": "1"}}},
		"env conflicting": {"a": {Command: "x", Env: map[string]string{"K": "1"}}, "b": {Command: "y", Env: map[string]string{"K": "2"}}},
	} {
		o := drover.Options{MCPServers: servers}
		err := New().Capabilities().Unsupported(o)
		if err == nil {
			_, err = Args(o)
		}
		var de *drover.Error
		if !errors.As(err, &de) || de.Code != drover.CodeUnsupportedOption {
			t.Errorf("%s: %v, want UNSUPPORTED_OPTION", name, err)
		}
	}
}
