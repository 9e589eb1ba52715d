package codex

import (
	"slices"
	"strings"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/adaptertest"
)

func argsOf(t *testing.T, o drover.Options) string {
	t.Helper()
	args, err := Args(o)
	if err != nil {
		t.Fatal(err)
	}
	return adaptertest.CommandLine(args)
}

const (
	base = "exec --json --skip-git-repo-check"
	sup  = "-s workspace-write --ignore-rules -c sandbox_workspace_write.network_access=false -c sandbox_workspace_write.exclude_slash_tmp=true -c sandbox_workspace_write.exclude_tmpdir_env_var=true -c sandbox_workspace_write.writable_roots=[]"
)

func TestADP3_OptionsToFlags(t *testing.T) {
	retries := 0
	adaptertest.Flags(t, func(o drover.Options, _ string) ([]string, error) { return Args(o) }, []adaptertest.FlagCase{
		{Name: "defaults are supervised", Options: drover.Options{}, Want: base + " " + sup + " -"},
		{Name: "model", Options: drover.Options{Model: "gpt-5.6-sol"}, Want: base + " " + sup + " -m gpt-5.6-sol -"},
		{Name: "add dirs", Options: drover.Options{AddDirs: []string{"/data", "/more"}}, Want: base + " " + sup + " --add-dir /data --add-dir /more -"},
		{Name: "system prompt appended as developer instructions", Options: drover.Options{SystemPrompt: "be \"brief\"\nand kind"}, Want: base + " " + sup + ` -c developer_instructions="be \"brief\"\nand kind" -`},
		{Name: "resume goes last, after every flag", Options: drover.Options{Resume: "01a20101-ea4e-7c91-aaed-ca0bec0a1a22", Model: "m"}, Want: base + " " + sup + " -m m resume 01a20101-ea4e-7c91-aaed-ca0bec0a1a22 -"},
		{Name: "endpoint: provider, offline switches, default model", Options: drover.Options{Tier: drover.TierAutonomous,
			Endpoint: &drover.Endpoint{BaseURL: "http://127.0.0.1:9/", APIKey: "k"}, APIRetries: &retries}, Want: base + ` --dangerously-bypass-approvals-and-sandbox -m gpt-5.5 -c model_provider="drover" -c model_providers.drover={name="drover",base_url="http://127.0.0.1:9/v1",wire_api="responses",env_key="DROVER_CODEX_API_KEY",request_max_retries=0,stream_max_retries=0} -c analytics.enabled=false -c features.plugins=false -`},
		{Name: "endpoint without key has no env_key", Options: drover.Options{Tier: drover.TierDryRun, Model: "x",
			Endpoint: &drover.Endpoint{BaseURL: "http://h"}}, Want: base + ` -s read-only --ignore-rules -m x -c model_provider="drover" -c model_providers.drover={name="drover",base_url="http://h/v1",wire_api="responses"} -c analytics.enabled=false -c features.plugins=false -`},
		{Name: "disallowed tools", Options: drover.Options{DisallowedTools: []string{"view_image", "web_search", "exec_command", "write_stdin"}}, Want: base + " " + sup + ` -c features.shell_tool=false -c features.view_image=false -c web_search="disabled" -`},
		{Name: "allowed tools", Options: drover.Options{AllowedTools: []string{"apply_patch", "request_user_input", "tool_search"}}, Want: base + " " + sup + ` -c features.shell_tool=false -c features.view_image=false -c features.goals=false -c web_search="disabled" -`},
	})
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
	adaptertest.Refused(t, New(), map[string]drover.Options{
		"maxTurns":                                {MaxTurns: 3},
		"maxBudgetUsd":                            {MaxBudgetUSD: 1},
		"partialText":                             {PartialText: true},
		"resume by name":                          {Resume: "my-thread"},
		"apiRetries without endpoint":             {APIRetries: &retries},
		"apply_patch cannot be removed":           {DisallowedTools: []string{"apply_patch"}},
		"allowed list without request_user_input": {AllowedTools: []string{"apply_patch", "tool_search", "exec_command", "write_stdin"}},
		"half of the shell group":                 {AllowedTools: []string{"exec_command", "apply_patch", "request_user_input", "tool_search"}},
		"half of the goals group":                 {DisallowedTools: []string{"get_goal"}},
	})
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
