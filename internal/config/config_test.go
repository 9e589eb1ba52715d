package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-run/drover"
	"github.com/google/go-cmp/cmp"
)

func TestACP1_ConfigDir(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", "/x/cfg")
	if d, _ := Dir(); d != "/x/cfg/drover" {
		t.Fatalf("Dir %q", d)
	}
	if f, _ := AgentsFile(); f != "/x/cfg/drover/agents.json" {
		t.Fatalf("AgentsFile %q", f)
	}
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("HOME", "/home/u")
	if d, _ := Dir(); d != "/home/u/.config/drover" {
		t.Fatalf("Dir %q", d)
	}
}

// TestACP1_AgentsFileRoundTrip: saved agents load back the same; the file
// is the owner's only; a missing file is no agents.
func TestACP1_AgentsFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "agents.json")
	if got, err := LoadAgents(path); err != nil || len(got) != 0 {
		t.Fatalf("missing file: %v %v", got, err)
	}
	want := map[string]Agent{"my-agent": {Command: "/usr/bin/agent", Args: []string{"--acp"}, Env: map[string]string{"K": "V"},
		Tested: []string{"1.2.3"}, Tiers: []drover.Tier{drover.TierSupervised}, OpenTimeout: "30s"}}
	if err := SaveAgents(path, want); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v", st.Mode(), err)
	}
	got, err := LoadAgents(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".agents-*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

// TestACP1_BadAgentsFile: a bad agents file is an error that names the
// file (and the agent), never a silent skip.
func TestACP1_BadAgentsFile(t *testing.T) {
	for name, content := range map[string]string{
		"syntax":        `{"agents": {`,
		"unknown field": `{"agents": {"a": {"command": "x", "colour": "red"}}}`,
		"no command":    `{"agents": {"a": {"args": ["--acp"]}}}`,
		"bad name":      `{"agents": {"Bad Name": {"command": "x"}}}`,
		"bad tier":      `{"agents": {"a": {"command": "x", "tiers": ["lenient"]}}}`,
		"bad timeout":   `{"agents": {"a": {"command": "x", "openTimeout": "soon"}}}`,
		"trailing":      `{"agents": {}} {}`,
	} {
		path := filepath.Join(t.TempDir(), "agents.json")
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := LoadAgents(path)
		if err == nil || !strings.Contains(err.Error(), path) || got != nil {
			t.Errorf("%s: %v %v, want an error naming %s", name, got, err, path)
		}
	}
	for _, bad := range []string{"", "Gemini", "-x", "a b", strings.Repeat("a", 65)} {
		if CheckName(bad) == nil {
			t.Errorf("name %q accepted", bad)
		}
	}
}
