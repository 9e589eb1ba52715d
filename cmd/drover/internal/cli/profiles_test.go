package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-run/drover"
)

// FAIL-1, SEC-3: drover profiles add/list/remove keep profiles in a 0600
// file in the config directory; list shows variable names, never values; a
// run with --profile uses it, and the secret is nowhere in the ledger's
// files or the run's events.
func TestFAIL1_ProfilesCommandsAndRun(t *testing.T) {
	cfg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	db := filepath.Join(t.TempDir(), "ledger.db")
	const secret = "sk-ant-very-secret-value"
	t.Setenv("MY_WORK_KEY", secret)
	ctx := context.Background()

	code, _, stderr, _ := runCLI(t, ctx, "ok", "profiles", "add", "work", "--agent", "claude", "--from-env", "ANTHROPIC_API_KEY=MY_WORK_KEY")
	if code != ExitOK {
		t.Fatalf("add: exit %d: %s", code, stderr)
	}
	path := filepath.Join(cfg, "drover", "profiles.json")
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("profiles file: %v %v", st, err)
	}
	if data, _ := os.ReadFile(path); !strings.Contains(string(data), secret) {
		t.Fatalf("the file does not hold the key: %s", data)
	}
	if code, _, stderr, _ := runCLI(t, ctx, "ok", "profiles", "add", "work", "--agent", "claude", "--env", "K=v"); code == ExitOK || !strings.Contains(stderr, "--force") {
		t.Errorf("add twice: exit %d: %s", code, stderr)
	}
	for _, bad := range [][]string{
		{"profiles", "add", "x"},
		{"profiles", "add", "x", "--agent", "nope", "--env", "K=v"},
		{"profiles", "add", "x", "--agent", "claude"},
		{"profiles", "add", "x", "--agent", "claude", "--from-env", "SURELY_UNSET_VARIABLE_42"},
		{"profiles", "add", "Bad Name", "--agent", "claude", "--env", "K=v"},
	} {
		if code, _, stderr, _ := runCLI(t, ctx, "ok", bad...); code != ExitUsage {
			t.Errorf("%v: exit %d: %s", bad, code, stderr)
		}
	}
	code, stdout, stderr, _ := runCLI(t, ctx, "ok", "profiles", "list", "--json")
	if code != ExitOK || strings.Contains(stdout, secret) {
		t.Fatalf("list: exit %d: %s %s", code, stdout, stderr)
	}
	var row profileInfo
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout)), &row); err != nil || row.Name != "work" || row.Agent != "claude" || len(row.Env) != 1 || row.Env[0] != "ANTHROPIC_API_KEY" {
		t.Errorf("list row %+v (%v)", row, err)
	}

	code, stdout, stderr, _ = runCLI(t, ctx, "ok", "run", "--db", db, "--json", "-a", "claude", "--tier", "dry-run", "--profile", "work", "--model-fallback", "m2", "hi")
	if code != ExitOK {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	evs := decodeEvents(t, stdout)
	if d := evs[len(evs)-1]; d.Type != drover.TypeDone || d.Metadata["attempts"] == nil {
		t.Errorf("done %+v: want metadata.attempts", d)
	}
	if strings.Contains(stdout, secret) || strings.Contains(stderr, secret) {
		t.Error("the secret reached the run's output")
	}
	files, _ := filepath.Glob(db + "*")
	for _, f := range files {
		if data, _ := os.ReadFile(f); strings.Contains(string(data), secret) {
			t.Errorf("the secret is in the ledger file %s", f)
		}
	}
	for _, bad := range [][]string{
		{"run", "--db", db, "-a", "claude", "--profile", "nope", "hi"},
		{"run", "--db", db, "-a", "codex", "--profile", "work", "hi"},
		{"run", "--db", db, "-a", "claude", "--fallback", "nope", "hi"},
	} {
		if code, _, stderr, _ := runCLI(t, ctx, "ok", bad...); code != ExitUsage {
			t.Errorf("%v: exit %d: %s", bad, code, stderr)
		}
	}

	if code, _, stderr, _ := runCLI(t, ctx, "ok", "profiles", "remove", "work"); code != ExitOK {
		t.Fatalf("remove: exit %d: %s", code, stderr)
	}
	if code, _, stderr, _ := runCLI(t, ctx, "ok", "profiles", "remove", "work"); code == ExitOK || !strings.Contains(stderr, `no profile "work"`) {
		t.Errorf("remove twice: exit %d: %s", code, stderr)
	}
}
