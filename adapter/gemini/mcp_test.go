package gemini

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/drover-run/drover"
	"github.com/google/go-cmp/cmp"
)

// TestMCP2_GeminiSettings: the run's servers go into its config home's
// settings beside the user's own; the next run sheds them and keeps the
// user's.
func TestMCP2_GeminiSettings(t *testing.T) {
	t.Setenv("GEMINI_CLI_HOME", t.TempDir()) // no user settings to seed
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".gemini"), 0o700)
	os.WriteFile(settingsFile(home), []byte(`{"mcpServers":{"mine":{"command":"/usr/bin/mine"}},"ui":{"theme":"x"}}`), 0o600)
	o := drover.Options{MCPServers: map[string]drover.MCPServer{
		"local":  {Command: "/bin/probe", Args: []string{"-v"}, Env: map[string]string{"K": "v"}},
		"remote": {URL: "http://127.0.0.1:9/mcp", Headers: map[string]string{"Authorization": "Bearer t"}},
		"old":    {Type: "sse", URL: "http://127.0.0.1:9/sse"},
	}}
	if err := prepareHome(home, o); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"mine":   map[string]any{"command": "/usr/bin/mine"},
		"local":  map[string]any{"command": "/bin/probe", "args": []any{"-v"}, "env": map[string]any{"K": "v"}},
		"remote": map[string]any{"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": map[string]any{"Authorization": "Bearer t"}},
		"old":    map[string]any{"type": "sse", "url": "http://127.0.0.1:9/sse"},
	}
	s := readSettings(t, home)
	if d := cmp.Diff(want, s["mcpServers"]); d != "" {
		t.Errorf("mcpServers (-want +got):\n%s", d)
	}
	if s["ui"] == nil {
		t.Error("the user's other settings were dropped")
	}
	if err := prepareHome(home, drover.Options{}); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]any{"mine": map[string]any{"command": "/usr/bin/mine"}}, readSettings(t, home)["mcpServers"]); d != "" {
		t.Errorf("after a run without servers (-want +got):\n%s", d)
	}
	if _, err := os.Stat(mcpAddedFile(home)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the record of added servers outlived them: %v", err)
	}
}

// TestMCP2_GeminiPolicy: in sandbox and dry-run the run's servers' tools
// are allowed above the tier's deny-all; above them nothing is added.
func TestMCP2_GeminiPolicy(t *testing.T) {
	servers := map[string]drover.MCPServer{"probe": {Command: "x"}}
	for _, tier := range drover.Tiers() {
		r := mcpRules(drover.Options{Tier: tier, MCPServers: servers})
		want := tier == drover.TierSandbox || tier == drover.TierDryRun
		if got := strings.Contains(r, "mcpName = \"probe\"\ntoolName = \"*\"\ndecision = \"allow\"\npriority = 200"); got != want {
			t.Errorf("%s: rules %q", tier, r)
		}
	}
}

// TestMCP2_GeminiHomeAndRefusals: a run with servers and no ConfigDir gets
// a home of its own (the user's settings are never rewritten), which
// cannot resume; a name Gemini would mangle is refused.
func TestMCP2_GeminiHomeAndRefusals(t *testing.T) {
	if _, temp := homeFor(drover.Options{MCPServers: map[string]drover.MCPServer{"p": {Command: "x"}}}); !temp {
		t.Error("servers without ConfigDir use the user's home")
	}
	if !slices.Equal(New().Capabilities().MCPTransports, []string{"stdio", "http", "sse"}) {
		t.Errorf("transports %v", New().Capabilities().MCPTransports)
	}
	for _, o := range []drover.Options{
		{MCPServers: map[string]drover.MCPServer{"my_server": {Command: "x"}}},
		{MCPServers: map[string]drover.MCPServer{"p": {Command: "x"}}, Resume: "abc"},
	} {
		_, err := New().Prepare(drover.Request{Prompt: "p", Options: o})
		var de *drover.Error
		if !errors.As(err, &de) || de.Code != drover.CodeUnsupportedOption {
			t.Errorf("%+v: %v, want UNSUPPORTED_OPTION", o, err)
		}
	}
}
