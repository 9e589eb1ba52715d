package claude

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/drover-run/drover"
)

func argsOf(t *testing.T, o drover.Options) string {
	t.Helper()
	args, err := Args(o)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(slices.Collect(func(yield func(string) bool) {
		for _, a := range args {
			if a == "" {
				a = `""`
			}
			if !yield(a) {
				return
			}
		}
	}), " ")
}

func TestADP3_OptionsToFlags(t *testing.T) {
	base := "-p --output-format stream-json --verbose"
	sup := `--setting-sources "" --permission-mode dontAsk --allowedTools Edit(./**)`
	cases := []struct {
		name string
		o    drover.Options
		want string
	}{
		{"defaults are supervised", drover.Options{}, base + " " + sup},
		{"sandbox", drover.Options{Tier: drover.TierSandbox}, base + ` --setting-sources "" --permission-mode dontAsk --tools ""`},
		{"dry-run", drover.Options{Tier: drover.TierDryRun}, base + ` --setting-sources "" --permission-mode dontAsk --tools Read,Glob,Grep`},
		{"dry-run narrowed", drover.Options{Tier: drover.TierDryRun, AllowedTools: []string{"Read", "Write"}}, base + ` --setting-sources "" --permission-mode dontAsk --tools Read`},
		{"autonomous", drover.Options{Tier: drover.TierAutonomous}, base + " --permission-mode bypassPermissions"},
		{"everything", drover.Options{Tier: drover.TierAutonomous, Model: "sonnet", MaxTurns: 3, MaxBudgetUSD: 0.25,
			AllowedTools: []string{"Read", "Bash"}, DisallowedTools: []string{"WebFetch"}, AddDirs: []string{"/data"},
			SystemPrompt: "be brief", PartialText: true, Resume: "abc"},
			base + " --permission-mode bypassPermissions --model sonnet --max-turns 3 --max-budget-usd 0.25 --tools Read,Bash --disallowedTools WebFetch --add-dir /data --append-system-prompt be brief --include-partial-messages --resume abc"},
		{"add-dir in supervised is editable", drover.Options{AddDirs: []string{"/data/x/"}}, base + " " + sup + " --add-dir /data/x/ --allowedTools Edit(//data/x/**)"},
	}
	for _, c := range cases {
		if got := argsOf(t, c.o); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
	if _, err := TierArgs("yolo"); drover.CodeOf(err, "") != drover.CodeUnsupportedOption {
		t.Errorf("unknown tier: %v", err)
	}
}

func TestADP3_EnvFromOptions(t *testing.T) {
	retries := 0
	a := New()
	env, err := a.env(drover.Options{Endpoint: &drover.Endpoint{BaseURL: "http://127.0.0.1:9/", APIKey: "k"},
		APIRetries: &retries, Env: map[string]string{"X_TEST": "1"}, ConfigDir: filepath.Join(t.TempDir(), "c")})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ANTHROPIC_BASE_URL=http://127.0.0.1:9", "ANTHROPIC_API_KEY=k", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"CLAUDE_CODE_MAX_RETRIES=0", "X_TEST=1", "DISABLE_AUTOUPDATER=1", "CLAUDE_CONFIG_DIR="} {
		if !slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, want) }) {
			t.Errorf("env lacks %s", want)
		}
	}
}

func TestADP7_ConfigDirSeeded(t *testing.T) {
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, ".credentials.json"), []byte(`{"token":"user"}`), 0o600)
	t.Setenv("CLAUDE_CONFIG_DIR", src)

	dir := filepath.Join(t.TempDir(), "run-home")
	if err := seedConfigDir(dir, true); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, ".credentials.json")); string(data) != `{"token":"user"}` {
		t.Fatalf("credentials not seeded: %q", data)
	}
	os.WriteFile(filepath.Join(dir, ".credentials.json"), []byte(`{"token":"own"}`), 0o600)
	if err := seedConfigDir(dir, true); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, ".credentials.json")); string(data) != `{"token":"own"}` {
		t.Fatal("seeding overwrote the run home's own credentials")
	}
	other := filepath.Join(t.TempDir(), "offline")
	if err := seedConfigDir(other, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(other, ".credentials.json")); err == nil {
		t.Fatal("credentials copied although not wanted")
	}
}

func TestADP4_NotInstalled(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv(BinaryEnv, "")
	a := New()
	if av := a.Available(context.Background()); av.Installed || !strings.Contains(av.Error, BinaryEnv) {
		t.Fatalf("availability %+v", av)
	}
	for _, err := range a.Run(context.Background(), drover.Request{Prompt: "x"}) {
		if drover.CodeOf(err, "") != drover.CodeNotInstalled {
			t.Fatalf("err %v, want AGENT_NOT_INSTALLED", err)
		}
	}
}
