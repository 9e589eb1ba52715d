package opencode

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/drover-run/drover"
	"github.com/google/go-cmp/cmp"
)

func configOf(t *testing.T, o drover.Options) map[string]any {
	t.Helper()
	data, err := Config(o, map[string]string{"plugin": "/h/drover/retries.js"})
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestMCP2_OpenCodeConfig pins the config `mcp` form of each transport
// and the permission rules that let the servers' tools run in sandbox and
// dry-run only.
func TestMCP2_OpenCodeConfig(t *testing.T) {
	t.Setenv(ConfigContentEnv, "")
	o := drover.Options{Tier: drover.TierSandbox, MCPServers: map[string]drover.MCPServer{
		"local":   {Command: "/bin/probe", Args: []string{"-v"}, Env: map[string]string{"K": "v"}},
		"re.mote": {URL: "http://127.0.0.1:9/mcp", Headers: map[string]string{"Authorization": "Bearer t"}},
		"old":     {Type: "sse", URL: "http://127.0.0.1:9/sse"},
	}}
	want := map[string]any{
		"local":   map[string]any{"type": "local", "command": []any{"/bin/probe", "-v"}, "environment": map[string]any{"K": "v"}, "enabled": true},
		"re.mote": map[string]any{"type": "remote", "url": "http://127.0.0.1:9/mcp", "headers": map[string]any{"Authorization": "Bearer t"}, "enabled": true},
		"old":     map[string]any{"type": "remote", "url": "http://127.0.0.1:9/sse", "enabled": true},
	}
	if d := cmp.Diff(want, configOf(t, o)["mcp"]); d != "" {
		t.Errorf("mcp (-want +got):\n%s", d)
	}
	if got, want := string(mustJSON(Permission(o))), `{"*":"deny","local_*":"allow","old_*":"allow","re_mote_*":"allow"}`; got != want {
		t.Errorf("sandbox permission %s, want %s", got, want)
	}
	for _, tier := range []drover.Tier{drover.TierSupervised, drover.TierAutonomous} {
		o.Tier = tier
		if p := string(mustJSON(Permission(o))); strings.Contains(p, "_*") {
			t.Errorf("%s: permission %s names the MCP servers", tier, p)
		}
	}
	if !slices.Equal(New().Capabilities().MCPTransports, []string{"stdio", "http", "sse"}) {
		t.Errorf("transports %v", New().Capabilities().MCPTransports)
	}
}

// TestSEC4_OpenCodeUserConfigContentMerged: the caller's
// OPENCODE_CONFIG_CONTENT (Options.Env first, else the environment) is
// kept under drover's: its provider, model and servers stay, its plugins
// come first; drover's permission and agent replace the user's, so the
// tier holds; a run's server replaces a user's of the same name.
func TestSEC4_OpenCodeUserConfigContentMerged(t *testing.T) {
	user := `{// mine
	"provider":{"mine":{"npm":"@ai-sdk/openai-compatible","options":{"baseURL":"http://127.0.0.1:7/v1"}}},"model":"mine/m",
		"permission":{"bash":"allow"},"agent":{"drover":{"permission":{"*":"allow"}},"other":{"mode":"primary"}},
		"plugin":["file:///user.js"],"mcp":{"probe":{"type":"local","command":["old"]},"theirs":{"type":"remote","url":"http://x"}}}`
	zero := 0
	o := drover.Options{Tier: drover.TierSupervised, APIRetries: &zero,
		MCPServers: map[string]drover.MCPServer{"probe": {URL: "http://127.0.0.1:8/mcp"}}}
	for _, inOptions := range []bool{true, false} {
		t.Setenv(ConfigContentEnv, "")
		if inOptions {
			o.Env = map[string]string{ConfigContentEnv: user}
		} else {
			o.Env = nil
			t.Setenv(ConfigContentEnv, user)
		}
		cfg := configOf(t, o)
		data, _ := Config(o, map[string]string{"plugin": "/h/drover/retries.js"})
		if !strings.Contains(string(data), `"permission":`+string(mustJSON(Permission(o)))) {
			t.Errorf("in options %v: permission in %s, want drover's, in order", inOptions, data)
		}
		if cfg["model"] != "mine/m" || cfg["provider"].(map[string]any)["mine"] == nil {
			t.Errorf("in options %v: the user's provider is gone: %v", inOptions, cfg)
		}
		agents := cfg["agent"].(map[string]any)
		if agents["other"] == nil || agents[AgentName].(map[string]any)["mode"] != "primary" {
			t.Errorf("in options %v: agents %v", inOptions, agents)
		}
		if d := cmp.Diff([]any{"file:///user.js", "file:///h/drover/retries.js"}, cfg["plugin"]); d != "" {
			t.Errorf("in options %v: plugins (-want +got):\n%s", inOptions, d)
		}
		servers := cfg["mcp"].(map[string]any)
		if d := cmp.Diff(map[string]any{"type": "remote", "url": "http://127.0.0.1:8/mcp", "enabled": true}, servers["probe"]); d != "" || servers["theirs"] == nil {
			t.Errorf("in options %v: mcp %v", inOptions, servers)
		}
	}
	// The process gets one OPENCODE_CONFIG_CONTENT, drover's merge.
	o.Env = map[string]string{ConfigContentEnv: user, "OPENCODE_PERMISSION": `{"*":"allow"}`}
	l, err := New().Prepare(drover.Request{Prompt: "p", Options: o})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Cleanup()
	var contents, perms []string
	for _, kv := range l.Env {
		if v, ok := strings.CutPrefix(kv, ConfigContentEnv+"="); ok {
			contents = append(contents, v)
		}
		if v, ok := strings.CutPrefix(kv, "OPENCODE_PERMISSION="); ok {
			perms = append(perms, v)
		}
	}
	if len(contents) != 1 || !strings.Contains(contents[len(contents)-1], `"mine"`) || perms[len(perms)-1] != string(mustJSON(Permission(o))) {
		t.Errorf("process config %v, permission %v", contents, perms)
	}

	o.Env = map[string]string{ConfigContentEnv: "[1]"}
	_, err = Config(o, map[string]string{"plugin": "/p"})
	if err == nil || !strings.Contains(err.Error(), ConfigContentEnv) {
		t.Errorf("a config content that is not an object: %v", err)
	}
	_, err = New().Prepare(drover.Request{Prompt: "p", Options: o})
	var de *drover.Error
	if !errors.As(err, &de) {
		t.Errorf("Prepare: %v", err)
	}
}
