package codex

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
	return strings.Join(args, " ")
}

const (
	base = "exec --json --skip-git-repo-check"
	sup  = "-s workspace-write --ignore-rules -c sandbox_workspace_write.network_access=false -c sandbox_workspace_write.exclude_slash_tmp=true -c sandbox_workspace_write.exclude_tmpdir_env_var=true -c sandbox_workspace_write.writable_roots=[]"
)

func TestADP3_OptionsToFlags(t *testing.T) {
	retries := 0
	cases := []struct {
		name string
		o    drover.Options
		want string
	}{
		{"defaults are supervised", drover.Options{}, base + " " + sup + " -"},
		{"model", drover.Options{Model: "gpt-5.6-sol"}, base + " " + sup + " -m gpt-5.6-sol -"},
		{"add dirs", drover.Options{AddDirs: []string{"/data", "/more"}}, base + " " + sup + " --add-dir /data --add-dir /more -"},
		{"system prompt appended as developer instructions", drover.Options{SystemPrompt: "be \"brief\"\nand kind"},
			base + " " + sup + ` -c developer_instructions="be \"brief\"\nand kind" -`},
		{"resume goes last, after every flag", drover.Options{Resume: "01a20101-ea4e-7c91-aaed-ca0bec0a1a22", Model: "m"},
			base + " " + sup + " -m m resume 01a20101-ea4e-7c91-aaed-ca0bec0a1a22 -"},
		{"endpoint: provider, offline switches, default model", drover.Options{Tier: drover.TierAutonomous,
			Endpoint: &drover.Endpoint{BaseURL: "http://127.0.0.1:9/", APIKey: "k"}, APIRetries: &retries},
			base + ` --dangerously-bypass-approvals-and-sandbox -m gpt-5.5 -c model_provider="drover" -c model_providers.drover={name="drover",base_url="http://127.0.0.1:9/v1",wire_api="responses",env_key="DROVER_CODEX_API_KEY",request_max_retries=0,stream_max_retries=0} -c analytics.enabled=false -c features.plugins=false -`},
		{"endpoint without key has no env_key", drover.Options{Tier: drover.TierDryRun, Model: "x",
			Endpoint: &drover.Endpoint{BaseURL: "http://h"}},
			base + ` -s read-only --ignore-rules -m x -c model_provider="drover" -c model_providers.drover={name="drover",base_url="http://h/v1",wire_api="responses"} -c analytics.enabled=false -c features.plugins=false -`},
		{"disallowed tools", drover.Options{DisallowedTools: []string{"view_image", "web_search", "exec_command", "write_stdin"}},
			base + " " + sup + ` -c features.shell_tool=false -c features.view_image=false -c web_search="disabled" -`},
		{"allowed tools", drover.Options{AllowedTools: []string{"apply_patch", "request_user_input", "tool_search"}},
			base + " " + sup + ` -c features.shell_tool=false -c features.view_image=false -c features.goals=false -c web_search="disabled" -`},
	}
	for _, c := range cases {
		if got := argsOf(t, c.o); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

// TestPERM1_TierFlags pins the flags of every tier (measurements in
// docs/adapters/codex.md) and the tools the synthesized init reports.
func TestPERM1_TierFlags(t *testing.T) {
	cases := []struct {
		tier  drover.Tier
		flags string
		tools []string
	}{
		{drover.TierSandbox, `-s read-only --ignore-rules -c features.shell_tool=false -c features.view_image=false -c features.goals=false -c web_search="disabled"`,
			[]string{"request_user_input", "apply_patch", "tool_search"}},
		{drover.TierDryRun, "-s read-only --ignore-rules", defaultTools},
		{drover.TierSupervised, sup, defaultTools},
		{drover.TierAutonomous, "--dangerously-bypass-approvals-and-sandbox", defaultTools},
	}
	for _, c := range cases {
		f, err := TierArgs(c.tier)
		if err != nil || strings.Join(f, " ") != c.flags {
			t.Errorf("%s: %v %v", c.tier, f, err)
		}
		if got := offeredTools(drover.Options{Tier: c.tier}); !slices.Equal(got, c.tools) {
			t.Errorf("%s: tools %v, want %v", c.tier, got, c.tools)
		}
	}
	if _, err := TierArgs("yolo"); drover.CodeOf(err, "") != drover.CodeUnsupportedOption {
		t.Errorf("unknown tier: %v", err)
	}
	// Sandbox already removes the shell: a filter naming it adds nothing.
	if got := argsOf(t, drover.Options{Tier: drover.TierSandbox, DisallowedTools: []string{"exec_command", "write_stdin"}}); strings.Count(got, "features.shell_tool=false") != 1 {
		t.Errorf("sandbox + filter: %s", got)
	}
	if got := removedTools(drover.Options{Tier: drover.TierSandbox}); !slices.Contains(got, "exec_command") {
		t.Errorf("sandbox removed %v", got)
	}
}

// TestADP3_Unsupported: every option Codex cannot honour fails closed
// before the CLI starts, with UNSUPPORTED_OPTION.
func TestADP3_Unsupported(t *testing.T) {
	retries := 1
	refused := []struct {
		name string
		o    drover.Options
	}{
		{"maxTurns", drover.Options{MaxTurns: 3}},
		{"maxBudgetUsd", drover.Options{MaxBudgetUSD: 1}},
		{"partialText", drover.Options{PartialText: true}},
		{"resume by name", drover.Options{Resume: "my-thread"}},
		{"apiRetries without endpoint", drover.Options{APIRetries: &retries}},
		{"apply_patch cannot be removed", drover.Options{DisallowedTools: []string{"apply_patch"}}},
		{"allowed list without request_user_input", drover.Options{AllowedTools: []string{"apply_patch", "tool_search", "exec_command", "write_stdin"}}},
		{"half of the shell group", drover.Options{AllowedTools: []string{"exec_command", "apply_patch", "request_user_input", "tool_search"}}},
		{"half of the goals group", drover.Options{DisallowedTools: []string{"get_goal"}}},
	}
	a := New()
	bin := fakeBinary(t)
	for _, c := range refused {
		c.o.Binary = bin
		var codes []drover.ErrorCode
		for _, err := range a.Run(context.Background(), drover.Request{Prompt: "x", Options: c.o}) {
			codes = append(codes, drover.CodeOf(err, "none"))
		}
		if !slices.Equal(codes, []drover.ErrorCode{drover.CodeUnsupportedOption}) {
			t.Errorf("%s: codes %v, want one UNSUPPORTED_OPTION", c.name, codes)
		}
	}
	if _, err := os.Stat(bin + ".ran"); err == nil {
		t.Fatal("the CLI was started for a refused option")
	}
}

// fakeBinary is an executable that records being run; refused options must
// never start it.
func fakeBinary(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "codex")
	if err := os.WriteFile(p, []byte("#!/bin/sh\ntouch \"$0.ran\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestADP3_EnvFromOptions(t *testing.T) {
	home := filepath.Join(t.TempDir(), "codex-home") // under the test TMPDIR
	t.Setenv("TMPDIR", filepath.Dir(filepath.Dir(home)))
	a := New()
	env, got, err := a.env(drover.Options{Endpoint: &drover.Endpoint{BaseURL: "http://127.0.0.1:9", APIKey: "k"},
		Env: map[string]string{"X_TEST": "1"}, ConfigDir: home})
	if err != nil {
		t.Fatal(err)
	}
	if got != home {
		t.Errorf("codex home %q, want %q", got, home)
	}
	for _, want := range []string{APIKeyEnv + "=k", "X_TEST=1", "CODEX_HOME=" + home, "TMPDIR=" + filepath.Join(home, ".tmp")} {
		if !slices.Contains(env, want) {
			t.Errorf("env lacks %s", want)
		}
	}
	if fi, err := os.Stat(filepath.Join(home, ".tmp")); err != nil || !fi.IsDir() {
		t.Errorf("TMPDIR inside CODEX_HOME not created: %v", err)
	}
	// A CODEX_HOME outside TMPDIR keeps the caller's TMPDIR.
	t.Setenv("TMPDIR", t.TempDir())
	env, _, err = a.env(drover.Options{ConfigDir: home})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(env, "TMPDIR="+filepath.Join(home, ".tmp")) {
		t.Error("TMPDIR moved although it is not a parent of CODEX_HOME")
	}
}

func TestADP7_ConfigDirSeeded(t *testing.T) {
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "auth.json"), []byte(`{"token":"user"}`), 0o600)
	os.WriteFile(filepath.Join(src, "config.toml"), []byte(`model = "gpt-5.5"`), 0o600)
	t.Setenv("CODEX_HOME", src)

	dir := filepath.Join(t.TempDir(), "run-home")
	a := New()
	if _, _, err := a.env(drover.Options{ConfigDir: dir}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"auth.json": `{"token":"user"}`, "config.toml": `model = "gpt-5.5"`} {
		if data, _ := os.ReadFile(filepath.Join(dir, name)); string(data) != want {
			t.Fatalf("%s not seeded: %q", name, data)
		}
	}
	os.WriteFile(filepath.Join(dir, "auth.json"), []byte(`{"token":"own"}`), 0o600)
	if err := seedConfigDir(dir, src, true); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "auth.json")); string(data) != `{"token":"own"}` {
		t.Fatal("seeding overwrote the run home's own login")
	}
	other := filepath.Join(t.TempDir(), "offline")
	if _, _, err := a.env(drover.Options{ConfigDir: other, Endpoint: &drover.Endpoint{BaseURL: "http://x", APIKey: "k"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(other, "auth.json")); err == nil {
		t.Fatal("login copied although an endpoint key is given")
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

func TestADP4_BinaryEnv(t *testing.T) {
	bin := fakeBinary(t)
	t.Setenv(BinaryEnv, bin)
	if p, err := New().Binary(drover.Options{}); err != nil || p != bin {
		t.Fatalf("Binary = %q, %v", p, err)
	}
	if p, _ := New().Binary(drover.Options{Binary: "/x/codex"}); p != "/x/codex" {
		t.Fatalf("Options.Binary ignored: %q", p)
	}
}

func TestUnwrapShell(t *testing.T) {
	for in, want := range map[string]string{
		`/bin/bash -lc 'echo hi'`:                 "echo hi",
		`/bin/bash -lc 'echo '"'"'q'"'"''`:        "echo 'q'",
		`/bin/bash -lc "curl -w '%{x}' http://h"`: "curl -w '%{x}' http://h",
		`/bin/bash -lc "echo \"a\" \$HOME"`:       `echo "a" $HOME`,
		`python3 x.py`:                            "python3 x.py",
	} {
		if got := unwrapShell(in); got != want {
			t.Errorf("unwrapShell(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTomlString(t *testing.T) {
	if got := tomlString("a\"b\\c\nd\x01é"); got != `"a\"b\\c\nd\u0001é"` {
		t.Errorf("tomlString = %s", got)
	}
}
