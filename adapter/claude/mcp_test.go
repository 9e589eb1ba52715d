package claude

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/adaptertest"
)

// servers are one MCP server of each transport, one with a name Claude
// rewrites in its tool names.
var servers = map[string]drover.MCPServer{
	"drover":  {Command: "drover", Args: []string{"mcp"}, Env: map[string]string{"DROVER_DB": "/l.db"}},
	"my.docs": {URL: "https://docs.example/mcp", Headers: map[string]string{"Authorization": "Bearer t"}},
	"events":  {Type: "sse", URL: "https://events.example/sse"},
}

// TestMCP2_ServersToFlags: in sandbox and dry-run, the tiers that ask
// nothing, the tools of the run's own MCP servers are allowed by a rule
// per server (Claude's dontAsk mode denies them otherwise); supervised
// asks for them, headless or live; autonomous allows everything anyway.
func TestMCP2_ServersToFlags(t *testing.T) {
	base := "-p --output-format stream-json --verbose"
	allow := "--allowedTools mcp__drover --allowedTools mcp__events --allowedTools mcp__my_docs"
	with := func(tier drover.Tier) drover.Options { return drover.Options{Tier: tier, MCPServers: servers} }
	adaptertest.Flags(t, func(o drover.Options, _ string) ([]string, error) { return Args(o) }, []adaptertest.FlagCase{
		{Name: "sandbox allows them", Options: with(drover.TierSandbox), Want: base + ` --setting-sources "" --permission-mode dontAsk ` + allow + ` --tools ""`},
		{Name: "dry-run allows them", Options: with(drover.TierDryRun), Want: base + ` --setting-sources "" --permission-mode dontAsk ` + allow + ` --tools Read,Glob,Grep`},
		{Name: "supervised asks", Options: with(drover.TierSupervised), Want: base + ` --setting-sources "" --permission-mode dontAsk --allowedTools Edit(./**)`},
		{Name: "autonomous", Options: with(drover.TierAutonomous), Want: base + " --permission-mode bypassPermissions"},
	})
	live := "-p --input-format stream-json --output-format stream-json --verbose --replay-user-messages"
	adaptertest.Flags(t, func(o drover.Options, _ string) ([]string, error) { return LiveArgs(o) }, []adaptertest.FlagCase{
		{Name: "live supervised asks", Options: with(drover.TierSupervised),
			Want: live + ` --setting-sources "" --permission-mode default --allowedTools Edit(./**) --permission-prompt-tool stdio`},
		{Name: "live sandbox allows them", Options: with(drover.TierSandbox), Want: live + ` --setting-sources "" --permission-mode dontAsk ` + allow + ` --tools ""`},
	})
	if err := New().Capabilities().Unsupported(drover.Options{MCPServers: servers}); err != nil {
		t.Fatalf("a transport is refused: %v", err)
	}
	if got := MCPToolPrefix("a b.c-d_e/é"); got != "mcp__a_b_c-d_e__" {
		t.Errorf("prefix %q", got)
	}
}

// TestMCP2_ConfigFile: Prepare writes the servers in Claude's form to a
// file only its owner can read, names it last with --mcp-config, and the
// launch's cleanup removes it; a run without servers gets neither.
func TestMCP2_ConfigFile(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	a := New()
	for _, live := range []bool{false, true} {
		req := drover.Request{Prompt: "p", Options: drover.Options{MCPServers: servers}}
		if live {
			req.Live = noInputs{}
		}
		l, err := a.Prepare(req)
		if err != nil {
			t.Fatal(err)
		}
		n := len(l.Args)
		if n < 2 || l.Args[n-2] != "--mcp-config" || l.Cleanup == nil {
			t.Fatalf("live %v: args %q, cleanup %v", live, l.Args, l.Cleanup != nil)
		}
		path := l.Args[n-1]
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("config file %s: %v %v", path, fi, err)
		}
		data, _ := os.ReadFile(path)
		var got map[string]map[string]map[string]any
		if err := json.Unmarshal(data, &got); err != nil {
			t.Fatal(err)
		}
		want := map[string]map[string]map[string]any{"mcpServers": {
			"drover":  {"type": "stdio", "command": "drover", "args": []any{"mcp"}, "env": map[string]any{"DROVER_DB": "/l.db"}},
			"my.docs": {"type": "http", "url": "https://docs.example/mcp", "headers": map[string]any{"Authorization": "Bearer t"}},
			"events":  {"type": "sse", "url": "https://events.example/sse"},
		}}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("config (-want +got):\n%s", d)
		}
		l.Cleanup()
		if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("config file left after cleanup: %v", err)
		}
	}
	l, err := a.Prepare(drover.Request{Prompt: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(l.Args, "--mcp-config") || l.Cleanup != nil {
		t.Fatalf("no servers: args %q, cleanup %v", l.Args, l.Cleanup != nil)
	}
}

// noInputs is a drover.Live that never has an input.
type noInputs struct{}

func (noInputs) Ready() <-chan struct{}   { return nil }
func (noInputs) Take() []drover.LiveInput { return nil }
