package builtin

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/acp"
)

func writeAgents(t *testing.T, content string) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	path := filepath.Join(dir, "drover", "agents.json")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestACP1_ConfiguredAgentsRegistered: the agents file's agents are
// registered after the built-ins, as ACP adapters with the tiers the file
// trusts them with.
func TestACP1_ConfiguredAgentsRegistered(t *testing.T) {
	writeAgents(t, `{"agents": {"my-agent": {"command": "my-agent", "args": ["--acp"], "tiers": ["controlled", "autonomous"]}}}`)
	reg, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if got := reg.List(); !slices.Equal(got, []string{"claude-code", "codex", "gemini", "my-agent", "opencode"}) {
		t.Fatalf("agents %v", got)
	}
	a, _ := reg.Get("my-agent")
	if _, ok := a.(*acp.Adapter); !ok {
		t.Fatalf("my-agent is a %T", a)
	}
	if tiers := a.Capabilities().Tiers; !slices.Equal(tiers, []drover.Tier{drover.TierSupervised, drover.TierAutonomous}) {
		t.Fatalf("tiers %v", tiers)
	}
	if !slices.Contains(Registry().List(), "my-agent") {
		t.Fatal("Registry lacks the configured agent")
	}
}

// TestACP1_BadAgentsFileNamed: an agents file that cannot be used (here a
// built-in's name, or invalid JSON) is an error naming it; the built-ins
// stay available.
func TestACP1_BadAgentsFileNamed(t *testing.T) {
	for _, content := range []string{`{"agents": {"gemini": {"command": "x"}}}`, `{"agents": [`} {
		path := writeAgents(t, content)
		reg, err := Load()
		if err == nil || !strings.Contains(err.Error(), path) {
			t.Fatalf("%s: %v, want an error naming %s", content, err, path)
		}
		if got := reg.List(); !slices.Equal(got, []string{"claude-code", "codex", "gemini", "opencode"}) {
			t.Fatalf("agents %v", got)
		}
		if got := Registry().List(); len(got) != 4 {
			t.Fatalf("Registry %v", got)
		}
	}
	if !IsBuiltin("claude") || !IsBuiltin("codex") || IsBuiltin("my-agent") {
		t.Fatal("IsBuiltin")
	}
}
