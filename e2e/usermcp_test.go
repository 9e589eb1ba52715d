package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/builtin"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/testkit/mcptest"
)

// TestSEC4_ClaudeKeepsTheUsersMCPServers: an MCP server the user
// configured for Claude Code themselves (user scope, in .claude.json) is
// offered and works in every tier: supervised asks for it (a rule answers
// here), autonomous runs it unasked.
func TestSEC4_ClaudeKeepsTheUsersMCPServers(t *testing.T) {
	for _, tier := range []drover.Tier{drover.TierSupervised, drover.TierAutonomous} {
		t.Run(string(tier), func(t *testing.T) {
			w := newWorld(t, lookupScript("mcp__mine__lookup"))
			log := filepath.Join(w.cwd, "calls.jsonl")
			o := w.opts()
			o.Tier = tier
			if err := os.MkdirAll(o.ConfigDir, 0o755); err != nil {
				t.Fatal(err)
			}
			cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
				"mine": map[string]any{"type": "stdio", "command": mcptest.Build(t), "args": []string{}, "env": map[string]string{mcptest.LogEnv: log}}}})
			if err := os.WriteFile(filepath.Join(o.ConfigDir, ".claude.json"), cfg, 0o600); err != nil {
				t.Fatal(err)
			}
			o.Control = engine.NewControl()
			rule, _ := drover.ParsePermissionRule("allow:mcp__mine__lookup")
			o.PermissionRules = []drover.PermissionRule{rule}
			o.Timeout = 2 * time.Minute
			key := fmt.Sprintf("k%d", time.Now().UnixNano()%100000)
			events, err := o.start(context.Background(), builtin.Registry(), "claude", "look up "+key)
			if err != nil {
				t.Fatal(err)
			}
			var evs []drover.Event
			for ev := range events {
				evs = append(evs, ev)
			}
			for _, r := range w.fake.Requests() {
				t.Logf("request rule %q step %d tools %v", r.Rule, r.Step, r.ToolsOffered)
			}
			results := slices.DeleteFunc(payloads[drover.ToolResultPayload](evs), func(p drover.ToolResultPayload) bool { return p.ToolName != "mcp__mine__lookup" })
			if len(results) != 1 || results[0].Status != drover.ToolSuccess || !strings.Contains(results[0].Output, mcptest.Answer(key)) {
				t.Errorf("the user's server: %+v (events %v)", results, typesOf(evs))
			}
		})
	}
}
